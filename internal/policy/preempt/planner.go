package preempt

import (
	"cmp"
	"math/bits"
	"slices"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/place"
)

// Placer chooses GPUs for a waiting job among the pool's free GPUs, or
// returns nil when the job does not fit now. It must not take the GPUs
// (the Planner does) and must return GPUs that are free in the pool.
type Placer interface {
	Place(pool *place.Pool, j *cluster.Job) []cluster.GPUID
}

// Order yields jobs in priority order, highest first, each at most once,
// until yield returns false.
type Order func(yield func(j *cluster.Job) bool)

// Input is one round's question to the Planner.
type Input struct {
	// Order yields every eligible job: all that hold GPUs, and the waiting
	// jobs that may start now (not backing off after a failure).
	Order Order
	// Holding is the number of GPU-holding jobs Order yields; once the
	// scan has seen them all it may stop early.
	Holding int
	// MinWaiting is a lower bound on the gang size of the waiting jobs
	// Order yields (1 is always safe); the scan stops once every holding
	// job was seen and fewer GPUs than this remain unclaimed.
	MinWaiting int
	// Reason is written on every action ("tiresias-l", ...).
	Reason string
	// Backfill, without free preemption, yields the waiting jobs in priority
	// order again, for the GPUs that admitted jobs could not be placed on
	// (Order may have stopped, or skipped waiting jobs, before reaching
	// them). Nil: only the waiting jobs Order yielded are tried.
	Backfill Order
	// Tied, when set, reports whether two jobs that Order yielded one
	// right after the other are of equal priority to the policy (their
	// order is only its tie-break). Among tied victims, those whose
	// suspension loses less work since their last checkpoint
	// (cluster.Job.Unsaved) are suspended first. Nil: none are tied.
	Tied func(a, b *cluster.Job) bool
}

// Planner decides starts, resumes and suspends from a priority order. The
// zero value with a Placer set is ready; it keeps buffers across rounds.
type Planner struct {
	// Placement: with place.Count GPUs are only counted (the capacity is
	// every GPU, and a waiting job takes any free GPUs, see Counted); with
	// place.Locality (the default) the Placer places waiting jobs.
	Placement place.Strategy
	// FreePreemption suspends every victim (preemption costs nothing, the
	// Tiresias simulator's count scheme), not only those a placement needs.
	FreePreemption bool
	// Placer places waiting jobs under place.Locality (nil: Consolidated{}).
	Placer Placer

	// Started lists the jobs the last Plan started or resumed: the admitted
	// ones in priority order, then any backfilled ones.
	Started []cluster.JobID
	// Suspended lists the jobs the last Plan suspended, in priority order.
	Suspended []cluster.JobID

	pool      place.Pool
	saturated bool
	actions   []cluster.Action
	admitted  []*cluster.Job
	victims   []*cluster.Job
	skipped   []*cluster.Job
	used      []bool // per victim: suspended
	// runs are the running jobs the scan saw that it could suspend (kept
	// or victims), in scan order; victim says which it made victims.
	runs   []*cluster.Job
	victim []bool
	gpus   [][]cluster.GPUID
	starts []*cluster.Job
	trial  []int

	// The state of one Plan's scan and backfill, for the methods scan and
	// try, which are handed to Input's Order and Backfill: bound once
	// (scanFn, tryFn, for the Planner at self), not as closures per Plan,
	// which allocated several objects a round.
	now                   float64
	budget, seen, minWait int
	holding               int
	scanFn, tryFn         func(*cluster.Job) bool
	self                  *Planner
}

// Saturated reports, during a Plan, whether the GPUs not yet claimed are
// fewer than any waiting job needs: from then on the scan only looks for
// the remaining holding jobs, and an Order may skip its waiting jobs.
func (p *Planner) Saturated() bool { return p.saturated }

