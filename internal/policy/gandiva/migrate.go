package gandiva

import (
	"math/bits"
	"slices"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/place"
)

// idlePool builds p.pool over the GPUs the plan leaves idle.
func (p *Policy) idlePool(s *cluster.Snapshot) int {
	p.pool.ResetMasks(s, func(sv cluster.ServerID) uint64 { return p.plan.IdleMask(sv, !p.bnd) })
	return p.pool.Free()
}

func (p *Policy) canMove(s *cluster.Snapshot, j *cluster.Job) bool {
	ji := &p.st.Jobs[j.ID]
	return p.moves < p.prm.migrationsPerRound && (ji.MovedAt == 0 || s.Now-ji.MovedAt >= p.prm.Cooldown) &&
		ji.Partner == cluster.NoJob && j.State != cluster.Migrating
}

// rebalance puts idle GPUs to work while others are over-subscribed:
// waiting jobs move to idle GPUs (bounded), in turn order. A waiting gang
// that is blocked by smaller jobs on its home GPUs gets them moved away
// instead, which frees its GPUs for its turn. At a boundary, spread gangs
// consolidate and jobs move up to faster idle GPU generations.
func (p *Policy) rebalance(s *cluster.Snapshot) {
	if p.idlePool(s) == 0 {
		return
	}
	pl := &p.plan
	for _, j := range p.cands {
		if p.pool.Free() == 0 || p.moves >= p.prm.migrationsPerRound {
			return
		}
		// waiting jobs, and running ones the plan would suspend
		if pl.Chosen(j.ID) || !p.eligible(s, j) || j.State == cluster.Migrating || (j.State == cluster.Running && !p.bnd) {
			continue
		}
		if j.Spec.GPUs > 1 && p.freeForGang(s, j) {
			continue
		}
		if !p.canMove(s, j) {
			continue
		}
		g := p.pool.Place(j.Spec.GPUs, place.OneMore)
		if g == nil {
			continue
		}
		p.move(s, j, g, "migrate: idle GPUs")
	}
}

// move gives j a new home on idle GPUs g and runs it there this round.
func (p *Policy) move(s *cluster.Snapshot, j *cluster.Job, g []cluster.GPUID, why string) {
	p.pool.Take(g)
	p.st.SetHome(j.ID, SlotsOf(s.Cluster, g))
	if j.State != cluster.Queued || j.Starts > 0 {
		p.st.Jobs[j.ID].MovedAt = s.Now
		p.moves++
	}
	p.plan.Unchoose(j.ID)
	p.plan.Choose(j.ID, g, why)
	p.plan.Waiting--
}

// freeForGang moves smaller jobs that hold a waiting gang's home GPUs in the
// plan to idle GPUs elsewhere, and gives the gang its turn if that frees
// enough of its home. It reports whether the gang now runs.
func (p *Policy) freeForGang(s *cluster.Snapshot, gang *cluster.Job) bool {
	pl := &p.plan
	home := p.st.Jobs[gang.ID].Home
	var blockers []*cluster.Job
	for _, sl := range home {
		srv := &s.Cluster.Servers[sl.Server]
		short := sl.N
		var cands []*cluster.Job
		for i := 0; i < srv.NumGPUs; i++ {
			g := srv.FirstGPU + cluster.GPUID(i)
			h := pl.Holder(g)
			if h == cluster.NoJob {
				if pl.available(g, !p.bnd) {
					short--
				}
				continue
			}
			if hj := s.Jobs[h]; !slices.Contains(cands, hj) {
				cands = append(cands, hj)
			}
		}
		slices.SortFunc(cands, func(a, b *cluster.Job) int {
			if a.Spec.GPUs != b.Spec.GPUs {
				return a.Spec.GPUs - b.Spec.GPUs
			}
			return int(a.ID - b.ID)
		})
		for _, hj := range cands {
			if short <= 0 {
				break
			}
			if hj.Spec.GPUs >= gang.Spec.GPUs || !p.canMove(s, hj) || len(SlotsOf(s.Cluster, pl.Target(hj.ID))) != 1 {
				return false
			}
			blockers = append(blockers, hj)
			short -= len(pl.Target(hj.ID))
		}
		if short > 0 {
			return false
		}
	}
	if len(blockers) == 0 || len(blockers) > p.prm.migrationsPerRound-p.moves {
		return false
	}
	mark := p.pool.Mark()
	// the blockers must leave the gang's home servers, not move within them
	for _, sl := range home {
		first := s.Cluster.Servers[sl.Server].FirstGPU
		var own []cluster.GPUID
		for m := p.pool.Mask(sl.Server); m != 0; m &= m - 1 {
			own = append(own, first+cluster.GPUID(bits.TrailingZeros64(m)))
		}
		p.pool.Take(own)
	}
	var dest [][]cluster.GPUID
	for _, b := range blockers {
		g := p.pool.Place(len(pl.Target(b.ID)), place.Packed)
		if g == nil {
			p.pool.Rollback(mark)
			return false
		}
		p.pool.Take(g)
		dest = append(dest, g)
	}
	p.pool.Rollback(mark)
	for i, b := range blockers {
		p.move(s, b, dest[i], "migrate: free GPUs for a gang")
		p.plan.Waiting++ // move() counted the blocker as a waiting job
	}
	if g := pl.Pick(home, gang.Last, !p.bnd); g != nil {
		pl.Choose(gang.ID, g, "turn")
		p.pool.Take(g)
		pl.Waiting--
		return true
	}
	return false
}

