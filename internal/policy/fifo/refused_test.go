package fifo_test

import (
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/fifo"
)

// spoiler wraps a policy: the first start of job victim it sees, it
// spoils (the GPU listed twice), so that the engine refuses it and starts
// nothing in its place.
type spoiler struct {
	policy.Policy
	victim cluster.JobID
	done   bool
}

func (sp *spoiler) Schedule(s *cluster.Snapshot) cluster.Decision {
	d := sp.Policy.Schedule(s)
	for i, a := range d.Actions {
		if !sp.done && a.Kind == cluster.Start && a.Job == sp.victim {
			sp.done = true
			d.Actions[i].GPUs = []cluster.GPUID{a.GPUs[0], a.GPUs[0]}
		}
	}
	return d
}

// TestRefusedStartCountsAsWaiting: a job whose start the engine refused
// counts again among the waiting jobs by size, so fifo does not stop
// early for want of free GPUs (the smallest waiting gang is its), though
// no event about the job came in between.
func TestRefusedStartCountsAsWaiting(t *testing.T) {
	b := cluster.NewBuilder("two", nil)
	b.Add(cluster.ServerGroup{Type: "V100", Count: 1, GPUs: 2, HostMemGiB: 64})
	c, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	pol, err := fifo.NewFJF(policy.Config{})
	if err != nil {
		t.Fatal(err)
	}
	sp := &spoiler{Policy: pol, victim: -1}
	e := engine.New(c, sp, nil, engine.Options{CheckSnapshot: true})
	submit := func(now float64, name string, gpus int) cluster.JobID {
		t.Helper()
		id, err := e.Submit(now, &cluster.JobSpec{Name: name, User: "u", GPUs: gpus, Iters: 1000, IterTime: 1})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	submit(0, "d", 1) // takes one GPU for good
	if res, err := e.Round(0); err != nil || len(res.Applied) != 1 {
		t.Fatalf("d's start: %v, %v", res, err)
	}
	sp.victim = submit(1, "a", 1)
	submit(1, "c", 2)
	res, err := e.Round(1)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Applied) != 0 || len(res.Rejected) != 1 || res.Rejected[0].Code != cluster.RejectNever {
		t.Fatalf("set-up: a's spoiled start: applied %v, rejected %v", res.Applied, res.Rejected)
	}
	// a later round with nothing new: a fits on the free GPU
	if err := e.Apply(cluster.Event{Time: 10, Kind: cluster.EvTick, Job: cluster.NoJob, Node: cluster.NoServer}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Round(10); err != nil {
		t.Fatal(err)
	}
	if st := e.Job(sp.victim).State; st != cluster.Running {
		t.Fatalf("a is %s with a GPU free: fifo no longer counted it among the waiting jobs", st)
	}
}
