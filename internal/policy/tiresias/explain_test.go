package tiresias

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/policy/preempt"
	"github.com/gandiva-sched/gandiva/internal/sim"
)

// TestExplainAgreesWithQueues replays an overloaded trace and, after every
// round, explains every waiting job: the queue named is the one the policy
// holds the job in, and the jobs ahead of it are those of higher queues and
// those before it in its own queue's list.
func TestExplainAgreesWithQueues(t *testing.T) {
	c, err := cluster.Load("tiresias-n2g4")
	if err != nil {
		t.Fatal(err)
	}
	var jobs []*cluster.JobSpec
	for i := range 60 {
		jobs = append(jobs, &cluster.JobSpec{Name: fmt.Sprint("j", i), User: "u", GPUs: 1 + i%4, Submit: float64(20 * i),
			Iters: float64(200 + 97*(i%7)*(i%5)), IterTime: 1})
	}
	for _, gittins := range []bool{false, true} {
		p, err := build(policyConfig(map[string]string{"limits": "300/1200"}), gittins, []float64{100, 500, 1000, 4000})
		if err != nil {
			t.Fatal(err)
		}
		checked, deep := 0, 0
		observe := func(now float64, e *engine.Engine) {
			s := e.Snapshot()
			for _, j := range s.Active() {
				q := p.Queue(j.ID)
				if !j.State.Waiting() || q < 0 || p.jobs[j.ID].holding {
					continue
				}
				ex := p.Explain(s, j.ID)
				checked++
				if q > 0 {
					deep++
				}
				if want := fmt.Sprintf("queue %d of 3 ", q+1); !strings.HasPrefix(ex.Queue, want) {
					t.Fatalf("t=%v %s: queue %q, the policy holds it in queue %d", now, j.Spec.Name, ex.Queue, q+1)
				}
				for _, a := range ex.Ahead {
					if qa := p.Queue(a); qa > q {
						t.Fatalf("t=%v %s (queue %d): %s of queue %d is ahead of it", now, j.Spec.Name, q+1, s.Jobs[a].Spec.Name, qa+1)
					}
				}
				idx, n := -1, 0
				p.queues[q].pend.Each(func(it preempt.Item) {
					if it.ID == j.ID {
						idx = n
					}
					n++
				})
				if want := fmt.Sprintf("place %d of %d waiting in it", idx+1, n); !strings.HasSuffix(ex.Queue, want) {
					t.Fatalf("t=%v %s: %q, its queue's list has it at %d of %d", now, j.Spec.Name, ex.Queue, idx+1, n)
				}
			}
		}
		if _, err := sim.Run(sim.Config{Cluster: c, Jobs: jobs, Policy: p, Check: true, Observe: observe}); err != nil {
			t.Fatal(err)
		}
		if checked == 0 || deep == 0 {
			t.Fatalf("gittins=%v: %d explanations checked, %d of jobs below queue 1: the trace does not exercise the queues", gittins, checked, deep)
		}
	}
}
