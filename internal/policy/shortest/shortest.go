// Package shortest is the preemptive shortest-first family of the Tiresias
// simulator: at every event all jobs are ranked and the cluster is re-packed
// fit-first in that order, suspending running jobs that no longer make the
// cut (package preempt plans the moves).
//
//   - sjf: fewest GPUs first (the simulator's "sjf"); ties by submission.
//   - srsf: least remaining GPU-time first (remaining run time × GPUs, the
//     simulator's "shortest-gpu"). Oracle: it knows every job's run time.
//   - srtf: least remaining run time first (the simulator's "shortest").
//     Oracle, as srsf.
//
// The oracle's remaining time is the job's run time alone (Iters × IterTime)
// minus the time it has held GPUs, the Tiresias simulator's definition;
// outside the Tiresias simulator's world that counts start-up and migration
// time as progress, so it is a reference bound, not a policy a live system
// could run.
// Package optimus builds the same machinery on estimates instead.
//
// # Tie orders
//
// The simulator keeps one list, stable-sorts it by the key at every event
// and appends new jobs at its end. For keys that shrink while a job runs
// (srsf, srtf) that means, on equal keys: waiting jobs first (in the order
// they had), then running jobs (in the order they had), then jobs that
// arrived at this event (in submission order). This package keeps that
// order incrementally: the waiting jobs in a preempt.Sorted list (their
// keys do not change while they wait), the running ones in a short list
// re-sorted every round. With --compat tiresias (policy.TiresiasCompat:
// count placement, free preemption and TiresiasRules, which selects these
// tie orders and whole-second run times) the outcome matches the
// simulator job by job; the test replays its own reference outputs.
// Without TiresiasRules (and for optimus) running jobs come first among
// equal keys instead, so that jobs whose (estimated) remaining time has
// reached zero do not preempt each other in turn.
//
// # Checkpoints
//
// Running jobs of equal keys are equals to the policy: their order in the
// scan is only a tie-break (preempt.Input.Tied). Among equals the planner
// suspends first those that lose least work since their last reported
// checkpoint (cluster.Job.Unsaved); a strict order (unequal keys) stands,
// and without reported checkpoints the tie-break alone decides. sjf's key
// is total (gang size, then submission), so sjf has no equals; srsf and
// srtf (and optimus, which uses this package) have equals on equal
// remaining times.
//
// Parameters: skew=0.5 (placement under place.Locality, see preempt.Profiled).
package shortest

import (
	"fmt"
	"math"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/preempt"
)

// Keyer ranks jobs: lower keys run first. Key is called for running jobs
// every round and for a waiting job when it starts waiting; a waiting
// job's key must not change until Observe returns it. Key must depend only on
// the job, now and what Observe saw: it may be called again for the same
// job in a round (to find jobs of equal keys).
type Keyer interface {
	Key(j *cluster.Job, now float64) preempt.Key
	// Observe sees each round's snapshot before any Key call and returns
	// the waiting jobs whose key changed (new measurements, say).
	Observe(s *cluster.Snapshot) []cluster.JobID
	// Describe names the order and a job's key in it, for explanations
	// ("fewest GPUs first; this job: 2 GPUs").
	Describe(k preempt.Key) string
}

// Policy is a preemptive shortest-first policy.
type Policy struct {
	name    string
	simTies bool
	keyer   Keyer
	planner preempt.Planner

	pend     preempt.Sorted
	running  []preempt.Item // policy's view of the holding jobs, in list order
	arrivals []preempt.Item
	sizes    policy.Sizes
	visited  []visit
	started  map[cluster.JobID]bool
	stopped  map[cluster.JobID]bool
	gate     preempt.Gate
}

type visit struct {
	it   preempt.Item
	list int // 0 waiting, 1 running, 2 arrived
}

var (
	_ policy.Policy    = (*Policy)(nil)
	_ policy.Explainer = (*Policy)(nil)
)

// New builds a policy named name that ranks jobs with k. With simTies (and
// cfg.TiresiasRules) equal keys are ordered as the Tiresias simulator
// orders them; otherwise running jobs win ties.
func New(name string, cfg policy.Config, k Keyer, simTies bool) (*Policy, error) {
	ps := policy.NewParams(cfg.Params)
	skew := ps.Float("skew", preempt.DefaultSkew)
	if err := ps.Done(name); err != nil {
		return nil, err
	}
	if !(skew >= 0) {
		return nil, fmt.Errorf("policy %s: skew must be ≥ 0, got %v", name, skew)
	}
	return &Policy{name: name, simTies: simTies && cfg.TiresiasRules, keyer: k,
		planner: preempt.Planner{Placement: cfg.Placement, FreePreemption: cfg.FreePreemption, Placer: preempt.Profiled{Skew: skew}},
		started: map[cluster.JobID]bool{}, stopped: map[cluster.JobID]bool{}}, nil
}

