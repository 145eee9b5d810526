package preempt

import (
	"slices"

	"github.com/gandiva-sched/gandiva/internal/cluster"
)

// Gate decides which calls to Schedule a policy acts on, so that it plans
// at the instants the Tiresias simulator has events for: arrivals, ends
// (and failures, cancellations, lost nodes), the wake-up it asked for last
// and, outside the simulator's world, the end of a failed job's back-off
// and the refusal of one of its actions (cluster.Snapshot.Rejected: the
// plan it made did not happen as planned).
// It ignores the rest: the samples and migration completions its own
// actions cause at the instant it planned (acting on them would re-plan
// within one instant, and a policy whose order depends on measurements
// could undo its own plan), stale wake-ups it no longer wants, and calls
// the driver makes for events of no interest. A policy may count more
// events as relevant (Optimus: new speed measurements).
type Gate struct {
	ran   bool
	at    float64 // instant of the last plan
	wake  float64 // wake-up asked for at the last plan
	retry []float64
}

// Relevant reports whether the policy should plan at s.Now; extra says the
// policy found something of its own in the events. The last plan's
// wake-up counts at any s.Now at or after it.
func (g *Gate) Relevant(s *cluster.Snapshot, extra bool) bool {
	if !g.ran || extra || len(s.Rejected) > 0 {
		return true
	}
	for _, ev := range s.Events {
		switch ev.Kind {
		case cluster.EvTick, cluster.EvProfile, cluster.EvActionDone, cluster.EvSetting:
		default:
			return true
		}
	}
	if s.Now <= g.at {
		return false
	}
	// the wake-up is due at or after the instant asked for: the simulator
	// calls at that instant, a live driver (gandiva kube, gandiva server)
	// a little later, when its timer fires; wake > at, so that a wake-up
	// of 0 (none) or one the last plan asked for in its past never is
	if g.wake > g.at && s.Now >= g.wake {
		return true
	}
	for _, t := range g.retry {
		if t <= s.Now {
			return true
		}
	}
	return false
}

// Planned records a plan at now and the wake-up it asked for (0: none).
func (g *Gate) Planned(now, wake float64) {
	g.ran, g.at, g.wake = true, now, wake
	g.retry = slices.DeleteFunc(g.retry, func(t float64) bool { return t <= now })
}

// Wake is the wake-up asked for at the last plan.
func (g *Gate) Wake() float64 { return g.wake }

// Retry notes that a waiting job becomes eligible at t (its back-off ends).
func (g *Gate) Retry(t float64) {
	if !slices.Contains(g.retry, t) {
		g.retry = append(g.retry, t)
	}
}
