// Package tiresias is Tiresias' discretised two-dimensional age-based
// scheduler (Gu et al., NSDI'19): tiresias-l (2D-LAS) and
// tiresias-g (2D-Gittins), with model profile-based placement.
//
// # Semantics
//
// A job's attained service is GPUs × time run (GPU-seconds). Jobs sit in K
// priority queues: a new job enters queue 0 and moves down one queue when
// its attained service reaches the queue's threshold (limits, default
// 3250 and 7200 GPU-seconds, the Tiresias simulator's; K = 3). Queues are
// served in strict priority; inside a queue tiresias-l serves jobs first
// come first served (running jobs ahead of waiting ones, so a job is never
// preempted by one of its own queue), and tiresias-g orders by the Gittins
// index of the job's attained service (higher first, then earlier
// submission), so a running job whose index fell below a waiting job's can
// be preempted inside its queue. The scan is fit-first: a job whose gang
// does not fit the GPUs left is skipped and the scan goes on. Running jobs
// the scan cannot keep are suspended (package preempt does the planning).
//
// Starvation (starve=S > 0): a job in a lower queue that has waited, in
// total since it last ran in queue 0, at least S × the time it has run
// since then goes back to queue 0 with its service count reset.
//
// Hold (tiresias-g outside compat mode, hold=H seconds): a running job is
// not preempted in favour of a waiting job of its own queue until H seconds
// have passed since the policy last started or resumed it (start-up time
// included). While held it ranks in its queue ahead of every job of that
// queue that is not held (held jobs among themselves by index), so a job of
// a higher queue still preempts it at once, though after the queue's unheld
// running jobs; once the hold is over the index alone decides. There is no
// margin on the index: a waiting job whose index is higher, by however
// little, takes over when the hold ends. The hold alone bounds the churn (a
// job loses its GPUs to its own queue at most once per H seconds of holding
// them), and a margin would be a second knob in units of the index, whose
// scale depends on the distribution.
//
// Why: the Gittins index of a heavy-tailed distribution falls as service
// grows, so inside the last queue a running job's index soon drops below a
// waiting job's, and without a hold the two swap at nearly every event (on
// the Philly trace, 252,000 preemptions for 7,423 jobs). The Tiresias
// simulator's preemption is free; here a swap costs the victim a suspend
// (0.15 s, plus the checkpoint when it must be written) and, when it
// resumes elsewhere, two checkpoint transfers and a 10 s start-up, and the
// job that takes its place a start-up: about 20–30 s of the gang's time in
// gandiva-perf/v1. The default hold, 300 s, is ten times the upper end, so
// same-queue preemption costs at most about a tenth of a held job's time;
// it is also short beside the quantum the index looks ahead (Δ = 3,250
// GPU-seconds, 54 minutes on one GPU). hold=0 is the simulator's rule.
//
// The policy asks to be woken when a running job will cross its queue's
// threshold, when a waiting job will reach its starvation limit, and when
// a held job's hold ends while its queue has waiting jobs (one wake-up
// per start or resume at most, so no storm).
//
// # Compat mode
//
// With --compat tiresias (policy.TiresiasCompat) the policy is the
// Tiresias simulator's dlas-gpu and dlas-gpu-gittins schedules
// (SymbioticLab/Tiresias, simulator/, with --scheme=count): GPUs only
// counted (policy.Config.Placement place.Count), free preemption
// (FreePreemption: every job the order does not keep is suspended, and
// tiresias-g's hold defaults to 0) and, with TiresiasRules, its tie orders
// and Python 2 arithmetic: service is counted only at events, a job moves
// down at most one queue per event, the wake-up for a threshold is
// floor((limit − seconds run) ÷ GPUs) seconds away (it mixes seconds with
// GPU-seconds, so 4-GPU jobs are demoted late), calls at times the
// simulator has no event for (stale wake-ups) change nothing, the
// starvation test truncates S × run time to an integer, and the Gittins
// index is the simulator's table (NewCompatIndex); and there is no hold
// (hold=H is rejected). Without TiresiasRules the thresholds are crossed
// exactly, service is the engine's attained GPU-seconds (start-up and
// suspend time included, as a live system measures it) and the index is
// NewIndex.
//
// # Placement
//
// Under place.Locality (the default) gangs are placed by preempt.Profiled:
// a gang of a model whose tensor sizes are skewed (skew ≥ 0.5) is
// consolidated or waits, others are consolidated when they can be and
// spread otherwise.
// A running job of a lower queue is suspended only if that lets a
// higher-priority job be placed (the simulator, counting GPUs, suspends
// it regardless). Preemption suspends at a mini-batch boundary; the
// simulator charges the suspend, any checkpoint, and the migration when a
// job resumes on other servers. A suspended job resumes on its old GPUs
// when they are free.
//
// The policy plans at arrivals, ends, failures, the wake-up it asked for
// last and the end of a failed job's back-off (preempt.Gate); the samples
// and migration completions its own actions cause do not make it re-plan.
//
// # Parameters
//
//	limits=3250/7200  queue thresholds in GPU-seconds, ascending, '/'-separated (K−1 values)
//	starve=0          starvation knob S (0: off, as the simulator's dlas-gpu)
//	skew=0.5          placement: tensor skew at or above which a gang is consolidated
//	delta=3250        tiresias-g: the Gittins service quantum Δ in GPU-seconds
//	learn=false       tiresias-g: add finished jobs' GPU-time to the distribution
//	minsamples=20     tiresias-g with learn: samples needed before the index is used
//	hold=300          tiresias-g outside compat mode: seconds a started or resumed job is
//	                  safe from preemption by jobs of its own queue (0: none)
//
// The prior distribution of tiresias-g is handed over by the registry
// (default: the Tiresias simulator's yarn-gput1000.csv), so this package
// does no I/O.
package tiresias

