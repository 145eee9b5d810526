// Package engine is Gandiva's synchronous core: it applies events to the
// cluster state, shows the policy a snapshot, validates the actions the policy
// returns (no GPU over-committed beyond its memory, gangs whole, legal state
// transitions only), applies them and hands them to an executor.
//
// The simulator, the live server and Kubernetes (package kube) all drive
// the same Engine, each with an Executor of its own. It never sleeps, never reads a clock and never does I/O: every
// event carries its time. An Engine is not safe for concurrent use; its
// driver calls it from one goroutine.
//
// The loop with the policy is closed: an action of a decision is either
// applied (its effect is in the next snapshot's job states) or refused, and
// the next snapshot lists every refusal (cluster.Snapshot.Rejected), with
// a code (cluster.RejectCode: retry later, never, stale) and a reason;
// those an executor reports after the fact (Refused) come after the
// engine's own. So a policy may assume an action of its last decision was
// applied unless its next snapshot lists it as refused, and a policy that
// keeps its own record of what it asked for (policy.Waiting) corrects it
// from that list. The engine does not wake a round for its own refusals:
// the policy hears of them at the next round (an event, a wake-up it asked
// for); a driver runs a round after reporting an executor's refusal, as it
// does after an event (reject.go).
//
// What an executor reports, and how: never by calling the engine from
// Execute, always through its driver, between rounds. Every outcome in
// its world is an event the driver applies (Apply): a job finished or
// failed, a profile sample, a process ready, a migration done, a node lost
// or back, and an action it could not carry out after the engine applied
// it (EvActionFailed: the engine releases the job's GPUs and queues it
// again). When it gives up on such an action, the driver also reports the
// refusal (Refused: the action, a code, a reason): the event changes the
// job's state, the refusal tells the policy which action failed and
// whether asking again can help; neither replaces the other, and neither
// is reported twice. After either, the driver owes the policy a round
// (Reported counts the refusals waiting for one). Refusals not yet shown
// to the policy are part of the exported State, so a restored or forked
// engine shows them as the original would have.
//
// Constraints as input (constrain.go): an executor whose world limits where
// jobs may run passes Options.Constraints; the engine then shows the
// policy a view in which the GPUs it may not use (Blocked) are taken, sets
// cluster.Snapshot.Allowed (where each job may run) and Unit (the GPUs of
// one of its pods), and validates the policy's actions against the same
// rules, refusing with a code (a server the job may not use, GPUs not in
// whole pods, a move of a job that may not be preempted: RejectNever; a GPU
// blocked now: RejectRetry). It never edits an action but one way: a start
// or resumption of a shared job goes to the GPUs its live processes hold
// (Pinned) when they are free or may be packed. Constraints that also
// implement Quotas (quota.go) cap the GPUs of each type that groups of jobs
// hold at once, in the view and in validation (RejectRetry). Without
// constraints the view is the cluster as it is.
//
// Checks for tests and gandiva sim --check: CheckInvariants verifies the
// state after any call, and Options.CheckSnapshot makes Round fail when the
// policy wrote to its snapshot (cluster.Digest before and after Schedule).
//
// State (state.go): Export copies the engine's whole state, its policy's
// own included (policy.MarshalState); Restore builds an engine that
// behaves exactly as the exported one from then on; Fork is both at once,
// an independent copy to run forward (in a simulator, say) without
// touching the original. The live server's snapshots are exports.
package engine

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/policy"
)

// Applied is an action the engine accepted and applied, with what an
// executor needs to carry it out. Its GPU lists (GPUs of Start, Resume,
// Migrate and Resize, and Prev) are the engine's own, never modified once
// the action is applied: an executor may keep them.
type Applied struct {
	cluster.Action
	// Prev are the GPUs the job held before (Suspend, Migrate, Resize, Kill),
	// or, for Resume, the GPUs it held when it was suspended.
	Prev []cluster.GPUID
	// Remote is set on a Resume whose state must move to other servers (a
	// migration) and on every Migrate.
	Remote bool
	// Checkpointed is set on a Suspend whose state did not fit in its
	// servers' host memory and goes to a checkpoint, and on a Resume or
	// Start that restores from a checkpoint.
	Checkpointed bool
	// Packed is set when some target GPU is shared with another job.
	Packed bool
	// Internal marks the engine's own actions (a kill after a cancel, a
	// warm start).
	Internal bool
	// NewProcess is set (under Options.StartUps) when the action launches
	// a new process for the job, whose first mini-batch boundary the
	// executor must report (EvReady): every Start and Warm, a Resume that
	// restores from a checkpoint or moves (Remote; under
	// Options.StartUpGrace every Resume), every Migrate and Resize.
	NewProcess bool
	// StillStarting is set on a Suspend of a job whose process is in its
	// start-up: the process goes on to its first mini-batch boundary and
	// is held there (the job is Warming until EvReady), rather than being
	// stopped mid-way.
	StillStarting bool
}

