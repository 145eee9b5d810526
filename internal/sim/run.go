// Package sim is the trace-driven simulator: discrete events in virtual
// time, ordered by (time, sequence) in one queue, a seeded random generator,
// and a simulated executor that charges the performance model's costs and
// reports completions and profile samples back to the engine as events.
// The engine runs a round at each time when something happened (an event
// applied or a job submitted), including the wake-ups it asked for; a time
// at which every queued item turned out stale brings none. That is when the
// live server runs rounds too, so a policy sees the same rounds in both.
//
// The same seed and inputs give the same event log, byte for byte.
package sim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/metrics"
	"github.com/gandiva-sched/gandiva/internal/model"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/timeline"
)

// Config is one simulation run.
type Config struct {
	Cluster *cluster.Cluster
	// Jobs are submitted at their Submit times; the driver does not modify them.
	Jobs   []*cluster.JobSpec
	Policy policy.Policy
	Perf   PerfModel
	// Catalog defaults to model.Default().
	Catalog *model.Catalog
	// Failures, when set, injects failures; nil means none.
	Failures *Failures
	Seed     uint64
	// Horizon stops the run at this time (0: run until every job ends).
	Horizon float64
	// Stop, when set, is asked after every round (and after Observe)
	// whether to stop the run there, as if the horizon were now (ETA
	// forks stop once the jobs they forecast have started).
	Stop func(now float64, e *engine.Engine) bool
	// Engine configures the engine (failure handling, packing limit).
	Engine engine.Options
	// Check verifies the engine's invariants after every event and round,
	// that attained service never decreases, and that the policy never
	// writes to the snapshot it is given (engine Options.CheckSnapshot);
	// the run stops with an error at the first violation. For tests and
	// gandiva sim --check.
	Check bool
	// Log, when set, receives one line per event and per applied action:
	// the event log that the determinism test compares.
	Log func(line string)
	// Progress, when set, is called now and then with the jobs ended so far.
	Progress func(ended, total int)
	// Curve, when set, is the hidden learning curve: the quality metric
	// (accuracy, say) a job reports after done mini-batches. Jobs report it
	// with every profile sample. Nil: no metric.
	Curve func(spec *cluster.JobSpec, done float64) float64
	// ReportEvery, when set, gives the mini-batches between a running job's
	// periodic progress reports (an epoch); 0 for a job means none.
	ReportEvery func(spec *cluster.JobSpec) float64
	// Observe, when set, is called after every round with the engine, for
	// experiments that sample state over time (fair shares, say).
	Observe func(now float64, e *engine.Engine)
	// SampleEvery, when positive, records every user's cumulative work at
	// each multiple of SampleEvery seconds up to the end of the run, from
	// the ground truth, into Result.Samples (fair-share experiments).
	SampleEvery float64
	// Settings are EvSetting events (an operator changing a user's tickets,
	// say) applied at their times, after the completions due then and
	// before the submissions.
	Settings []cluster.Event
	// Restart, when set, is called after every round with the engine and
	// the simulated executor; the run goes on with the engine it returns.
	// For tests of engine.Export and Restore: a run whose engine (and
	// policy) is replaced by one restored from its export must be the same
	// run.
	Restart func(now float64, e *engine.Engine, exec engine.Executor) (*engine.Engine, error)
	// Timeline, when set, records the run's GPU timeline (gandiva sim
	// --html): the run notes every event it applies and every action a
	// round applies, and observes after every round, so a recorder made
	// with Noted gets the engine's own times at the cost of what changed.
	Timeline *timeline.Recorder
}

// Result is the outcome of a run.
type Result struct {
	Policy, Perf, Cluster string
	GPUs                  int
	Start, End            float64
	// Jobs are the jobs' records, in submission order (pre-runs are part
	// of their jobs).
	Jobs     []metrics.Job
	Stats    engine.Stats
	Events   int
	Stale    int
	Rejected []engine.Rejection
	// Samples are the per-user work samples of Config.SampleEvery.
	Samples []WorkSample
}

