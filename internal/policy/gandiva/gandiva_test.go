package gandiva_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/harness"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/registry"
	"github.com/gandiva-sched/gandiva/internal/sim"
)

// TestScenarios runs the golden action logs in testdata (rewrite with -rewrite).
func TestScenarios(t *testing.T) { harness.Run(t, "testdata") }

// TestRandomRuns drives the policy through random clusters and workloads —
// gangs of every size, elastic jobs, groups reporting metrics, models that
// pack well and badly, infrastructure and user failures, heterogeneous GPUs
// — with the engine's invariants checked after every event and any
// rejected action failing the run.
func TestRandomRuns(t *testing.T) {
	for seed := uint64(1); seed <= 12; seed++ {
		rng := rand.New(rand.NewPCG(seed, 99))
		b := cluster.NewBuilder("rand", nil)
		types := []string{"V100", "P100", "K80"}
		for d := 0; d < 1+rng.IntN(2); d++ {
			for k := 0; k < 1+rng.IntN(3); k++ {
				b.Add(cluster.ServerGroup{Type: types[rng.IntN(3)], Count: 1 + rng.IntN(2), GPUs: []int{1, 2, 4, 8}[rng.IntN(4)], Domain: d})
			}
		}
		c, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		models := []string{"superresolution", "lm-b5", "resnet50", "resnet18-b16", "vgg19", ""}
		var jobs []*cluster.JobSpec
		at := 0.0
		for i := 0; i < 40; i++ {
			at += rng.ExpFloat64() * 40
			g := []int{1, 1, 1, 2, 4}[rng.IntN(5)]
			if g > c.NumGPUs() {
				g = 1
			}
			m := models[rng.IntN(len(models))]
			spec := &cluster.JobSpec{Name: fmt.Sprintf("j%02d", i), User: "u", GPUs: g, Submit: math.Round(at), Model: m,
				Iters: float64(200 + rng.IntN(3000)), IterTime: 0.05 + 0.2*rng.Float64(), MemGiB: float64(1 + rng.IntN(10))}
			if rng.IntN(5) == 0 {
				spec.MinGPUs, spec.MaxGPUs = 1, min(4, c.NumGPUs())
				spec.GPUs = 1
			}
			if rng.IntN(3) == 0 {
				spec.Group = "search"
			}
			jobs = append(jobs, spec)
		}
		p, err := registry.New("gandiva", policy.Config{Seed: seed, Params: map[string]string{"quantum": "30"}})
		if err != nil {
			t.Fatal(err)
		}
		fail := sim.PhillyFailures()
		fail.InfraPerGPUHour = 0.05
		res, err := sim.Run(sim.Config{Cluster: c, Jobs: jobs, Policy: p, Failures: &fail, Seed: seed, Check: true,
			Curve:       func(s *cluster.JobSpec, done float64) float64 { return done / (done + 500) },
			ReportEvery: func(*cluster.JobSpec) float64 { return 100 }})
		if err != nil {
			t.Fatalf("seed %d (%s): %v", seed, c.Summary(), err)
		}
		for _, j := range res.Jobs {
			if !j.State.Terminal() {
				t.Errorf("seed %d: job %s did not end (%s)", seed, j.Name, j.State)
			}
		}
	}
}
