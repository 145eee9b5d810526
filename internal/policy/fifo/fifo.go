// Package fifo is the YARN-CS baseline: jobs start in order of submission,
// each on GPUs of its own (no sharing, no preemption), with consolidated
// placement (one server when the gang fits one, else the fewest servers of
// one InfiniBand domain). The head of the queue blocks everything behind it
// until it fits: head-of-line blocking, as in YARN's capacity scheduler.
//
// In Tiresias-compatibility mode GPUs are only counted, as the Tiresias
// simulator's "count" placement scheme does.
//
// Parameters: none.
package fifo

import (
	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/place"
	"github.com/gandiva-sched/gandiva/internal/policy"
)

// Policy is FIFO/YARN-CS.
type Policy struct {
	compat  bool
	waiting policy.Waiting
	pool    place.Pool
}

var _ policy.Policy = (*Policy)(nil)

// New builds the policy.
func New(cfg policy.Config) (policy.Policy, error) {
	if err := policy.NewParams(cfg.Params).Done("fifo"); err != nil {
		return nil, err
	}
	return &Policy{compat: cfg.Compat}, nil
}

// Name implements policy.Policy.
func (p *Policy) Name() string { return "fifo" }

// Schedule starts waiting jobs in submission order until the first that does not fit.
func (p *Policy) Schedule(s *cluster.Snapshot) cluster.Decision {
	p.waiting.Update(s)
	var d cluster.Decision
	if s.FreeGPUs == 0 {
		return d
	}
	var pool *place.Pool
	p.waiting.Each(s, func(j *cluster.Job) bool {
		if j.NotBefore > s.Now {
			return true // backing off after a failure: not eligible yet
		}
		if pool == nil {
			pool = &p.pool
			pool.Reset(s)
		}
		if pool.Free() < j.Spec.GPUs {
			return false
		}
		var gpus []cluster.GPUID
		if p.compat {
			gpus = pool.Any(j.Spec.GPUs)
		} else {
			gpus = pool.Consolidated(j.Spec.GPUs)
		}
		if gpus == nil {
			return false // head-of-line blocking
		}
		pool.Take(gpus)
		d.Actions = append(d.Actions, cluster.Action{Kind: j.StartKind(), Job: j.ID, GPUs: gpus, Reason: "fifo"})
		p.waiting.Remove(j.ID)
		return true
	})
	return d
}