// Capacity is the number of GPUs on schedulable servers (all GPUs under
// place.Count: the count scheme's clusters never lose a node) that the
// view lets the planner use: free, or held by a job (which it may
// preempt). GPUs the view hides (shown taken with no job on them: an
// executor's Blocked GPUs, other schedulers' pods) are no capacity: a
// waiting job counted onto them would be admitted beside the jobs it
// should preempt, and wait for ever. Servers can be drained without an
// event, and GPUs hidden, so it is counted afresh each round.
func (p *Planner) Capacity(s *cluster.Snapshot) int {
	n := 0
	for i := range s.Servers {
		if p.Placement == place.Count || s.Servers[i].Schedulable() {
			n += usable(s, cluster.ServerID(i))
		}
	}
	return n
}

// usable is the number of server sv's GPUs that are free in the view s or
// held by a job: all of them unless the view hides some.
func usable(s *cluster.Snapshot, sv cluster.ServerID) int {
	srv := &s.Cluster.Servers[sv]
	n := srv.NumGPUs
	taken := ^s.Servers[sv].Free
	if n < 64 {
		taken &= 1<<uint(n) - 1
	}
	for ; taken != 0; taken &= taken - 1 {
		g := srv.FirstGPU + cluster.GPUID(bits.TrailingZeros64(taken))
		if int(g) < len(s.GPUs) && len(s.GPUs[g].Jobs) == 0 {
			n-- // hidden: taken, and no job holds it
		}
	}
	return n
}

// Plan scans in.Order, appends the actions to d and records Started and
// Suspended. See the package comment for the semantics. When d.Actions is
// nil, Plan uses a buffer of its own that the next Plan reuses (the engine
// copies the actions it applies; it keeps no reference to the Decision).
func (p *Planner) Plan(s *cluster.Snapshot, in Input, d *cluster.Decision) {
	if d.Actions == nil {
		d.Actions = p.actions[:0]
		defer func() { p.actions = d.Actions[:0] }()
	}
	p.Started, p.Suspended = p.Started[:0], p.Suspended[:0]
	p.admitted, p.victims, p.skipped = p.admitted[:0], p.victims[:0], p.skipped[:0]
	p.runs, p.victim = p.runs[:0], p.victim[:0]
	if p.self != p || p.scanFn == nil { // first Plan of this Planner (or of a copy, or of a restored state: funcs are not stored)
		p.scanFn, p.tryFn, p.self = p.scan, p.try, p
	}
	p.now, p.budget, p.seen, p.minWait, p.holding = s.Now, p.Capacity(s), 0, max(in.MinWaiting, 1), in.Holding
	p.saturated = p.budget < p.minWait
	in.Order(p.scanFn)
	if len(p.admitted) == 0 {
		return
	}
	p.byUnsaved(in.Tied)
	pool := &p.pool
	pool.Reset(s)
	if p.FreePreemption {
		p.planFree(pool, in.Reason, d)
		return
	}
	p.planPlaced(pool, in.Reason, d, in.Backfill)
}

// placer is the Placer for the strategy.
func (p *Planner) placer() Placer {
	switch {
	case p.Placement == place.Count:
		return Counted{}
	case p.Placer == nil:
		return Consolidated{}
	}
	return p.Placer
}

// placeAllowed is placer's placement of j on servers it may run on
// (cluster.Snapshot.Allowed), or nil.
func placeAllowed(pool *place.Pool, placer Placer, j *cluster.Job) []cluster.GPUID {
	m := pool.Only(j.ID)
	g := placer.Place(pool, j)
	pool.Rollback(m)
	return g
}

// scan takes the next job of the Order: a holding job keeps its GPUs if
// the budget allows, else becomes a victim; a waiting job that fits is
// admitted. It reports whether the scan goes on.
func (p *Planner) scan(j *cluster.Job) bool {
	if j.State.Holding() {
		p.seen++
		g := len(j.GPUs)
		switch {
		case g <= p.budget:
			p.budget -= g
			if j.State == cluster.Running && !j.StartingUp {
				p.runs, p.victim = append(p.runs, j), append(p.victim, false)
			}
		case j.State == cluster.Running && !j.StartingUp:
			p.victims = append(p.victims, j)
			p.runs, p.victim = append(p.runs, j), append(p.victim, true)
		default: // migrating, or starting up: not stopped now, keeps its GPUs
			p.budget -= g
		}
	} else if j.State.Waiting() && j.NotBefore <= p.now {
		if g := j.Spec.GPUs; g <= p.budget {
			p.budget -= g
			p.admitted = append(p.admitted, j)
		} else {
			p.skipped = append(p.skipped, j)
		}
	}
	p.saturated = p.budget < p.minWait
	return p.seen < p.holding || !p.saturated
}

