package kube

import (
	"fmt"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/registry"
)

// BenchmarkRound is one scheduling round of `gandiva kube` at 1,000 pending
// jobs: the engine and a policy under Kubernetes' constraints, on 200 nodes of 8 GPUs
// full of running jobs (1-GPU jobs and gangs of 8), with Kubernetes' limits
// in play (a few GPUs held by other schedulers, nodes a tenth of the jobs
// may not use). Each iteration is what one event costs in steady state: a
// running job finishes, a new one is submitted, the round starts what fits.
// docs/PERFORMANCE.md has the figures; the target is < 50 ms a round.
func BenchmarkRound(b *testing.B) {
	for _, name := range []string{"fifo", "fjf", "tiresias-l", "gandiva-fair"} {
		b.Run(fmt.Sprintf("policy=%s/nodes=200/gpus=1600/pending=1000", name), func(b *testing.B) {
			c, err := cluster.NewBuilder("bench", nil).Add(cluster.ServerGroup{Type: "V100", Count: 200, GPUs: 8}).Build()
			if err != nil {
				b.Fatal(err)
			}
			inner, err := registry.New(name, policy.Config{Seed: 1})
			if err != nil {
				b.Fatal(err)
			}
			lim := &table{blocked: map[cluster.ServerID]int{3: 2, 77: 1}, nofit: map[[2]int]bool{},
				podGPUs: map[cluster.JobID]int{}, fixed: map[cluster.JobID]bool{}}
			e := engine.New(c, inner, nil, engine.Options{Constraints: lim})
			now := 0.0
			n := 0
			submit := func() {
				gpus := 1
				if n%16 == 0 {
					gpus = 8 // a gang of 8 one-GPU pods
				}
				id, err := e.Submit(now, &cluster.JobSpec{Name: fmt.Sprintf("j%d", n), User: fmt.Sprintf("team-%d", n%8), GPUs: gpus})
				if err != nil {
					b.Fatal(err)
				}
				if n%10 == 0 {
					lim.nofit[[2]int{int(id), n % 200}] = true
				}
				n++
			}
			for range 2100 { // about 1,100 run, 1,000 wait
				submit()
			}
			now++
			if _, err := e.Round(now); err != nil {
				b.Fatal(err)
			}
			pending := 0
			var running []cluster.JobID
			for _, j := range e.Snapshot().Active() {
				if j.State.Waiting() {
					pending++
				} else {
					running = append(running, j.ID)
				}
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				now += 0.01
				// a running job ends and a new one arrives
				j := running[i%len(running)]
				if e.Job(j).State.Holding() {
					e.Apply(cluster.Event{Time: now, Kind: cluster.EvFinish, Job: j})
				}
				submit()
				res, err := e.Round(now)
				if err != nil {
					b.Fatal(err)
				}
				for _, a := range res.Applied {
					if a.Kind == cluster.Start || a.Kind == cluster.Resume {
						running = append(running, a.Job)
					}
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(pending), "pending")
		})
	}
}

// BenchmarkBacklogRound is the first round over a backlog, as in `gandiva
// kube bench`: 1,500 pending 1-GPU jobs and 100 gangs of 8 on 200 empty
// nodes of 8 GPUs; the round starts what fits (1,512 jobs) and leaves 88
// gangs waiting.
func BenchmarkBacklogRound(b *testing.B) {
	for _, name := range []string{"fjf", "tiresias-l"} {
		b.Run("policy="+name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				c, err := cluster.NewBuilder("bench", nil).Add(cluster.ServerGroup{Type: "V100", Count: 200, GPUs: 8}).Build()
				if err != nil {
					b.Fatal(err)
				}
				inner, err := registry.New(name, policy.Config{Seed: 1})
				if err != nil {
					b.Fatal(err)
				}
				lim := &table{}
				e := engine.New(c, inner, nil, engine.Options{Constraints: lim})
				for k := range 1600 {
					gpus := 1
					if k >= 1500 {
						gpus = 8
					}
					if _, err := e.Submit(0, &cluster.JobSpec{Name: fmt.Sprintf("j%d", k), User: "bench", GPUs: gpus}); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				res, err := e.Round(1)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if i == 0 {
					b.ReportMetric(float64(len(res.Applied)), "starts")
				}
			}
		})
	}
}
