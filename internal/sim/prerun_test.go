package sim_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/registry"
	"github.com/gandiva-sched/gandiva/internal/sim"
)

// TestPreRunCatchesUserErrorsCheaply models Philly's pre-run (engine
// Options.PreRun) in the simulator: a quarter of the jobs, mostly multi-GPU
// gangs, carry a user error that fails their first mini-batch. Without the
// pre-run each of them burns its whole gang twice (the failure policy stops
// after two user errors); with it, a one-GPU probe fails twice instead and
// the gang never starts. Every good job still finishes.
func TestPreRunCatchesUserErrorsCheaply(t *testing.T) {
	c, err := cluster.NewBuilder("t", nil).Add(cluster.ServerGroup{Type: "V100", Count: 4, GPUs: 8, HostMemGiB: 256}).Build()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var jobs []*cluster.JobSpec
	for i := 0; i < 60; i++ {
		jobs = append(jobs, &cluster.JobSpec{Name: fmt.Sprintf("j%02d", i), User: "u", GPUs: []int{1, 2, 4, 8, 8}[rng.IntN(5)],
			Submit: float64(i * 30), Model: "resnet50", Iters: float64(200 + rng.IntN(2000)), IterTime: 0.3, MemGiB: 4})
	}
	fail := &sim.Failures{UserErrorFrac: 0.25, UserErrorIter: 1}
	type outcome struct {
		wasted, preRun      float64 // GPU-seconds held by the failed jobs; by pre-runs in all
		failed, finished    int
		gangStartsOfFailed  int
		avgJCTOfGood, count float64
	}
	runOnce := func(preRun bool) outcome {
		p, err := registry.New("fifo", policy.Config{})
		if err != nil {
			t.Fatal(err)
		}
		res, err := sim.Run(sim.Config{Cluster: c, Jobs: jobs, Policy: p, Failures: fail, Seed: 11, Check: true,
			Engine: engine.Options{PreRun: preRun}})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Jobs) != len(jobs) {
			t.Fatalf("prerun=%v: %d job results for %d jobs (probes must fold into their jobs)", preRun, len(res.Jobs), len(jobs))
		}
		var o outcome
		for _, j := range res.Jobs {
			o.preRun += j.PreRun
			switch j.State {
			case cluster.Failed:
				o.failed++
				o.wasted += j.Busy
				if preRun {
					o.gangStartsOfFailed += j.Attempts
				}
			case cluster.Finished:
				o.finished++
				o.avgJCTOfGood += j.End - j.Submit
				o.count++
			default:
				t.Errorf("prerun=%v: job %s ended %s", preRun, j.Name, j.State)
			}
		}
		o.avgJCTOfGood /= o.count
		if preRun && res.Stats.PreRuns != len(jobs) {
			t.Errorf("pre-runs = %d, want one per job (%d)", res.Stats.PreRuns, len(jobs))
		}
		if preRun && res.Stats.PreRunFailures != o.failed {
			t.Errorf("pre-run failures = %d, failed jobs = %d", res.Stats.PreRunFailures, o.failed)
		}
		return o
	}
	without, with := runOnce(false), runOnce(true)
	t.Logf("without pre-run: %d failed, %.0f GPU-s wasted on them, good jobs' avg JCT %.0f s", without.failed, without.wasted, without.avgJCTOfGood)
	t.Logf("with pre-run:    %d failed, %.0f GPU-s wasted on them, %.0f GPU-s of pre-runs in all, good jobs' avg JCT %.0f s",
		with.failed, with.wasted, with.preRun, with.avgJCTOfGood)
	if without.failed == 0 || with.failed != without.failed || with.finished != without.finished {
		t.Fatalf("the same jobs must fail either way: without %d failed / %d finished, with %d / %d", without.failed, without.finished, with.failed, with.finished)
	}
	if with.gangStartsOfFailed != 0 {
		t.Errorf("with pre-run, failing jobs started their gangs %d times; want 0", with.gangStartsOfFailed)
	}
	// The probes run on one GPU where the gangs averaged several: the
	// waste must shrink by well over half.
	if with.wasted > 0.35*without.wasted {
		t.Errorf("pre-run wasted %.0f GPU-s on failing jobs, without it %.0f: want at most 35%%", with.wasted, without.wasted)
	}
}