// Records returns the run's records for package metrics (the Jobs slice is
// shared, not copied).
func (r *Result) Records() *metrics.Run {
	return &metrics.Run{Policy: r.Policy, Perf: r.Perf, Cluster: r.Cluster, GPUs: r.GPUs, Start: r.Start, End: r.End, Jobs: r.Jobs,
		Preemptions: r.Stats.Suspends, Migrations: r.Stats.Migrations, Packs: r.Stats.Packs, Retries: r.Stats.Retries,
		Events: r.Events, RejectedActions: len(r.Rejected)}
}

// Run simulates cfg to the end (or the horizon).
func Run(cfg Config) (*Result, error) {
	if cfg.Cluster == nil || cfg.Policy == nil {
		return nil, errors.New("sim: cluster and policy are required")
	}
	cat := cfg.Catalog
	if cat == nil {
		cat = model.Default()
	}
	jobs := slices.Clone(cfg.Jobs)
	slices.SortStableFunc(jobs, cluster.BySubmit)
	r := &runner{cfg: cfg, jobs: jobs, h: &eventHeap{}, endedAt: -1}
	perf := cfg.Perf
	if perf.Name == "" {
		perf = DefaultPerf()
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x9e3779b97f4a7c15))
	r.x = newExecutor(cfg.Cluster, &perf, cat, cfg.Failures, rng, r.h)
	r.x.every = cfg.ReportEvery
	eo := cfg.Engine
	eo.CheckSnapshot = eo.CheckSnapshot || cfg.Check
	eo.StartUps = eo.StartUps || perf.StartUps
	if eo.Warm.PerNode == 0 && perf.WarmPerNode > 0 {
		eo.Warm = engine.WarmOptions{PerNode: perf.WarmPerNode, PerGPU: perf.WarmPerGPU, ContextGiB: perf.ContextGiB}
	}
	r.e = engine.New(cfg.Cluster, cfg.Policy, r.x, eo)
	if err := r.pushSettings(); err != nil {
		return nil, err
	}
	if err := r.loop(); err != nil {
		return nil, err
	}
	if r.horizon {
		r.sample(r.cfg.Horizon)
	} else {
		r.sample(r.now)
	}
	return r.result(&perf), nil
}

type runner struct {
	cfg      Config
	jobs     []*cluster.JobSpec
	h        *eventHeap
	x        *executor
	e        *engine.Engine
	ticks    timeSet // times of the ticks queued
	now      float64
	events   int
	stale    int
	ended    int
	rejected []engine.Rejection
	attained []float64
	horizon  bool
	samples  []WorkSample
	endedAt  float64 // when the last job ended, -1 before
}

