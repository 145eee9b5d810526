package tiresias

import (
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/sim"
)

func policyConfig(params map[string]string) policy.Config { return policy.Config{Params: params} }

// runLearn replays 40 jobs of growing size through p.
func runLearn(t *testing.T, p *Policy) {
	c, err := cluster.Load("tiresias-n2g4")
	if err != nil {
		t.Fatal(err)
	}
	var jobs []*cluster.JobSpec
	for i := range 40 {
		jobs = append(jobs, &cluster.JobSpec{Name: string(rune('A' + i)), User: "u", GPUs: 1 + i%4, Submit: float64(10 * i),
			Iters: float64(100 + 50*i), IterTime: 1})
	}
	if _, err := sim.Run(sim.Config{Cluster: c, Jobs: jobs, Policy: p, Check: true}); err != nil {
		t.Fatal(err)
	}
	if len(p.samples) != 40 {
		t.Fatalf("%d samples learnt from 40 finished jobs", len(p.samples))
	}
}
