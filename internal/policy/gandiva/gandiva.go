package gandiva

import (
	"fmt"
	"math"
	"math/bits"
	"slices"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/place"
	"github.com/gandiva-sched/gandiva/internal/policy"
)

// Params are the policy's settings (see the package comment).
type Params struct {
	Quantum    float64
	Pack       bool
	PackMargin float64
	Migrate    bool
	Migrations int
	Cooldown   float64
	Upgrade    float64
	Grow       bool
	GrowMargin float64
	Feedback   bool
	Rung, Eta  float64
	Unaligned  bool
	Unpack     bool
	// Intro divides the quantum while a job whose process is warm waits
	// for its first turn (startup.go).
	Intro              int
	migrationsPerRound int
}

// Policy is Gandiva.
type Policy struct {
	prm     Params
	st      State
	plan    Plan
	pool    place.Pool
	waiting policy.Waiting
	// pairs remembers packing outcomes by pair of models.
	pairs map[[2]string]bool
	// groups holds, per group and rung, the metrics recorded there.
	groups map[string][][]report
	// cands are the round's candidates for a turn, in turn order once
	// candsSorted is set (between boundaries they are sorted only when a
	// mechanism walks them: turnOrder)
	cands        []*cluster.Job
	candsSorted  bool
	sel          []*cluster.Job
	selGen       []uint32
	capa         capacity
	acts         []cluster.Action
	moves        int
	lastBoundary float64
	started      bool
	lastWaiting  int
	// bnd is set while Schedule runs a boundary round.
	bnd bool
	// plen is this round's period: the quantum, or a part of it (startup.go).
	plen float64
	// stop lists running jobs to suspend now, between boundaries (a
	// packing trial that failed).
	stop []cluster.JobID
}

var _ policy.Policy = (*Policy)(nil)

// New builds the policy from its parameters.
func New(cfg policy.Config) (*Policy, error) {
	ps := policy.NewParams(cfg.Params)
	prm := Params{
		Quantum:    ps.Float("quantum", 60),
		Pack:       ps.Bool("pack", true),
		PackMargin: ps.Float("pack_margin", 0.05),
		Migrate:    ps.Bool("migrate", true),
		Migrations: ps.Int("migrations", 0),
		Cooldown:   ps.Float("cooldown", 600),
		Upgrade:    ps.Float("upgrade", 1.3),
		Grow:       ps.Bool("grow", true),
		GrowMargin: ps.Float("grow_margin", 0.5),
		Feedback:   ps.Bool("feedback", true),
		Rung:       ps.Float("rung", 1.0/27),
		Eta:        ps.Float("eta", 3),
		Unaligned:  ps.Bool("unaligned", false),
		Unpack:     ps.Bool("unpack", true),
		Intro:      ps.Int("intro", 3),
	}
	if err := ps.Done("gandiva"); err != nil {
		return nil, err
	}
	switch {
	case prm.Quantum <= 0:
		return nil, fmt.Errorf("policy gandiva: quantum must be positive, got %v", prm.Quantum)
	case prm.Migrations < 0 || prm.Cooldown < 0:
		return nil, fmt.Errorf("policy gandiva: migrations and cooldown must not be negative")
	case prm.Rung <= 0 || prm.Rung >= 1 || prm.Eta <= 1:
		return nil, fmt.Errorf("policy gandiva: need 0 < rung < 1 and eta > 1")
	case prm.Intro < 1:
		return nil, fmt.Errorf("policy gandiva: intro must be at least 1, got %d", prm.Intro)
	}
	return &Policy{prm: prm, pairs: map[[2]string]bool{}, groups: map[string][][]report{}}, nil
}

// Name implements policy.Policy.
func (p *Policy) Name() string { return "gandiva" }