import (
	"container/heap"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/preempt"
)

// DefaultLimits are the Tiresias simulator's queue thresholds (GPU-seconds)
// of dlas-gpu: three queues. Its configuration lists a third limit, 18000,
// that only its multi-queue variant uses.
var DefaultLimits = []float64{3250, 7200}

// DefaultDelta is the Gittins quantum of the Tiresias simulator.
const DefaultDelta = 3250

// DefaultHold is tiresias-g's hold outside compat mode, in seconds: ten
// times the upper end of what a same-queue swap costs in gandiva-perf/v1
// (see the package comment).
const DefaultHold = 300

// Policy is tiresias-l or tiresias-g.
type Policy struct {
	name    string
	rules   bool // policy.Config.TiresiasRules
	gittins bool
	limits  []float64
	starve  float64

	// Gittins
	index      *Index
	delta      float64
	learn      bool
	minSamples int
	hold       float64 // 0: no hold
	samples    []float64
	builtAt    int

	planner preempt.Planner
	// order and backfill, bound once (not closures made at every plan),
	// and the snapshot they read during a plan
	orderFn, backfillFn preempt.Order
	tiedFn              func(a, b *cluster.Job) bool
	snap                *cluster.Snapshot
	jobs                []jstate // by JobID
	queues              []queue
	sizes               policy.Sizes // waiting jobs by gang size

	arrivals []cluster.JobID
	running  []cluster.JobID
	promote  []cluster.JobID
	due      dueHeap
	next     []dueItem // due for promotion at the next update
	visited  []visit
	heldL    [2][]preempt.Item // scratch: one queue's held run and tail jobs
	freeL    [2][]preempt.Item // scratch: its other run and tail jobs

	ranAt float64 // time of the last update pass
	ran   bool
	// plans numbers the calls to Schedule that plan, twice: odd while one
	// runs (att keeps values for it), even between them (none is kept).
	plans uint64
	gate  preempt.Gate
}

var (
	_ policy.Policy    = (*Policy)(nil)
	_ policy.Explainer = (*Policy)(nil)
)

type queue struct {
	run  []preempt.Item // holding jobs, in list order
	pend preempt.Sorted // waiting jobs, in list order
	tail []preempt.Item // holding jobs moved into the queue this round
}

// appendRun appends a job, with no key yet, to the queue's run list.
func (qu *queue) appendRun(id cluster.JobID) {
	// (not append(qu.run, preempt.Item{ID: id}): that literal is built on the
	// stack and copied, and the copy stalls on the stores just made)
	qu.run = append(qu.run, preempt.Item{})
	qu.run[len(qu.run)-1].ID = id
}