// Executor carries out applied actions. It must not call back into the
// engine; outcomes (completions, profiles, failures) come back as events,
// and an action it gave up on as EvActionFailed with a refusal (Refused),
// both applied by its driver between rounds (see the package doc).
// The actions slice is the engine's buffer, reused by the next Round: an
// executor may keep the actions (copies) but not the slice.
type Executor interface {
	Execute(now float64, actions []Applied)
}

// Result is the outcome of one Round.
type Result struct {
	// Applied is valid until the next call to Round, which reuses its
	// array; a caller that needs the actions longer copies them.
	Applied []Applied
	// Rejected are the policy's actions the engine refused in this round,
	// in the order of the decision, each with its code. The next round's
	// snapshot shows them to the policy (cluster.Snapshot.Rejected).
	Rejected []Rejection
	// WakeAt is the next time the driver must call Round even if no event
	// arrives (the policy's request or a retry back-off), or 0.
	WakeAt float64
}

// Stats counts what the engine did.
type Stats struct {
	Rounds, Events                       int
	Starts, Suspends, Resumes            int
	Migrations, Resizes, Packs, Kills    int
	Retries, Rejected, Checkpoints       int
	Finished, Failed, Cancelled, Blocked int
	// PreRuns counts pre-run probes created; PreRunFailures the jobs
	// failed because their pre-run failed.
	PreRuns, PreRunFailures int
}

// Options configure an Engine.
type Options struct {
	// Failure is the failure-handling policy; the zero value takes DefaultFailurePolicy.
	Failure *FailurePolicy
	// MaxJobsPerGPU bounds packing (default 4).
	MaxJobsPerGPU int
	// Log receives rejections and failure-policy decisions (nil: discard).
	Log *slog.Logger
	// PreRun makes every new job pre-run its first mini-batch on one GPU
	// before its gang may start (Philly's failure handling: user errors in
	// code or configuration show in the first iteration, so catch them
	// cheaply). See prerun.go.
	PreRun bool
	// PreRunIf, when set, limits PreRun to the jobs for which it returns
	// true (the live server lets a job opt out). It must be deterministic.
	PreRunIf func(*cluster.JobSpec) bool
	// StartUps says the executor reports the first mini-batch boundary of
	// every new process it launches (EvReady; Applied.NewProcess says which
	// actions launch one): a job is starting up until then, and its
	// measured start-up is remembered (Job.StartUp, Job.StartUpEst). Without
	// it every process is ready when placed, and EvReady is stale. See
	// startup.go.
	StartUps bool
	// StartUpGrace, above 0 and with StartUps, is for an executor whose
	// every placement launches new processes and whose suspensions stop
	// them at once, start-up or not (Kubernetes: a placement makes new
	// pods, a suspension deletes them). A start-up is then not charged as
	// service (Job.Attained, Job.Executed) for at most StartUpGrace
	// seconds: the job is charged from its EvReady, or from the deadline
	// if none came by then, when its start-up ends and the job is treated
	// as any running job. A Suspend of a job starting up stops it (no
	// Warming), and every Resume launches a new process. 0: start-ups are
	// charged, as Tiresias counts service. See startup.go.
	StartUpGrace float64
	// Warm configures warm starts (zero: none); they need StartUps. See
	// warm.go.
	Warm WarmOptions
	// CheckSnapshot fingerprints the snapshot before and after every call
	// to the policy's Schedule, and Round fails with an error wrapping
	// ErrSnapshotWritten, naming the policy and the first part it changed,
	// when they differ. For checks (sim --check, the test harness): it
	// walks the whole snapshot twice per round; off, rounds do nothing more.
	CheckSnapshot bool
	// Constraints, when set, are an executor's rules on where jobs may run
	// and what may be done to them (Kubernetes): the policy's view shows
	// them (cluster.Snapshot.Allowed and Unit, Blocked GPUs taken) and the
	// engine refuses actions that break them. Nil (the simulator, the
	// live server): none. See constrain.go.
	Constraints Constraints
}

