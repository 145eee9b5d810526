package zzreview

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/registry"
	"github.com/gandiva-sched/gandiva/internal/sim"
	"github.com/gandiva-sched/gandiva/internal/zzreview_gandiva/gpatch"
)

func buildCluster(rng *rand.Rand) *cluster.Cluster {
	b := cluster.NewBuilder("rand", nil)
	types := []string{"V100", "P100", "K80", "P40", "A100"}
	for d := 0; d < 1+rng.IntN(3); d++ {
		for k := 0; k < 1+rng.IntN(4); k++ {
			b.Add(cluster.ServerGroup{Type: types[rng.IntN(len(types))], Count: 1 + rng.IntN(3), GPUs: []int{1, 1, 2, 3, 4, 8}[rng.IntN(6)], Domain: d, HostMemGiB: []float64{0, 1, 500}[rng.IntN(3)]})
		}
	}
	c, err := b.Build()
	if err != nil {
		panic(err)
	}
	return c
}

func runOne(t *testing.T, seed uint64, verbose bool) {
	rng := rand.New(rand.NewPCG(seed, 7))
	c := buildCluster(rng)
	maxSrv := 0
	for _, s := range c.Servers {
		maxSrv = max(maxSrv, s.NumGPUs)
	}
	models := []string{"superresolution", "lm-b5", "resnet50", "resnet18-b16", "vgg19", ""}
	var jobs []*cluster.JobSpec
	at := 0.0
	n := 20 + rng.IntN(60)
	for i := 0; i < n; i++ {
		at += rng.ExpFloat64() * 30
		g := []int{1, 1, 1, 2, 3, 4, maxSrv + 1, 8}[rng.IntN(8)]
		if g > c.NumGPUs() {
			g = 1
		}
		m := models[rng.IntN(len(models))]
		spec := &cluster.JobSpec{Name: fmt.Sprintf("j%02d", i), User: "u", GPUs: g, Submit: math.Round(at), Model: m,
			Iters: float64(200 + rng.IntN(4000)), IterTime: 0.05 + 0.3*rng.Float64(), MemGiB: float64(1 + rng.IntN(10))}
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
	var p policy.Policy
	var err error
	if os.Getenv("PATCH") != "" {
		p, err = gpatch.New(policy.Config{Seed: seed, Params: params})
	} else {
		p, err = registry.New("gandiva", policy.Config{Seed: seed, Params: params})
	}
	if err != nil {
		t.Fatal(err)
	}
	fail := sim.PhillyFailures()
	fail.InfraPerGPUHour = []float64{0, 0.05, 0.3}[rng.IntN(3)]
	fail.UserErrorFrac = 0.1
	fp := engine.DefaultFailurePolicy()
	fp.NodeFailureLimit = 2 // drain nodes easily
	fp.MaxAttempts = 6
	opts := engine.Options{Failure: &fp, PreRun: rng.IntN(3) == 0}
	every := float64(20 + rng.IntN(200))
	cfg := sim.Config{Cluster: c, Jobs: jobs, Policy: p, Failures: &fail, Seed: seed, Check: true, Engine: opts,
		Curve:       func(s *cluster.JobSpec, done float64) float64 { return done / (done + 500*s.IterTime*10) },
		ReportEvery: func(*cluster.JobSpec) float64 { return every }}
	var eng *engine.Engine
	cfg.Observe = func(now float64, e *engine.Engine) { eng = e }
	if verbose {
		cfg.Log = func(l string) { fmt.Println(l) }
	}
	res, err := sim.Run(cfg)
	if err != nil {
		t.Errorf("seed %d (%s) params %v prerun=%v: %v", seed, c.Summary(), params, opts.PreRun, err)
		return
	}
	// count schedulable GPUs at end? just report non-terminal jobs
	sched := 0
	snap := eng.Snapshot()
	for i := range snap.Servers {
		if snap.Servers[i].Schedulable() {
			sched += c.Servers[i].NumGPUs
		}
	}
	for _, j := range res.Jobs {
		if !j.State.Terminal() && j.GPUs <= sched {
			t.Errorf("seed %d (%s) params %v prerun=%v: job %s (gpus=%d) did not end (%s) blocked=%d sched=%d", seed, c.Summary(), params, opts.PreRun, j.Name, j.GPUs, j.State, res.Stats.Blocked, sched)
			break
		}
	}
}

func TestStress(t *testing.T) {
	from, to := uint64(1), uint64(300)
	if v := os.Getenv("SEED"); v != "" {
		s, _ := strconv.ParseUint(v, 10, 64)
		from, to = s, s
	}
	for seed := from; seed <= to; seed++ {
		runOne(t, seed, os.Getenv("V") != "")
	}
}