type jstate struct {
	in      bool
	holding bool // in run or tail (the policy's view)
	q       int
	gpus    float64 // the gang size, JobSpec.GPUs (read here, not there, at every plan)
	// Service since the last promotion: Executed(now) − exeBase seconds,
	// Attained(now) − attBase GPU-seconds.
	exeBase, attBase float64
	// att's value during plan number attPlan (see Policy.att)
	attV    float64
	attPlan uint64
	// Time waited since the last promotion (counted while exe > 0), up to
	// pendFrom, when the current wait began.
	lpend, pendFrom float64
	ver             uint32 // invalidates starvation heap entries
	// Gittins rank cache, under the index built from idx samples: in compat
	// mode rank holds for attained service in [lo, hi); otherwise piece.
	rank, lo, hi float64
	piece        Piece
	idx          int
	since        float64 // when the policy last started or resumed it
	started      bool    // scratch: started this round
	suspended    bool    // scratch: suspended this round
}

type visit struct {
	id   cluster.JobID
	q    int
	list int         // 0 run, 1 pend, 2 tail
	key  preempt.Key // the job's key in the scan (p.key at the plan's instant)
}

// NewL builds tiresias-l.
func NewL(cfg policy.Config) (*Policy, error) { return build(cfg, false, nil) }

// NewG builds tiresias-g with the given prior samples of job GPU-time
// (GPU-seconds); nil with learn=false is an error.
func NewG(cfg policy.Config, prior []float64) (*Policy, error) { return build(cfg, true, prior) }

func build(cfg policy.Config, gittins bool, prior []float64) (*Policy, error) {
	name := "tiresias-l"
	if gittins {
		name = "tiresias-g"
	}
	ps := policy.NewParams(cfg.Params)
	p := &Policy{name: name, rules: cfg.TiresiasRules, gittins: gittins}
	limits, err := parseLimits(ps.String("limits", ""))
	if err != nil {
		return nil, fmt.Errorf("policy %s: limits: %w", name, err)
	}
	p.limits = limits
	p.starve = ps.Float("starve", 0)
	skew := ps.Float("skew", preempt.DefaultSkew)
	if gittins {
		p.delta = ps.Float("delta", DefaultDelta)
		p.learn = ps.Bool("learn", false)
		p.minSamples = ps.Int("minsamples", 20)
		def := float64(DefaultHold)
		if cfg.FreePreemption || p.rules {
			def = 0 // nothing to protect a running job from; the simulator has no hold
		}
		p.hold = ps.Float("hold", def)
	}
	if err := ps.Done(name); err != nil {
		return nil, err
	}
	switch {
	case p.starve < 0 || math.IsNaN(p.starve) || math.IsInf(p.starve, 0):
		return nil, fmt.Errorf("policy %s: starve must be a finite number ≥ 0, got %v", name, p.starve)
	case !(skew >= 0):
		return nil, fmt.Errorf("policy %s: skew must be ≥ 0, got %v", name, skew)
	case gittins && !(p.delta > 0):
		return nil, fmt.Errorf("policy %s: delta must be positive, got %v", name, p.delta)
	case gittins && (!(p.hold >= 0) || math.IsInf(p.hold, 0)):
		return nil, fmt.Errorf("policy %s: hold must be a finite number ≥ 0, got %v", name, p.hold)
	case gittins && p.rules && p.hold > 0:
		return nil, fmt.Errorf("policy %s: hold=%v: the Tiresias simulator has no hold, so --compat tiresias takes none", name, p.hold)
	case gittins && p.minSamples < 1:
		return nil, fmt.Errorf("policy %s: minsamples must be ≥ 1, got %d", name, p.minSamples)
	case gittins && len(prior) == 0 && !p.learn:
		return nil, fmt.Errorf("policy %s: no prior distribution and learn=false", name)
	}
	p.queues = make([]queue, len(p.limits)+1)
	p.planner = preempt.Planner{Placement: cfg.Placement, FreePreemption: cfg.FreePreemption, Placer: preempt.Profiled{Skew: skew}}
	p.orderFn, p.backfillFn, p.tiedFn = p.order, p.backfill, p.tied
	if gittins {
		p.samples = slices.Clone(prior)
		if len(p.samples) > 0 {
			p.rebuild()
		}
	}
	return p, nil
}

// parseLimits reads "3250/7200" (also space- or semicolon-separated).
func parseLimits(s string) ([]float64, error) {
	if strings.TrimSpace(s) == "" {
		return slices.Clone(DefaultLimits), nil
	}
	var out []float64
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == '/' || r == ' ' || r == ';' }) {
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return nil, err
		}
		if !(v > 0) || math.IsInf(v, 0) || (len(out) > 0 && v <= out[len(out)-1]) {
			return nil, fmt.Errorf("%q: thresholds must be positive, finite and ascending", s)
		}
		out = append(out, v)
	}
	return out, nil
}

