package sim_test

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/registry"
	"github.com/gandiva-sched/gandiva/internal/sim"
)

// randomJobs is a seeded mix of gang sizes, models and run times.
func randomJobs(seed uint64, n int) []*cluster.JobSpec {
	rng := rand.New(rand.NewPCG(seed, 1))
	models := []string{"resnet50", "vgg19", "lstm", "superresolution", "transformer-b32", ""}
	sizes := []int{1, 1, 1, 2, 4, 8}
	var out []*cluster.JobSpec
	t := 0.0
	for i := 0; i < n; i++ {
		t += rng.ExpFloat64() * 60
		it := 0.05 + rng.Float64()*0.5
		out = append(out, &cluster.JobSpec{Name: "j" + string(rune('a'+i%26)) + string(rune('0'+i/26%10)) + string(rune('0'+i/260)),
			User: []string{"ann", "bob", "cy"}[rng.IntN(3)], GPUs: sizes[rng.IntN(len(sizes))], Submit: math.Round(t),
			Model: models[rng.IntN(len(models))], Iters: float64(100 + rng.IntN(5000)), IterTime: it, MemGiB: float64(1 + rng.IntN(12))})
	}
	return out
}

func run(t *testing.T, pol string, c *cluster.Cluster, jobs []*cluster.JobSpec, perf sim.PerfModel, fail *sim.Failures, seed uint64) (*sim.Result, string) {
	t.Helper()
	cfg := policy.Config{Seed: seed}
	if perf.Compat {
		cfg = policy.TiresiasCompat(cfg)
	}
	p, err := registry.New(pol, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	res, err := sim.Run(sim.Config{Cluster: c, Jobs: jobs, Policy: p, Perf: perf, Failures: fail, Seed: seed, Check: true,
		Log: func(l string) { log.WriteString(l); log.WriteByte('\n') }})
	if err != nil {
		t.Fatalf("%s: %v", pol, err)
	}
	return res, log.String()
}

func hash(s string) uint64 { h := fnv.New64a(); h.Write([]byte(s)); return h.Sum64() }

// TestDeterminism: same seed, same event log, byte for byte (failures on,
// so the random generator is exercised); another seed gives another log.
func TestDeterminism(t *testing.T) {
	c, err := cluster.Load("philly-sample")
	if err != nil {
		t.Fatal(err)
	}
	jobs := randomJobs(7, 300)
	fail := sim.PhillyFailures()
	fail.InfraPerGPUHour = 0.5 // frequent, so the log depends on the seed
	for _, pol := range registry.Names() {
		_, a := run(t, pol, c, jobs, sim.DefaultPerf(), &fail, 42)
		_, b := run(t, pol, c, jobs, sim.DefaultPerf(), &fail, 42)
		if a != b {
			t.Errorf("%s: two runs with seed 42 logged differently (%d vs %d bytes)", pol, len(a), len(b))
		}
		_, other := run(t, pol, c, jobs, sim.DefaultPerf(), &fail, 43)
		if hash(a) == hash(other) {
			t.Errorf("%s: seeds 42 and 43 gave the same log; the seed is not used", pol)
		}
		if !strings.Contains(a, "ev fail") {
			t.Errorf("%s: no failure in the log; the test does not exercise the random generator", pol)
		}
	}
}

// TestAloneRunsItsDuration: a job alone on a consolidated reference GPU set
// takes start-up + its duration; spread over servers it is slower by the
// locality factor; in compat mode it takes exactly its duration.
func TestAloneRunsItsDuration(t *testing.T) {
	c, err := cluster.Load("tiresias-n4g4")
	if err != nil {
		t.Fatal(err)
	}
	job := func(gpus int, model string) []*cluster.JobSpec {
		return []*cluster.JobSpec{{Name: "x", User: "u", GPUs: gpus, Submit: 5, Model: model, Iters: 1000, IterTime: 0.5}}
	}
	perf := sim.DefaultPerf()
	cases := []struct {
		name   string
		jobs   []*cluster.JobSpec
		perf   sim.PerfModel
		wantJC float64
	}{
		{"compat", job(2, "vgg19"), sim.CompatPerf(), 500},
		{"one server", job(4, "vgg19"), perf, perf.Startup + 500},
		{"two servers, skewed", job(8, "vgg19"), perf, perf.Startup + 500*(1+perf.CommBase+perf.CommSkew*0.7165)},
		{"unknown model", job(1, ""), perf, perf.Startup + 500},
	}
	for _, tc := range cases {
		res, _ := run(t, "fifo", c, tc.jobs, tc.perf, nil, 1)
		j := res.Jobs[0]
		if j.State != cluster.Finished || math.Abs(j.End-j.Submit-tc.wantJC) > 0.5 {
			t.Errorf("%s: state %s, JCT %.3f, want %.3f", tc.name, j.State, j.End-j.Submit, tc.wantJC)
		}
		if math.Abs(j.Work-500*float64(j.GPUs)) > 1e-6 {
			t.Errorf("%s: work %.3f, want %d", tc.name, j.Work, 500*j.GPUs)
		}
	}
}

// TestInvariantsUnderLoad runs every policy on a random overloaded trace
// with failures, checking the engine's invariants after every event (Check).
func TestInvariantsUnderLoad(t *testing.T) {
	c, err := cluster.Load("tiresias-n4g4")
	if err != nil {
		t.Fatal(err)
	}
	fail := sim.PhillyFailures()
	for seed := uint64(1); seed <= 3; seed++ {
		jobs := randomJobs(seed, 150)
		for _, pol := range registry.Names() {
			res, _ := run(t, pol, c, jobs, sim.DefaultPerf(), &fail, seed)
			ended := 0
			for _, j := range res.Jobs {
				if j.State.Terminal() {
					ended++
				}
			}
			if ended != len(jobs) {
				t.Errorf("%s seed %d: %d of %d jobs ended", pol, seed, ended, len(jobs))
			}
		}
	}
}

// swapAt is a test policy: it starts job 0, and at time at suspends it
// (aligned or not) and starts job 1 on the same GPU.
type swapAt struct {
	at        float64
	unaligned bool
	done      int
}

func (p *swapAt) Name() string { return "swap" }

func (p *swapAt) Schedule(s *cluster.Snapshot) cluster.Decision {
	switch {
	case p.done == 0:
		p.done++
		return cluster.Decision{Actions: []cluster.Action{{Kind: cluster.Start, Job: 0, GPUs: []cluster.GPUID{0}}}, WakeAt: p.at}
	case p.done == 1 && s.Now >= p.at:
		p.done++
		return cluster.Decision{Actions: []cluster.Action{
			{Kind: cluster.Suspend, Job: 0, Unaligned: p.unaligned},
			{Kind: cluster.Start, Job: 1, GPUs: []cluster.GPUID{0}}}}
	}
	return cluster.Decision{}
}

// TestSuspendCosts: a suspend at a mini-batch boundary keeps the GPU busy
// for SuspendCost (the next job starts that much later); one not aligned
// to a boundary costs UnalignedFactor times as much (Gandiva OSDI'18: ~50×).
func TestSuspendCosts(t *testing.T) {
	c, err := cluster.Load("p100x1")
	if err != nil {
		t.Fatal(err)
	}
	perf := sim.DefaultPerf()
	for _, unaligned := range []bool{false, true} {
		jobs := []*cluster.JobSpec{
			{Name: "a", User: "u", GPUs: 1, Iters: 1e6, IterTime: 0.1},
			{Name: "b", User: "u", GPUs: 1, Iters: 1000, IterTime: 0.1 * 3.34 / 5.14}, // 0.1 s per mini-batch on a P100
		}
		res, err := sim.Run(sim.Config{Cluster: c, Jobs: jobs, Policy: &swapAt{at: 100, unaligned: unaligned}, Perf: perf, Horizon: 1000})
		if err != nil {
			t.Fatal(err)
		}
		hold := perf.SuspendCost
		if unaligned {
			hold *= perf.UnalignedFactor
		}
		// b starts after the suspend's hold and its own start-up, then runs 1000 × 0.1 s
		want := 100 + hold + perf.Startup + 100
		if got := res.Jobs[1].End; math.Abs(got-want) > 1e-6 {
			t.Errorf("unaligned=%v: b ended at %.3f, want %.3f", unaligned, got, want)
		}
	}
}