func (r *runner) loop() error {
	next := 0
	total := len(r.jobs)
	lastProgress := -1
	for {
		hasSub := next < len(r.jobs)
		if !hasSub && r.h.Len() == 0 {
			return nil
		}
		var t float64
		if hasSub && (r.h.Len() == 0 || r.jobs[next].Submit <= r.h.next()) {
			t = r.jobs[next].Submit
		} else {
			t = r.h.next()
		}
		if r.cfg.Horizon > 0 && t > r.cfg.Horizon {
			r.horizon = true
			return nil
		}
		r.sample(t)
		prev := r.now
		r.now = t
		applied, submitted := r.events-r.stale, next
		for {
			it, ok := r.h.popAt(t)
			if !ok {
				break
			}
			if err := r.handle(it); err != nil {
				return err
			}
		}
		for next < len(r.jobs) && r.jobs[next].Submit == t {
			spec := r.jobs[next]
			next++
			id, err := r.e.Submit(t, spec)
			if err != nil {
				return fmt.Errorf("sim: submitting job %d of the trace: %w", next, err)
			}
			r.x.add(id, spec)
			r.logEvent(cluster.Event{Time: t, Kind: cluster.EvSubmit, Job: id, Spec: spec})
			if pr := r.e.Job(id).PreRun; pr != cluster.NoJob {
				// engine Options.PreRun: the job's one-GPU probe, with the job's hidden truth
				r.x.addProbe(pr, r.e.Job(pr).Spec, id)
				r.logEvent(cluster.Event{Time: t, Kind: cluster.EvSubmit, Job: pr, Spec: r.e.Job(pr).Spec})
			}
			if err := r.check(); err != nil {
				return err
			}
		}
		if r.events-r.stale == applied && next == submitted {
			// every item due at t was stale (a sample or action completion
			// of a placement since undone, or an event the engine found
			// stale): nothing happened, so no round, as the live server
			// (server.core.roundDue) would hold none; nor does the run's end
			// move here
			r.now = prev
			continue
		}
		res, err := r.e.Round(t)
		if err != nil {
			return err
		}
		r.rejected = append(r.rejected, res.Rejected...)
		if r.cfg.Check && len(res.Rejected) > 0 {
			return fmt.Errorf("sim: t=%.3f: policy %s: action %s rejected (%s): %s", t, r.e.Policy().Name(), res.Rejected[0].Action, res.Rejected[0].Code, res.Rejected[0].Reason)
		}
		if r.cfg.Log != nil {
			for _, a := range res.Applied {
				r.cfg.Log(r.describeAction(t, a))
			}
		}
		if res.WakeAt > t && r.ticks.add(res.WakeAt) {
			r.h.push(item{t: res.WakeAt, kind: evTick})
		}
		if err := r.check(); err != nil {
			return err
		}
		if r.ended == total && r.endedAt < 0 {
			r.endedAt = t
		}
		// (the rounds of wake-ups after every job ended change nothing, and
		// would only stretch the timeline past the run's end)
		if tl := r.cfg.Timeline; tl != nil && (r.endedAt < 0 || t == r.endedAt) {
			tl.NoteApplied(res.Applied)
			if err := tl.Observe(r.e.Snapshot()); err != nil {
				return fmt.Errorf("sim: t=%.3f: %w", t, err)
			}
		}
		if r.cfg.Observe != nil {
			r.cfg.Observe(t, r.e)
		}
		if r.cfg.Restart != nil {
			if r.e, err = r.cfg.Restart(t, r.e, r.x); err != nil {
				return fmt.Errorf("sim: t=%.3f: restart: %w", t, err)
			}
		}
		if r.cfg.Stop != nil && r.cfg.Stop(t, r.e) {
			r.horizon, r.cfg.Horizon = true, t
			return nil
		}
		if r.cfg.Progress != nil && r.ended != lastProgress && r.ended%256 == 0 {
			lastProgress = r.ended
			r.cfg.Progress(r.ended, total)
		}
	}
}

func (r *runner) apply(ev cluster.Event) error {
	r.events++
	err := r.e.Apply(ev)
	if errors.Is(err, engine.ErrStale) {
		r.stale++
		return nil
	}
	if err != nil {
		return fmt.Errorf("sim: t=%.3f: %w", ev.Time, err)
	}
	if r.cfg.Timeline != nil {
		r.cfg.Timeline.NoteEvent(ev)
	}
	r.logEvent(ev)
	return r.check()
}

func (r *runner) logEvent(ev cluster.Event) {
	if r.cfg.Log == nil {
		return
	}
	line := fmt.Sprintf("t=%.6f ev %s", ev.Time, ev.Kind)
	if j := r.e.Job(ev.Job); j != nil && ev.Kind != cluster.EvTick && ev.Kind != cluster.EvNodeUp && ev.Kind != cluster.EvNodeDown {
		line += " " + j.Spec.Name
	}
	switch ev.Kind {
	case cluster.EvSubmit:
		line += fmt.Sprintf(" gpus=%d", ev.Spec.GPUs)
	case cluster.EvProfile:
		line += fmt.Sprintf(" done=%.3f iter=%.6f", ev.Done, ev.IterTime)
	case cluster.EvFinish:
		line += fmt.Sprintf(" done=%.3f", ev.Done)
	case cluster.EvNodeUp, cluster.EvNodeDown:
		line += fmt.Sprintf(" node=%d", ev.Node)
	}
	if ev.Reason != "" {
		line += " (" + ev.Reason + ")"
	}
	r.cfg.Log(line)
}