// Name implements policy.Policy.
func (p *Policy) Name() string { return p.name }

// Limits returns the queue thresholds in use.
func (p *Policy) Limits() []float64 { return slices.Clone(p.limits) }

// Queue returns the queue a job is in, or -1 if the policy does not track it.
func (p *Policy) Queue(id cluster.JobID) int {
	if int(id) >= len(p.jobs) || !p.jobs[id].in {
		return -1
	}
	return p.jobs[id].q
}

func (p *Policy) rebuild() {
	if p.rules {
		ints := make([]int64, len(p.samples))
		for i, v := range p.samples {
			ints[i] = int64(v)
		}
		p.index = NewCompatIndex(ints, int64(p.delta))
	} else {
		p.index = NewIndex(p.samples, p.delta)
	}
	p.builtAt = len(p.samples)
}

func (p *Policy) state(id cluster.JobID) *jstate {
	for int(id) >= len(p.jobs) {
		p.jobs = append(p.jobs, jstate{})
	}
	return &p.jobs[id]
}

// exe is the time the job has run since its last promotion.
func (p *Policy) exe(j *cluster.Job, now float64) float64 {
	return j.Executed(now) - p.jobs[j.ID].exeBase
}

// att is the job's service in GPU-seconds since its last promotion.
// Within a plan (Schedule at one instant, over a frozen snapshot) it is
// read several times per holding job (demote, key, nextWake), so it is
// kept for the plan; promoteDue, which moves the bases, drops it.
func (p *Policy) att(j *cluster.Job, now float64) float64 {
	st := &p.jobs[j.ID]
	if p.plans%2 == 1 && st.attPlan == p.plans {
		return st.attV
	}
	a := p.service(j, now)
	st.attV, st.attPlan = a, p.plans
	return a
}

// service is att without the cache: the job's service in GPU-seconds
// since its last promotion.
func (p *Policy) service(j *cluster.Job, now float64) float64 {
	if p.rules {
		return p.exe(j, now) * p.jobs[j.ID].gpus
	}
	return j.Attained(now) - p.jobs[j.ID].attBase
}

// key orders a job inside its queue: constant for tiresias-l (list order
// decides), (−Gittins index, submit time) for tiresias-g.
func (p *Policy) key(j *cluster.Job, now float64) preempt.Key {
	if !p.gittins {
		return preempt.Key{}
	}
	r := 0.0
	if p.index != nil && (!p.learn || p.index.Len() >= p.minSamples) {
		a := p.att(j, now)
		st := &p.jobs[j.ID]
		switch {
		case !p.rules: // the searches cached, the formula recomputed
			if st.idx != p.builtAt {
				st.piece, st.idx = Piece{}, p.builtAt
			}
			r = p.index.RankFrom(a, &st.piece)
		case st.idx == p.builtAt && a >= st.lo && a < st.hi:
			r = st.rank // the compat index is a step function: cached
		default:
			r, st.lo, st.hi = p.index.Step(a)
			st.rank, st.idx = r, p.builtAt
		}
	}
	return preempt.Key{A: -r, B: j.Spec.Submit}
}

// Schedule implements policy.Policy.
func (p *Policy) Schedule(s *cluster.Snapshot) cluster.Decision {
	now := s.Now
	if !p.gate.Relevant(s, false) {
		return cluster.Decision{WakeAt: p.gate.Wake()}
	}
	update := !p.ran || now > p.ranAt // service is counted once per instant
	p.ran, p.ranAt = true, now
	p.plans++ // a new plan: att's values of the last one are void
	defer func() { p.plans++ }()
	p.events(s)
	p.refused(s)
	p.fixup(s)
	p.arrive(s)
	if update {
		p.demote(s)
		p.promoteDue(s)
	}
	var d cluster.Decision
	p.plan(s, &d)
	d.WakeAt = p.nextWake(s)
	p.gate.Planned(now, d.WakeAt)
	return d
}