// Engine is the core. See the package comment for its contract.
type Engine struct {
	c       *cluster.Cluster
	pol     policy.Policy
	exec    Executor
	opts    Options
	fail    FailurePolicy
	log     *slog.Logger
	now     float64
	jobs    []*cluster.Job
	byName  map[string]cluster.JobID
	gpus    []cluster.GPUState
	servers []cluster.ServerState
	active  []*cluster.Job
	dead    []cluster.JobID // jobs ended since the last compact, in order
	events  []cluster.Event
	pending []Applied // engine-originated actions for the next Round
	applied []Applied // Result.Applied of the last Round, reused by the next
	retries []cluster.JobID
	nodeErr [][]float64 // per server: times of infrastructure failures
	stats   Stats
	wakeAt  float64 // the last round's Result.WakeAt (state.go)
	free    cluster.FreeIndex
	snap    cluster.Snapshot
	check   *checkSnapshot // Options.CheckSnapshot
	cons    *constrained   // Options.Constraints
	// refused are the refusals the next snapshot shows the policy: the
	// last round's and those reported with Refused since (reported of
	// them); reject.go
	refused  []Rejection
	reported int
	// start-ups and warm starts (startup.go, warm.go)
	starting []cluster.JobID    // jobs whose process is starting up, in order
	warmOn   [][]cluster.JobID  // per GPU: the Warming jobs on it, in ID order
	families map[string]float64 // a family's last measured start-up
	noClient map[string]bool    // families whose processes said no in-job client's hello
	sus      StartUpStats
	cooled   []Applied // kills of warm starts cooled in this round (warm.go)
	// stateSize is the size of the policy's state at the last Export (the
	// next one's buffer starts that large); not part of the state.
	stateSize int
}

// New builds an engine over cluster c. All servers start up.
func New(c *cluster.Cluster, pol policy.Policy, exec Executor, opts Options) *Engine {
	e := &Engine{c: c, pol: pol, exec: exec, opts: opts, byName: map[string]cluster.JobID{}, families: map[string]float64{},
		noClient: map[string]bool{}}
	if opts.Failure != nil {
		e.fail = *opts.Failure
	} else {
		e.fail = DefaultFailurePolicy()
	}
	if e.opts.MaxJobsPerGPU <= 0 {
		e.opts.MaxJobsPerGPU = 4
	}
	if opts.CheckSnapshot {
		e.check = &checkSnapshot{}
	}
	if opts.Constraints != nil {
		e.cons = newConstrained(e, opts.Constraints)
	}
	e.log = opts.Log
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	e.syncServers(true)
	return e
}

// syncServers extends per-GPU and per-server state to cover servers added to the cluster.
func (e *Engine) syncServers(up bool) {
	for len(e.servers) < len(e.c.Servers) {
		s := e.c.Servers[len(e.servers)]
		mask := uint64(1)<<uint(s.NumGPUs) - 1
		if s.NumGPUs == 64 {
			mask = ^uint64(0)
		}
		e.servers = append(e.servers, cluster.ServerState{Free: mask, Up: up})
		e.nodeErr = append(e.nodeErr, nil)
		e.touch(s.ID)
	}
	for len(e.gpus) < e.c.NumGPUs() {
		e.gpus = append(e.gpus, cluster.GPUState{})
		e.warmOn = append(e.warmOn, nil)
	}
}

// touch refreshes server s in the free index after its free mask or
// schedulability changed.
func (e *Engine) touch(s cluster.ServerID) {
	st := &e.servers[s]
	n := 0
	if st.Schedulable() {
		n = st.NumFree()
	}
	e.free.Set(s, n, e.c.Servers[s].NumGPUs)
}

// AddServer registers a server added to the cluster (c.AddServer) after New;
// it starts down until an EvNodeUp arrives.
func (e *Engine) AddServer() { e.syncServers(false) }

// Cluster returns the cluster the engine schedules.
func (e *Engine) Cluster() *cluster.Cluster { return e.c }