// Schedule runs the mechanisms in order: bookkeeping from events
// (feedback, packing and growth verdicts), homes for new jobs, the turn
// plan, packing trials, migrations, growth, and finally the actions.
func (p *Policy) Schedule(s *cluster.Snapshot) cluster.Decision {
	p.st.Sync(s)
	p.waiting.Update(s)
	// The turns change in the first round of each quantum period (normally
	// the wake-up at its start; live, a wake-up may come a little late);
	// later rounds in the period, such as a second round at the same time
	// caused by the first, only fill.
	// When nobody waited for a turn in the last round, a new period has
	// nothing to rotate and only fills (new jobs that must wait ask for the
	// next boundary).
	p.plen = p.periodLen(s)
	period := periodStart(s.Now, p.plen)
	newPeriod := !p.started || p.after(period)
	boundary := newPeriod && p.lastWaiting > 0
	p.plan.reset(s, !boundary)
	for len(p.selGen) < len(s.Jobs) {
		p.selGen = append(p.selGen, 0)
	}
	if p.prm.migrationsPerRound == 0 {
		p.prm.migrationsPerRound = p.prm.Migrations
		if p.prm.migrationsPerRound == 0 {
			p.prm.migrationsPerRound = max(2, s.Cluster.NumGPUs()/8)
		}
	}
	p.moves = 0
	p.absorb(s)
	p.assignHomes(s)
	if newPeriod {
		p.started = true
		p.lastBoundary = period
		p.st.Sweep(s)
	}
	p.bnd = boundary
	if p.prm.Grow {
		p.shrinkForWaiting(s)
	}
	if boundary {
		p.stop = p.stop[:0] // the full plan re-decides every turn
		p.fullTurns(s)
	} else {
		p.fillTurns(s)
	}
	if p.prm.Pack && boundary {
		p.packTrials(s)
	}
	if p.prm.Migrate {
		p.migrations(s)
	}
	if p.prm.Grow {
		p.elastic(s)
	}
	return p.actions(s, boundary)
}

// freed reports whether GPUs came free through the round's events.
func freed(s *cluster.Snapshot) bool {
	for _, ev := range s.Events {
		switch ev.Kind {
		case cluster.EvFinish, cluster.EvFail, cluster.EvCancel, cluster.EvNodeUp, cluster.EvActionFailed:
			return true
		}
	}
	return false
}

// absorb reads the events: profile samples judge packing and growth trials
// and feed early feedback.
func (p *Policy) absorb(s *cluster.Snapshot) {
	for _, ev := range s.Events {
		if ev.Kind != cluster.EvProfile || ev.Job < 0 || int(ev.Job) >= len(s.Jobs) {
			continue
		}
		j := s.Jobs[ev.Job]
		if j.State.Terminal() {
			continue
		}
		if p.prm.Pack {
			p.judgePacking(s, j)
		}
		if p.prm.Grow {
			p.judgeGrowth(s, j)
		}
		if p.prm.Feedback && ev.HasMetric && j.Spec.Group != "" {
			p.feedback(s, j)
		}
	}
}

// assignHomes gives every waiting job without a home one, and a new one to
// a waiting job whose home lost a server (down or blacklisted, or one the
// job may no longer run on) or is short of GPUs the view lets a plan give
// out (place.Plannable: it hides other work's).
func (p *Policy) assignHomes(s *cluster.Snapshot) {
	p.waiting.Each(s, func(j *cluster.Job) bool {
		ji := &p.st.Jobs[j.ID]
		if ji.Dropped {
			return true
		}
		for _, sl := range ji.Home {
			if !s.Servers[sl.Server].Schedulable() || !s.MayRun(j.ID, sl.Server) ||
				bits.OnesCount64(place.Plannable(s, sl.Server)) < sl.N {
				p.st.SetHome(j.ID, nil)
				p.st.Unpack(j.ID) // the pair was measured on the old home
				break
			}
		}
		if ji.Home == nil || p.warmElsewhere(s, j) {
			p.st.SetHome(j.ID, p.warmHome(s, j))
		}
		return true
	})
}