// events folds in submissions, cancellations and finished jobs' service.
func (p *Policy) events(s *cluster.Snapshot) {
	p.arrivals = p.arrivals[:0]
	for _, ev := range s.Events {
		switch ev.Kind {
		case cluster.EvSubmit:
			st := p.state(ev.Job)
			*st = jstate{in: true, pendFrom: s.Now, gpus: float64(s.Jobs[ev.Job].Spec.GPUs)}
			p.arrivals = append(p.arrivals, ev.Job)
		case cluster.EvCancel, cluster.EvFinish, cluster.EvFail:
			if ev.Kind == cluster.EvFinish && p.gittins && p.learn {
				p.samples = append(p.samples, s.Jobs[ev.Job].Attained(s.Now))
			}
			// a waiting job can end too (cancelled, or finished while suspended)
			if int(ev.Job) < len(p.jobs) && p.jobs[ev.Job].in && !p.jobs[ev.Job].holding && s.Jobs[ev.Job].State.Terminal() {
				p.dropWaiting(s.Jobs[ev.Job])
			}
		}
	}
	if p.gittins && p.learn && len(p.samples) >= p.minSamples && float64(len(p.samples)) >= 1.1*float64(p.builtAt) {
		p.rebuild()
		for q := range p.queues {
			p.queues[q].pend.Rekey(func(id cluster.JobID) preempt.Key { return p.key(s.Jobs[id], s.Now) })
		}
	}
}

func (p *Policy) dropWaiting(j *cluster.Job) {
	st := &p.jobs[j.ID]
	if p.queues[st.q].pend.Remove(j.ID) {
		p.sizes.Remove(j.Spec.GPUs)
	}
	st.in = false
	st.ver++
}

// fixup reconciles the policy's holding jobs with the engine: finished,
// failed and cancelled jobs leave; jobs the engine requeued (a failure, a
// lost node, a rejected start) wait again.
func (p *Policy) fixup(s *cluster.Snapshot) {
	for q := range p.queues {
		qu := &p.queues[q]
		out := qu.run[:0]
		for _, it := range qu.run {
			j := s.Jobs[it.ID]
			switch {
			case j.State.Holding():
				out = append(out, it)
				continue
			case j.State.Terminal():
				p.jobs[it.ID].in = false
				p.jobs[it.ID].holding = false
			default:
				st := &p.jobs[it.ID]
				st.holding = false
				st.pendFrom = s.Now
				st.ver++
				if j.NotBefore > s.Now {
					p.gate.Retry(j.NotBefore)
				}
				qu.pend.InsertAfter(p.key(j, s.Now), it.ID)
				p.sizes.Add(j.Spec.GPUs)
				p.watch(j, s.Now)
			}
		}
		qu.run = out
	}
}

// refused takes back the suspensions of the last plan that were refused
// (cluster.Snapshot.Rejected): such a job still holds its GPUs, so it
// leaves its queue's waiting list for the run list, where the next plan
// may suspend it again. (A refused start needs nothing here: fixup sends
// a job of a run list that holds nothing back to waiting.)
func (p *Policy) refused(s *cluster.Snapshot) {
	for i := range s.Rejected {
		id := s.Rejected[i].Action.Job
		if s.Rejected[i].Action.Kind != cluster.Suspend || id < 0 || int(id) >= len(p.jobs) || int(id) >= len(s.Jobs) {
			continue
		}
		st := &p.jobs[id]
		j := s.Jobs[id]
		if !st.in || st.holding || !j.State.Holding() {
			continue
		}
		if p.queues[st.q].pend.Remove(id) {
			p.sizes.Remove(j.Spec.GPUs)
		}
		st.holding = true
		st.ver++ // its starvation watch is void
		p.queues[st.q].appendRun(id)
	}
}

// arrive appends new jobs to the end of queue 0.
func (p *Policy) arrive(s *cluster.Snapshot) {
	for _, id := range p.arrivals {
		j := s.Jobs[id]
		if !j.State.Waiting() {
			continue
		}
		p.queues[0].pend.InsertAfter(p.key(j, s.Now), id)
		p.sizes.Add(j.Spec.GPUs)
	}
}

// demote moves running jobs that crossed their queue's threshold to the
// end of the next queue, in submission order (the simulator's runnable
// order); in compat mode by at most one queue per event.
func (p *Policy) demote(s *cluster.Snapshot) {
	p.running = p.running[:0]
	last := len(p.queues) - 1
	for q := 0; q < last; q++ {
		for _, it := range p.queues[q].run {
			if p.att(s.Jobs[it.ID], s.Now) >= p.limits[q] {
				p.running = append(p.running, it.ID)
			}
		}
	}
	slices.Sort(p.running)
	for _, id := range p.running {
		j := s.Jobs[id]
		st := &p.jobs[id]
		from := st.q
		to := from
		att := p.att(j, s.Now)
		for to < last && att >= p.limits[to] {
			to++
			if p.rules {
				break
			}
		}
		if to == from {
			continue
		}
		qf := &p.queues[from]
		i := slices.IndexFunc(qf.run, func(it preempt.Item) bool { return it.ID == id })
		qf.run = slices.Delete(qf.run, i, i+1)
		st.q = to
		p.queues[to].tail = append(p.queues[to].tail, preempt.Item{ID: id})
	}
}

