// Package fjf is the Tiresias simulator's "fjf" (first job that fits):
// FIFO without head-of-line blocking. Jobs are considered in order of
// submission, each on GPUs of its own, without preemption; a job that does
// not fit is skipped and the jobs behind it may start (backfilling without
// reservation, so a large gang can wait behind a stream of small ones).
//
// Placement is YARN-CS's (consolidated: one server when the gang fits one,
// else the fewest servers of one InfiniBand domain), as in package fifo;
// in Tiresias-compatibility mode GPUs are only counted, and the outcome
// matches the simulator job by job.
//
// Parameters: none.
package fjf

import (
	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/place"
	"github.com/gandiva-sched/gandiva/internal/policy"
)

// Policy is fjf.
type Policy struct {
	compat  bool
	waiting policy.Waiting
	pool    place.Pool
	sizes   policy.Sizes // waiting jobs by gang size, to stop scanning early
}

var _ policy.Policy = (*Policy)(nil)

// New builds the policy.
func New(cfg policy.Config) (policy.Policy, error) {
	if err := policy.NewParams(cfg.Params).Done("fjf"); err != nil {
		return nil, err
	}
	return &Policy{compat: cfg.Compat}, nil
}

// Name implements policy.Policy.
func (p *Policy) Name() string { return "fjf" }

// Schedule starts, in submission order, every waiting job that fits.
func (p *Policy) Schedule(s *cluster.Snapshot) cluster.Decision {
	recount := false
	for _, ev := range s.Events {
		switch ev.Kind {
		case cluster.EvSubmit:
			p.sizes.Add(s.Jobs[ev.Job].Spec.GPUs)
		case cluster.EvFinish:
			recount = recount || p.waiting.Has(ev.Job) // a suspended job may finish
		case cluster.EvProfile, cluster.EvTick, cluster.EvActionDone, cluster.EvSetting:
		default:
			recount = true // a cancel, a failure, a lost node: jobs came back or left
		}
	}
	p.waiting.Update(s)
	if recount {
		p.recount(s)
	}
	var d cluster.Decision
	if s.FreeGPUs < p.sizes.Min() {
		return d
	}
	pool := &p.pool
	pool.Reset(s)
	p.waiting.Each(s, func(j *cluster.Job) bool {
		if pool.Free() < p.sizes.Min() {
			return false
		}
		if j.NotBefore > s.Now || pool.Free() < j.Spec.GPUs {
			return true
		}
		var gpus []cluster.GPUID
		if p.compat {
			gpus = pool.Any(j.Spec.GPUs)
		} else {
			gpus = pool.Consolidated(j.Spec.GPUs)
		}
		if gpus == nil {
			return true // does not fit: skip, the next may
		}
		pool.Take(gpus)
		d.Actions = append(d.Actions, cluster.Action{Kind: j.StartKind(), Job: j.ID, GPUs: gpus, Reason: "fjf"})
		p.waiting.Remove(j.ID)
		p.sizes.Remove(j.Spec.GPUs)
		return true
	})
	return d
}

func (p *Policy) recount(s *cluster.Snapshot) {
	p.sizes.Reset()
	p.waiting.Each(s, func(j *cluster.Job) bool { p.sizes.Add(j.Spec.GPUs); return true })
}