// Homes finds a home for job id's gang of n GPUs, on servers it may run on
// (cluster.Snapshot.MayRun): a server (or, for gangs larger than any
// server, the fewest servers of one domain) that has the GPUs free and no
// over-subscription, best fit; failing that, the least loaded server(s) of
// the right size, where the gang will take turns. A server's size is the
// GPUs the view lets a plan give out (place.Plannable): a view under an
// executor's constraints hides GPUs of other work, on which no turn can
// be given.
func (p *Policy) Homes(s *cluster.Snapshot, id cluster.JobID, n int) []place.Slot {
	c := s.Cluster
	best, bestLoad, bestFree := cluster.ServerID(-1), math.Inf(1), 1<<30
	for i := range c.Servers {
		sv := cluster.ServerID(i)
		if !s.Servers[i].Schedulable() || c.Servers[i].NumGPUs < n || !s.MayRun(id, sv) {
			continue
		}
		size := bits.OnesCount64(place.Plannable(s, sv))
		if size < n {
			continue
		}
		free := s.Servers[i].NumFree()
		if int(p.st.Demand[i])+n <= size && free >= n {
			// a free place: best fit
			if bestLoad > 0 || free < bestFree {
				best, bestLoad, bestFree = sv, 0, free
			}
			continue
		}
		if load := float64(int(p.st.Demand[i])+n) / float64(size); load < bestLoad {
			best, bestLoad = sv, load
		}
	}
	if best >= 0 {
		return []place.Slot{{Server: best, N: n}}
	}
	// A gang larger than any server: fewest servers, least loaded first.
	top := 0
	for i := range c.Servers {
		if s.Servers[i].Schedulable() {
			if size := bits.OnesCount64(place.Plannable(s, cluster.ServerID(i))); size > 0 {
				top = max(top, int(p.st.Demand[i])/size+1)
			}
		}
	}
	for level := 0; level <= top; level++ {
		p.pool.ResetMasks(s, func(sv cluster.ServerID) uint64 {
			if !s.MayRun(id, sv) {
				return 0
			}
			size := bits.OnesCount64(place.Plannable(s, sv))
			avail := min(max((level+1)*size-int(p.st.Demand[sv]), 0), size)
			return uint64(1)<<uint(avail) - 1
		})
		if p.pool.Free() >= n {
			for l := place.Packed; l < place.NumLevels; l++ {
				if g := p.pool.Place(n, l); g != nil {
					return place.SlotsOf(c, g)
				}
			}
		}
	}
	return nil // fewer schedulable GPUs than the gang needs
}

// eligible reports whether a job with a home may get a turn now.
func (p *Policy) eligible(s *cluster.Snapshot, j *cluster.Job) bool {
	ji := &p.st.Jobs[j.ID]
	return ji.Home != nil && !ji.Dropped && !(j.State.Waiting() && j.NotBefore > s.Now) && j.State != cluster.Warming
}

// capacity is per-server scratch space for the turn selection.
type capacity struct {
	gen uint32
	at  []uint32
	n   []int32
}

func (cp *capacity) reset(servers int) {
	for len(cp.at) < servers {
		cp.at = append(cp.at, 0)
		cp.n = append(cp.n, 0)
	}
	cp.gen++
}

func (cp *capacity) get(sv cluster.ServerID, init func() int32) int32 {
	if cp.at[sv] != cp.gen {
		cp.at[sv], cp.n[sv] = cp.gen, init()
	}
	return cp.n[sv]
}

// give returns a home's GPUs to the capacity (a take that was not used).
func (cp *capacity) give(home []place.Slot) {
	for _, sl := range home {
		cp.n[sl.Server] += int32(sl.N)
	}
}

// fits checks a home against the capacity, taking it if it fits.
func (cp *capacity) take(home []place.Slot, init func(cluster.ServerID) int32) bool {
	for _, sl := range home {
		if cp.get(sl.Server, func() int32 { return init(sl.Server) }) < int32(sl.N) {
			return false
		}
	}
	for _, sl := range home {
		cp.n[sl.Server] -= int32(sl.N)
	}
	return true
}

// fillTurns runs between quantum boundaries: running jobs keep their GPUs;
// waiting jobs start on free GPUs of their home servers, in turn order.
func (p *Policy) fillTurns(s *cluster.Snapshot) {
	pl := &p.plan
	cands := p.cands[:0]
	p.waiting.Each(s, func(j *cluster.Job) bool {
		if !p.eligible(s, j) {
			return true
		}
		cands = append(cands, j)
		return true
	})
	p.capa.reset(len(s.Servers))
	freeOn := func(sv cluster.ServerID) int32 { return int32(pl.Idle().FreeOn(sv)) }
	// rebalance considers every eligible waiting job, in turn order
	all := append(p.sel[:0], cands...)
	// drop at once the jobs whose home lacks the GPUs (the common case on a
	// busy cluster), so only the few that might start are sorted
	out := cands[:0]
	for _, j := range cands {
		ok := true
		for _, sl := range p.st.Jobs[j.ID].Home {
			if p.capa.get(sl.Server, func() int32 { return freeOn(sl.Server) }) < int32(sl.N) {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, j)
		} else {
			pl.Waiting++
		}
	}
	cands = out
	p.sortTurns(s, cands)
	// jobs whose state waits on free GPUs run there first, so that a move
	// takes only GPUs none of them wants (cost.go)
	for _, j := range cands {
		if g := stateGPUs(j); g != nil && !pl.Chosen(j.ID) && p.ownFree(s, j, g) {
			p.fillOne(s, j, freeOn)
		}
	}
	for _, j := range cands {
		if !pl.Chosen(j.ID) {
			p.fillOne(s, j, freeOn)
		}
	}
	// (rebalance walks all of them in turn order, if it runs: turnOrder)
	p.sel, p.cands, p.candsSorted = cands, all, false
}

