package gandiva

import (
	"slices"

	"github.com/gandiva-sched/gandiva/internal/cluster"
)

// noGrowFor is how long a job that did not profit from growing waits
// before it may try again.
const noGrowFor = 1800

// shrinkForWaiting shrinks grown elastic jobs back to their home width
// when a job that waits is homed on one of their servers, before the turns
// are planned, so the waiting job can take the GPUs in the same round.
func (p *Policy) shrinkForWaiting(s *cluster.Snapshot) {
	if p.st.Elastic == 0 {
		return
	}
	grown := false
	for _, j := range s.Active() {
		if len(p.st.Jobs[j.ID].Borrowed) > 0 && j.State == cluster.Running {
			grown = true
			break
		}
	}
	if !grown {
		return
	}
	wanted := map[cluster.ServerID]bool{}
	p.waiting.Each(s, func(j *cluster.Job) bool {
		if p.eligible(s, j) {
			for _, sl := range p.st.Jobs[j.ID].Home {
				wanted[sl.Server] = true
			}
		}
		return true
	})
	for _, j := range s.Active() {
		ji := &p.st.Jobs[j.ID]
		if j.State != cluster.Running || len(ji.Borrowed) == 0 {
			continue
		}
		for _, sv := range cluster.ServersOf(s.Cluster, j.GPUs) {
			if wanted[sv] {
				p.shrink(s, j, "shrink: GPUs needed")
				ji.noGrowUntil = s.Now + p.prm.Quantum
				break
			}
		}
	}
}

// elastic grows elastic jobs onto idle GPUs of their servers when nobody
// waits, and shrinks them back to their home as soon as somebody does.
func (p *Policy) elastic(s *cluster.Snapshot) {
	if p.st.Elastic == 0 {
		return
	}
	if p.plan.Waiting > 0 {
		p.shrinkGrown(s)
		return
	}
	idle := false
	for _, j := range s.Active() {
		if !p.mayGrow(s, j) {
			continue
		}
		if !idle {
			if p.idlePool() == 0 {
				return
			}
			idle = true
		}
		p.grow(s, j)
	}
}

// shrinkGrown shrinks every grown job back to its home width (a job whose
// turn is over just forgets its borrowed GPUs).
func (p *Policy) shrinkGrown(s *cluster.Snapshot) {
	pl := &p.plan
	for _, j := range s.Active() {
		ji := &p.st.Jobs[j.ID]
		if j.State == cluster.Running && len(ji.Borrowed) > 0 && (!pl.Chosen(j.ID) || len(pl.Target(j.ID)) > j.Spec.GPUs) {
			if !pl.Chosen(j.ID) && p.bnd {
				ji.Borrowed = nil // its turn is over anyway
				continue
			}
			p.shrink(s, j, "shrink: GPUs needed")
			ji.noGrowUntil = s.Now + p.prm.Quantum
		}
	}
}

// mayGrow reports whether a running elastic job may try to grow now: not
// packed, not in a growth trial or its aftermath, not moving, below its
// widest, and measured at its current width.
func (p *Policy) mayGrow(s *cluster.Snapshot, j *cluster.Job) bool {
	ji := &p.st.Jobs[j.ID]
	if j.State != cluster.Running || !j.Spec.Elastic() || ji.Partner != cluster.NoJob || ji.growAt > 0 || s.Now < ji.noGrowUntil {
		return false
	}
	if p.plan.Chosen(j.ID) && !slices.Equal(p.plan.Target(j.ID), j.GPUs) {
		return false
	}
	if _, hi := j.Spec.WidthRange(); len(j.GPUs) >= hi {
		return false
	}
	last := j.Profile.Last()
	return last != nil && last.Width == len(j.GPUs) && last.IterTime > 0 && !last.Shared // else measure the current width first
}

// grow widens j onto idle GPUs of its servers (the scratch pool), up to
// its widest, and starts a growth trial.
func (p *Policy) grow(s *cluster.Snapshot, j *cluster.Job) {
	if len(j.GPUs) != j.Spec.GPUs || !schedulable(s, j.GPUs) {
		return // grows once, from its home width, and not on a drained node
	}
	_, hi := j.Spec.WidthRange()
	var add []cluster.GPUID
	for _, sv := range cluster.ServersOf(s.Cluster, j.GPUs) {
		if n := min(p.pool.FreeOn(sv), hi-len(j.GPUs)-len(add)); n > 0 {
			add, _ = p.pool.PickOn(add, sv, n, nil)
		}
	}
	if len(add) == 0 {
		return
	}
	p.pool.Take(add)
	ji := &p.st.Jobs[j.ID]
	ji.Borrowed = append(ji.Borrowed, add...)
	ji.growAt, ji.growRate = s.Now, 1/j.Profile.Last().IterTime
	target := append(slices.Clone(j.GPUs), add...)
	slices.Sort(target)
	p.plan.Unchoose(j.ID)
	p.plan.Choose(j.ID, target, "grow: idle GPUs")
}

// judgeGrowth keeps a growth when the measured rate rose by at least
// grow_margin × the relative width increase; otherwise the job shrinks back
// and does not try again for a while.
func (p *Policy) judgeGrowth(s *cluster.Snapshot, j *cluster.Job) {
	ji := &p.st.Jobs[j.ID]
	if ji.growAt == 0 || j.State != cluster.Running {
		return
	}
	last := j.Profile.Last()
	if last == nil || last.At <= ji.growAt || last.IterTime <= 0 || last.Width != len(j.GPUs) {
		return
	}
	before := len(j.GPUs) - len(ji.Borrowed)
	need := 1 + p.prm.GrowMargin*float64(len(ji.Borrowed))/float64(before)
	if (1/last.IterTime)/ji.growRate >= need {
		ji.growAt = 0 // keep
		return
	}
	ji.growAt, ji.noGrowUntil = 0, s.Now+noGrowFor
	p.shrink(s, j, "shrink: growth did not pay")
}

// shrink returns a grown elastic job to its home width, on GPUs it holds.
func (p *Policy) shrink(s *cluster.Snapshot, j *cluster.Job, why string) {
	ji := &p.st.Jobs[j.ID]
	keep := make([]cluster.GPUID, 0, j.Spec.GPUs)
	for _, g := range j.GPUs {
		if !slices.Contains(ji.Borrowed, g) {
			keep = append(keep, g)
		}
	}
	ji.Borrowed, ji.growAt = nil, 0
	p.plan.Unchoose(j.ID)
	if !schedulable(s, keep) {
		// the engine resizes nothing on a drained node: stop the job; its
		// turn comes back on a new home
		p.stop = append(p.stop, j.ID)
		return
	}
	p.plan.Choose(j.ID, keep, why)
}

// schedulable reports whether every GPU's server takes new work.
func schedulable(s *cluster.Snapshot, gpus []cluster.GPUID) bool {
	for _, g := range gpus {
		if !s.Servers[s.Cluster.ServerOf(g)].Schedulable() {
			return false
		}
	}
	return true
}
