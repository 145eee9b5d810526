package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/metrics"
	"github.com/gandiva-sched/gandiva/internal/report"
	"github.com/gandiva-sched/gandiva/internal/server"
)

// TestWhatifBadInput: each bad flag or missing store is an error naming it.
// (gandiva whatif on a real history: internal/e2e TestDashboardOfTheDemo.)
func TestWhatifBadInput(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"whatif", "--data-dir", dir}, "no store in " + dir},
		{[]string{"whatif", "--data-dir", dir, "--policy", "nope"}, `unknown policy "nope"`},
		{[]string{"whatif", "--data-dir", dir, "--format", "xml"}, `--format "xml"`},
		{[]string{"whatif", "--data-dir", dir, "--startup", "-1"}, "--startup -1"},
	} {
		if _, _, err := run(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
}

// TestWhatifCountsJobsAsTheyEnded: on the store of a server where one job
// finished, one was cancelled after it had run and one still ran when the
// server stopped, every row of gandiva whatif holds the same three jobs,
// each counted as it ended live: one finished (the JCT over it alone), one
// cancelled, one unfinished (the replays counted all three finished, and
// averaged their JCT over them against the live row's one).
func TestWhatifCountsJobsAsTheyEnded(t *testing.T) {
	dir := t.TempDir()
	s, err := server.Open(server.Config{DataDir: dir, Policy: "fifo"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { s.Run(ctx); close(ran) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			<-ran
			s.Close()
		}
	}
	defer stop()
	node := api.Principal{User: "node:n1", Agent: true, Node: "n1"}
	reg := &api.Registration{Name: "n1", HostMemGiB: 64, Addr: "http://127.0.0.1:1", LogKey: "k", Incarnation: "i1"}
	for g := range 4 {
		reg.GPUs = append(reg.GPUs, api.GPU{Index: g, Type: "V100", MemGiB: 16})
	}
	rep, err := s.Register(ctx, node, reg)
	if err != nil {
		t.Fatal(err)
	}
	alice := api.Principal{User: "alice"}
	no := false
	var ids []string
	for _, rq := range []api.JobRequest{{Name: "done", Iters: 20, IterTime: 0.1}, {Name: "cancelled"}, {Name: "runs", Iters: 50, IterTime: 0.1}} {
		rq.Command, rq.GPUs, rq.PreRun = []string{"train"}, 1, &no
		j, _, err := s.Submit(ctx, alice, &rq)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	attempts := map[string]int64{}
	for deadline := time.Now().Add(time.Minute); len(attempts) < 3; time.Sleep(10 * time.Millisecond) {
		as, err := s.Assignments(ctx, node, "n1", rep.Session, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range as.Items {
			attempts[a.Job] = a.Attempt
		}
		if time.Now().After(deadline) {
			t.Fatalf("assignments %+v", as.Items)
		}
	}
	var reps []api.Report
	for i, id := range ids {
		reps = append(reps, api.Report{Seq: uint64(i + 1), Job: id, Attempt: attempts[id], Kind: api.RepStarted})
	}
	reps = append(reps, api.Report{Seq: 4, Job: ids[0], Attempt: attempts[ids[0]], Kind: api.RepProgress, Done: 20, IterTime: 0.1},
		api.Report{Seq: 5, Job: ids[0], Attempt: attempts[ids[0]], Kind: api.RepExited, Outcome: "finished", Done: 20},
		api.Report{Seq: 6, Job: ids[2], Attempt: attempts[ids[2]], Kind: api.RepProgress, Done: 5, IterTime: 0.1})
	if err := s.Report(ctx, node, &api.ReportBatch{Node: "n1", Session: rep.Session, Reports: reps[:3]}); err != nil {
		t.Fatal(err)
	}
	if err := s.Report(ctx, node, &api.ReportBatch{Node: "n1", Session: rep.Session, Reports: reps[3:]}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Cancel(ctx, alice, ids[1]); err != nil {
		t.Fatal(err)
	}
	stop()

	out, errs, err := run(t, "whatif", "--data-dir", dir, "--policy", "fifo,sjf", "--format", "json")
	if err != nil {
		t.Fatalf("whatif: %v\n%s", err, errs)
	}
	var doc struct {
		Run     report.Run        `json:"run"`
		Results []metrics.Summary `json:"results"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(doc.Results) != 3 {
		t.Fatalf("%d rows:\n%s", len(doc.Results), out)
	}
	live := doc.Results[0]
	for _, r := range doc.Results {
		if r.Jobs != 3 || r.Finished != 1 || r.Cancelled != 1 || r.Unfinished != 1 {
			t.Errorf("%s: %d jobs, %d finished, %d cancelled, %d unfinished; want 3, 1, 1, 1 as live", r.Policy, r.Jobs, r.Finished, r.Cancelled, r.Unfinished)
		}
		if r.AvgJCT <= 0 || r.AvgSlowdown <= 0 {
			t.Errorf("%s: JCT %g, slowdown %g", r.Policy, r.AvgJCT, r.AvgSlowdown)
		}
	}
	if live.Policy != "live: fifo" {
		t.Errorf("the first row is %q", live.Policy)
	}
	if want := "every row holds the same 3 jobs, each counted as it ended live: 1 finished (JCT over them), 1 cancelled, 1 not ended when the history was read (unfinished in every row)"; !strings.Contains(doc.Run.Note, want) {
		t.Errorf("the header says %q, want %q", doc.Run.Note, want)
	}
}
