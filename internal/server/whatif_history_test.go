package server

import (
	"strings"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/experiment"
	"github.com/gandiva-sched/gandiva/internal/metrics"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/registry"
	"github.com/gandiva-sched/gandiva/internal/sim"
)

// TestHistoryComparesLikeWithLike: the history of a live run in which
// jobs finished, failed at once, failed after some work, ran without the
// in-job client to their end while warming, and had not ended when the
// history was read, and failed in its pre-run, gives every row of a what-if comparison the same jobs,
// each counted as it ended live: the JCT over the same finished jobs in
// every row, the failed ones failed everywhere, the unended ones
// unfinished everywhere, none left out, and a slowdown only for jobs
// whose work is known (no slowdown in the hundreds from a failed job
// replayed as a run of no length).
func TestHistoryComparesLikeWithLike(t *testing.T) {
	pol, err := registry.New("fifo", policy.Config{})
	if err != nil {
		t.Fatal(err)
	}
	fp := engine.DefaultFailurePolicy()
	fp.MaxAttempts = 1 // a failure is final
	m := newMachine(machineConfig{Policy: pol, Epoch: machineEpoch, Failure: &fp, StartUps: true, PreRun: true,
		Warm: engine.WarmOptions{PerNode: 2, PerGPU: 2, ContextGiB: 1}})
	apply := applier(t, m)
	apply(&entry{Kind: entRegister, T: 0, Reg: fourV100("n1")})
	submit := func(at float64, id string, gpus int, iters, iterTime float64) {
		apply(&entry{Kind: entSubmit, T: at, Job: &Record{ID: id, User: "alice", Submitted: m.wall(at), PreRun: id == "j6",
			Request: api.JobRequest{Command: []string{"train", id}, GPUs: gpus, Iters: iters, IterTime: iterTime, MemGiB: 2}}})
	}
	assigned := func(id string) *api.Assignment {
		for _, it := range m.x.assignments(m.x.nodes["n1"]).Items {
			if it.Job == id {
				return &it
			}
		}
		t.Fatalf("job %s has no assignment: %+v", id, m.x.assignments(m.x.nodes["n1"]).Items)
		return nil
	}
	repSeq := uint64(0)
	report := func(at float64, id string, rs ...api.Report) {
		t.Helper()
		a := assigned(id)
		for i := range rs {
			repSeq++
			rs[i].Seq, rs[i].Job, rs[i].Attempt = repSeq, id, a.Attempt
		}
		apply(&entry{Kind: entReport, T: at, Node: "n1", Reports: rs})
	}
	ready := api.Report{Kind: api.RepReady, Took: 1}
	// j1 (declared, 2 GPUs) and j2 (1 GPU) start; j3 fails at once.
	submit(1, "j1", 2, 100, 0.2)
	submit(1, "j2", 1, 0, 0)
	submit(1, "j3", 1, 0, 0)
	report(1, "j3", api.Report{Kind: api.RepStarted}, api.Report{Kind: api.RepExited, Outcome: "failed", Code: 1, Message: "no such file"})
	report(2, "j1", api.Report{Kind: api.RepStarted}, ready)
	report(2, "j2", api.Report{Kind: api.RepStarted}, ready)
	// j4 (no in-job client) waits for the GPU j3 freed... j1 and j2 hold
	// three; j4 asks for 2, so it is warmed beside them and runs to its end
	// while warming.
	submit(3, "j4", 2, 0, 0)
	if a := assigned("j4"); a.Want != api.WantWarm {
		t.Fatalf("j4 is not warmed: %+v", a)
	}
	report(4, "j4", api.Report{Kind: api.RepStarted})
	report(9, "j4", api.Report{Kind: api.RepExited, Outcome: "finished"})
	// j2 fails after 30 mini-batches; j1 finishes; j5 (declared) starts
	// and has not ended when the history is read.
	report(10, "j2", api.Report{Kind: api.RepProgress, Done: 30, IterTime: 0.2}, api.Report{Kind: api.RepExited, Outcome: "failed", Code: 1, Message: "NaN"})
	report(22, "j1", api.Report{Kind: api.RepProgress, Done: 100, IterTime: 0.2}, api.Report{Kind: api.RepExited, Outcome: "finished", Done: 100})
	// j6's pre-run fails (its code's error) after 0.5 s: it never runs
	submit(22, "j6", 2, 0, 0)
	report(22, "j6", api.Report{Kind: api.RepStarted})
	report(22.5, "j6", api.Report{Kind: api.RepExited, Outcome: "failed", Code: 1, UserError: true, Message: "ImportError"})
	submit(23, "j5", 4, 1000, 0.1)
	report(24, "j5", api.Report{Kind: api.RepStarted}, ready, api.Report{Kind: api.RepProgress, Done: 10, IterTime: 0.1})
	states := map[string]cluster.JobState{}
	for _, j := range m.order {
		states[j.rec.ID] = m.eng.Job(j.eid).State
	}
	want := map[string]cluster.JobState{"j1": cluster.Finished, "j2": cluster.Failed, "j3": cluster.Failed, "j4": cluster.Finished, "j5": cluster.Running, "j6": cluster.Failed}
	for id, st := range want {
		if states[id] != st {
			t.Fatalf("live: %s %s, want %s (all: %v)", id, states[id], st, states)
		}
	}

	h := historyOf(m, policyMeta{Name: "fifo"})
	t.Logf("notes:\n%s", strings.Join(h.Notes, "\n"))
	if len(h.Jobs) != 6 || len(h.Live.Jobs) != 6 {
		t.Fatalf("%d trace rows, %d live records, want 6 of each (none left out):\n%s", len(h.Jobs), len(h.Live.Jobs), strings.Join(h.Notes, "\n"))
	}
	notes := strings.Join(h.Notes, "\n")
	for _, n := range []string{"j3 failed at once: replayed as a run of 0.001 s", "j4 finished, no progress reported (no in-job client?): replayed as its run time, 6.0 s",
		"j2 failed: replayed as the work it did, 30 mini-batches", "j5 running: replayed as the work it declared",
		"j6 failed in its pre-run: replayed as a run of its pre-run's length, 0.5 s"} {
		if !strings.Contains(notes, n) {
			t.Errorf("notes lack %q:\n%s", n, notes)
		}
	}
	for _, j := range h.Jobs {
		if h.PreRunIf(j) {
			t.Errorf("%s is pre-run in the replays: only j6 was, and it is replayed as its pre-run", j.Name)
		}
	}
	res, err := experiment.Compare(experiment.Setup{Cluster: h.Cluster, Jobs: h.Jobs, Policies: []string{"fifo", "sjf"}, Seed: 1, Perf: sim.DefaultPerf(), PreRunIf: h.PreRunIf})
	if err != nil {
		t.Fatal(err)
	}
	live := metrics.Summarize(h.Live)
	rows := []metrics.Summary{live}
	for _, r := range res {
		rec := r.Records()
		h.Align(rec)
		for _, j := range rec.Jobs {
			if st := want[j.Name]; (st == cluster.Running && (j.State.Terminal() || j.End != -1)) || (st.Terminal() && j.State != st) {
				t.Errorf("%s: replayed %s (end %g), live %s", j.Name, j.State, j.End, st)
			}
		}
		rows = append(rows, metrics.Summarize(rec))
		// the slowdown is over j1 alone (the one finished job whose work
		// is known): its replayed run time over its 20 s alone
		var j1 metrics.Job
		for _, j := range rec.Jobs {
			if j.Name == "j1" {
				j1 = j
			}
		}
		if s := rows[len(rows)-1].AvgSlowdown; s != (j1.End-j1.FirstStart)/20 {
			t.Errorf("%s: slowdown %g, want j1's alone, %g", rec.Policy, s, (j1.End-j1.FirstStart)/20)
		}
	}
	for _, s := range rows {
		if s.Jobs != 6 || s.Finished != 2 || s.Failed != 3 || s.Unfinished != 1 {
			t.Errorf("%s: %d jobs, %d finished, %d failed, %d unfinished; want 6, 2, 3, 1 in every row", s.Policy, s.Jobs, s.Finished, s.Failed, s.Unfinished)
		}
		if s.AvgSlowdown <= 0 || s.AvgSlowdown > 10 {
			t.Errorf("%s: slowdown %g", s.Policy, s.AvgSlowdown)
		}
	}
	if b := h.Basis(); !strings.Contains(b, "same 6 jobs") || !strings.Contains(b, "2 finished") || !strings.Contains(b, "3 failed") ||
		!strings.Contains(b, "1 not ended") || !strings.Contains(b, "slowdown over the 1 of them whose work is known") {
		t.Errorf("basis: %s", b)
	}
}