// Now is the time of the latest event or round.
func (e *Engine) Now() float64 { return e.now }

// Stats returns the counters so far.
func (e *Engine) Stats() Stats { return e.stats }

// Job returns a job by ID, or nil.
func (e *Engine) Job(id cluster.JobID) *cluster.Job {
	if id < 0 || int(id) >= len(e.jobs) {
		return nil
	}
	return e.jobs[id]
}

// Lookup finds a job by its external name.
func (e *Engine) Lookup(name string) (*cluster.Job, bool) {
	id, ok := e.byName[name]
	if !ok {
		return nil, false
	}
	return e.jobs[id], true
}

// Jobs returns every job, indexed by ID. Read-only.
func (e *Engine) Jobs() []*cluster.Job { return e.jobs }

// Snapshot returns the current state as a policy would see it (with the
// events pending for the next round). Valid until the next call into the engine.
func (e *Engine) Snapshot() *cluster.Snapshot {
	e.compact()
	e.snap.Fill(e.now, e.c, e.jobs, e.gpus, e.servers, e.events, e.active, &e.free)
	e.snap.Rejected = e.refused
	return &e.snap
}

// Policy returns the engine's policy.
func (e *Engine) Policy() policy.Policy { return e.pol }

// ErrStale is wrapped by Apply when an event refers to a job in a state
// where it no longer applies (a finish after a cancel, say). Drivers may
// ignore it; the state is unchanged.
var ErrStale = errors.New("stale event")

func (e *Engine) advance(t float64) error {
	if math.IsNaN(t) || math.IsInf(t, 0) {
		return fmt.Errorf("event time %v is not finite", t)
	}
	if t < e.now {
		return fmt.Errorf("event time %.6f is before the engine's time %.6f", t, e.now)
	}
	e.now = t
	return nil
}

// Submit is Apply of an EvSubmit; it returns the new job's ID.
func (e *Engine) Submit(now float64, spec *cluster.JobSpec) (cluster.JobID, error) {
	if err := e.advance(now); err != nil {
		return cluster.NoJob, err
	}
	if spec == nil {
		return cluster.NoJob, errors.New("submit: no job spec")
	}
	if err := spec.Validate(); err != nil {
		return cluster.NoJob, fmt.Errorf("job %q: %w", spec.Name, err)
	}
	if _, dup := e.byName[spec.Name]; dup {
		return cluster.NoJob, fmt.Errorf("job %q: name already used", spec.Name)
	}
	preRun := e.opts.PreRun && (e.opts.PreRunIf == nil || e.opts.PreRunIf(spec))
	here := preRun && e.opts.StartUps && spec.GPUs == 1 && !spec.Elastic()
	if here {
		preRun = false // its first process's first mini-batch is its pre-run (prerun.go)
	}
	if preRun {
		if _, dup := e.byName[probeName(spec)]; dup {
			return cluster.NoJob, fmt.Errorf("job %q: name %q of its pre-run already used", spec.Name, probeName(spec))
		}
	}
	id := e.add(spec, now)
	e.stats.Events++
	e.jobs[id].PreRunHere = here
	if preRun {
		e.addProbe(e.jobs[id], now)
	}
	return id, nil
}

// CarryService gives job id, just submitted and never started, the
// service a job it replaces attained (GPU-seconds) and executed (seconds
// holding GPUs): a driver that withdraws a job and submits it again in
// another shape (Kubernetes: a Job whose width its user changed) keeps
// what it was charged, so that a policy ordering by attained service
// (Tiresias) does not see it as new. It is not an event: a policy sees
// the service in the next snapshot.
func (e *Engine) CarryService(id cluster.JobID, attained, executed float64) error {
	j := e.Job(id)
	if j == nil || j.State != cluster.Queued || j.FirstStart >= 0 {
		return fmt.Errorf("carry service: job %d is not a queued job that never started", id)
	}
	j.Carry(attained, executed)
	return nil
}