// watch schedules a waiting job's starvation check.
func (p *Policy) watch(j *cluster.Job, now float64) {
	if p.starve <= 0 {
		return
	}
	st := &p.jobs[j.ID]
	exe := p.exe(j, now)
	if st.q == 0 || exe <= 0 || j.Executed(now) <= 0 {
		return
	}
	limit := exe * p.starve
	if p.rules {
		limit = math.Trunc(limit)
	}
	due := st.pendFrom + math.Max(0, limit-st.lpend)
	heap.Push(&p.due, dueItem{t: due, id: j.ID, ver: st.ver})
}

// promoteDue sends starving jobs back to queue 0, in submission order.
func (p *Policy) promoteDue(s *cluster.Snapshot) {
	if p.starve <= 0 {
		return
	}
	p.promote = p.promote[:0]
	for _, it := range p.next {
		if p.valid(it) {
			p.promote = append(p.promote, it.id)
		}
	}
	p.next = p.next[:0]
	for p.due.Len() > 0 && p.due[0].t <= s.Now {
		it := heap.Pop(&p.due).(dueItem)
		if p.valid(it) {
			p.promote = append(p.promote, it.id)
		}
	}
	slices.Sort(p.promote)
	p.promote = slices.Compact(p.promote)
	for _, id := range p.promote {
		st := &p.jobs[id]
		j := s.Jobs[id]
		if !st.in || st.holding || st.q == 0 || !j.State.Waiting() {
			continue
		}
		p.queues[st.q].pend.Remove(id)
		st.q = 0
		st.exeBase, st.attBase = j.Executed(s.Now), j.Attained(s.Now)
		st.attPlan = 0 // att's kept value is void
		st.lpend, st.pendFrom = 0, s.Now
		st.ver++
		p.queues[0].pend.InsertAfter(p.key(j, s.Now), id)
	}
}

func (p *Policy) valid(it dueItem) bool {
	if int(it.id) >= len(p.jobs) {
		return false
	}
	st := &p.jobs[it.id]
	return st.in && !st.holding && st.ver == it.ver && st.q > 0
}

// plan scans the queues in priority order and lets the planner decide.
func (p *Policy) plan(s *cluster.Snapshot, d *cluster.Decision) {
	now := s.Now
	for q := range p.queues {
		if !p.gittins {
			break // tiresias-l: one key for all, list order decides
		}
		qu := &p.queues[q]
		for _, l := range [][]preempt.Item{qu.run, qu.tail} {
			for i := range l {
				l[i].Key = p.key(s.Jobs[l[i].ID], now)
			}
			if p.hold == 0 { // (with a hold, split sorts each part)
				preempt.SortStable(l)
			}
		}
	}
	p.visited = p.visited[:0]
	holding := 0
	for q := range p.queues {
		holding += len(p.queues[q].run) + len(p.queues[q].tail)
	}
	p.snap = s
	p.planner.Plan(s, preempt.Input{Order: p.orderFn, Holding: holding, MinWaiting: p.sizes.Min(), Reason: p.name, Backfill: p.backfillFn, Tied: p.tiedFn}, d)
	p.snap = nil
	p.apply(s)
}

// order is the plan's scan (preempt.Input.Order) over p.snap: queue by
// queue, the held jobs (hold > 0), then the others merged with the
// waiting jobs by key. It records the jobs it yields in p.visited.
func (p *Policy) order(yield func(*cluster.Job) bool) {
	s, now := p.snap, p.snap.Now
	for q := range p.queues {
		qu := &p.queues[q]
		stop := false
		emit := func(it preempt.Item, list int) bool {
			// (fields set in place: a composite literal here is built on the
			// stack and copied, and the copy stalls on the stores just made)
			p.visited = append(p.visited, visit{})
			v := &p.visited[len(p.visited)-1]
			v.id, v.q, v.list, v.key = it.ID, q, list, it.Key
			if !yield(s.Jobs[it.ID]) {
				stop = true
			}
			return !stop
		}
		run, tail := qu.run, qu.tail
		if p.hold > 0 {
			if p.split(qu, now) {
				// held jobs first, run before tail on equal keys
				if len(p.heldL[1]) == 0 { // (the usual case, without Merge's indirection)
					for _, it := range p.heldL[0] {
						if !emit(it, 0) {
							return
						}
					}
				} else {
					preempt.Merge(func(it preempt.Item, list int) bool { return emit(it, 2*list) },
						[][]preempt.Item{p.heldL[0]}, [][]preempt.Item{p.heldL[1]})
					if stop {
						return
					}
				}
			}
			run, tail = p.freeL[0], p.freeL[1]
		}
		preempt.MergeSkip(emit, p.waitingDone, [][]preempt.Item{run}, qu.pend.Chunks(), [][]preempt.Item{tail})
		if stop {
			return
		}
	}
}

