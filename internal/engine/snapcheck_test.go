package engine_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
)

// writer is a misbehaving policy for tests: it starts job 0 on GPU 0 in its
// first round (and job 1 on the same GPU, which the engine refuses) and,
// once write is set, writes to its snapshot.
type writer struct {
	rounds int
	write  func(s *cluster.Snapshot)
}

func (w *writer) Name() string { return "writer" }

func (w *writer) Schedule(s *cluster.Snapshot) cluster.Decision {
	w.rounds++
	if w.rounds == 1 {
		return cluster.Decision{Actions: []cluster.Action{{Kind: cluster.Start, Job: 0, GPUs: []cluster.GPUID{0}},
			{Kind: cluster.Start, Job: 1, GPUs: []cluster.GPUID{0}}}}
	}
	if w.write != nil {
		w.write(s)
	}
	return cluster.Decision{}
}

// TestCheckSnapshot: under Options.CheckSnapshot, Round fails when the
// policy wrote to any part of its snapshot, and says which; without it,
// the same write goes unnoticed.
func TestCheckSnapshot(t *testing.T) {
	for _, tc := range []struct {
		name, where string
		write       func(s *cluster.Snapshot)
	}{
		{"none", "", func(*cluster.Snapshot) {}},
		{"reads", "", func(s *cluster.Snapshot) {
			_ = s.Jobs[0].Attained(s.Now + 10)
			_ = s.FreeOn(nil, 1)
			_ = s.Free.Total()
		}},
		{"job", "job 0 (a) field Reason", func(s *cluster.Snapshot) { s.Jobs[0].Reason = "mine" }},
		{"spec", "job 1 (b) field Spec", func(s *cluster.Snapshot) { s.Jobs[1].Spec.GPUs = 3 }},
		{"profile", "job 0 (a) field Profile", func(s *cluster.Snapshot) { s.Jobs[0].Profile.Samples[0].IterTime = 9 }},
		{"held GPUs", "job 0 (a) field GPUs", func(s *cluster.Snapshot) { s.Jobs[0].GPUs[0] = 5 }},
		{"unexported", "job 0 (a) field attained", func(s *cluster.Snapshot) { s.Jobs[0].Settle(s.Now + 100) }},
		{"gpu", "the state of GPU 0", func(s *cluster.Snapshot) { s.GPUs[0].MemGiB = 99 }},
		{"server", "the state of server 1", func(s *cluster.Snapshot) { s.Servers[1].Free = 0 }},
		{"cluster", "the cluster", func(s *cluster.Snapshot) { s.Cluster.Servers[1].NumGPUs = 2 }},
		{"free index", "the free index", func(s *cluster.Snapshot) { s.Free.Set(1, 0, 4) }},
		{"job list", "the job list", func(s *cluster.Snapshot) { s.Jobs[0], s.Jobs[1] = s.Jobs[1], s.Jobs[0] }},
		{"now", "Now", func(s *cluster.Snapshot) { s.Now++ }},
		{"events", "the events", func(s *cluster.Snapshot) { s.Events[0].Done = 1 }},
		{"rejections", "the rejections", func(s *cluster.Snapshot) { s.Rejected[0].Code = cluster.RejectRetry }},
		{"rejected action", "the rejections", func(s *cluster.Snapshot) { s.Rejected[0].Action.GPUs[0] = 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, check := range []bool{true, false} {
				err := writeRound(t, check, tc.write)
				switch {
				case !check || tc.where == "":
					if err != nil {
						t.Errorf("check=%v: %v", check, err)
					}
				case err == nil:
					t.Errorf("the write to %s was not caught", tc.where)
				case !errors.Is(err, engine.ErrSnapshotWritten) || !strings.Contains(err.Error(), "policy writer changed "+tc.where+" during"):
					t.Errorf("error %q, want one naming %q", err, tc.where)
				}
			}
		})
	}
}

// writeRound runs a round with job 0 running and profiled, then a round in
// which the policy calls write, and returns that round's error.
func writeRound(t *testing.T, check bool, write func(*cluster.Snapshot)) error {
	t.Helper()
	b := cluster.NewBuilder("t", nil)
	b.Add(cluster.ServerGroup{Type: "V100", Count: 2, GPUs: 4, HostMemGiB: 64})
	c, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	w := &writer{}
	e := engine.New(c, w, nil, engine.Options{CheckSnapshot: check})
	for _, name := range []string{"a", "b"} {
		if _, err := e.Submit(0, &cluster.JobSpec{Name: name, User: "u", GPUs: 1, Iters: 100, IterTime: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.Round(0); err != nil {
		t.Fatal(err)
	}
	if err := e.Apply(cluster.Event{Kind: cluster.EvProfile, Time: 10, Job: 0, Node: cluster.NoServer, Done: 10, IterTime: 1}); err != nil {
		t.Fatal(err)
	}
	w.write = write
	_, err = e.Round(10)
	return err
}