func (r *runner) describeAction(t float64, a engine.Applied) string {
	line := fmt.Sprintf("t=%.6f act %s %s", t, a.Kind, r.e.Job(a.Job).Spec.Name)
	if len(a.GPUs) > 0 {
		line += fmt.Sprintf(" gpus=%v", a.GPUs)
	}
	for _, f := range []struct {
		on   bool
		name string
	}{{a.Remote, "remote"}, {a.Checkpointed, "checkpoint"}, {a.Packed, "packed"}, {a.Unaligned, "unaligned"}, {a.Internal, "internal"}} {
		if f.on {
			line += " " + f.name
		}
	}
	if a.Reason != "" {
		line += " (" + a.Reason + ")"
	}
	return line
}

func (r *runner) handle(it item) error {
	now := it.t
	switch it.kind {
	case evTick:
		r.ticks.remove(it.t)
		return r.apply(cluster.Event{Time: now, Kind: cluster.EvTick})
	case evSetting:
		ev := r.cfg.Settings[it.job]
		ev.Time, ev.Job = now, cluster.NoJob
		return r.apply(ev)
	}
	t := r.x.truth[it.job]
	switch it.kind {
	case evFinish:
		if it.ver != t.ver || !t.holding {
			return nil
		}
		r.x.settle(t, now)
		t.done = t.spec.Iters
		if t.t100 < 0 {
			t.t100 = now
		}
		r.x.unplace(it.job, t, now, 0)
		r.x.reschedule(now)
		if !r.e.Job(it.job).Probe {
			r.ended++
		}
		return r.apply(cluster.Event{Time: now, Kind: cluster.EvFinish, Job: it.job, Done: t.done})
	case evProfile:
		if it.ver != t.ver {
			return nil
		}
		r.x.settle(t, now)
		ev := cluster.Event{Time: now, Kind: cluster.EvProfile, Job: it.job, Done: t.done}
		if t.holding && t.rate > 0 {
			ev.IterTime = 1 / t.rate
		}
		if r.cfg.Curve != nil {
			ev.Metric, ev.HasMetric = r.cfg.Curve(t.spec, t.done), true
		}
		if it.periodic && t.holding {
			r.x.nextReport(it.job, t, now)
		}
		return r.apply(ev)
	case evActionDone:
		if it.ver != t.placements || !t.holding {
			return nil
		}
		return r.apply(cluster.Event{Time: now, Kind: cluster.EvActionDone, Job: it.job})
	case evReady:
		if it.ver != t.placements || !(t.holding || t.warming) {
			return nil
		}
		if t.warming {
			r.x.stopWarming(it.job, t)
			r.x.reschedule(now)
			if t.userErr && r.x.fail.UserErrorIter <= t.done+1 {
				// the warm process's first mini-batch meets the job's error
				return r.failWarm(it.job, t, now)
			}
		}
		return r.apply(cluster.Event{Time: now, Kind: cluster.EvReady, Job: it.job, StartUp: now - t.procAt})
	case evFail:
		if !t.holding || (it.user && it.ver != t.ver) || (!it.user && it.ver != t.placements) {
			return nil
		}
		node := r.cfg.Cluster.ServerOf(t.gpus[0])
		r.x.unplace(it.job, t, now, 0)
		r.x.reschedule(now)
		if it.user && t.done > r.x.fail.UserErrorIter {
			// the failing mini-batch is not progress (float rounding may put
			// done a hair past it): the next attempt meets the error again
			t.done = r.x.fail.UserErrorIter
		}
		reason := "infrastructure failure"
		if it.user {
			reason = "user error: job code failed"
		}
		if err := r.apply(cluster.Event{Time: now, Kind: cluster.EvFail, Job: it.job, Node: node, UserError: it.user, Done: t.done, Reason: reason}); err != nil {
			return err
		}
		j := r.e.Job(it.job)
		if j.Probe {
			j = r.e.Job(j.Parent) // a failed pre-run ends its job
		}
		if j.State.Terminal() {
			r.ended++
		}
		return nil
	}
	return fmt.Errorf("sim: unknown internal event %d", it.kind)
}