// tried reports whether the current plan already admitted id.
func (p *Planner) tried(id cluster.JobID) bool {
	for _, j := range p.admitted {
		if j.ID == id {
			return true
		}
	}
	return false
}

// planFree is the plan when preemption is free (the Tiresias simulator's
// count scheme): every victim is suspended, then every admitted job that
// the placement allows starts. Returning jobs go first: a suspended job
// gets the GPUs it left when they are all free, else as many free GPUs on
// each of the servers it left (a resume in place, which the engine need
// not treat as a migration); the others are placed after them (under
// place.Count any free GPUs, lowest first: which GPUs does not matter to
// the count scheme).
func (p *Planner) planFree(pool *place.Pool, reason string, d *cluster.Decision) {
	for _, v := range p.victims {
		d.Actions = appendAction(d.Actions, cluster.Suspend, v.ID, nil, reason)
		p.Suspended = append(p.Suspended, v.ID)
		pool.Give(v.GPUs)
	}
	p.gpus = p.gpus[:0]
	for _, j := range p.admitted {
		g := returnTo(pool, j)
		if g != nil {
			pool.Take(g)
		}
		p.gpus = append(p.gpus, g)
	}
	placer := p.placer()
	for i, j := range p.admitted {
		gpus := p.gpus[i]
		if gpus == nil {
			if gpus = placeAllowed(pool, placer, j); gpus == nil {
				continue // does not fit (under place.Count: servers down)
			}
			pool.Take(gpus)
		}
		d.Actions = appendAction(d.Actions, j.StartKind(), j.ID, gpus, reason)
		p.Started = append(p.Started, j.ID)
	}
}

// planPlaced places admitted jobs on real GPUs, suspending only the
// victims a placement needs.
func (p *Planner) planPlaced(pool *place.Pool, reason string, d *cluster.Decision, backfill Order) {
	placer := p.placer()
	p.used = p.used[:0]
	for range p.victims {
		p.used = append(p.used, false)
	}
	p.gpus = p.gpus[:0]
	clear(p.starts)
	p.starts = p.starts[:0]
	failed := false
	for _, j := range p.admitted {
		gpus := placeAllowed(pool, placer, j)
		if gpus == nil && len(p.victims) > 0 {
			gpus = p.withVictims(pool, placer, j)
		}
		if gpus == nil {
			failed = true
			continue
		}
		pool.Take(gpus)
		p.starts = append(p.starts, j)
		p.gpus = append(p.gpus, gpus)
	}
	if failed {
		// Backfill: GPUs the unplaced jobs left are offered to the other
		// waiting jobs, without preempting anyone.
		if backfill != nil {
			backfill(p.tryFn)
		} else {
			for _, j := range p.skipped {
				if !p.try(j) {
					break
				}
			}
		}
	}
	for v, j := range p.victims {
		if p.used[v] {
			d.Actions = appendAction(d.Actions, cluster.Suspend, j.ID, nil, reason)
			p.Suspended = append(p.Suspended, j.ID)
		}
	}
	for i, j := range p.starts {
		d.Actions = appendAction(d.Actions, j.StartKind(), j.ID, p.gpus[i], reason)
		p.Started = append(p.Started, j.ID)
	}
}