// NewSJF builds sjf.
func NewSJF(cfg policy.Config) (*Policy, error) { return New("sjf", cfg, gangKey{}, true) }

// NewSRSF builds srsf (oracle).
func NewSRSF(cfg policy.Config) (*Policy, error) {
	return New("srsf", cfg, oracle{wholeSeconds: cfg.TiresiasRules, service: true}, true)
}

// NewSRTF builds srtf (oracle).
func NewSRTF(cfg policy.Config) (*Policy, error) {
	return New("srtf", cfg, oracle{wholeSeconds: cfg.TiresiasRules}, true)
}

// Name implements policy.Policy.
func (p *Policy) Name() string { return p.name }

// gangKey ranks by gang size, then submission (job ID): a total order.
type gangKey struct{}

func (gangKey) Key(j *cluster.Job, _ float64) preempt.Key {
	return preempt.Key{A: float64(j.Spec.GPUs), B: float64(j.ID)}
}
func (gangKey) Observe(*cluster.Snapshot) []cluster.JobID { return nil }
func (gangKey) Describe(k preempt.Key) string {
	return fmt.Sprintf("fewest GPUs first, then submission order; this job: %.0f GPUs", k.A)
}

// oracle ranks by remaining run time (× GPUs when service is set), from
// the job's true run time (in whole seconds with wholeSeconds).
type oracle struct{ wholeSeconds, service bool }

// Remaining is the oracle's remaining run time of j at now; with
// wholeSeconds the run time is rounded to whole seconds first.
func Remaining(j *cluster.Job, now float64, wholeSeconds bool) float64 {
	d := j.Spec.Duration()
	if wholeSeconds {
		d = math.Round(d) // the simulator's durations are whole seconds
	}
	return math.Max(0, d-j.Executed(now))
}

func (o oracle) Key(j *cluster.Job, now float64) preempt.Key {
	r := Remaining(j, now, o.wholeSeconds)
	if o.service {
		r *= float64(j.Spec.GPUs)
	}
	return preempt.Key{A: r}
}
func (oracle) Observe(*cluster.Snapshot) []cluster.JobID { return nil }
func (o oracle) Describe(k preempt.Key) string {
	if o.service {
		return "least remaining GPU-time first (oracle run times); this job: " + policy.Thousands(k.A) + " GPU·s remaining"
	}
	return "least remaining run time first (oracle run times); this job: " + policy.Thousands(k.A) + " s remaining"
}

// Schedule implements policy.Policy.
func (p *Policy) Schedule(s *cluster.Snapshot) cluster.Decision {
	var d cluster.Decision
	changed := p.keyer.Observe(s)
	if !p.gate.Relevant(s, len(changed) > 0) {
		return d
	}
	defer p.gate.Planned(s.Now, 0)
	p.events(s, changed)
	p.reconcile(s)
	p.visited = p.visited[:0]
	order := func(yield func(*cluster.Job) bool) {
		see := func(it preempt.Item, list int) bool {
			p.visited = append(p.visited, visit{it, list})
			return yield(s.Jobs[it.ID])
		}
		// Waiting jobs (old and new) are skipped once none can be admitted.
		if p.simTies {
			preempt.MergeSkip(see, func(l int) bool { return l != 1 && p.planner.Saturated() },
				p.pend.Chunks(), [][]preempt.Item{p.running}, [][]preempt.Item{p.arrivals})
			return
		}
		// Otherwise running jobs win ties: keys can stay equal (estimates
		// clamped at 0), and a tie must not preempt.
		preempt.MergeSkip(func(it preempt.Item, list int) bool {
			return see(it, [...]int{1, 0, 2}[list])
		}, func(l int) bool { return l != 0 && p.planner.Saturated() },
			[][]preempt.Item{p.running}, p.pend.Chunks(), [][]preempt.Item{p.arrivals})
	}
	backfill := func(yield func(*cluster.Job) bool) {
		preempt.Merge(func(it preempt.Item, _ int) bool { return yield(s.Jobs[it.ID]) }, p.pend.Chunks(), [][]preempt.Item{p.arrivals})
	}
	tied := func(a, b *cluster.Job) bool { return p.tied(a, b, s.Now) }
	p.planner.Plan(s, preempt.Input{Order: order, Holding: len(p.running), MinWaiting: p.sizes.Min(), Reason: p.name, Backfill: backfill, Tied: tied}, &d)
	p.apply(s)
	return d
}

// tied reports whether two running jobs that the scan yields one after the
// other are of equal priority (preempt.Input.Tied): their keys at now are
// equal. Their order in the scan (the running list's order) is then only
// a tie-break, and the planner may suspend first the one that loses less
// work since its last checkpoint. sjf's key is total (gang size, then
// submission), so it never ties; srsf and srtf tie on equal remaining
// times.
func (p *Policy) tied(a, b *cluster.Job, now float64) bool {
	return p.keyer.Key(a, now) == p.keyer.Key(b, now)
}

