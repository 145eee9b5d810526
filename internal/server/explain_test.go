package server

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gandiva-sched/gandiva/internal/api"
)

// TestExplainTiresias: on a server running tiresias-l, explain shows a
// waiting job's queue as the policy holds it and its place in the
// policy's order, with the jobs ahead of it, and says per node why its
// gang does not fit.
func TestExplainTiresias(t *testing.T) {
	// (no warm starts: this agent runs nothing, so a warm start would never
	// be ready, and the job would not wait in the policy's order meanwhile)
	s, stop := runServer(t, Config{DataDir: t.TempDir(), Policy: "tiresias-l", WarmStarts: -1})
	defer stop()
	ctx := context.Background()
	alice := api.Principal{User: "alice"}
	a := &fakeAgent{t: t, s: s, name: "n1"}
	a.register()
	submit := func(gpus int) string {
		j, _, err := s.Submit(ctx, alice, &api.JobRequest{Command: []string{"train"}, GPUs: gpus})
		if err != nil {
			t.Fatal(err)
		}
		return j.ID
	}
	j1 := submit(4)
	waitFor(t, func() bool { return find(a.assignments(), j1, false) != nil })
	j2, j3 := submit(2), submit(1)
	var e *api.Explanation
	waitFor(t, func() bool {
		var err error
		if e, err = s.Explain(ctx, alice, j3); err != nil {
			t.Fatal(err)
		}
		return e.Position > 0 // the policy has taken j3 in
	})
	if e.Policy != "tiresias-l" || e.State != "queued" {
		t.Fatalf("explanation of %s: policy %q state %q", j3, e.Policy, e.State)
	}
	if want := "queue 1 of 3 (attained 0 GPU·s; limits 3,250/7,200); place 2 of 2 waiting in it"; e.Queue != want {
		t.Errorf("queue %q, want %q", e.Queue, want)
	}
	if e.Position != 2 || e.Waiting != 2 || !slices.Equal(e.Ahead, []string{j2}) || e.AheadGPUs != 2 {
		t.Errorf("place %d of %d, ahead %v asking for %d GPUs; want 2 of 2, ahead [%s] asking for 2", e.Position, e.Waiting, e.Ahead, e.AheadGPUs, j2)
	}
	if len(e.Servers) != 1 || e.Servers[0].Node != "n1" || e.Servers[0].Fits || !strings.Contains(e.Servers[0].Why, "0 of 4 GPUs free, the gang needs 1") {
		t.Errorf("servers %+v", e.Servers)
	}
	if !strings.Contains(e.Summary, "0 of 4 GPUs are free, it needs 1; 1 waiting job ahead of it asks for 2 GPUs") {
		t.Errorf("summary %q", e.Summary)
	}
}

// waitFor polls cond (every 10 ms, at most 5 s) until it holds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for i := 0; i < 500; i++ {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("condition never held")
}

// TestViewRedactsOtherUsersJobs: the engine's causes name the jobs a
// transition involved ("preempted by j2"); a user reading their job's
// reason and history sees another user's job only as "another user's
// job", an admin (or the job's own user, for their own jobs) by its ID.
func TestViewRedactsOtherUsersJobs(t *testing.T) {
	s, stop := runServer(t, Config{DataDir: t.TempDir(), Policy: "fifo", WarmStarts: -1})
	defer stop()
	ctx := context.Background()
	alice, bob := api.Principal{User: "alice"}, api.Principal{User: "bob"}
	a := &fakeAgent{t: t, s: s, name: "n1"}
	a.register()
	submit := func(p api.Principal) string {
		j, _, err := s.Submit(ctx, p, &api.JobRequest{Command: []string{"train"}, GPUs: 1})
		if err != nil {
			t.Fatal(err)
		}
		return j.ID
	}
	ja, ja2, jb := submit(alice), submit(alice), submit(bob)
	s.mu.Lock()
	j := s.m.jobs[ja]
	j.history = append(j.history, api.Change{At: time.Now(), From: "running", To: "suspended",
		Reason: "preempted by " + jb + "," + ja2 + " (turn over)"})
	s.mu.Unlock()
	for _, c := range []struct {
		p    api.Principal
		want string
	}{
		{alice, "preempted by another user's job," + ja2 + " (turn over)"},
		{api.Principal{User: "admin", Admin: true}, "preempted by " + jb + "," + ja2 + " (turn over)"},
	} {
		v, err := s.Get(ctx, c.p, ja)
		if err != nil {
			t.Fatal(err)
		}
		if got := v.History[len(v.History)-1].Reason; got != c.want {
			t.Errorf("%s reads %q, want %q", c.p.User, got, c.want)
		}
	}
	// The record itself is not changed by a redacted view.
	s.mu.RLock()
	defer s.mu.RUnlock()
	if got := s.m.jobs[ja].history[len(s.m.jobs[ja].history)-1].Reason; !strings.Contains(got, jb) {
		t.Errorf("the recorded history lost the cause: %q", got)
	}
}
