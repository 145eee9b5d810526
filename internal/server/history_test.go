package server

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/timeline"
	"github.com/gandiva-sched/gandiva/internal/ui"
)

// TestReadHistory: a stopped server's store gives back its history: the
// registered node as a cluster, every job as a trace row with the work it
// did (or declared), what happened (records and the timeline, as the
// dashboard showed it), and a note for each job that did not simply finish.
func TestReadHistory(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{DataDir: dir, Policy: "fifo", PreRun: true}
	s, stop := runServer(t, cfg)
	ctx := context.Background()
	a := &fakeAgent{t: t, s: s, name: "n1"}
	a.register()
	alice, bob := api.Principal{User: "alice"}, api.Principal{User: "bob"}
	no := false
	submit := func(p api.Principal, rq api.JobRequest) string {
		rq.Command, rq.PreRun = []string{"train"}, &no
		j, _, err := s.Submit(ctx, p, &rq)
		if err != nil {
			t.Fatal(err)
		}
		return j.ID
	}
	j1 := submit(alice, api.JobRequest{Name: "declared", GPUs: 2, Iters: 300, IterTime: 0.5})
	j2 := submit(bob, api.JobRequest{Name: "measured", GPUs: 1})
	j3 := submit(alice, api.JobRequest{Name: "cancelled", GPUs: 1})
	yes := true
	pr := api.JobRequest{Name: "waits", GPUs: 4, Iters: 10, IterTime: 1, PreRun: &yes}
	pr.Command = []string{"train"}
	j4v, _, err := s.Submit(ctx, alice, &pr)
	if err != nil {
		t.Fatal(err)
	}
	j4 := j4v.ID
	var items []api.Assignment
	waitFor(t, func() bool {
		items = a.assignments()
		return find(items, j1, false) != nil && find(items, j2, false) != nil && find(items, j3, false) != nil
	})
	w1, w2, w3 := find(items, j1, false), find(items, j2, false), find(items, j3, false)
	a.report(api.Report{Job: j1, Attempt: w1.Attempt, Kind: api.RepStarted}, api.Report{Job: j2, Attempt: w2.Attempt, Kind: api.RepStarted},
		api.Report{Job: j3, Attempt: w3.Attempt, Kind: api.RepStarted},
		api.Report{Job: j2, Attempt: w2.Attempt, Kind: api.RepProgress, Done: 40, IterTime: 0.25},
		api.Report{Job: j1, Attempt: w1.Attempt, Kind: api.RepProgress, Done: 300, IterTime: 0.6},
		api.Report{Job: j1, Attempt: w1.Attempt, Kind: api.RepExited, Outcome: "finished", Done: 300},
		api.Report{Job: j2, Attempt: w2.Attempt, Kind: api.RepProgress, Done: 80, IterTime: 0.25},
		api.Report{Job: j2, Attempt: w2.Attempt, Kind: api.RepExited, Outcome: "finished", Done: 80})
	if _, err := s.Cancel(ctx, alice, j3); err != nil {
		t.Fatal(err)
	}
	admin := api.Principal{User: "admin", Admin: true}
	d, err := s.Dashboard().Timeline(ctx, admin, "", ui.Window{})
	if err != nil {
		t.Fatal(err)
	}
	shown, _ := json.Marshal(d)
	stop()

	h, err := ReadHistory(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if h.Policy != "fifo" || !h.PreRun || h.Diverged != 0 || h.Entries == 0 || h.Cluster.NumGPUs() != 4 || len(h.Cluster.Servers) != 1 {
		t.Fatalf("history: policy %s prerun %v, %d entries, %d diverged, %d GPUs", h.Policy, h.PreRun, h.Entries, h.Diverged, h.Cluster.NumGPUs())
	}
	if got, _ := json.Marshal(h.TimelineData(timeline.Query{})); string(got) != string(shown) {
		t.Fatalf("the history's timeline differs from the dashboard's:\n%s\n%s", got, shown)
	}
	if len(h.Jobs) != 4 || len(h.Live.Jobs) != 4 {
		t.Fatalf("%d trace rows, %d records: %+v", len(h.Jobs), len(h.Live.Jobs), h.Jobs)
	}
	want := []struct {
		name, user      string
		gpus            int
		iters, iterTime float64
	}{
		{j1 + " declared", "alice", 2, 300, 0.5}, // finished: its mini-batches × its declared time
		{j2 + " measured", "bob", 1, 80, 0.25},   // finished: × the time measured
		{j3 + " cancelled", "alice", 1, 1, -1},   // no progress: its run time, as one mini-batch
		{j4 + " waits", "alice", 4, 10, 1},       // never ran: the work it declared
	}
	for i, w := range want {
		j := h.Jobs[i]
		if j.Name != w.name || j.User != w.user || j.GPUs != w.gpus || j.Iters != w.iters || (w.iterTime > 0 && j.IterTime != w.iterTime) || j.IterTime <= 0 {
			t.Errorf("row %d: %+v, want %+v", i, *j, w)
		}
		if h.Live.Jobs[i].Name != w.name {
			t.Errorf("record %d named %q", i, h.Live.Jobs[i].Name)
		}
		if i > 0 && j.Submit < h.Jobs[i-1].Submit {
			t.Errorf("row %d submitted before row %d", i, i-1)
		}
	}
	if !h.PreRunIf(h.Jobs[3]) || h.PreRunIf(h.Jobs[0]) {
		t.Errorf("pre-runs: %v", h.PreRuns)
	}
	notes := strings.Join(h.Notes, "\n")
	for _, n := range []string{j3 + " cancelled cancelled, no progress reported (no in-job client?): replayed as its run time", j4 + " waits queued: replayed as the work it declared"} {
		if !strings.Contains(notes, n) {
			t.Errorf("notes lack %q:\n%s", n, notes)
		}
	}
	// the store is left as it was: a server opens it and replays the same
	s2, stop2 := runServer(t, cfg)
	defer stop2()
	if s2.Replay.Diverged != 0 || s2.Replay.Entries != h.Entries {
		t.Fatalf("after ReadHistory, the server replays %+v (history: %d entries)", s2.Replay, h.Entries)
	}
	if _, err := ReadHistory(dir, nil); err == nil || !strings.Contains(err.Error(), "is a server running on it?") {
		t.Fatalf("ReadHistory of a store in use: %v", err)
	}
	if _, err := ReadHistory(t.TempDir(), nil); err == nil || !strings.Contains(err.Error(), "no store in") {
		t.Fatalf("ReadHistory of an empty directory: %v", err)
	}
}