// fillOne gives waiting job j a turn between boundaries on free GPUs of its
// home, preferring its last ones, with its packed partner; a turn that
// moves it elsewhere than where its state waits is given only if it pays
// (cost.go).
func (p *Policy) fillOne(s *cluster.Snapshot, j *cluster.Job, freeOn func(cluster.ServerID) int32) {
	pl := &p.plan
	ji := &p.st.Jobs[j.ID]
	if !p.capa.take(ji.Home, freeOn) {
		pl.Waiting++
		return
	}
	g := pl.Pick(ji.Home, j.Last)
	if g == nil {
		pl.Waiting++
		return
	}
	q := p.partner(s, j)
	if q != nil && (pl.Chosen(q.ID) || !q.State.Waiting() || !p.eligible(s, q)) {
		q = nil
	}
	why, ok := p.turnElsewhere(s, j, q, g)
	if !ok {
		p.capa.give(ji.Home)
		pl.Waiting++
		return
	}
	pl.Choose(j.ID, g, why)
	if q != nil {
		pl.ChooseShared(q.ID, g, "packed")
	}
}

// turnOrder returns the round's candidates (cands) in turn order, sorting
// them at the first call of the round that needs the order.
func (p *Policy) turnOrder(s *cluster.Snapshot) []*cluster.Job {
	if !p.candsSorted {
		p.sortTurns(s, p.cands)
		p.candsSorted = true
	}
	return p.cands
}

// partner returns j's packed partner if it is alive, else nil (and unpacks).
func (p *Policy) partner(s *cluster.Snapshot, j *cluster.Job) *cluster.Job {
	q := p.st.Jobs[j.ID].Partner
	if q == cluster.NoJob {
		return nil
	}
	if qj := s.Jobs[q]; !qj.State.Terminal() && !p.st.Jobs[q].Dropped {
		return qj
	}
	p.st.Unpack(j.ID)
	return nil
}

// fullTurns runs at a quantum boundary: every job with a home competes for
// a turn. Selection goes in turn order against per-server capacity; then
// jobs that keep running keep their GPUs and the others are placed on what
// is left, preferring the GPUs they last ran on.
func (p *Policy) fullTurns(s *cluster.Snapshot) {
	pl := &p.plan
	cands := p.cands[:0]
	for _, j := range s.Active() {
		if !p.eligible(s, j) {
			continue
		}
		if j.State == cluster.Migrating {
			p.keep(s, j, "migrating")
			continue
		}
		if why := p.protected(s, j); why != "" {
			p.keep(s, j, why)
			continue
		}
		cands = append(cands, j)
	}
	p.sortTurns(s, cands)
	sel := p.selectTurns(s, cands)
	// jobs that keep running keep their GPUs
	for _, j := range sel {
		if j.State == cluster.Running && pl.Free(j.GPUs) {
			pl.Choose(j.ID, j.GPUs, "turn")
		}
	}
	p.ownFirst(s, sel)
	var moving []*cluster.Job
	for _, j := range sel {
		ji := &p.st.Jobs[j.ID]
		if !pl.Chosen(j.ID) {
			if stateGPUs(j) != nil {
				moving = append(moving, j) // its own GPUs are taken: a move
				continue
			}
			prefer := j.Last
			if j.State == cluster.Running {
				prefer = j.GPUs
			}
			g := pl.Pick(ji.Home, prefer)
			if g == nil {
				pl.Waiting++
				continue
			}
			pl.Choose(j.ID, g, "turn")
		}
		if q := p.partner(s, j); q != nil && p.selGen[q.ID] == p.plan.gen && !pl.Chosen(q.ID) {
			pl.ChooseShared(q.ID, pl.Target(j.ID), "packed")
		}
	}
	if len(moving) > 0 {
		p.moveTurns(s, moving, cands)
	}
	p.sel = sel
	p.cands, p.candsSorted = cands, true
}