// improve moves running jobs to better places that are idle: a gang spread
// over servers consolidates onto fewer, and a job moves to a faster GPU
// generation when its speed-up there (measured when the job has run on
// both, nominal otherwise) is at least `upgrade`. Bounded like every move.
func (p *Policy) improve(s *cluster.Snapshot) {
	if s.FreeGPUs == 0 {
		return
	}
	c := s.Cluster
	// the fastest generation the cluster has (its type list also holds
	// generations no server has)
	fastest, maxSize := 0.0, 0
	for i := range c.Servers {
		maxSize = max(maxSize, c.Servers[i].NumGPUs)
		if s.Servers[i].Schedulable() {
			fastest = max(fastest, c.TypeOf(cluster.ServerID(i)).Speed)
		}
	}
	type cand struct {
		j       *cluster.Job
		servers int
	}
	var cs []cand
	for _, j := range s.Active() {
		ji := &p.st.Jobs[j.ID]
		if j.State != cluster.Running || ji.Home == nil || len(ji.Borrowed) > 0 || !p.canMove(s, j) {
			continue
		}
		if p.plan.Chosen(j.ID) && !slices.Equal(p.plan.Target(j.ID), j.GPUs) {
			continue // already moving this round
		}
		if !isBoundaryOrKept(p, j) {
			continue
		}
		slow := c.GPUType(j.GPUs[0]).Speed < fastest
		if len(j.GPUs) == 1 && !slow {
			continue
		}
		n, _ := place.Spread(c, j.GPUs)
		fewest := (len(j.GPUs) + maxSize - 1) / maxSize
		if n > fewest || slow {
			cs = append(cs, cand{j, n})
		}
	}
	if len(cs) == 0 {
		return
	}
	slices.SortFunc(cs, func(a, b cand) int {
		if a.servers != b.servers {
			return b.servers - a.servers
		}
		return int(a.j.ID - b.j.ID)
	})
	idle := make([]uint64, len(s.Servers))
	total := 0
	for sv := range idle {
		idle[sv] = p.plan.IdleMask(cluster.ServerID(sv), !p.bnd)
		total += bits.OnesCount64(idle[sv])
	}
	pool := func(t int) int {
		p.pool.ResetMasks(s, func(sv cluster.ServerID) uint64 {
			if t >= 0 && c.Servers[sv].Type != t {
				return 0
			}
			return idle[sv]
		})
		return p.pool.Free()
	}
	take := func(g []cluster.GPUID) {
		for _, x := range g {
			sv := c.ServerOf(x)
			idle[sv] &^= 1 << uint(x-c.Servers[sv].FirstGPU)
			total--
		}
	}
	for _, x := range cs {
		if p.moves >= p.prm.migrationsPerRound || total == 0 {
			return
		}
		j := x.j
		cur := c.Servers[c.ServerOf(j.GPUs[0])].Type
		if x.servers > (len(j.GPUs)+maxSize-1)/maxSize && pool(-1) >= j.Spec.GPUs {
			if g := p.pool.Place(j.Spec.GPUs, place.Packed); g != nil {
				if n, _ := place.Spread(c, g); n < x.servers && c.GPUType(g[0]).Speed >= c.Types[cur].Speed {
					take(g)
					p.relocate(s, j, g, "migrate: consolidate")
					continue
				}
			}
		}
		// upgrade to the faster generation with the best speed-up
		bestT, bestUp := -1, p.prm.Upgrade
		for t := range c.Types {
			if c.Types[t].Speed <= c.Types[cur].Speed && j.Profile.SoloIterTime(t) == 0 {
				continue // not faster, on paper or measured
			}
			if up := speedup(j, cur, t, c); up >= bestUp && pool(t) >= j.Spec.GPUs {
				bestT, bestUp = t, up
			}
		}
		if bestT < 0 {
			continue
		}
		pool(bestT)
		if g := p.pool.Place(j.Spec.GPUs, place.Packed); g != nil {
			take(g)
			p.relocate(s, j, g, "migrate: faster GPUs")
		}
	}
}

// isBoundaryOrKept: a running job may be moved when the plan keeps it
// running (chosen), or between boundaries where every running job is kept.
func isBoundaryOrKept(p *Policy, j *cluster.Job) bool {
	return p.plan.Chosen(j.ID) || !p.bnd
}

// relocate migrates a running job to g.
func (p *Policy) relocate(s *cluster.Snapshot, j *cluster.Job, g []cluster.GPUID, why string) {
	p.st.SetHome(j.ID, SlotsOf(s.Cluster, g))
	p.st.Jobs[j.ID].MovedAt = s.Now
	p.moves++
	p.plan.Unchoose(j.ID)
	p.plan.Choose(j.ID, g, why)
}

// speedup is job j's expected speed on GPU type to relative to type from:
// measured solo times when the job has run alone on both, else the types'
// nominal speeds.
func speedup(j *cluster.Job, from, to int, c *cluster.Cluster) float64 {
	if a, b := j.Profile.SoloIterTime(from), j.Profile.SoloIterTime(to); a > 0 && b > 0 {
		return a / b
	}
	return c.Types[to].Speed / c.Types[from].Speed
}