// add creates a queued job and announces it to the policy.
func (e *Engine) add(spec *cluster.JobSpec, now float64) cluster.JobID {
	id := cluster.JobID(len(e.jobs))
	j := &cluster.Job{ID: id, Spec: spec, State: cluster.Queued, Home: cluster.NoServer,
		Submitted: now, FirstStart: -1, QueuedAt: now, Ended: -1, PreRun: cluster.NoJob, Parent: cluster.NoJob,
		ProcStart: -1, ReadyAt: -1, StartUpEst: e.families[family(spec)]}
	j.Settle(now)
	e.jobs = append(e.jobs, j)
	e.byName[spec.Name] = id
	e.active = append(e.active, j)
	e.events = append(e.events, cluster.Event{Time: now, Kind: cluster.EvSubmit, Job: id, Spec: spec})
	return id
}

// Apply applies one event. An error means the event was rejected (and the
// state is unchanged); errors wrapping ErrStale are benign races.
func (e *Engine) Apply(ev cluster.Event) error {
	if ev.Kind == cluster.EvSubmit {
		_, err := e.Submit(ev.Time, ev.Spec)
		return err
	}
	if err := e.advance(ev.Time); err != nil {
		return err
	}
	var j *cluster.Job
	switch ev.Kind {
	case cluster.EvCancel, cluster.EvFinish, cluster.EvFail, cluster.EvProfile, cluster.EvActionDone, cluster.EvActionFailed, cluster.EvReady:
		j = e.Job(ev.Job)
		if j == nil {
			return fmt.Errorf("%s: no job %d", ev.Kind, ev.Job)
		}
		if j.State.Terminal() {
			return fmt.Errorf("%s for job %s in state %s: %w", ev.Kind, j.Spec.Name, j.State, ErrStale)
		}
	case cluster.EvNodeUp, cluster.EvNodeDown:
		if ev.Node < 0 || int(ev.Node) >= len(e.servers) {
			return fmt.Errorf("%s: no server %d", ev.Kind, ev.Node)
		}
	case cluster.EvTick:
	case cluster.EvSetting:
		if ev.Key == "" {
			return fmt.Errorf("setting: empty key")
		}
	default:
		return fmt.Errorf("unknown event kind %d", ev.Kind)
	}
	now := ev.Time
	switch ev.Kind {
	case cluster.EvCancel:
		prev := e.release(j, now)
		e.setState(j, cluster.Cancelled, now, "cancelled by user")
		e.pending = append(e.pending, Applied{Action: cluster.Action{Kind: cluster.Kill, Job: j.ID, Reason: "cancel"}, Prev: prev, Internal: true})
	case cluster.EvFinish:
		if !j.State.Holding() && j.State != cluster.Suspended && j.State != cluster.Warming {
			return fmt.Errorf("finish for job %s in state %s: %w", j.Spec.Name, j.State, ErrStale)
		}
		j.Done, j.DoneAt = ev.Done, now
		e.release(j, now)
		e.setState(j, cluster.Finished, now, "completed")
	case cluster.EvFail:
		if !j.State.Holding() && j.State != cluster.Warming {
			return fmt.Errorf("fail for job %s in state %s: %w", j.Spec.Name, j.State, ErrStale)
		}
		if ev.Done > j.Done {
			j.Done, j.DoneAt = ev.Done, now
		}
		e.onFailure(j, ev, now)
	case cluster.EvProfile:
		e.profile(j, ev, now)
	case cluster.EvActionDone:
		if j.State != cluster.Migrating {
			return fmt.Errorf("action-done for job %s in state %s: %w", j.Spec.Name, j.State, ErrStale)
		}
		e.setState(j, cluster.Running, now, "migrated: its state was restored on its new GPUs")
	case cluster.EvActionFailed:
		if !j.State.Holding() && j.State != cluster.Warming {
			return fmt.Errorf("action-failed for job %s in state %s: %w", j.Spec.Name, j.State, ErrStale)
		}
		e.release(j, now)
		j.Home = cluster.NoServer
		e.requeue(j, now, e.fail.Backoff, "action failed: "+ev.Reason)
	case cluster.EvReady:
		if !j.StartingUp || !e.opts.StartUps {
			return fmt.Errorf("ready for job %s, which is not starting up: %w", j.Spec.Name, ErrStale)
		}
		e.ready(j, ev, now)
	case cluster.EvNodeUp:
		e.servers[ev.Node].Up = true
		e.servers[ev.Node].Reason = ""
		e.touch(ev.Node)
	case cluster.EvNodeDown:
		e.nodeDown(ev.Node, now, ev.Reason)
	}
	e.stats.Events++
	e.events = append(e.events, ev)
	return nil
}

