package fair_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/fair"
	"github.com/gandiva-sched/gandiva/internal/sim"
)

// TestUnderLoad runs gandiva-fair on the heterogeneous preset with random
// jobs (gangs of 1–16 GPUs, so some span 4-GPU servers and go through the
// central strides), several job types (profiling, trading), failures with
// retries and node blacklisting, and ticket changes while running, with the
// engine's invariants checked after every event and every rejected action
// an error (sim.Config.Check). Every job must end.
func TestUnderLoad(t *testing.T) {
	c, err := cluster.Load("fair-hetero")
	if err != nil {
		t.Fatal(err)
	}
	models := []string{"vae", "dcgan", "resnet50", "superresolution", ""}
	sizes := []int{1, 1, 1, 2, 4, 8, 16}
	for seed := uint64(1); seed <= 3; seed++ {
		rng := rand.New(rand.NewPCG(seed, 11))
		var jobs []*cluster.JobSpec
		at := 0.0
		for i := range 200 {
			at += rng.ExpFloat64() * 90
			jobs = append(jobs, &cluster.JobSpec{Name: fmt.Sprint("j", i), User: fmt.Sprint("u", rng.IntN(5)), GPUs: sizes[rng.IntN(len(sizes))],
				Submit: float64(int(at)), Model: models[rng.IntN(len(models))], Iters: float64(200 + rng.IntN(4000)),
				IterTime: 0.2 + rng.Float64(), MemGiB: float64(1 + rng.IntN(8))})
		}
		fail := sim.PhillyFailures()
		fail.InfraPerGPUHour = 0.05
		p, err := fair.New(policy.Config{Params: map[string]string{"tickets": "u0:3/u1:2", "moves": "4"}})
		if err != nil {
			t.Fatal(err)
		}
		res, err := sim.Run(sim.Config{Cluster: c, Jobs: jobs, Policy: p, Failures: &fail, Seed: seed, Check: true,
			Settings: []cluster.Event{
				{Kind: cluster.EvSetting, Time: 3000, Key: "tickets/u2", Value: "5"},
				{Kind: cluster.EvSetting, Time: 6000, Key: "tickets/u0", Value: "0"},
			}})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		ended, spread := 0, 0
		for _, j := range res.Jobs {
			if j.State.Terminal() {
				ended++
			}
			if j.Spread {
				spread++
			}
		}
		if ended != len(jobs) {
			t.Errorf("seed %d: %d of %d jobs ended", seed, ended, len(jobs))
		}
		if spread == 0 {
			t.Errorf("seed %d: no job ran across servers; the central stride was not exercised", seed)
		}
		if res.Stats.Suspends == 0 {
			t.Errorf("seed %d: no suspends: time-slicing was not exercised", seed)
		}
	}
}
