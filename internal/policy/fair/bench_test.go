package fair_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/harness"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/fair"
)

// loaded builds an engine on the 8,000-GPU preset under gandiva-fair with
// n jobs of 100 users (tickets 1–4) submitted at time 0, gang sizes as in
// Philly (mostly 1, some 2–16; 16-GPU gangs span two servers and go through
// the central stride), and runs rounds up to time upTo (one per quantum).
func loaded(b *testing.B, n int, upTo float64) *engine.Engine {
	c, err := cluster.Load("big-8000")
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	tickets := ""
	for u := range 100 {
		if u > 0 {
			tickets += "/"
		}
		tickets += fmt.Sprintf("user-%02d:%d", u, 1+rng.IntN(4))
	}
	p, err := fair.New(policy.Config{Params: map[string]string{"tickets": tickets}})
	if err != nil {
		b.Fatal(err)
	}
	e := engine.New(c, p, &harness.Recorder{}, engine.Options{})
	sizes := []int{1, 1, 1, 1, 1, 1, 1, 2, 4, 8, 16}
	for i := range n {
		spec := &cluster.JobSpec{Name: fmt.Sprint(i), User: fmt.Sprintf("user-%02d", rng.IntN(100)), GPUs: sizes[rng.IntN(len(sizes))],
			Iters: 1e6, IterTime: 1}
		if _, err := e.Submit(0, spec); err != nil {
			b.Fatal(err)
		}
	}
	for t := 0.0; t <= upTo; t += 60 {
		if _, err := e.Round(t); err != nil {
			b.Fatal(err)
		}
	}
	return e
}

// BenchmarkRound times one gandiva-fair round at 8,000 GPUs with 5,000
// jobs of 100 users (about 16,800 GPUs of demand, so every server
// time-slices): the first round (every job is new: plan, homes, starts)
// and a steady-state quantum boundary (strides on 1,000 servers, the
// central strides for spanning gangs, suspends and resumes).
func BenchmarkRound(b *testing.B) {
	b.Run("gpus=8000/jobs=5000/first", func(b *testing.B) {
		acts := 0
		for b.Loop() {
			b.StopTimer()
			e := loaded(b, 5000, -1)
			b.StartTimer()
			res, err := e.Round(0)
			if err != nil {
				b.Fatal(err)
			}
			acts = len(res.Applied)
		}
		b.ReportMetric(float64(acts), "actions/round")
	})
	b.Run("gpus=8000/jobs=5000/quantum", func(b *testing.B) {
		e := loaded(b, 5000, 600)
		now, acts := 600.0, 0
		for b.Loop() {
			now += 60
			res, err := e.Round(now)
			if err != nil {
				b.Fatal(err)
			}
			if len(res.Rejected) > 0 {
				b.Fatalf("rejected: %s", res.Rejected[0].Reason)
			}
			acts = len(res.Applied)
		}
		b.ReportMetric(float64(acts), "actions/round")
	})
}
