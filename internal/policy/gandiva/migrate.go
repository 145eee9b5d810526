package gandiva

import (
	"slices"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/place"
)

// migrations runs the moves of a round: waiting jobs onto idle GPUs while
// GPUs are over-subscribed; when GPUs came free (or at a boundary), better
// places for running jobs and the end of kept packings that no longer pay.
func (p *Policy) migrations(s *cluster.Snapshot) {
	if p.plan.Waiting > 0 {
		p.rebalance(s)
	}
	if p.bnd || freed(s) {
		p.improve(s)
		if p.prm.Unpack {
			p.separate(s)
		}
	}
}

// idlePool makes p.pool a scratch copy of the GPUs the plan leaves idle.
func (p *Policy) idlePool() int {
	p.pool.ResetFrom(p.plan.Idle())
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
	if p.idlePool() == 0 {
		return
	}
	pl := &p.plan
	for _, j := range p.turnOrder(s) {
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
		g := p.pool.PlaceFor(j.ID, j.Spec.GPUs, place.OneMore)
		if g == nil {
			continue
		}
		if why, ok := pays("migrate: idle GPUs", func() float64 { return p.waitGain(s, j) }, moveCost(j, g)); ok {
			p.move(s, j, g, why)
		}
	}
}

// move gives j a new home on idle GPUs g and runs it there this round.
func (p *Policy) move(s *cluster.Snapshot, j *cluster.Job, g []cluster.GPUID, why string) {
	p.pool.Take(g)
	p.st.SetHome(j.ID, place.SlotsOf(s.Cluster, g))
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
		var ok bool
		if blockers, ok = p.blockersOn(s, gang, sl, blockers); !ok {
			return false
		}
	}
	if len(blockers) == 0 || len(blockers) > p.prm.migrationsPerRound-p.moves {
		return false
	}
	dest := p.destinations(home, blockers)
	if dest == nil {
		return false
	}
	cost := 0.0
	for i, b := range blockers {
		cost += moveCost(b, dest[i]) * float64(len(dest[i]))
	}
	why, ok := pays("migrate: free GPUs for a gang", func() float64 { return p.waitGain(s, gang) * float64(gang.Spec.GPUs) }, cost)
	if !ok {
		return false
	}
	for i, b := range blockers {
		p.move(s, b, dest[i], why)
		p.plan.Waiting++ // move() counted the blocker as a waiting job
	}
	if g := pl.Pick(home, gang.Last); g != nil {
		pl.Choose(gang.ID, g, "turn")
		p.pool.Take(g)
		pl.Waiting--
		return true
	}
	return false
}