// events notes the round's arrivals, drops waiting jobs that ended, and
// re-keys the waiting jobs whose key changed.
func (p *Policy) events(s *cluster.Snapshot, changed []cluster.JobID) {
	p.arrivals = p.arrivals[:0]
	for _, ev := range s.Events {
		switch ev.Kind {
		case cluster.EvSubmit:
			p.arrivals = append(p.arrivals, preempt.Item{ID: ev.Job})
		case cluster.EvCancel, cluster.EvFinish, cluster.EvFail:
			// a waiting job can end too (cancelled, or finished while suspended)
			if s.Jobs[ev.Job].State.Terminal() && p.pend.Remove(ev.Job) {
				p.sizes.Remove(s.Jobs[ev.Job].Spec.GPUs)
			}
		}
	}
	for _, id := range changed {
		if k, ok := p.pend.KeyOf(id); ok {
			if nk := p.keyer.Key(s.Jobs[id], s.Now); nk != k {
				p.pend.InsertAfter(nk, id)
			}
		}
	}
}

// reconcile brings the running list in line with the engine (finished
// jobs leave, requeued ones, after failures, lost nodes or rejected
// starts, wait again) and keys it and the arrivals for this round.
func (p *Policy) reconcile(s *cluster.Snapshot) {
	now := s.Now
	out := p.running[:0]
	for _, it := range p.running {
		j := s.Jobs[it.ID]
		switch {
		case j.State.Holding():
			out = append(out, preempt.Item{Key: p.keyer.Key(j, now), ID: it.ID})
		case j.State.Waiting():
			p.pend.InsertAfter(p.keyer.Key(j, now), it.ID)
			p.sizes.Add(j.Spec.GPUs)
			if j.NotBefore > now {
				p.gate.Retry(j.NotBefore)
			}
		}
	}
	p.running = out
	preempt.SortStable(p.running)
	arr := p.arrivals[:0]
	for _, it := range p.arrivals {
		if j := s.Jobs[it.ID]; j.State.Waiting() {
			arr = append(arr, preempt.Item{Key: p.keyer.Key(j, now), ID: it.ID})
			p.sizes.Add(j.Spec.GPUs)
		}
	}
	p.arrivals = arr
	preempt.SortStable(p.arrivals)
}

// apply updates the lists after a plan: the running list in scan order;
// suspended jobs and arrivals that did not start join the waiting list
// after their equals, in scan order.
func (p *Policy) apply(s *cluster.Snapshot) {
	clear(p.started)
	clear(p.stopped)
	for _, id := range p.planner.Started {
		p.started[id] = true
	}
	for _, id := range p.planner.Suspended {
		p.stopped[id] = true
	}
	p.running = p.running[:0]
	seen := 0
	for _, v := range p.visited {
		id := v.it.ID
		g := s.Jobs[id].Spec.GPUs
		switch {
		case p.started[id]:
			delete(p.started, id)
			if v.list == 0 {
				p.pend.Remove(id)
			}
			p.sizes.Remove(g)
			p.running = append(p.running, v.it)
		case p.stopped[id]:
			p.pend.InsertAfter(v.it.Key, id)
			p.sizes.Add(g)
		case v.list == 1:
			p.running = append(p.running, v.it)
		case v.list == 2:
			p.pend.InsertAfter(v.it.Key, id)
		}
		if v.list == 2 {
			seen++
		}
	}
	// Arrivals the scan did not reach (it visits them in order) wait,
	// after the ones it did, unless the backfill started them.
	for _, it := range p.arrivals[seen:] {
		if p.started[it.ID] {
			delete(p.started, it.ID)
			p.sizes.Remove(s.Jobs[it.ID].Spec.GPUs)
			p.running = append(p.running, it)
			continue
		}
		p.pend.InsertAfter(it.Key, it.ID)
	}
	// Waiting jobs the backfill started, beyond the scan.
	for _, id := range p.planner.Started {
		if p.started[id] {
			delete(p.started, id)
			k, _ := p.pend.KeyOf(id)
			p.pend.Remove(id)
			p.sizes.Remove(s.Jobs[id].Spec.GPUs)
			p.running = append(p.running, preempt.Item{Key: k, ID: id})
		}
	}
}

// Explain implements policy.Explainer: the job's key in the policy's order
// (the keyer names it), its place among the waiting jobs in that order, and
// per server whether its gang fits now, as the policy places it.
func (p *Policy) Explain(s *cluster.Snapshot, id cluster.JobID) policy.Explanation {
	var e policy.Explanation
	var order []cluster.JobID
	p.pend.Each(func(it preempt.Item) { order = append(order, it.ID) })
	e.Rank(order, id)
	if k, ok := p.pend.KeyOf(id); ok {
		e.Queue = p.name + ": " + p.keyer.Describe(k)
	} else {
		e.Queue = p.name + ": not ranked yet (the policy ranks a new job at its next round)"
	}
	e.Servers = p.planner.Reasons(s, s.Jobs[id])
	return e
}
