package engine_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/harness"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/registry"
)

// pending builds an engine on the 8,000-GPU preset with busy GPUs already
// running and n jobs waiting (gang sizes as in Philly: mostly 1, some 2-16).
func pending(b *testing.B, pol string, busy, n int) *engine.Engine {
	c, err := cluster.Load("big-8000")
	if err != nil {
		b.Fatal(err)
	}
	p, err := registry.New(pol, policy.Config{})
	if err != nil {
		b.Fatal(err)
	}
	e := engine.New(c, p, &harness.Recorder{}, engine.Options{})
	rng := rand.New(rand.NewPCG(1, 2))
	sizes := []int{1, 1, 1, 1, 1, 1, 1, 2, 4, 8, 16}
	id := 0
	submit := func(gpus int) {
		id++
		spec := &cluster.JobSpec{Name: fmt.Sprint(id), User: fmt.Sprintf("user-%02d", rng.IntN(100)), GPUs: gpus, Iters: 1000, IterTime: 1}
		if _, err := e.Submit(0, spec); err != nil {
			b.Fatal(err)
		}
	}
	for used := 0; used < busy; used += 8 {
		submit(8)
	}
	if _, err := e.Round(0); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < n; i++ {
		submit(sizes[rng.IntN(len(sizes))])
	}
	return e
}

// BenchmarkRound times one engine round (snapshot, policy, validation,
// hand-off) with 5,000 jobs pending on 8,000 GPUs: on an empty cluster
// (thousands of starts in one round) and on a half-busy one.
func BenchmarkRound(b *testing.B) {
	for _, pol := range registry.Names() {
		for _, busy := range []int{0, 4000} {
			b.Run(fmt.Sprintf("policy=%s/gpus=8000/busy=%d/jobs=5000", pol, busy), func(b *testing.B) {
				starts := 0
				for b.Loop() {
					b.StopTimer()
					e := pending(b, pol, busy, 5000)
					b.StartTimer()
					res, err := e.Round(1)
					if err != nil {
						b.Fatal(err)
					}
					starts = len(res.Applied)
				}
				b.ReportMetric(float64(starts), "starts/round")
			})
		}
	}
}
