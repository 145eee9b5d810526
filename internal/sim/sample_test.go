package sim_test

import (
	"math"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/registry"
	"github.com/gandiva-sched/gandiva/internal/sim"
)

// settingsSeen is a FIFO policy wrapper that records the settings it sees.
type settingsSeen struct {
	policy.Policy
	seen []cluster.Event
}

func (p *settingsSeen) Schedule(s *cluster.Snapshot) cluster.Decision {
	for _, ev := range s.Events {
		if ev.Kind == cluster.EvSetting {
			p.seen = append(p.seen, ev)
		}
	}
	return p.Policy.Schedule(s)
}

// TestSamplesAndSettings: per-user work samples follow the ground truth
// exactly (a job alone on a V100 does 1 unit of work per second once its
// start-up is over), and settings reach the policy at their times.
func TestSamplesAndSettings(t *testing.T) {
	c, err := cluster.Load("tiresias-n2g4")
	if err != nil {
		t.Fatal(err)
	}
	fifo, err := registry.New("fifo", policy.Config{})
	if err != nil {
		t.Fatal(err)
	}
	pol := &settingsSeen{Policy: fifo}
	jobs := []*cluster.JobSpec{
		{Name: "a", User: "ann", GPUs: 2, Submit: 0, Iters: 1000, IterTime: 0.5},
		{Name: "b", User: "bob", GPUs: 1, Submit: 50, Iters: 100, IterTime: 1},
	}
	perf := sim.DefaultPerf()
	res, err := sim.Run(sim.Config{Cluster: c, Jobs: jobs, Policy: pol, Perf: perf, Check: true, SampleEvery: 100,
		Settings: []cluster.Event{{Kind: cluster.EvSetting, Time: 75, Key: "tickets/ann", Value: "3"}}})
	if err != nil {
		t.Fatal(err)
	}
	// a: 2 GPUs, 1000 × 0.5 s from t=10 to 510: work 2/s; b: 1 GPU from 60 to 160.
	want := func(at float64) (ann, bob float64) {
		ann = 2 * math.Max(0, math.Min(at, 510)-10)
		bob = math.Max(0, math.Min(at, 160)-60)
		return
	}
	if len(res.Samples) != 6 { // 0, 100, ..., 500 (the run ends at 510)
		t.Fatalf("%d samples, want 6 (end %.1f)", len(res.Samples), res.End)
	}
	for _, s := range res.Samples {
		ann, bob := want(s.At)
		if math.Abs(s.Work["ann"]-ann) > 1e-6 || math.Abs(s.Work["bob"]-bob) > 1e-6 {
			t.Errorf("t=%v: work %v, want ann %v bob %v", s.At, s.Work, ann, bob)
		}
	}
	if len(pol.seen) != 1 || pol.seen[0].Time != 75 || pol.seen[0].Key != "tickets/ann" || pol.seen[0].Value != "3" {
		t.Errorf("settings seen by the policy: %v", pol.seen)
	}
	if _, err := sim.Run(sim.Config{Cluster: c, Jobs: jobs, Policy: fifo, Settings: []cluster.Event{{Kind: cluster.EvTick}}}); err == nil {
		t.Error("a setting without a key was accepted")
	}
}