// selectTurns picks, in turn order, the candidates whose homes fit the
// per-server capacity (a grown elastic job keeps its width if it fits),
// and their packed partners with them.
func (p *Policy) selectTurns(s *cluster.Snapshot, cands []*cluster.Job) []*cluster.Job {
	pl := &p.plan
	p.capa.reset(len(s.Servers))
	capOf := func(sv cluster.ServerID) int32 { return int32(pl.Idle().FreeOn(sv)) }
	sel := p.sel[:0]
	for _, j := range cands {
		ji := &p.st.Jobs[j.ID]
		if p.selGen[j.ID] == p.plan.gen {
			continue // selected as a partner
		}
		home := ji.Home
		if j.State == cluster.Running && len(ji.Borrowed) > 0 {
			home = place.SlotsOf(s.Cluster, j.GPUs) // keep the width unless someone waits
		}
		if !p.capa.take(home, capOf) && (len(ji.Borrowed) == 0 || !p.capa.take(ji.Home, capOf)) {
			pl.Waiting++
			continue
		}
		p.selGen[j.ID] = p.plan.gen
		sel = append(sel, j)
		if q := p.partner(s, j); q != nil && q.State != cluster.Migrating && p.eligible(s, q) {
			p.selGen[q.ID] = p.plan.gen
		}
	}
	return sel
}

// keep chooses a holding job on the GPUs it holds.
func (p *Policy) keep(s *cluster.Snapshot, j *cluster.Job, why string) {
	pl := &p.plan
	if q := p.st.Jobs[j.ID].Partner; q != cluster.NoJob && pl.Chosen(q) {
		pl.ChooseShared(j.ID, j.GPUs, why)
		return
	}
	pl.Choose(j.ID, j.GPUs, why)
}

// sortTurns orders jobs for turns (State.before).
func (p *Policy) sortTurns(s *cluster.Snapshot, js []*cluster.Job) {
	slices.SortFunc(js, func(a, b *cluster.Job) int {
		if p.st.before(a, b, s.Now) {
			return -1
		}
		if p.st.before(b, a, s.Now) {
			return 1
		}
		return 0
	})
}

// actions turns the plan into engine actions: kills, suspends, resizes
// and migrations, then starts and resumes; it updates turn bookkeeping and
// asks to be woken at the next boundary while GPUs are over-subscribed.
func (p *Policy) actions(s *cluster.Snapshot, boundary bool) cluster.Decision {
	pl := &p.plan
	t := turnActions{acts: append(p.acts[:0], pl.kills...), killed: map[cluster.JobID]bool{}}
	for _, k := range pl.kills {
		t.killed[k.Job] = true
	}
	if boundary {
		for _, j := range s.Active() {
			p.visit(s, j, boundary, &t)
		}
	} else {
		// between boundaries only waiting jobs start, and jobs the
		// mechanisms touched (shrinks, migrations) change
		p.waiting.Each(s, func(j *cluster.Job) bool { p.visit(s, j, boundary, &t); return true })
		for _, j := range s.Active() {
			if j.State == cluster.Running && (pl.Chosen(j.ID) && !slices.Equal(pl.Target(j.ID), j.GPUs) || slices.Contains(p.stop, j.ID)) {
				p.visit(s, j, boundary, &t)
			}
		}
		p.stop = p.stop[:0]
	}
	// migrations before starts (moves first), ordered so that a job moves
	// only onto GPUs their holders have left; then starts and resumes
	var moves, starts []cluster.Action
	for _, a := range t.later {
		if rank(a.Kind) == 0 {
			moves = append(moves, a)
		} else {
			starts = append(starts, a)
		}
	}
	acts := p.orderMoves(s, t.acts, moves, &starts)
	acts = append(acts, starts...)
	for _, a := range acts {
		if a.Kind == cluster.Suspend {
			p.waiting.Add(a.Job)
		}
	}
	p.acts = acts
	p.lastWaiting = pl.Waiting
	d := cluster.Decision{Actions: acts}
	// A turn can only change hands if some job holds GPUs when it ends.
	if pl.Waiting > 0 && (len(t.later) > 0 || holding(s)) {
		d.WakeAt = periodStart(s.Now, p.plen) + p.plen
	}
	return d
}

// turnActions is the action list actions builds: what goes first (kills,
// suspends, shrinks), what comes later (moves, starts), the killed jobs.
type turnActions struct {
	acts, later []cluster.Action
	killed      map[cluster.JobID]bool
}

