package gandiva_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/harness"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/registry"
	"github.com/gandiva-sched/gandiva/internal/sim"
)

// TestScenarios runs the golden action logs in testdata (rewrite with -rewrite).
func TestScenarios(t *testing.T) { harness.Run(t, "testdata") }

// stressRun drives the policy through one random cluster and workload —
// mixed GPU generations, servers of 1 to 8 GPUs, gangs larger than a
// server, elastic jobs, groups reporting metrics, pre-runs, user errors and
// infrastructure failures that drain nodes easily — with the engine's
// invariants checked after every event (a rejected action fails the run),
// and checks that every job that can still fit the schedulable GPUs ends.
func stressRun(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	b := cluster.NewBuilder("rand", nil)
	types := []string{"V100", "P100", "K80", "P40", "A100"}
	for d := 0; d < 1+rng.IntN(3); d++ {
		for k := 0; k < 1+rng.IntN(4); k++ {
			b.Add(cluster.ServerGroup{Type: types[rng.IntN(len(types))], Count: 1 + rng.IntN(3),
				GPUs: []int{1, 1, 2, 3, 4, 8}[rng.IntN(6)], Domain: d, HostMemGiB: []float64{0, 1, 500}[rng.IntN(3)]})
		}
	}
	c, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	maxSrv := 0
	for _, s := range c.Servers {
		maxSrv = max(maxSrv, s.NumGPUs)
	}
	models := []string{"superresolution", "lm-b5", "resnet50", "resnet18-b16", "vgg19", ""}
	var jobs []*cluster.JobSpec
	at := 0.0
	for i, n := 0, 20+rng.IntN(60); i < n; i++ {
		at += rng.ExpFloat64() * 30
		g := []int{1, 1, 1, 2, 3, 4, maxSrv + 1, 8}[rng.IntN(8)]
		if g > c.NumGPUs() {
			g = 1
		}
		spec := &cluster.JobSpec{Name: fmt.Sprintf("j%02d", i), User: "u", GPUs: g, Submit: math.Round(at),
			Model: models[rng.IntN(len(models))], Iters: float64(200 + rng.IntN(4000)), IterTime: 0.05 + 0.3*rng.Float64(),
			MemGiB: float64(1 + rng.IntN(10))}
		if rng.IntN(4) == 0 {
			lo := 1 + rng.IntN(2)
			spec.GPUs = lo + rng.IntN(2)
			spec.MinGPUs, spec.MaxGPUs = lo, min(spec.GPUs+rng.IntN(8), c.NumGPUs())
			if spec.GPUs > c.NumGPUs() {
				spec.GPUs, spec.MinGPUs, spec.MaxGPUs = 1, 1, min(4, c.NumGPUs())
			}
		}
		if rng.IntN(3) == 0 {
			spec.Group = []string{"a", "b"}[rng.IntN(2)]
		}
		jobs = append(jobs, spec)
	}
	params := map[string]string{"quantum": []string{"30", "60", "17"}[rng.IntN(3)]}
	if rng.IntN(3) == 0 {
		params["migrations"] = "1"
	}
	if rng.IntN(3) == 0 {
		params["cooldown"] = "0"
	}
	if rng.IntN(4) == 0 {
		params["unaligned"] = "true"
	}
	p, err := registry.New("gandiva", policy.Config{Seed: seed, Params: params})
	if err != nil {
		t.Fatal(err)
	}
	fail := sim.PhillyFailures()
	fail.InfraPerGPUHour = []float64{0, 0.05, 0.3}[rng.IntN(3)]
	fail.UserErrorFrac = 0.1
	fp := engine.DefaultFailurePolicy()
	fp.NodeFailureLimit, fp.MaxAttempts = 2, 6 // drain nodes easily
	opts := engine.Options{Failure: &fp, PreRun: rng.IntN(3) == 0}
	every := float64(20 + rng.IntN(200))
	var eng *engine.Engine
	res, err := sim.Run(sim.Config{Cluster: c, Jobs: jobs, Policy: p, Failures: &fail, Seed: seed, Check: true, Engine: opts,
		Curve:       func(s *cluster.JobSpec, done float64) float64 { return done / (done + 5000*s.IterTime) },
		ReportEvery: func(*cluster.JobSpec) float64 { return every },
		Observe:     func(_ float64, e *engine.Engine) { eng = e }})
	if err != nil {
		t.Fatalf("seed %d (%s) params %v prerun=%v: %v", seed, c.Summary(), params, opts.PreRun, err)
	}
	sched := 0
	snap := eng.Snapshot()
	for i := range snap.Servers {
		if snap.Servers[i].Schedulable() {
			sched += c.Servers[i].NumGPUs
		}
	}
	for _, j := range res.Jobs {
		if !j.State.Terminal() && j.GPUs <= sched {
			t.Fatalf("seed %d (%s) params %v: job %s (%d GPUs) did not end (%s) with %d GPUs schedulable",
				seed, c.Summary(), params, j.Name, j.GPUs, j.State, sched)
		}
	}
}

// TestStress runs stressRun on 150 seeds (STRESS=N for more).
func TestStress(t *testing.T) {
	n := uint64(150)
	if v, err := strconv.ParseUint(os.Getenv("STRESS"), 10, 64); err == nil {
		n = v
	}
	for seed := uint64(1); seed <= n; seed++ {
		stressRun(t, seed)
	}
}