// byUnsaved chooses, among tied running jobs (a run of jobs the scan
// yielded one after the other, tied pairwise), the victims that lose least
// work since their last checkpoint (cluster.Job.Unsaved): in each run, as
// many victims of each gang size as the scan made, those that lose least,
// the least last (withVictims takes victims from the end). Victims without
// reported checkpoints lose nothing; when no job of the scan has any, the
// victims stay as the scan made them.
func (p *Planner) byUnsaved(tied func(a, b *cluster.Job) bool) {
	if tied == nil || len(p.victims) == 0 || !slices.ContainsFunc(p.runs, func(j *cluster.Job) bool { return j.Saved }) {
		return
	}
	now := p.now
	for lo := 0; lo < len(p.runs); {
		hi := lo + 1
		for hi < len(p.runs) && tied(p.runs[hi-1], p.runs[hi]) {
			hi++
		}
		if hi-lo > 1 {
			p.rechoose(p.runs[lo:hi], p.victim[lo:hi], now)
		}
		lo = hi
	}
	p.victims = p.victims[:0]
	for i, j := range p.runs {
		if p.victim[i] {
			p.victims = append(p.victims, j)
		}
	}
}

// rechoose sorts one run of tied jobs by work lost, most first (stably),
// and makes the last k of each gang size victims, k as many as were.
func (p *Planner) rechoose(run []*cluster.Job, victim []bool, now float64) {
	k := map[int]int{}
	for i, j := range run {
		if victim[i] {
			k[len(j.GPUs)]++
		}
	}
	if len(k) == 0 {
		return
	}
	slices.SortStableFunc(run, func(a, b *cluster.Job) int { return cmp.Compare(b.Unsaved(now), a.Unsaved(now)) })
	for i := len(run) - 1; i >= 0; i-- {
		g := len(run[i].GPUs)
		victim[i] = k[g] > 0
		k[g]--
	}
}

// withVictims places j on the free GPUs plus those of victims not yet
// used, added to the trial one at a time, lowest priority first, until it
// fits; the victims it needs are marked used, and if it does not fit the
// trial is rolled back and it returns nil.
func (p *Planner) withVictims(pool *place.Pool, placer Placer, j *cluster.Job) []cluster.GPUID {
	mark := pool.Mark()
	p.trial = p.trial[:0]
	var gpus []cluster.GPUID
	for v := len(p.victims) - 1; v >= 0 && gpus == nil; v-- {
		if p.used[v] {
			continue
		}
		pool.Give(p.victims[v].GPUs)
		p.trial = append(p.trial, v)
		gpus = placeAllowed(pool, placer, j)
	}
	if gpus == nil {
		pool.Rollback(mark)
		return nil
	}
	for _, v := range p.trial {
		p.used[v] = true
	}
	return gpus
}

// try is the backfill's step: it places waiting job j on the GPUs left,
// if it fits and was not admitted already, and reports whether enough GPUs
// remain for any waiting job.
func (p *Planner) try(j *cluster.Job) bool {
	pool := &p.pool
	if pool.Free() < p.minWait {
		return false
	}
	if !j.State.Waiting() || j.NotBefore > p.now || p.tried(j.ID) || pool.Free() < j.Spec.GPUs {
		return true
	}
	if gpus := placeAllowed(pool, p.placer(), j); gpus != nil {
		pool.Take(gpus)
		p.starts = append(p.starts, j)
		p.gpus = append(p.gpus, gpus)
	}
	return true
}

// Reasons reports, per server, whether waiting job j's gang can be placed
// there now on the free GPUs, as the planner places it (before any
// preemption its priority may earn it).
func (p *Planner) Reasons(s *cluster.Snapshot, j *cluster.Job) []place.Reason {
	placer := p.placer()
	how := ""
	if d, ok := placer.(interface{ How(*cluster.Job) string }); ok {
		how = d.How(j)
	}
	return place.Reasons(s, j.Spec.GPUs, placeAllowed(place.NewPool(s), placer, j), p.Placement, how)
}

// appendAction appends an action to acts. (Its fields are set in place: a
// composite literal appended is built on the stack and copied, and the
// copy stalls on the stores just made; a plan appends dozens.)
func appendAction(acts []cluster.Action, kind cluster.ActionKind, job cluster.JobID, gpus []cluster.GPUID, reason string) []cluster.Action {
	acts = append(acts, cluster.Action{})
	a := &acts[len(acts)-1]
	a.Kind, a.Job, a.GPUs, a.Reason = kind, job, gpus, reason
	return acts
}
