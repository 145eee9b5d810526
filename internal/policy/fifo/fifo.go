// Package fifo is first-come-first-served scheduling without preemption, in
// two variants that differ only in what the scan does at a job that does
// not fit:
//
//   - fifo is the YARN-CS baseline: jobs start in order of submission, each
//     on GPUs of its own (no sharing, no preemption). The head of the queue
//     blocks everything behind it until it fits: head-of-line blocking, as
//     in YARN's capacity scheduler.
//   - fjf is the Tiresias simulator's "fjf" (first job that fits): a job
//     that does not fit is skipped and the jobs behind it may start
//     (backfilling without reservation, so a large gang can wait behind a
//     stream of small ones).
//
// Placement (policy.Config.Placement) is YARN-CS's by default
// (place.Locality at level Packed: one server when the gang fits one, else
// the fewest servers of one InfiniBand domain); with place.Count GPUs are
// only counted, as the Tiresias simulator's "count" scheme does, and fjf
// then matches that simulator job by job.
//
// Parameters: none.
package fifo

import (
	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/place"
	"github.com/gandiva-sched/gandiva/internal/policy"
)

// Policy is fifo or fjf.
type Policy struct {
	name      string
	firstFit  bool // fjf: skip a job that does not fit instead of stopping
	placement place.Strategy
	waiting   policy.Waiting
	pool      place.Pool
	sizes     policy.Sizes // waiting jobs by gang size, to stop scanning early
}

var _ policy.Policy = (*Policy)(nil)

// New builds fifo (YARN-CS: the scan stops at the first job that does not fit).
func New(cfg policy.Config) (*Policy, error) { return build("fifo", cfg, false) }

// NewFJF builds fjf (the scan skips jobs that do not fit).
func NewFJF(cfg policy.Config) (*Policy, error) { return build("fjf", cfg, true) }

func build(name string, cfg policy.Config, firstFit bool) (*Policy, error) {
	if err := policy.NewParams(cfg.Params).Done(name); err != nil {
		return nil, err
	}
	return &Policy{name: name, firstFit: firstFit, placement: cfg.Placement}, nil
}

// Name implements policy.Policy.
func (p *Policy) Name() string { return p.name }

// Schedule starts waiting jobs in submission order, each where it fits; at
// the first that does not fit, fifo stops and fjf goes on.
func (p *Policy) Schedule(s *cluster.Snapshot) cluster.Decision {
	p.track(s)
	var d cluster.Decision
	if s.FreeGPUs < p.sizes.Min() {
		return d
	}
	pool := &p.pool
	pool.Reset(s)
	p.waiting.Each(s, func(j *cluster.Job) bool {
		if pool.Free() < p.sizes.Min() {
			return false // no waiting job fits any more
		}
		if j.NotBefore > s.Now {
			return true // backing off after a failure: not eligible yet
		}
		var gpus []cluster.GPUID
		if pool.Free() >= j.Spec.GPUs {
			gpus = pool.FindFor(j.ID, j.Spec.GPUs, p.placement, place.Packed)
		}
		if gpus == nil {
			return p.firstFit // fifo: head-of-line blocking; fjf: the next may fit
		}
		pool.Take(gpus)
		d.Actions = append(d.Actions, cluster.Action{Kind: j.StartKind(), Job: j.ID, GPUs: gpus, Reason: p.name})
		p.waiting.Remove(j.ID)
		p.sizes.Remove(j.Spec.GPUs)
		return true
	})
	return d
}

// track folds the round's events into the waiting list and the count of
// waiting jobs by gang size.
func (p *Policy) track(s *cluster.Snapshot) {
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
	// a refused start leaves its job waiting (Waiting.Update puts it back)
	recount = recount || len(s.Rejected) > 0
	p.waiting.Update(s)
	if recount {
		p.sizes.Reset()
		p.waiting.Each(s, func(j *cluster.Job) bool { p.sizes.Add(j.Spec.GPUs); return true })
	}
}

var _ policy.Explainer = (*Policy)(nil)

// Explain implements policy.Explainer: the job's place in submission order
// and, per server, whether its gang fits there as the policy places it.
func (p *Policy) Explain(s *cluster.Snapshot, id cluster.JobID) policy.Explanation {
	e := policy.Explanation{Queue: "submission order; the first job that does not fit blocks the jobs behind it"}
	if p.firstFit {
		e.Queue = "submission order; a job that does not fit is skipped and the next may start"
	}
	e.Rank(policy.WaitingByID(s), id)
	e.Servers = place.Explain(s, s.Jobs[id].Spec.GPUs, p.placement, place.Packed)
	return e
}
