package server

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/engine"
)

// fakeAgent plays an agent against the Backend directly: it registers,
// reads its assignments and reports whatever the test says happened.
type fakeAgent struct {
	t       testing.TB
	s       *Server
	name    string
	session string
	seq     uint64
	version uint64
}

func (a *fakeAgent) register(running ...api.Running) {
	a.t.Helper()
	reg := &api.Registration{Name: a.name, GPUs: []api.GPU{{Index: 0, Type: "V100", MemGiB: 16}, {Index: 1, Type: "V100", MemGiB: 16},
		{Index: 2, Type: "V100", MemGiB: 16}, {Index: 3, Type: "V100", MemGiB: 16}},
		HostMemGiB: 64, Addr: "http://127.0.0.1:1", LogKey: "k", Incarnation: "inc-" + a.name, Running: running}
	rep, err := a.s.Register(context.Background(), nodeP(a.name), reg)
	if err != nil {
		a.t.Fatal(err)
	}
	a.session, a.version = rep.Session, 0
}

func (a *fakeAgent) assignments() []api.Assignment {
	a.t.Helper()
	as, err := a.s.Assignments(context.Background(), nodeP(a.name), a.name, a.session, a.version, 0)
	if err != nil {
		a.t.Fatal(err)
	}
	a.version = as.Version
	return as.Items
}

func (a *fakeAgent) report(rs ...api.Report) {
	a.t.Helper()
	for i := range rs {
		a.seq++
		rs[i].Seq = a.seq
	}
	if err := a.s.Report(context.Background(), nodeP(a.name), &api.ReportBatch{Node: a.name, Session: a.session, Reports: rs}); err != nil {
		a.t.Fatal(err)
	}
}

// addNode registers a node of 4 V100s (a fake agent that does nothing
// more), so that the cluster can take jobs.
func addNode(t testing.TB, s *Server, name string) *fakeAgent {
	t.Helper()
	a := &fakeAgent{t: t, s: s, name: name}
	a.register()
	return a
}

// find returns the assignment of job id (the pre-run's if prerun).
func find(items []api.Assignment, id string, prerun bool) *api.Assignment {
	for i := range items {
		if items[i].Job == id && items[i].PreRun == prerun {
			return &items[i]
		}
	}
	return nil
}

// runServer opens a server on cfg and runs its loop; stop ends the loop
// and closes the store.
func runServer(t testing.TB, cfg Config) (s *Server, stop func()) {
	t.Helper()
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	return s, func() { cancel(); <-done; s.Close() }
}

// state is everything the API shows, and the jobs' records for metrics,
// for comparisons across a replay.
func state(t *testing.T, s *Server) string {
	t.Helper()
	ctx := context.Background()
	admin := api.Principal{User: "admin", Admin: true}
	jobs, err := s.List(ctx, admin, api.ListOptions{All: true})
	if err != nil {
		t.Fatal(err)
	}
	var full []*api.Job
	for _, j := range jobs {
		v, _ := s.Get(ctx, admin, j.ID)
		// (not the ETA: a forecast made in the background, on the wall
		// clock, when the loop is idle; not part of the replicated state)
		v.ETA = nil
		full = append(full, v)
	}
	s.mu.RLock()
	var as []*api.Assignments
	for _, n := range s.m.x.byID {
		as = append(as, s.m.x.assignments(n))
	}
	s.mu.RUnlock()
	data, _ := json.MarshalIndent(map[string]any{"jobs": full, "assignments": as, "records": s.Records()}, "", " ")
	return string(data)
}

