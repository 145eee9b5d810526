// Package philly is Philly's locality-aware gang scheduler (the Philly
// paper, Jeon et al., ATC'19; docs/PAPERS.md): jobs are served in submission order, each asks for the highest
// locality first (the fewest servers, inside one InfiniBand domain), and a
// job that cannot get it within a time-out backs off and relaxes locality
// step by step (one more server, any servers of one domain, any servers at
// all), trading training speed for less waiting. Unlike YARN-CS a job that
// does not fit does not block the jobs behind it, except that a job waiting
// longer than the starvation limit reserves the cluster: nothing behind it
// starts until it does.
//
// Parameters:
//
//	relax=600   seconds a job waits at one locality level before relaxing
//	starve=21600 seconds after which a waiting job blocks later jobs (0: never)
//
// Both values are our assumptions; the Philly papers describe the mechanism
// but publish no time-outs.
package philly

import (
	"fmt"
	"math"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/place"
	"github.com/gandiva-sched/gandiva/internal/policy"
)

// Policy is Philly's scheduler.
type Policy struct {
	relax, starve float64
	placement     place.Strategy
	waiting       policy.Waiting
	pool          place.Pool
}

var (
	_ policy.Policy    = (*Policy)(nil)
	_ policy.Explainer = (*Policy)(nil)
)

// New builds the policy.
func New(cfg policy.Config) (*Policy, error) {
	ps := policy.NewParams(cfg.Params)
	p := &Policy{relax: ps.Float("relax", 600), starve: ps.Float("starve", 6*3600), placement: cfg.Placement}
	if err := ps.Done("philly"); err != nil {
		return nil, err
	}
	if p.relax <= 0 || p.starve < 0 {
		return nil, errBadParams
	}
	return p, nil
}

type paramError string

func (e paramError) Error() string { return string(e) }

const errBadParams = paramError("policy philly: relax must be positive and starve not negative")

// Name implements policy.Policy.
func (p *Policy) Name() string { return "philly" }

// Level returns the locality level a job asks for after waiting w seconds.
func (p *Policy) Level(w float64) place.Level {
	l := place.Level(w / p.relax)
	if l >= place.NumLevels {
		l = place.NumLevels - 1
	}
	return l
}

// Schedule places waiting jobs in submission order at their current locality level.
func (p *Policy) Schedule(s *cluster.Snapshot) cluster.Decision {
	p.waiting.Update(s)
	var d cluster.Decision
	pool := &p.pool
	pool.Reset(s)
	wake := math.Inf(1)
	p.waiting.Each(s, func(j *cluster.Job) bool {
		if j.NotBefore > s.Now {
			wake = math.Min(wake, j.NotBefore)
			return true
		}
		waited := s.Now - j.QueuedAt
		lvl := p.Level(waited)
		var gpus []cluster.GPUID
		if pool.Free() >= j.Spec.GPUs {
			gpus = pool.FindFor(j.ID, j.Spec.GPUs, p.placement, lvl)
		}
		if gpus == nil {
			if lvl < place.NumLevels-1 {
				// back off: try again, relaxed, when the next level starts
				wake = math.Min(wake, j.QueuedAt+float64(lvl+1)*p.relax)
			}
			// starvation guard: an old job reserves what frees up next
			return p.starve == 0 || waited < p.starve
		}
		pool.Take(gpus)
		d.Actions = append(d.Actions, cluster.Action{Kind: j.StartKind(), Job: j.ID, GPUs: gpus, Reason: "philly " + lvl.String()})
		p.waiting.Remove(j.ID)
		return true
	})
	if !math.IsInf(wake, 1) {
		d.WakeAt = wake
	}
	return d
}

// Explain implements policy.Explainer: the job's place in submission order,
// the locality it asks for now, and per server whether its gang fits there
// at that locality.
func (p *Policy) Explain(s *cluster.Snapshot, id cluster.JobID) policy.Explanation {
	j := s.Jobs[id]
	waited := s.Now - j.QueuedAt
	lvl := p.Level(waited)
	e := policy.Explanation{Queue: fmt.Sprintf("submission order, a job that does not fit skipped; this one asks for locality %s after waiting %.0f s (relaxing every %.0f s)",
		lvl, waited, p.relax)}
	if p.starve > 0 {
		e.Queue += fmt.Sprintf("; a job waiting over %.0f s blocks the jobs behind it", p.starve)
	}
	e.Rank(policy.WaitingByID(s), id)
	e.Servers = place.Explain(s, j.Spec.GPUs, p.placement, lvl)
	return e
}