// tied reports whether two holding jobs of p.snap that the scan yields
// one after the other are of equal priority (preempt.Input.Tied): in one
// queue, both held or neither, with equal keys. Their order in the queue
// (by when they entered it) is then only a tie-break, and the planner may
// suspend first the one that loses less work since its last checkpoint.
func (p *Policy) tied(a, b *cluster.Job) bool {
	now := p.snap.Now
	sa, sb := &p.jobs[a.ID], &p.jobs[b.ID]
	if !sa.holding || !sb.holding || sa.q != sb.q {
		return false
	}
	if p.hold > 0 && p.held(a.ID, now) != p.held(b.ID, now) {
		return false
	}
	return p.key(a, now) == p.key(b, now)
}

// backfill yields the waiting jobs of p.snap in priority order
// (preempt.Input.Backfill).
func (p *Policy) backfill(yield func(*cluster.Job) bool) {
	for q := range p.queues {
		for _, c := range p.queues[q].pend.Chunks() {
			for _, it := range c {
				if !yield(p.snap.Jobs[it.ID]) {
					return
				}
			}
		}
	}
}

// split divides a queue's holding jobs into those still held (started or
// resumed less than hold seconds ago) and the others, each sorted stably
// by key (p.heldL and p.freeL: run, then tail), and reports whether any
// is held. (Splitting, then sorting the parts, gives the parts of the
// sorted list, and sorts fewer inversions: the list is in the last plan's
// scan order, held jobs first.)
func (p *Policy) split(qu *queue, now float64) bool {
	some := false
	for l, list := range [2][]preempt.Item{qu.run, qu.tail} {
		p.heldL[l], p.freeL[l] = p.heldL[l][:0], p.freeL[l][:0]
		for _, it := range list {
			if p.held(it.ID, now) {
				p.heldL[l] = append(p.heldL[l], it)
				some = true
			} else {
				p.freeL[l] = append(p.freeL[l], it)
			}
		}
		preempt.SortStable(p.heldL[l])
		preempt.SortStable(p.freeL[l])
	}
	return some
}

// held reports whether a holding job is still within its hold at now. (The
// hold ends at since + hold exactly, the time nextWake asks for.)
func (p *Policy) held(id cluster.JobID, now float64) bool {
	return now < p.jobs[id].since+p.hold
}

// waitingDone tells the scan to skip waiting jobs (list 1) once no waiting
// job can be admitted any more.
func (p *Policy) waitingDone(list int) bool { return list == 1 && p.planner.Saturated() }

// apply updates the queues after a plan: in each queue the jobs that hold
// GPUs come first, in scan order, then the waiting ones ("pending to the
// back"); jobs suspended from the front of a queue become its first
// waiting jobs, jobs suspended from its tail its last.
func (p *Policy) apply(s *cluster.Snapshot) {
	for _, id := range p.planner.Started {
		p.jobs[id].started = true
	}
	for _, id := range p.planner.Suspended {
		p.jobs[id].suspended = true
	}
	p.newFronts(s)
	// Suspended jobs join the waiting lists: from the front in reverse
	// scan order before their equals, from the tail after them.
	if len(p.planner.Suspended) > 0 {
		for i := len(p.visited) - 1; i >= 0; i-- {
			if v := &p.visited[i]; v.list == 0 && p.jobs[v.id].suspended {
				p.suspend(s, v)
			}
		}
		for i := range p.visited {
			if v := &p.visited[i]; v.list == 2 && p.jobs[v.id].suspended {
				p.suspend(s, v)
			}
		}
	}
	for q := range p.queues {
		p.queues[q].tail = p.queues[q].tail[:0]
	}
	for _, id := range p.planner.Suspended {
		p.jobs[id].suspended = false
	}
}