// blockersOn appends to blockers the smallest jobs holding the gang's home
// GPUs on slot sl's server in the plan, enough of them to free the slot;
// it reports false when they cannot be moved (too large, moved lately,
// spanning servers) or do not free enough.
func (p *Policy) blockersOn(s *cluster.Snapshot, gang *cluster.Job, sl place.Slot, blockers []*cluster.Job) ([]*cluster.Job, bool) {
	pl := &p.plan
	srv := &s.Cluster.Servers[sl.Server]
	short := sl.N
	shown := place.Plannable(s, sl.Server) // (a GPU the view hides is not freed by moving jobs)
	var cands []*cluster.Job
	for i := 0; i < srv.NumGPUs; i++ {
		g := srv.FirstGPU + cluster.GPUID(i)
		h := pl.Holder(g)
		if h == cluster.NoJob {
			if !pl.Idle().Held(g) && shown&(1<<uint(i)) != 0 {
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
		if hj.Spec.GPUs >= gang.Spec.GPUs || !p.canMove(s, hj) || len(place.SlotsOf(s.Cluster, pl.Target(hj.ID))) != 1 {
			return blockers, false
		}
		blockers = append(blockers, hj)
		short -= len(pl.Target(hj.ID))
	}
	return blockers, short <= 0
}

// destinations finds idle GPUs, off the gang's home servers, for each
// blocker (a trial on the scratch pool, rolled back); nil if one does not
// fit.
func (p *Policy) destinations(home []place.Slot, blockers []*cluster.Job) [][]cluster.GPUID {
	mark := p.pool.Mark()
	defer p.pool.Rollback(mark)
	// the blockers must leave the gang's home servers, not move within them
	p.pool.Restrict(func(sv cluster.ServerID) bool {
		return !slices.ContainsFunc(home, func(sl place.Slot) bool { return sl.Server == sv })
	})
	var dest [][]cluster.GPUID
	for _, b := range blockers {
		g := p.pool.PlaceFor(b.ID, len(p.plan.Target(b.ID)), place.Packed)
		if g == nil {
			return nil
		}
		p.pool.Take(g)
		dest = append(dest, g)
	}
	return dest
}

// improve moves running jobs to better places that are idle: a gang spread
// over servers consolidates onto fewer, and a job moves to a faster GPU
// generation when its speed-up there (measured when the job has run on
// both, nominal otherwise) is at least `upgrade`. Bounded like every move.
// The idle GPUs are those the plan left idle when improve began: GPUs a
// move frees are not offered again this round.
func (p *Policy) improve(s *cluster.Snapshot) {
	if s.FreeGPUs == 0 {
		return
	}
	cs, maxSize := p.improvable(s)
	if len(cs) == 0 {
		return
	}
	p.pool.ResetFrom(p.plan.Idle())
	for _, x := range cs {
		if p.moves >= p.prm.migrationsPerRound || p.pool.Free() == 0 {
			return
		}
		if x.servers > (len(x.j.GPUs)+maxSize-1)/maxSize && p.consolidate(s, x.j, x.servers) {
			continue
		}
		p.upgrade(s, x.j)
	}
}

// spreadJob is a running job improve may move, and the servers it spans.
type spreadJob struct {
	j       *cluster.Job
	servers int
}

// improvable lists the running jobs improve may move (spread over more
// servers than their gang needs, or on a slower generation than the
// fastest the cluster has), most spread first, and the largest server
// size.
func (p *Policy) improvable(s *cluster.Snapshot) ([]spreadJob, int) {
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
	var cs []spreadJob
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
		if fewest := (len(j.GPUs) + maxSize - 1) / maxSize; n > fewest || slow {
			cs = append(cs, spreadJob{j, n})
		}
	}
	slices.SortFunc(cs, func(a, b spreadJob) int {
		if a.servers != b.servers {
			return b.servers - a.servers
		}
		return int(a.j.ID - b.j.ID)
	})
	return cs, maxSize
}

// consolidate moves a running gang spread over servers onto fewer idle
// ones (of a generation at least as fast), if it can; it reports whether
// it moved the gang.
func (p *Policy) consolidate(s *cluster.Snapshot, j *cluster.Job, servers int) bool {
	c := s.Cluster
	if p.pool.Free() < j.Spec.GPUs {
		return false
	}
	g := p.pool.PlaceFor(j.ID, j.Spec.GPUs, place.Packed)
	if g == nil {
		return false
	}
	if n, _ := place.Spread(c, g); n >= servers || c.GPUType(g[0]).Speed < c.GPUType(j.GPUs[0]).Speed {
		return false
	}
	p.pool.Take(g)
	p.relocate(s, j, g, "migrate: consolidate")
	return true
}

// upgrade moves a running job to idle GPUs of the faster generation with
// the best speed-up, when that is at least `upgrade`.
func (p *Policy) upgrade(s *cluster.Snapshot, j *cluster.Job) {
	c := s.Cluster
	cur := c.Servers[c.ServerOf(j.GPUs[0])].Type
	bestT, bestUp := -1, p.prm.Upgrade
	for t := range c.Types {
		if c.Types[t].Speed <= c.Types[cur].Speed && j.Profile.SoloIterTime(t) == 0 {
			continue // not faster, on paper or measured
		}
		if up := speedup(j, cur, t, c); up >= bestUp && p.freeOfType(c, t) >= j.Spec.GPUs {
			bestT, bestUp = t, up
		}
	}
	if bestT < 0 {
		return
	}
	mark := p.onType(c, bestT)
	p.pool.Only(j.ID)
	g := p.pool.Place(j.Spec.GPUs, place.Packed)
	p.pool.Rollback(mark)
	if g == nil {
		return
	}
	if why, ok := pays("migrate: faster GPUs", func() float64 { return (1 - 1/bestUp) * p.horizon(j) }, moveCost(j, g)); ok {
		p.pool.Take(g)
		p.relocate(s, j, g, why)
	}
}

// onType restricts the scratch pool to the servers of GPU type t, for a
// trial: roll back to the mark it returns.
func (p *Policy) onType(c *cluster.Cluster, t int) int {
	mark := p.pool.Mark()
	p.pool.Restrict(func(sv cluster.ServerID) bool { return c.Servers[sv].Type == t })
	return mark
}

// freeOfType counts the scratch pool's free GPUs of type t.
func (p *Policy) freeOfType(c *cluster.Cluster, t int) int {
	mark := p.onType(c, t)
	defer p.pool.Rollback(mark)
	return p.pool.Free()
}

// isBoundaryOrKept: a running job may be moved when the plan keeps it
// running (chosen), or between boundaries where every running job is kept.
func isBoundaryOrKept(p *Policy, j *cluster.Job) bool {
	return p.plan.Chosen(j.ID) || !p.bnd
}

// relocate migrates a running job to g.
func (p *Policy) relocate(s *cluster.Snapshot, j *cluster.Job, g []cluster.GPUID, why string) {
	p.st.SetHome(j.ID, place.SlotsOf(s.Cluster, g))
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

// separate ends kept packings while GPUs sit idle and no job waits for a
// turn. Packing pays only against time-slicing: two jobs that would take
// turns run together, each at the fraction of its solo speed that the pair
// allows. With a spare GPU neither has to wait, and both run alone at full
// speed, so the partner that joined the pair moves to idle GPUs of its
// type (or a faster one), bounded like every move. The pair's models stay
// remembered as good, so they pack again without a trial once jobs wait.
func (p *Policy) separate(s *cluster.Snapshot) {
	if p.plan.Waiting > 0 || s.FreeGPUs == 0 {
		return
	}
	c := s.Cluster
	p.pool.ResetFrom(p.plan.Idle())
	for _, j := range s.Active() {
		if p.moves >= p.prm.migrationsPerRound || p.pool.Free() == 0 {
			return
		}
		ji := &p.st.Jobs[j.ID]
		q := ji.Partner
		if q == cluster.NoJob || q < j.ID || ji.PackedAt != 0 || j.State != cluster.Running {
			continue // each kept pair once, from its lower ID
		}
		qj := s.Jobs[q]
		qi := &p.st.Jobs[q]
		if qj.State != cluster.Running || qi.PackedAt != 0 || len(qi.Borrowed) > 0 || !p.stays(j) || !p.stays(qj) ||
			(qi.MovedAt != 0 && s.Now-qi.MovedAt < p.prm.Cooldown) {
			continue
		}
		cur := c.GPUType(qj.GPUs[0]).Speed
		mark := p.pool.Mark()
		p.pool.Restrict(func(sv cluster.ServerID) bool { return c.TypeOf(sv).Speed >= cur })
		p.pool.Only(qj.ID)
		g := p.pool.Place(qj.Spec.GPUs, place.Packed)
		p.pool.Rollback(mark)
		if g == nil {
			continue
		}
		why, ok := pays("migrate: unpack onto idle GPUs", func() float64 { return (2 - pairNorm(j, qj)) * min(p.horizon(j), p.horizon(qj)) }, moveCost(qj, g))
		if !ok {
			continue
		}
		p.pool.Take(g)
		p.st.Unpack(j.ID)
		p.plan.share[j.ID] = false
		p.relocate(s, qj, g, why)
	}
}

// stays reports whether a running job keeps its GPUs after this round: the
// plan chose it where it runs, or (between boundaries) left it untouched.
func (p *Policy) stays(j *cluster.Job) bool {
	if p.plan.Chosen(j.ID) {
		return slices.Equal(p.plan.Target(j.ID), j.GPUs)
	}
	return !p.bnd
}