// visit adds a job's action, if the plan changes it: a suspend at the end
// of its turn (or of a packing that did not pay), a migration or resize to
// its new target, or a start or resume.
func (p *Policy) visit(s *cluster.Snapshot, j *cluster.Job, boundary bool, t *turnActions) {
	pl := &p.plan
	if t.killed[j.ID] {
		return
	}
	ji := &p.st.Jobs[j.ID]
	chosen := pl.Chosen(j.ID)
	switch {
	case j.State.Holding() && !chosen && (boundary || slices.Contains(p.stop, j.ID)):
		why := "turn over"
		if slices.Contains(p.stop, j.ID) {
			why = "unpack: packing did not pay"
		}
		t.acts = append(t.acts, cluster.Action{Kind: cluster.Suspend, Job: j.ID, Unaligned: p.prm.Unaligned, Reason: why})
		ji.LastRun = s.Now
		ji.Borrowed, ji.growAt = nil, 0
	case j.State == cluster.Running && chosen && !slices.Equal(pl.Target(j.ID), j.GPUs):
		kind := cluster.Migrate
		if j.Spec.Elastic() && sameServers(s, pl.Target(j.ID), j.GPUs) {
			kind = cluster.Resize
		}
		a := cluster.Action{Kind: kind, Job: j.ID, GPUs: pl.Target(j.ID), Share: p.sharing(s, j.ID), Reason: pl.reason[j.ID]}
		if len(pl.Target(j.ID)) < len(j.GPUs) {
			t.acts = append(t.acts, a) // shrinks free GPUs: before anything else
		} else {
			t.later = append(t.later, a)
		}
	case j.State.Waiting() && chosen:
		t.later = append(t.later, cluster.Action{Kind: j.StartKind(), Job: j.ID, GPUs: pl.Target(j.ID), Share: p.sharing(s, j.ID), Reason: pl.reason[j.ID]})
		ji.SliceStart = s.Now
		p.waiting.Remove(j.ID)
	}
}

// sharing reports whether a chosen job's target GPUs stay held by another
// job that keeps running (its packed partner): its action must then be
// allowed to share.
func (p *Policy) sharing(s *cluster.Snapshot, id cluster.JobID) bool {
	if p.plan.share[id] {
		return true
	}
	if q := p.st.Jobs[id].Partner; q != cluster.NoJob && p.plan.Chosen(q) {
		return true // the pair lands on the same GPUs: either may come first
	}
	for _, g := range p.plan.Target(id) {
		for _, h := range s.GPUs[g].Jobs {
			if h != id && p.plan.Chosen(h) && slices.Contains(p.plan.Target(h), g) {
				return true
			}
		}
	}
	return false
}

// orderMoves appends moves to acts so that each lands on GPUs whose other
// holders have left by then (suspended, killed, or moved earlier). A cycle
// of moves is broken by suspending one job and resuming it at its target
// after the others (appended to starts).
func (p *Policy) orderMoves(s *cluster.Snapshot, acts, moves []cluster.Action, starts *[]cluster.Action) []cluster.Action {
	gone := map[cluster.JobID]bool{}
	for _, a := range acts {
		if a.Kind == cluster.Suspend || a.Kind == cluster.Kill {
			gone[a.Job] = true
		}
	}
	clear := func(a cluster.Action) bool {
		for _, g := range a.GPUs {
			for _, h := range s.GPUs[g].Jobs {
				if h != a.Job && !gone[h] && !(a.Share && slices.Contains(p.plan.Target(h), g)) {
					return false
				}
			}
		}
		return true
	}
	for len(moves) > 0 {
		progress := false
		rest := moves[:0]
		for _, a := range moves {
			if clear(a) {
				acts = append(acts, a)
				gone[a.Job] = true
				progress = true
			} else {
				rest = append(rest, a)
			}
		}
		moves = rest
		if !progress && len(moves) > 0 {
			a := moves[0]
			acts = append(acts, cluster.Action{Kind: cluster.Suspend, Job: a.Job, Reason: "move in a cycle"})
			*starts = append(*starts, cluster.Action{Kind: cluster.Resume, Job: a.Job, GPUs: a.GPUs, Share: a.Share, Reason: a.Reason})
			gone[a.Job] = true
			moves = moves[1:]
		}
	}
	return acts
}

// holding reports whether some job holds GPUs.
func holding(s *cluster.Snapshot) bool {
	return s.FreeGPUs < s.Cluster.NumGPUs() && slices.ContainsFunc(s.GPUs, func(g cluster.GPUState) bool { return len(g.Jobs) > 0 })
}

func rank(k cluster.ActionKind) int {
	switch k {
	case cluster.Migrate, cluster.Resize:
		return 0
	}
	return 1
}

func sameServers(s *cluster.Snapshot, a, b []cluster.GPUID) bool {
	return slices.Equal(cluster.ServersOf(s.Cluster, a), cluster.ServersOf(s.Cluster, b))
}