func (e *Engine) profile(j *cluster.Job, ev cluster.Event, now float64) {
	if ev.Done >= j.Done {
		j.Done, j.DoneAt = ev.Done, now
	}
	if ev.HasMetric {
		j.Metric, j.MetricAt = ev.Metric, now
	}
	if ev.Saved && !math.IsNaN(ev.SavedAt) {
		j.Saved, j.SavedAt = true, max(j.SavedAt, min(ev.SavedAt, now))
	}
	if ev.IterTime > 0 && j.State.Holding() && len(j.GPUs) > 0 {
		s := cluster.Sample{At: now, Done: ev.Done, IterTime: ev.IterTime, Width: len(j.GPUs),
			Type: e.c.Servers[e.c.ServerOf(j.GPUs[0])].Type, Servers: numServers(e.c, j.GPUs)}
		for _, g := range j.GPUs {
			for _, o := range e.gpus[g].Jobs {
				if o != j.ID {
					s.Shared = true
					if !slices.Contains(s.Neighbors, o) {
						s.Neighbors = append(s.Neighbors, o)
					}
				}
			}
		}
		slices.Sort(s.Neighbors)
		j.Profile.Add(s)
	}
}

// numServers is len(cluster.ServersOf(c, gpus)), without building the list.
func numServers(c *cluster.Cluster, gpus []cluster.GPUID) int {
	n := 0
	last := cluster.NoServer
	for _, g := range gpus {
		if s := c.ServerOf(g); s != last {
			n++
			last = s
		}
	}
	return n
}

func (e *Engine) nodeDown(s cluster.ServerID, now float64, reason string) {
	st := &e.servers[s]
	st.Up = false
	if reason == "" {
		reason = "node down"
	}
	st.Reason = reason
	defer e.touch(s)
	for _, j := range e.active {
		if j.State.Terminal() {
			continue
		}
		on := false
		for _, g := range j.GPUs {
			if e.c.ServerOf(g) == s {
				on = true
				break
			}
		}
		if j.State.Holding() && on {
			e.release(j, now)
			j.Home = cluster.NoServer
			e.requeue(j, now, 0, "node "+e.c.Servers[s].Name+" lost")
			continue
		}
		if j.State == cluster.Warming && e.homeOn(j, s) {
			e.cool(j, now, "its node "+e.c.Servers[s].Name+" was lost")
			continue
		}
		if j.State == cluster.Suspended && j.Home != cluster.NoServer && e.homeOn(j, s) {
			e.dropHome(j)
			j.Home = cluster.NoServer
		}
	}
}

func (e *Engine) homeOn(j *cluster.Job, s cluster.ServerID) bool {
	for _, sv := range cluster.ServersOf(e.c, j.Last) {
		if sv == s {
			return true
		}
	}
	return false
}

// requeue sends a job back to Queued after a failure, with a back-off.
func (e *Engine) requeue(j *cluster.Job, now, backoff float64, reason string) {
	e.setState(j, cluster.Queued, now, reason)
	j.NotBefore = now + backoff
	if backoff > 0 {
		e.retries = append(e.retries, j.ID)
	}
}

// setState moves j to s, checking the state machine. The engine only calls
// it for legal moves; an illegal one is a bug in the engine.
func (e *Engine) setState(j *cluster.Job, s cluster.JobState, now float64, reason string) {
	if !cluster.CanTransition(j.State, s) {
		panic(fmt.Sprintf("engine: illegal transition %s → %s for job %s", j.State, s, j.Spec.Name))
	}
	j.Settle(now)
	// a warming job waits for its turn too: its wait goes on through it
	waits := func(s cluster.JobState) bool { return s.Waiting() || s == cluster.Warming }
	wasWaiting := waits(j.State)
	j.State = s
	j.Seq++
	if reason != "" {
		j.Reason = reason
	}
	if waits(s) && !wasWaiting {
		j.QueuedAt = now
	}
	if j.Saved && wasWaiting && s.Holding() {
		j.SavedAt = now // started again from its last checkpoint
	}
	if s.Terminal() {
		j.Ended = now
		e.dead = append(e.dead, j.ID)
		switch s {
		case cluster.Finished:
			e.stats.Finished++
		case cluster.Failed:
			e.stats.Failed++
		case cluster.Cancelled:
			e.stats.Cancelled++
		}
		e.preRunEnded(j, now)
	}
}