// TestReplayRebuildsState: after a sequence of submissions, pre-runs,
// starts, progress, a failure and its retry, a finish and a cancel, a
// server opened on the same store shows exactly the same jobs, histories
// and assignments, and its replay reproduces the recorded state changes.
func TestReplayRebuildsState(t *testing.T) {
	dir := t.TempDir()
	fp := engine.DefaultFailurePolicy()
	fp.Backoff = 0.01
	// (j1 and j2 are gangs, so that their pre-runs are probes: a one-GPU
	// job's pre-run is its own first process; warm starts are off, as this
	// agent runs nothing and never reports a process ready)
	cfg := Config{DataDir: dir, Policy: "fifo", PreRun: true, Failure: &fp, CheckpointEvery: 5, WarmStarts: -1}
	s, stop := runServer(t, cfg)
	ctx := context.Background()
	alice := api.Principal{User: "alice"}
	submit := func(gpus int) string {
		j, _, err := s.Submit(ctx, alice, &api.JobRequest{Command: []string{"train"}, GPUs: gpus})
		if err != nil {
			t.Fatal(err)
		}
		return j.ID
	}
	a := &fakeAgent{t: t, s: s, name: "n1"}
	a.register()
	j1, j2, j3 := submit(2), submit(2), submit(1)
	wait := func(cond func([]api.Assignment) bool) []api.Assignment {
		t.Helper()
		for i := 0; i < 200; i++ {
			if items := a.assignments(); cond(items) {
				return items
			}
			time.Sleep(10 * time.Millisecond)
		}
		a.s.mu.Lock()
		for _, j := range a.s.m.eng.Jobs() {
			t.Logf("%s %s %v %v %s", j.Spec.Name, j.State, j.GPUs, j.NotBefore, j.Reason)
		}
		a.s.mu.Unlock()
		t.Fatalf("assignments never matched; now %+v", a.assignments())
		return nil
	}
	// The pre-runs run (one GPU each); j1's passes, j2's fails.
	items := wait(func(it []api.Assignment) bool { return find(it, j1, true) != nil && find(it, j2, true) != nil })
	p1, p2 := find(items, j1, true), find(items, j2, true)
	a.report(api.Report{Job: j1, Attempt: p1.Attempt, Kind: api.RepStarted}, api.Report{Job: j1, Attempt: p1.Attempt, Kind: api.RepExited, Outcome: "finished"},
		api.Report{Job: j2, Attempt: p2.Attempt, Kind: api.RepStarted}, api.Report{Job: j2, Attempt: p2.Attempt, Kind: api.RepExited, Outcome: "failed", Code: 3, UserError: true, Message: "bad code"})
	// j1 runs; it reports progress and then fails once (infrastructure).
	items = wait(func(it []api.Assignment) bool { return find(it, j1, false) != nil })
	w := find(items, j1, false)
	if !w.Restore || w.CheckpointEvery != 5 || w.Want != api.WantRun {
		t.Fatalf("j1's assignment %+v", w)
	}
	a.report(api.Report{Job: j1, Attempt: w.Attempt, Kind: api.RepStarted},
		api.Report{Job: j1, Attempt: w.Attempt, Kind: api.RepProgress, Done: 10, IterTime: 0.1},
		api.Report{Job: j1, Attempt: w.Attempt, Kind: api.RepExited, Outcome: "failed", Code: 137, Message: "GPU fell off the bus"})
	first := w.Attempt
	items = wait(func(it []api.Assignment) bool { w := find(it, j1, false); return w != nil && w.Attempt != first })
	w = find(items, j1, false)
	a.report(api.Report{Job: j1, Attempt: w.Attempt, Kind: api.RepStarted},
		api.Report{Job: j1, Attempt: w.Attempt, Kind: api.RepProgress, Done: 30, IterTime: 0.1})
	if _, err := s.Cancel(ctx, alice, j3); err != nil {
		t.Fatal(err)
	}
	before := state(t, s)
	recorded := s.nextSeq
	stop()

	s2, stop2 := runServer(t, cfg)
	defer stop2()
	if s2.Replay.Diverged != 0 || s2.Replay.Snapshot+uint64(s2.Replay.Entries) != recorded-1 {
		t.Fatalf("replay: %+v, want %d entries (after the snapshot, if any) and no divergence", s2.Replay, recorded-1)
	}
	if after := state(t, s2); after != before {
		t.Fatalf("state after replay differs.\nbefore:\n%s\nafter:\n%s", before, after)
	}
	// The old session is void: the agent must register again, and until it
	// has, nothing new is dispatched to it.
	if _, err := s2.Assignments(ctx, nodeP("n1"), "n1", a.session, 0, 0); !api.IsStatus(err, 409) {
		t.Fatalf("poll with a pre-restart session: %v, want 409", err)
	}
	a.s = s2
	a.register(api.Running{Job: j1, Attempt: w.Attempt, State: "running", GPUs: w.GPUs})
	items = a.assignments()
	if got := find(items, j1, false); got == nil || got.Attempt != w.Attempt {
		t.Fatalf("after re-registration j1 should keep running as attempt %d: %+v", w.Attempt, items)
	}
	v, _ := s2.Get(ctx, alice, j2)
	if v.State != "queued" || (v.PreRun != "pending" && v.PreRun != "running") {
		// j2's pre-run failed once (a user error): it is retried.
		t.Fatalf("j2: %s prerun=%s", v.State, v.PreRun)
	}
}

// nodeP is the principal of node name's credential (what the
// authenticator makes of it).
func nodeP(name string) api.Principal {
	return api.Principal{User: "node:" + name, Agent: true, Node: name}
}

// TestFailedEntry: a request the shell let through but the machine cannot
// apply (a job of 0 GPUs, which the API's decoder would have refused) gets
// its error, is counted, stays in the log, and is replayed the same way.
func TestFailedEntry(t *testing.T) {
	cfg := Config{DataDir: t.TempDir(), Policy: "fifo"}
	s, stop := runServer(t, cfg)
	addNode(t, s, "n1")
	alice := api.Principal{User: "alice"}
	if _, _, err := s.Submit(context.Background(), alice, &api.JobRequest{Command: []string{"train"}, GPUs: 0}); err == nil || !strings.Contains(err.Error(), "gpus") {
		t.Fatalf("submit of 0 GPUs: %v, want an error naming gpus", err)
	}
	rec := httptest.NewRecorder()
	s.met.handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if m := `gandiva_log_entries_failed_total{kind="submit"} 1`; !strings.Contains(rec.Body.String(), m) {
		t.Fatalf("/metrics lacks %s", m)
	}
	// The failed submission used up j1: the next job is j2, and the store
	// has no record of j1 (before the fix, j2 was given j1's ID and its
	// record overwrote the failed one's).
	j, _, err := s.Submit(context.Background(), alice, &api.JobRequest{Command: []string{"train"}, GPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	if j.ID != "j2" {
		t.Fatalf("the submission after a failed one got ID %s, want j2", j.ID)
	}
	if _, ok, err := s.db.Job("j1"); err != nil || ok {
		t.Fatalf("the failed submission left a job record j1 (%v)", err)
	}
	before := state(t, s)
	stop()
	s2, stop2 := runServer(t, cfg)
	defer stop2()
	if s2.Replay.Diverged != 0 || s2.Replay.Entries < 2 {
		t.Fatalf("replay %+v", s2.Replay)
	}
	if after := state(t, s2); after != before {
		t.Fatalf("state after replay differs.\nbefore:\n%s\nafter:\n%s", before, after)
	}
	// After the replay the next ID is still a new one.
	j3, _, err := s2.Submit(context.Background(), alice, &api.JobRequest{Command: []string{"train"}, GPUs: 1})
	if err != nil || j3.ID != "j3" {
		t.Fatalf("after replay: job %v (%v), want j3", j3, err)
	}
}
