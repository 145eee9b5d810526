package server

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/registry"
	"github.com/gandiva-sched/gandiva/internal/timeline"
	"github.com/gandiva-sched/gandiva/internal/ui"
)

// stateSpan is a job in one state over [start, end) (end -1: still).
type stateSpan struct {
	state      string
	start, end float64
}

// spansOf turns a sequence of (state, from time) into spans, dropping
// those that lasted no time and merging neighbours in the same state.
func spansOf(states []string, times []float64, now float64) []stateSpan {
	var out []stateSpan
	for i := range states {
		end := -1.0
		if i+1 < len(times) {
			end = times[i+1]
		}
		if end == times[i] || states[i] == "" {
			continue
		}
		if n := len(out); n > 0 && out[n-1].state == states[i] && out[n-1].end == times[i] {
			out[n-1].end = end
			continue
		}
		out = append(out, stateSpan{states[i], times[i], end})
	}
	for i := range out {
		if out[i].end < 0 && out[i].state == "" {
			out[i].end = now
		}
	}
	return out
}

// laneState is the engine state a timeline kind shows.
func laneState(k timeline.Kind) string {
	switch k {
	case timeline.Running, timeline.Packed, timeline.PreRun, timeline.StartUp:
		return "running"
	}
	return string(k)
}

// TestTimelineMatchesTheHistory: the machine's timeline, rebuilt by a
// replay of the log (as at every restart), shows every job in exactly the
// states, and over exactly the times, of the history of state changes the
// server records (the store's, which `gandiva status` shows), suspensions
// and resumes of time-slicing included; and every GPU segment of a job
// lies in a span where it held GPUs.
func TestTimelineMatchesTheHistory(t *testing.T) {
	for _, sc := range []scenario{
		{policy: "fifo", seed: 1, steps: 200, nodes: 3},
		{policy: "gandiva:quantum=5", seed: 2, steps: 300, nodes: 3, prerun: true},
		{policy: "gandiva:quantum=7;migrations=1", seed: 3, steps: 300, nodes: 4},
		{policy: "tiresias-l", seed: 4, steps: 250, nodes: 3, prerun: true},
	} {
		t.Run(sc.policy, func(t *testing.T) {
			_, entries, _, _ := sc.run(t)
			m := sc.newMachine(t)
			var changes []change
			for i, data := range entries {
				var e entry
				if err := json.Unmarshal(data, &e); err != nil {
					t.Fatal(err)
				}
				m.apply(uint64(i+1), &e)
				changes = append(changes, m.takeChanges()...)
			}
			// the history, per engine job name (a pre-run is NAME/prerun)
			hist := map[string][]change{}
			for _, ch := range changes {
				name := ch.Job
				if strings.HasPrefix(ch.To, "prerun ") {
					name += "/prerun"
				}
				hist[name] = append(hist[name], ch)
			}
			d := m.rec.Data(timeline.Query{})
			suspends := 0
			for _, j := range d.Jobs {
				var hs []string
				var ht []float64
				if j.Probe {
					// (a pre-run's history starts at its first change)
					hs, ht = append(hs, "queued"), append(ht, j.Submitted)
				}
				for _, ch := range hist[j.Name] {
					st := strings.TrimPrefix(ch.To, "prerun ")
					if s, err := cluster.ParseJobState(st); err != nil || s.Terminal() {
						st = "" // ended
					}
					hs, ht = append(hs, st), append(ht, ch.T)
				}
				var ls []string
				var lt []float64
				for _, sp := range j.Lane {
					ls, lt = append(ls, laneState(d.Kinds[sp.Kind].Kind)), append(lt, sp.Start)
					if !sp.Open {
						// the lane ends where the job ended
						if i := len(j.Lane) - 1; sp == j.Lane[i] {
							ls, lt = append(ls, ""), append(lt, sp.End)
						}
					}
				}
				want, got := spansOf(hs, ht, d.Now), spansOf(ls, lt, d.Now)
				if !slices.Equal(got, want) {
					t.Fatalf("job %s: the timeline shows %v; the history %v", j.Name, got, want)
				}
				for _, sp := range want {
					if sp.state == "suspended" {
						suspends++
					}
				}
			}
			if len(d.Jobs) != len(hist) {
				t.Fatalf("the timeline has %d jobs, the history %d", len(d.Jobs), len(hist))
			}
			// every GPU segment of a job lies within a span in which it held GPUs
			holding := map[int32][]stateSpan{}
			for _, j := range d.Jobs {
				for _, sp := range j.Lane {
					if d.Kinds[sp.Kind].Holds {
						holding[int32(j.ID)] = append(holding[int32(j.ID)], stateSpan{"", sp.Start, sp.End})
					}
				}
			}
			segs := 0
			for g, row := range d.GPUs {
				for _, s := range row {
					if !d.Kinds[s.Kind].Holds {
						continue
					}
					segs++
					if !slices.ContainsFunc(holding[int32(s.Job)], func(h stateSpan) bool { return h.start <= s.Start && s.End <= h.end }) {
						t.Fatalf("GPU %d: job %d's segment [%g, %g) is outside the spans in which it held GPUs %v", g, s.Job, s.Start, s.End, holding[int32(s.Job)])
					}
				}
			}
			t.Logf("%d jobs, %d GPU segments, %d suspensions, all as in the history", len(d.Jobs), segs, suspends)
			if sc.policy == "gandiva:quantum=5" && suspends == 0 {
				t.Fatalf("no suspension: the scenario does not time-slice")
			}
		})
	}
}