// newFronts rebuilds each queue's list of holding jobs in scan order;
// started jobs leave the waiting lists (jobs started by the backfill,
// which the scan did not reach, last).
func (p *Policy) newFronts(s *cluster.Snapshot) {
	for q := range p.queues {
		p.queues[q].run = p.queues[q].run[:0]
	}
	someSuspended := len(p.planner.Suspended) > 0
	for i := range p.visited {
		v := &p.visited[i]
		if v.list == 1 { // waiting: only a job started is in the new front list
			if !p.jobs[v.id].started {
				continue
			}
			p.start(s, v.id, v.q)
		} else if someSuspended && p.jobs[v.id].suspended { // (only holding jobs are suspended)
			continue
		}
		p.queues[v.q].appendRun(v.id)
	}
	for _, id := range p.planner.Started {
		if st := &p.jobs[id]; st.started {
			p.start(s, id, st.q)
			p.queues[st.q].appendRun(id)
		}
	}
}

// start moves a job the plan started out of queue q's waiting list.
func (p *Policy) start(s *cluster.Snapshot, id cluster.JobID, q int) {
	now := s.Now
	j := s.Jobs[id]
	st := &p.jobs[id]
	p.queues[q].pend.Remove(id)
	p.sizes.Remove(j.Spec.GPUs)
	if p.exe(j, now) > 0 {
		st.lpend += now - st.pendFrom
	}
	st.holding = true
	st.started = false
	st.since = now
	st.ver++
}

func (p *Policy) suspend(s *cluster.Snapshot, v *visit) {
	j := s.Jobs[v.id]
	st := &p.jobs[v.id]
	st.holding = false
	st.pendFrom = s.Now
	st.ver++
	if v.list == 0 { // (v.key is p.key(j, s.Now), computed by plan)
		p.queues[v.q].pend.InsertBefore(v.key, v.id)
	} else {
		p.queues[v.q].pend.InsertAfter(v.key, v.id)
	}
	p.sizes.Add(j.Spec.GPUs)
	p.watch(j, s.Now)
}

// nextWake is the earliest time a running job crosses its threshold, a
// waiting job reaches its starvation limit or a held job's hold ends while
// its queue has waiting jobs, or 0.
func (p *Policy) nextWake(s *cluster.Snapshot) float64 {
	now := s.Now
	w := math.Inf(1)
	last := len(p.queues) - 1
	for q := range p.queues {
		qu := &p.queues[q]
		limit := q < last
		// a hold that ends while waiting jobs of the queue could take over
		hold := p.hold > 0 && qu.pend.Len() > 0
		if !limit && !hold {
			continue
		}
		for _, it := range qu.run {
			st := &p.jobs[it.ID]
			// (comparisons, not math.Min: no NaN here, and this is a hot path)
			if limit {
				j := s.Jobs[it.ID]
				g := st.gpus // (not len(j.GPUs): a job started this round holds none yet)
				// a start-up the engine does not charge (engine
				// Options.StartUpGrace) defers the crossing: a round
				// follows its end (EvReady or its deadline)
				var t float64
				if p.rules {
					t = now + j.Uncharged(now) + math.Floor((p.limits[q]-p.exe(j, now))/g)
				} else {
					t = now + j.Uncharged(now) + (p.limits[q]-p.att(j, now))/g
				}
				if t < w {
					w = t
				}
			}
			if hold {
				if t := st.since + p.hold; t > now && t < w {
					w = t
				}
			}
		}
	}
	for p.due.Len() > 0 && (!p.valid(p.due[0]) || p.due[0].t <= now) {
		it := heap.Pop(&p.due).(dueItem)
		if p.valid(it) {
			p.next = append(p.next, it) // due: promoted at the next update
		}
	}
	if p.due.Len() > 0 {
		w = math.Min(w, p.due[0].t)
	}
	if math.IsInf(w, 1) || w <= now {
		return 0
	}
	return w
}

type dueItem struct {
	t   float64
	id  cluster.JobID
	ver uint32
}

// dueHeap orders starvation checks by (time, job ID).
type dueHeap []dueItem

func (h dueHeap) Len() int { return len(h) }
func (h dueHeap) Less(i, j int) bool {
	if h[i].t != h[j].t {
		return h[i].t < h[j].t
	}
	return h[i].id < h[j].id
}
func (h dueHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)   { *h = append(*h, x.(dueItem)) }
func (h *dueHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
