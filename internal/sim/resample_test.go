package sim_test

import (
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/sim"
)

// turns is a scripted policy: it starts job 0 on GPU 0 at its submission,
// suspends it at 5 s (before its first placement sample, due 20 s after
// its 10 s start-up), and resumes it on the same GPU at 60 s.
type turns struct{ started, suspended, resumed bool }

func (p *turns) Name() string { return "turns" }

func (p *turns) Schedule(s *cluster.Snapshot) cluster.Decision {
	d := cluster.Decision{}
	switch {
	case !p.started:
		p.started = true
		d.Actions = []cluster.Action{{Kind: cluster.Start, Job: 0, GPUs: []cluster.GPUID{0}}}
		d.WakeAt = 5
	case !p.suspended && s.Now >= 5:
		p.suspended = true
		d.Actions = []cluster.Action{{Kind: cluster.Suspend, Job: 0}}
		d.WakeAt = 60
	case !p.resumed && s.Now >= 60:
		p.resumed = true
		d.Actions = []cluster.Action{{Kind: cluster.Resume, Job: 0, GPUs: []cluster.GPUID{0}}}
	}
	return d
}

// TestResumeSamplesWhenTheSampleNeverCame: a job suspended before its
// placement's profile sample fired reports one after it resumes on the
// same GPUs (before, the resume was taken for a placement already sampled,
// and the job never reported its rate while it took turns: Gandiva could
// never pack it).
func TestResumeSamplesWhenTheSampleNeverCame(t *testing.T) {
	c, err := cluster.Load("tiresias-n2g4")
	if err != nil {
		t.Fatal(err)
	}
	jobs := []*cluster.JobSpec{{Name: "a", User: "u", GPUs: 1, Iters: 1000, IterTime: 0.5}}
	var rated []float64
	res, err := sim.Run(sim.Config{Cluster: c, Jobs: jobs, Policy: &turns{}, Perf: sim.DefaultPerf(), Horizon: 200, Check: true,
		Observe: func(now float64, e *engine.Engine) {
			if j := e.Job(0); j.Profile.Last() != nil && j.Profile.Last().IterTime > 0 && len(rated) == 0 {
				rated = append(rated, now)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rated) == 0 || rated[0] < 60 {
		t.Fatalf("first rated sample at %v (run ended %v), want one after the resume at 60 s", rated, res.End)
	}
}

// joiner starts job 0 on GPU 0, then job 1 on the same GPU at 100 s.
type joiner struct{ step int }

func (p *joiner) Name() string { return "joiner" }

func (p *joiner) Schedule(s *cluster.Snapshot) cluster.Decision {
	switch {
	case p.step == 0:
		p.step++
		return cluster.Decision{Actions: []cluster.Action{{Kind: cluster.Start, Job: 0, GPUs: []cluster.GPUID{0}}}, WakeAt: 100}
	case p.step == 1 && s.Now >= 100 && len(s.Jobs) > 1:
		p.step++
		return cluster.Decision{Actions: []cluster.Action{{Kind: cluster.Start, Job: 1, GPUs: []cluster.GPUID{0}, Share: true}}}
	}
	return cluster.Decision{}
}

// TestNewNeighbourIsReported: a job whose GPU gets a neighbour reports a
// sample that names it even when its rate does not change (Gavel measured
// two super-resolution jobs on a V100 at full speed each), so a policy
// judging the packing hears from both jobs.
func TestNewNeighbourIsReported(t *testing.T) {
	c, err := cluster.Load("tiresias-n2g4")
	if err != nil {
		t.Fatal(err)
	}
	jobs := []*cluster.JobSpec{
		{Name: "a", User: "u", GPUs: 1, Iters: 1e5, IterTime: 0.111, Model: "superresolution", MemGiB: 2.5},
		{Name: "b", User: "u", GPUs: 1, Iters: 1e5, IterTime: 0.111, Model: "superresolution", MemGiB: 2.5, Submit: 50},
	}
	named := -1.0
	_, err = sim.Run(sim.Config{Cluster: c, Jobs: jobs, Policy: &joiner{}, Perf: sim.DefaultPerf(), Horizon: 300, Check: true,
		Observe: func(now float64, e *engine.Engine) {
			if last := e.Job(0).Profile.Last(); last != nil && named < 0 && len(last.Neighbors) > 0 && last.Neighbors[0] == 1 {
				named = now
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if named < 100 {
		t.Fatalf("job a never reported a sample naming its neighbour (at %v)", named)
	}
}