// TestPolicyOrder: the queue order built from a few explanations is the
// order of every job's own explanation, for every registered policy.
func TestPolicyOrder(t *testing.T) {
	for _, name := range registry.Names() {
		t.Run(name, func(t *testing.T) {
			pol, err := registry.New(name, policy.Config{Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			ex, ok := pol.(policy.Explainer)
			if !ok {
				t.Skipf("%s does not explain", name)
			}
			m := newMachine(machineConfig{Policy: pol, Epoch: machineEpoch})
			seq := uint64(0)
			apply := func(e *entry) {
				seq++
				if err := m.apply(seq, e); err != nil {
					t.Fatal(err)
				}
			}
			reg := &api.Registration{Name: "n1", HostMemGiB: 32, Addr: "http://n1:7071", Incarnation: "n1.0"}
			for g := range 4 {
				reg.GPUs = append(reg.GPUs, api.GPU{Index: g, Type: "V100", MemGiB: 16})
			}
			apply(&entry{Kind: entRegister, T: 0, Reg: reg})
			for i := range 60 {
				apply(&entry{Kind: entSubmit, T: float64(1 + i), Job: &Record{ID: fmt.Sprintf("j%d", i+1), User: []string{"alice", "bob", "carol"}[i%3],
					Request: api.JobRequest{Command: []string{"x"}, GPUs: 1 + i%3, Iters: float64(100 + 37*i%300), IterTime: 1}}})
				if i%7 == 6 {
					apply(&entry{Kind: entRound, T: float64(1 + i)})
				}
			}
			// the last few submissions come after the last round: unseen
			snap := m.eng.Snapshot()
			var waiting []cluster.JobID
			for _, j := range snap.Active() {
				if j.State.Waiting() && !j.Probe {
					waiting = append(waiting, j.ID)
				}
			}
			got := policyOrder(snap, ex, waiting, maxExplains)
			// the order every explanation gives: by (position among
			// Waiting, the order it belongs to), unseen last
			if len(got) != len(waiting) {
				t.Fatalf("order of %d jobs, %d waiting", len(got), len(waiting))
			}
			at := map[cluster.JobID]int{}
			for i, id := range got {
				at[id] = i
			}
			for _, id := range waiting {
				e := ex.Explain(snap, id)
				if e.Position == 0 {
					continue
				}
				for _, a := range e.Ahead {
					if _, ok := at[a]; ok && at[a] > at[id] {
						t.Fatalf("job %d is ahead of job %d in the policy's explanation, after it in the queue %v", a, id, got)
					}
				}
			}
			// and with a tight budget, every job is still there once
			short := policyOrder(snap, ex, waiting, 2)
			if s := slices.Sorted(slices.Values(short)); !slices.Equal(s, waiting) {
				t.Fatalf("with 2 explanations: %v, want a permutation of %v", short, waiting)
			}
		})
	}
}

// TestDashboardAPI: the server's dashboard over HTTP with the /v1 tokens: an
// admin sees every job, a user their own by name and the others' as
// anonymous segments and counts; the queue is in the policy's order.
func TestDashboardAPI(t *testing.T) {
	s, hs := testServer(t, Config{Policy: "fifo", WarmStarts: -1}) // (no warm starts: the queued jobs stay queued)
	ctx := context.Background()
	admin := s.AdminToken
	tok := map[string]string{}
	for _, u := range []string{"alice", "bob"} {
		c, err := s.CreateToken(ctx, api.Principal{User: "admin", Admin: true}, api.TokenRequest{User: u})
		if err != nil {
			t.Fatal(err)
		}
		tok[u] = c.Token
	}
	a := &fakeAgent{t: t, s: s, name: "n1"}
	a.register()
	var ids []string
	for i, u := range []string{"alice", "bob", "alice", "bob", "alice"} {
		j, _, err := s.Submit(ctx, api.Principal{User: u}, &api.JobRequest{Name: fmt.Sprintf("%s-%d", u, i), Command: []string{"train"}, GPUs: 2})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	waitFor(t, func() bool { return len(a.assignments()) == 2 })
	get := func(token, path string, out any) {
		t.Helper()
		if err := json.Unmarshal(do(t, hs.URL, call{method: "GET", path: path, token: token, status: 200}), out); err != nil {
			t.Fatal(err)
		}
	}
	var sum ui.Summary
	get(admin, "/ui/api/summary", &sum)
	if sum.GPUs != 4 || sum.FreeGPUs != 0 || sum.Jobs["running"] != 2 || sum.Jobs["queued"] != 3 || sum.Nodes["up"] != 1 || sum.Epoch < 1e9 {
		t.Fatalf("admin's summary %+v", sum)
	}
	var td timeline.Data
	get(admin, "/ui/api/timeline", &td)
	if len(td.Jobs) != 5 || td.Jobs[0].Name != ids[0]+" alice-0" {
		t.Fatalf("admin's timeline: %+v", td.Jobs)
	}
	var q ui.Queue
	get(admin, "/ui/api/queue", &q)
	if q.Order != "policy" || len(q.Jobs) != 3 || q.Jobs[0].ID != ids[2] || q.Jobs[0].Position != 1 || q.Jobs[2].ID != ids[4] {
		t.Fatalf("admin's queue: %+v", q)
	}
	if !strings.HasPrefix(q.Jobs[0].Reason, "submission order") {
		t.Fatalf("the queue's reason is not the policy's: %q", q.Jobs[0].Reason)
	}
	// alice: her jobs by name; bob's running job is an anonymous segment
	get(tok["alice"], "/ui/api/timeline", &td)
	anon := 0
	for _, row := range td.GPUs {
		for _, sg := range row {
			if sg.Job < 0 {
				anon++
			}
		}
	}
	if len(td.Jobs) != 3 || td.Hidden != 2 || anon != 2 {
		t.Fatalf("alice's timeline: %d jobs, %d hidden, %d anonymous segments: %+v", len(td.Jobs), td.Hidden, anon, td.Jobs)
	}
	for _, j := range td.Jobs {
		if j.User != "alice" {
			t.Fatalf("alice sees %+v", j)
		}
	}
	get(tok["alice"], "/ui/api/queue", &q)
	if len(q.Jobs) != 2 || q.Hidden != 1 || q.Jobs[0].Position != 1 || q.Jobs[1].Position != 3 {
		t.Fatalf("alice's queue: %+v", q)
	}
	get(tok["bob"], "/ui/api/summary", &sum)
	if sum.Jobs["running"] != 1 || sum.Jobs["queued"] != 1 {
		t.Fatalf("bob's summary counts %v, want his own jobs only", sum.Jobs)
	}
	var sh timeline.Shares
	get(tok["bob"], "/ui/api/shares", &sh)
	for _, u := range sh.Users {
		if u.User != "" && u.User != "bob" {
			t.Fatalf("bob's shares name %s", u.User)
		}
	}
	do(t, hs.URL, call{method: "GET", path: "/ui/api/summary", status: 401})
	do(t, hs.URL, call{method: "GET", path: "/ui/api/summary", token: s.AgentToken, status: 403})
	do(t, hs.URL, call{method: "GET", path: "/ui/api/timeline?run=whatif", token: admin, status: 404})
	do(t, hs.URL, call{method: "GET", path: "/ui/", status: 200, contains: "<html"})
}

// TestTimelineSurvivesRestart: a restarted server replays its log and has
// the whole timeline, exactly as before.
func TestTimelineSurvivesRestart(t *testing.T) {
	cfg := Config{DataDir: t.TempDir(), Policy: "fifo"}
	s, stop := runServer(t, cfg)
	ctx := context.Background()
	a := &fakeAgent{t: t, s: s, name: "n1"}
	a.register()
	for range 6 {
		if _, _, err := s.Submit(ctx, api.Principal{User: "alice"}, &api.JobRequest{Command: []string{"train"}, GPUs: 1}); err != nil {
			t.Fatal(err)
		}
	}
	var items []api.Assignment
	waitFor(t, func() bool { items = a.assignments(); return len(items) == 4 })
	a.report(api.Report{Job: items[0].Job, Attempt: items[0].Attempt, Kind: api.RepStarted},
		api.Report{Job: items[0].Job, Attempt: items[0].Attempt, Kind: api.RepExited, Outcome: "finished", Done: 10})
	waitFor(t, func() bool { return len(a.assignments()) == 4 && find(a.assignments(), items[0].Job, false) == nil })
	admin := api.Principal{User: "admin", Admin: true}
	export := func(s *Server) string {
		d, err := s.Dashboard().Timeline(ctx, admin, "", ui.Window{})
		if err != nil {
			t.Fatal(err)
		}
		data, _ := json.Marshal(d)
		return string(data)
	}
	before := export(s)
	if !strings.Contains(before, `"state":"finished"`) {
		t.Fatalf("no finished job in the timeline: %s", before)
	}
	stop()
	s2, stop2 := runServer(t, cfg)
	defer stop2()
	if after := export(s2); after != before {
		t.Fatalf("the timeline after a restart differs:\n%s\nbefore:\n%s", after, before)
	}
}
