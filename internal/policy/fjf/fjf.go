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
	"math"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/place"
	"github.com/gandiva-sched/gandiva/internal/policy"
)

// Policy is fjf.
type Policy struct {
	compat  bool
	waiting policy.Waiting
	pool    place.Pool
	sizes   []int // waiting jobs by gang size, to stop scanning early
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
			p.add(s.Jobs[ev.Job].Spec.GPUs, 1)
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
	if s.FreeGPUs < p.min() {
		return d
	}
	pool := &p.pool
	pool.Reset(s)
	p.waiting.Each(s, func(j *cluster.Job) bool {
		if pool.Free() < p.min() {
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
		kind := cluster.Start
		if j.State == cluster.Suspended {
			kind = cluster.Resume
		}
		d.Actions = append(d.Actions, cluster.Action{Kind: kind, Job: j.ID, GPUs: gpus, Reason: "fjf"})
		p.waiting.Remove(j.ID)
		p.add(j.Spec.GPUs, -1)
		return true
	})
	return d
}

func (p *Policy) recount(s *cluster.Snapshot) {
	clear(p.sizes)
	p.waiting.Each(s, func(j *cluster.Job) bool { p.add(j.Spec.GPUs, 1); return true })
}

func (p *Policy) add(g, n int) {
	for len(p.sizes) <= g {
		p.sizes = append(p.sizes, 0)
	}
	p.sizes[g] += n
}

// min is the smallest gang among the waiting jobs (MaxInt32 if none).
func (p *Policy) min() int {
	for g := 1; g < len(p.sizes); g++ {
		if p.sizes[g] > 0 {
			return g
		}
	}
	return math.MaxInt32
}