// failWarm fails a warm start whose first mini-batch meets the job's user
// error, as the job's own first mini-batch would.
func (r *runner) failWarm(id cluster.JobID, t *truth, now float64) error {
	node := r.cfg.Cluster.ServerOf(t.warmGPUs0)
	if err := r.apply(cluster.Event{Time: now, Kind: cluster.EvFail, Job: id, Node: node, UserError: true, Done: t.done,
		Reason: "user error: job code failed"}); err != nil {
		return err
	}
	if r.e.Job(id).State.Terminal() {
		r.ended++
	}
	return nil
}

func (r *runner) check() error {
	if !r.cfg.Check {
		return nil
	}
	if err := r.e.CheckInvariants(); err != nil {
		return fmt.Errorf("sim: t=%.3f: invariant: %w", r.now, err)
	}
	jobs := r.e.Jobs()
	for len(r.attained) < len(jobs) {
		r.attained = append(r.attained, 0)
	}
	for i, j := range jobs {
		a := j.Attained(r.now)
		if a < r.attained[i]-1e-9 {
			return fmt.Errorf("sim: t=%.3f: attained service of job %s fell from %.3f to %.3f", r.now, j.Spec.Name, r.attained[i], a)
		}
		r.attained[i] = a
	}
	return nil
}

func (r *runner) result(perf *PerfModel) *Result {
	end := r.now
	if r.horizon {
		end = r.cfg.Horizon
	} else if last, all := r.lastEnd(); all {
		// every job ended: the run ends with the last of them, not at a
		// wake-up the policy asked for after it (makespan: first submission
		// to the last end)
		end = last
	}
	res := &Result{Policy: r.cfg.Policy.Name(), Perf: perf.Name, Cluster: r.cfg.Cluster.Name, GPUs: r.cfg.Cluster.NumGPUs(),
		End: end, Stats: r.e.Stats(), Events: r.events, Stale: r.stale, Rejected: r.rejected, Samples: r.samples}
	if len(r.jobs) > 0 {
		res.Start = r.jobs[0].Submit
	}
	jobs := r.e.Jobs()
	res.Jobs = make([]metrics.Job, 0, len(jobs))
	at := make([]int, len(jobs)) // engine JobID → index in res.Jobs
	for i, j := range jobs {
		t := r.x.truth[i]
		if t.holding {
			r.x.settle(t, end)
			t.busy += float64(len(t.gpus)) * (end - t.heldAt)
			t.heldAt = end
		}
		if j.Probe {
			// A pre-run is part of its job: its GPU time counts there.
			p := &res.Jobs[at[j.Parent]]
			p.Busy += t.busy
			p.PreRun += t.busy
			continue
		}
		at[i] = len(res.Jobs)
		i := len(res.Jobs)
		res.Jobs = append(res.Jobs, metrics.Job{})
		done := t.done
		res.Jobs[i] = metrics.Job{Name: j.Spec.Name, User: j.Spec.User, Group: j.Spec.Group, GPUs: j.Spec.GPUs,
			Submit: j.Submitted, FirstStart: j.FirstStart, End: j.Ended, State: j.State, Done: done, Iters: j.Spec.Iters,
			Work: done * j.Spec.IterTime * float64(j.Spec.GPUs), T100: t.t100, Busy: t.busy,
			Suspends: j.Suspends, Migrations: j.Migrations, Attempts: j.Attempts, Packs: j.Packs, Metric: j.Metric,
			Spread: t.spread, Duration: j.Spec.Duration()}
		if !j.State.Terminal() {
			res.Jobs[i].End = -1
		}
		if math.IsNaN(res.Jobs[i].Work) {
			res.Jobs[i].Work = 0
		}
	}
	return res
}

// lastEnd is the latest end of a job (pre-runs included) and whether every
// job has ended.
func (r *runner) lastEnd() (float64, bool) {
	last := math.Inf(-1)
	for _, j := range r.e.Jobs() {
		if !j.State.Terminal() {
			return 0, false
		}
		last = max(last, j.Ended)
	}
	return last, !math.IsInf(last, -1)
}
