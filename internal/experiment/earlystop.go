package experiment

import (
	"fmt"
	"math"
	"slices"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/policy"
)

// earlyStop is the AutoML experiment's baseline: HyperOpt-style early
// feedback on exclusive GPUs (the paper's baseline, in its talk: "HyperOpt:
// predict more promising mode based on early feedback", each configuration
// on a GPU of its own). It wraps a policy that gives every job GPUs of its
// own (fifo: no time-slicing, no preemption, no packing) and adds the very
// drop rule of the gandiva policy's early feedback
// (internal/policy/gandiva/feedback.go), with the same rungs: when a job of
// a group reports a metric and has passed rung k (rung × eta^k of its
// mini-batches), its metric is recorded with the group's at that rung; once
// a rung holds at least 2·eta reports, every job whose latest rung is that
// one and whose metric is below the rung's median is killed. What the
// baseline lacks is what Gandiva adds: time-slicing (all configurations
// make progress at once) and prioritisation (the promising ones run first).
type earlyStop struct {
	inner     policy.Policy
	rung, eta float64
	groups    map[string][][]float64
	// at[j] is the next rung job j has not passed; atJob lists, per group
	// and rung, the jobs that reported there.
	at     map[cluster.JobID]int
	atJob  map[string][][]cluster.JobID
	killed map[cluster.JobID]bool
	kills  int
}

var _ policy.Policy = (*earlyStop)(nil)

// newEarlyStop wraps inner with the drop rule at rungs rung·eta^k.
func newEarlyStop(inner policy.Policy, rung, eta float64) *earlyStop {
	return &earlyStop{inner: inner, rung: rung, eta: eta, groups: map[string][][]float64{},
		at: map[cluster.JobID]int{}, atJob: map[string][][]cluster.JobID{}, killed: map[cluster.JobID]bool{}}
}

func (p *earlyStop) Name() string { return p.inner.Name() + "+early-stop" }

func (p *earlyStop) Schedule(s *cluster.Snapshot) cluster.Decision {
	var kills []cluster.Action
	for _, ev := range s.Events {
		if ev.Kind != cluster.EvProfile || !ev.HasMetric || ev.Job < 0 || int(ev.Job) >= len(s.Jobs) {
			continue
		}
		j := s.Jobs[ev.Job]
		if j.State.Terminal() || p.killed[j.ID] || j.Spec.Group == "" || j.Spec.Iters <= 0 {
			continue
		}
		kills = append(kills, p.report(s, j)...)
	}
	d := p.inner.Schedule(s)
	if len(kills) > 0 {
		d.Actions = append(kills, d.Actions...)
		// the freed GPUs go to the next configurations at once
		if wake := s.Now + 1e-3; d.WakeAt == 0 || wake < d.WakeAt {
			d.WakeAt = wake
		}
	}
	return d
}

// report records j's metric at every rung it has passed since its last
// report and returns the kills the rule decides.
func (p *earlyStop) report(s *cluster.Snapshot, j *cluster.Job) []cluster.Action {
	var kills []cluster.Action
	frac := j.Done / j.Spec.Iters
	g := j.Spec.Group
	for !p.killed[j.ID] {
		k := p.at[j.ID]
		if r := p.rung * math.Pow(p.eta, float64(k)); r >= 1 || frac < r {
			break
		}
		for len(p.groups[g]) <= k {
			p.groups[g] = append(p.groups[g], nil)
			p.atJob[g] = append(p.atJob[g], nil)
		}
		p.groups[g][k] = append(p.groups[g][k], j.Metric)
		p.atJob[g][k] = append(p.atJob[g][k], j.ID)
		p.at[j.ID] = k + 1
		n := len(p.groups[g][k])
		if float64(n) < 2*p.eta {
			continue
		}
		sorted := slices.Clone(p.groups[g][k])
		slices.Sort(sorted)
		median := sorted[n/2]
		for i, id := range p.atJob[g][k] {
			m := p.groups[g][k][i]
			if p.killed[id] || p.at[id] != k+1 || s.Jobs[id].State.Terminal() || m >= median {
				continue
			}
			p.killed[id] = true
			p.kills++
			kills = append(kills, cluster.Action{Kind: cluster.Kill, Job: id,
				Reason: fmt.Sprintf("early stop: metric %.4g below the median %.4g of group %s at rung %d", m, median, g, k)})
		}
	}
	return kills
}