// release frees the GPUs of j (if it holds any) and returns them; for a
// suspended job it drops its host-memory state instead.
func (e *Engine) release(j *cluster.Job, now float64) []cluster.GPUID {
	j.Settle(now)
	e.stopStartUp(j)
	switch j.State {
	case cluster.Suspended:
		e.dropHome(j)
		j.Warmed = false
		return j.Last
	case cluster.Warming:
		e.unwarm(j)
		j.Warmed = false
		return j.Last
	}
	prev := j.GPUs
	for _, g := range prev {
		gs := &e.gpus[g]
		gs.Jobs = removeID(gs.Jobs, j.ID)
		gs.MemGiB -= j.Spec.MemGiB
		if len(gs.Jobs) == 0 {
			gs.MemGiB = 0
			s := e.c.ServerOf(g)
			e.servers[s].Free |= 1 << uint(g-e.c.Servers[s].FirstGPU)
			e.touch(s)
		}
	}
	j.GPUs = nil
	j.Shared = false
	return prev
}

// take gives GPUs to j (already validated).
func (e *Engine) take(j *cluster.Job, gpus []cluster.GPUID, now float64) (packed bool) {
	j.Settle(now)
	for _, g := range gpus {
		gs := &e.gpus[g]
		if len(gs.Jobs) > 0 {
			packed = true
		}
		gs.Jobs = insertID(gs.Jobs, j.ID)
		gs.MemGiB += j.Spec.MemGiB
		s := e.c.ServerOf(g)
		e.servers[s].Free &^= 1 << uint(g-e.c.Servers[s].FirstGPU)
		e.touch(s)
	}
	j.GPUs = gpus
	j.Last = gpus
	j.Shared = packed
	return packed
}

func (e *Engine) dropHome(j *cluster.Job) {
	if j.Home == cluster.NoServer {
		return
	}
	for _, g := range j.Last {
		e.servers[e.c.ServerOf(g)].SuspendedGiB -= stateGiB(j)
	}
	j.Home = cluster.NoServer
}

// stateGiB is the host memory one worker's suspended state takes.
func stateGiB(j *cluster.Job) float64 {
	if j.Spec.MemGiB <= 0 {
		return 0
	}
	// The state at a mini-batch boundary is what survives the boundary:
	// weights and optimizer state, a fraction of the peak (Gandiva seed
	// 000: 0.3 GB of 23 GB for ResNet-50). We keep the peak as a bound
	// when the spec gives nothing finer.
	return j.Spec.MemGiB * BoundaryFraction
}

// BoundaryFraction is the share of a job's peak GPU memory that its state
// takes at a mini-batch boundary, when suspended to host memory. Source:
// the Gandiva paper (Xiao et al., OSDI'18), ResNet-50: 0.3 GB at the boundary vs 23 GB peak (1.3%);
// we use 5% to cover optimizer state of larger models.
const BoundaryFraction = 0.05

func removeID(s []cluster.JobID, id cluster.JobID) []cluster.JobID {
	for i, x := range s {
		if x == id {
			return append(s[:i], s[i+1:]...)
		}
	}
	return s
}

func insertID(s []cluster.JobID, id cluster.JobID) []cluster.JobID {
	i, _ := slices.BinarySearch(s, id)
	return slices.Insert(s, i, id)
}

func (e *Engine) compact() {
	if len(e.dead) == 0 {
		return
	}
	if len(e.dead) <= 8 {
		// a few jobs ended (the usual case): find them by ID, as active is
		// in ID order, rather than read every active job's state
		for _, id := range e.dead {
			if i, ok := slices.BinarySearchFunc(e.active, id, func(j *cluster.Job, id cluster.JobID) int { return cmp.Compare(j.ID, id) }); ok {
				e.active = slices.Delete(e.active, i, i+1)
			}
		}
		e.dead = e.dead[:0]
		return
	}
	out := e.active[:0]
	for _, j := range e.active {
		if !j.State.Terminal() {
			out = append(out, j)
		}
	}
	clear(e.active[len(out):])
	e.active = out
	e.dead = e.dead[:0]
}
