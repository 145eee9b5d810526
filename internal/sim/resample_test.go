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
