package server

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/metrics"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/timeline"
)

// machineConfig is what the machine's behaviour depends on besides its log.
// It must be the same when the log is replayed (Server checks the policy).
type machineConfig struct {
	Policy         policy.Policy
	PreRun         bool
	Failure        *engine.FailurePolicy
	CheckpointRoot string
	Epoch          time.Time
	Log            *slog.Logger
	// StartUps: the agents report each process's first mini-batch
	// boundary (engine Options.StartUps); Warm: the engine's warm starts.
	StartUps bool
	Warm     engine.WarmOptions
}

// machine is the server's replicated, deterministic state machine.
//
// Contract: its only input is the log, one entry at a time, in order
// (apply). An entry becomes engine events (submit, cancel, node up and
// down, profile, finish, fail, action done, setting) or a scheduling round;
// the machine keeps the jobs' records and histories (the state changes it
// records, which the store keeps and a replay compares), and its live
// executor (executor.go) keeps the workers and what each node should run.
// It reads no clock (time is the entries'), draws no random numbers and
// does no I/O, so applying the same entries to a fresh machine with the
// same machineConfig rebuilds it exactly: that is how the server recovers.
// The shell (Server) validates requests before it makes entries of them,
// stores the entries, and reads the machine only under its lock: the
// machine is not safe for concurrent use.
type machine struct {
	cfg  machineConfig
	c    *cluster.Cluster
	eng  *engine.Engine
	x    *executor
	jobs map[string]*job
	// idem finds a job by its submitter and idempotency key (idemKey).
	idem  map[string]*job
	order []*job
	// submits counts the submit entries applied, those that failed
	// included: the next job is j<submits+1>, so a failed submission's ID
	// is never given to another job.
	submits int
	// settings holds the last value of every setting applied (the
	// server's own, such as quotas, and the policy's); unended counts each
	// user's jobs that have not ended (for the quota on them).
	settings map[string]string
	unended  map[string]int
	byEID    []*job // the job of each engine job (a job or its pre-run)
	live     []*job // jobs not yet terminal (with their pre-runs), in order
	// touched are the jobs whose engine state an entry may have changed
	// (record looks at them only); scanAll makes it look at every live job.
	touched      map[*job]bool
	scanAll      bool
	finishedLive int // ended jobs still in live

	// Retention and the quotas on job records (limits.go), all derived
	// from the log: stored and fullJobs are each user's spec bytes and
	// jobs kept in full (not summarised), endedFull those of them that
	// have ended; retained are the ended jobs kept in full, in the order
	// they ended (summarised ones are dropped from its head lazily), and
	// userRetained the same per user. summarised are the jobs summarised
	// since the shell last took them (to rewrite their stored records).
	// limitsReady is false in a machine decoded from a snapshot of a
	// build without them: ensureLimits rebuilds them from the jobs.
	stored, fullJobs, endedFull map[string]int
	retained                    []*job
	userRetained                map[string][]*job
	summarised                  []*job
	limitsReady                 bool

	now    float64
	seq    uint64 // the entry being applied
	wakeAt float64
	// events counts engine events applied since the last round: a round
	// is due when it is positive or the policy's wake-up time has come.
	events int

	changes  []change // recorded since the shell last took them
	rejected int
	stale    int

	// rec is the GPU timeline of everything the machine did (the dashboard's,
	// ui.go): fed after every entry, so a replay rebuilds it whole.
	rec *timeline.Recorder
	// nodeChanges counts the entries that may change a node's status (the
	// dashboard shows it beside the settings).
	nodeChanges uint64
}

// job is one submitted job: its record, its engine IDs, what it reported,
// and its history.
type job struct {
	rec *Record
	eid cluster.JobID
	// run and probe are the executor's runs of the job and of its pre-run
	// (nil without one).
	run, probe *run
	last       cluster.JobState
	lastPR     cluster.JobState
	history    []api.Change
	notes      []string
	// from reports: mini-batches done, seconds per mini-batch, metric
	done, iterTime float64
	metric         *float64
	lastCkpt       float64 // mini-batches done at the last checkpoint saved, -1: none
	// t100 is when done first reached min(100, the job's mini-batches), -1
	// before; spread is set once an attempt spanned several nodes.
	t100   float64
	spread bool
	ended  bool    // it and its pre-run are terminal (counted in finishedLive)
	endT   float64 // when ended was set (engine time)
	// attempts are every attempt of the job and of its pre-run, in order:
	// where each ran, for logs.
	attempts []attemptInfo
}

type attemptInfo struct {
	attempt int64
	probe   bool
	nodes   []string // by rank
	// n numbers the job's attempts 1, 2, ... in order, its pre-run's
	// included: the numbers users see (status) and give (logs --attempt).
	// 0 in a store written before attempts were numbered: then its
	// position in the list, from 1 (number).
	n int
	// gpus are the node-local GPUs of each rank; start is when the
	// attempt was made and end when its processes ended (engine seconds),
	// outcome how ("" while it lasts, or where the store predates it).
	gpus       [][]int
	start, end float64
	outcome    string
}

// number is the attempt's number (attemptInfo.n), i its index in its
// job's list.
func (a *attemptInfo) number(i int) int {
	if a.n > 0 {
		return a.n
	}
	return i + 1
}

// attemptOf returns the job's attempt whose process attempt (the
// agents' ID) is id, nil if none.
func (j *job) attemptOf(id int64) *attemptInfo {
	for i := len(j.attempts) - 1; i >= 0; i-- {
		if j.attempts[i].attempt == id {
			return &j.attempts[i]
		}
	}
	return nil
}

// attemptEnded records how an attempt ended, once: the first outcome said
// stands.
func (j *job) attemptEnded(id int64, now float64, outcome string) {
	if at := j.attemptOf(id); at != nil && at.outcome == "" {
		at.outcome, at.end = outcome, now
	}
}

func newMachine(cfg machineConfig) *machine {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	m := &machine{cfg: cfg, c: &cluster.Cluster{Name: "live"}, jobs: map[string]*job{}, idem: map[string]*job{},
		touched: map[*job]bool{}, settings: map[string]string{}, unended: map[string]int{}, rec: newRecorder()}
	m.x = newExecutor(m.c, cfg.CheckpointRoot, m.state, m.emit)
	m.eng = engine.New(m.c, cfg.Policy, m.x, m.engineOptions())
	return m
}

// engineOptions are the options of the machine's engine (also those of
// one restored from a snapshot).
func (m *machine) engineOptions() engine.Options {
	return engine.Options{Failure: m.cfg.Failure, PreRun: m.cfg.PreRun, Log: m.cfg.Log,
		PreRunIf: func(s *cluster.JobSpec) bool {
			j := m.jobs[s.Name]
			return j != nil && j.rec.PreRun
		}, StartUps: m.cfg.StartUps, Warm: m.cfg.Warm}
}

// wall converts engine time to wall-clock time.
func (m *machine) wall(t float64) time.Time {
	return m.cfg.Epoch.Add(time.Duration(t * float64(time.Second))).UTC()
}

// apply applies log entry seq. Errors are for entries that could not be
// applied at all (a corrupt log, or a request the shell should have
// refused); applying the same entries again fails the same way.
func (m *machine) apply(seq uint64, e *entry) error {
	m.ensureLimits()
	m.seq = seq
	if e.T > m.now {
		m.now = e.T
	}
	m.x.begin(seq, m.now)
	var err error
	switch e.Kind {
	case entSubmit:
		m.submits++
		err = m.submit(e.Job)
	case entCancel:
		err = m.cancel(e.ID)
	case entRegister:
		m.nodeChanges++
		err = m.register(e.Reg)
	case entReport:
		n := m.x.nodes[e.Node]
		if n == nil {
			return fmt.Errorf("report from unknown node %q", e.Node)
		}
		for _, r := range e.Reports {
			m.x.report(n, r)
		}
	case entNodeDown:
		m.nodeChanges++
		m.nodeDown(e.Node, e.Reason)
		if n := m.x.nodes[e.Node]; n != nil && (e.Removed || e.Reason == reasonRemoved) {
			n.removed = true // (an older release's log says so by its reason only)
		}
	case entUndrain:
		m.nodeChanges++
		if n := m.x.nodes[e.Node]; n != nil {
			err = m.eng.Undrain(n.sid)
			m.events++
		}
	case entDrain:
		if n := m.x.nodes[e.Node]; n != nil {
			err = m.eng.Drain(n.sid, e.Reason)
			m.events++
		}
	case entSetting:
		if err = m.event(cluster.Event{Kind: cluster.EvSetting, Key: e.Key, Value: e.Value, Job: cluster.NoJob, Node: cluster.NoServer}); err == nil {
			m.settings[e.Key] = e.Value
		}
	case entRound:
		err = m.round()
	case entRetain:
		// (retainJobs below, at this entry's time)
	default:
		err = fmt.Errorf("unknown entry kind %q", e.Kind)
	}
	m.reconcile()
	m.x.publish()
	m.record()
	m.retainJobs()
	m.observe()
	return err
}

// event applies one engine event at the current time. A stale event (about
// a job that has moved on) is counted and is no error.
func (m *machine) event(ev cluster.Event) error {
	ev.Time = m.now
	m.touch(ev.Job)
	if ev.Kind == cluster.EvNodeDown || ev.Kind == cluster.EvNodeUp {
		m.scanAll = true
	}
	err := m.eng.Apply(ev)
	if err == nil {
		m.events++
		m.rec.NoteEvent(ev)
	} else if errors.Is(err, engine.ErrStale) {
		m.stale++
		return nil
	}
	return err
}

// emit applies an event of the machine's own or of the executor (from an
// agent's report), logging one the engine refused: nobody waits for it.
func (m *machine) emit(ev cluster.Event) {
	if err := m.event(ev); err != nil {
		m.cfg.Log.Warn("event not applied", "seq", m.seq, "event", ev.String(), "err", err)
	}
}

// state is a job's engine state, for the executor.
func (m *machine) state(id cluster.JobID) cluster.JobState { return m.eng.Job(id).State }

// roundDue reports whether the shell should append a round entry at time t.
func (m *machine) roundDue(t float64) bool {
	return m.events > 0 || (m.wakeAt > 0 && t >= m.wakeAt)
}

func (m *machine) round() error {
	m.events = 0
	res, err := m.eng.Round(m.now)
	if err != nil {
		return fmt.Errorf("round at %.3f: %w", m.now, err)
	}
	for _, a := range res.Applied { // (Execute has turned them into workers)
		m.touch(a.Job)
	}
	m.rec.NoteApplied(res.Applied)
	m.wakeAt = res.WakeAt
	m.rejected += len(res.Rejected)
	return nil
}

func (m *machine) submit(rec *Record) error {
	if rec == nil || m.jobs[rec.ID] != nil {
		return fmt.Errorf("submit: bad or duplicate record")
	}
	req := &rec.Request
	spec := &cluster.JobSpec{Name: rec.ID, User: rec.User, Group: req.Group, GPUs: req.GPUs, MinGPUs: req.MinGPUs,
		MaxGPUs: req.MaxGPUs, Submit: m.now, MemGiB: req.MemGiB, Priority: req.Priority, Family: family(rec.User, req.Command)}
	if req.IterTime > 0 {
		spec.Iters, spec.IterTime = req.Iters, req.IterTime
	}
	j := &job{rec: rec, lastCkpt: -1, t100: -1}
	m.jobs[rec.ID] = j
	eid, err := m.eng.Submit(m.now, spec)
	if err != nil {
		delete(m.jobs, rec.ID)
		return fmt.Errorf("submit %s: %w", rec.ID, err)
	}
	m.order = append(m.order, j)
	m.unended[rec.User]++
	m.stored[rec.User] += specBytes(req)
	m.fullJobs[rec.User]++
	if k := req.IdempotencyKey; k != "" {
		m.idem[idemKey(rec.User, k)] = j
	}
	m.live = append(m.live, j)
	m.events++
	j.eid = eid
	j.last = cluster.Queued
	m.own(eid, j)
	j.run = m.x.addRun(j, eid, false)
	j.history = append(j.history, api.Change{At: m.wall(m.now), To: "queued", Reason: "submitted"})
	m.changes = append(m.changes, change{Seq: m.seq, Job: rec.ID, T: m.now, To: "queued", Reason: "submitted"})
	if pr := m.eng.Job(eid).PreRun; pr != cluster.NoJob {
		m.own(pr, j)
		j.probe = m.x.addRun(j, pr, true)
		j.lastPR = cluster.Queued
	}
	return nil
}

// own records that engine job id (a job or its pre-run) is j's.
func (m *machine) own(id cluster.JobID, j *job) {
	for int(id) >= len(m.byEID) {
		m.byEID = append(m.byEID, nil)
	}
	m.byEID[id] = j
}

func (m *machine) cancel(id string) error {
	j := m.jobs[id]
	if j == nil {
		return fmt.Errorf("cancel: no job %s", id)
	}
	return m.event(cluster.Event{Kind: cluster.EvCancel, Job: j.eid, Node: cluster.NoServer})
}

// register applies an agent's registration: a new node joins the cluster;
// a known one comes back (with a new agent process, whose predecessor's
// job processes are gone, or with the same one, whose unacknowledged
// reports are applied now) and is up.
func (m *machine) register(r *api.Registration) error {
	if r == nil {
		return fmt.Errorf("register: empty")
	}
	if err := m.x.checkRegister(r); err != nil {
		return err
	}
	n := m.x.nodes[r.Name]
	wasUp := false
	if n == nil {
		typ := r.GPUs[0].Type
		if m.c.TypeIndex(typ) < 0 {
			if _, err := cluster.LookupGPUType(typ); err != nil {
				// A type we have no speed for: counted as a reference GPU.
				m.c.Types = append(m.c.Types, cluster.GPUType{Name: typ, Speed: 1, MemGiB: r.GPUs[0].MemGiB})
			}
		}
		rack := r.Rack
		if rack == "" {
			rack = "rack-" + r.Name
		}
		sid, err := m.c.AddServer(r.Name, typ, len(r.GPUs), rack, r.Domain, r.HostMemGiB)
		if err != nil {
			return fmt.Errorf("register %s: %w", r.Name, err)
		}
		m.eng.AddServer()
		n = m.x.addNode(r.Name, sid, typ)
	} else {
		wasUp = m.eng.Snapshot().Servers[n.sid].Up
	}
	n.removed = false
	if m.x.connect(n, r) {
		if wasUp {
			// A new agent process: the old one's job processes died with it.
			m.emit(cluster.Event{Kind: cluster.EvNodeDown, Node: n.sid, Reason: "agent restarted"})
		}
		m.x.dropNode(n, "agent restarted")
	} else {
		for _, rep := range r.Reports {
			m.x.report(n, rep)
		}
	}
	if !m.eng.Snapshot().Servers[n.sid].Up {
		m.emit(cluster.Event{Kind: cluster.EvNodeUp, Node: n.sid})
	}
	m.x.confirm(n, m.ranHere(n, r.Running))
	return nil
}

// ranHere keeps the processes a registration claims that an attempt placed
// on n (a job, attempt and rank of n's): a node cannot hold another node's
// job back by claiming to run it (the executor waits for every process of
// a job to end before it starts another). The agent kills what it runs
// that no assignment names anyway.
func (m *machine) ranHere(n *node, procs []api.Running) []api.Running {
	var out []api.Running
	for _, p := range procs {
		j := m.jobs[p.Job]
		if j == nil {
			continue
		}
		for _, at := range j.attempts {
			if at.attempt == p.Attempt && p.Rank >= 0 && p.Rank < len(at.nodes) && at.nodes[p.Rank] == n.name {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// nodeDown handles a node the shell declared lost (no contact for longer
// than the node time-out).
func (m *machine) nodeDown(name, reason string) {
	n := m.x.nodes[name]
	if n == nil {
		return
	}
	if m.eng.Snapshot().Servers[n.sid].Up {
		m.emit(cluster.Event{Kind: cluster.EvNodeDown, Node: n.sid, Reason: reason})
	}
	m.x.disconnect(n, reason)
}

// reconcile has the executor retire the workers of jobs the engine no
// longer holds: those of the touched jobs (an engine state changes only
// through events and rounds, which touch the jobs they change), or of
// every job after a node went down or up (scanAll).
func (m *machine) reconcile() {
	if m.scanAll {
		m.x.reconcile(true)
		return
	}
	rs := make([]*run, 0, 2*len(m.touched))
	for j := range m.touched {
		rs = append(rs, j.run, j.probe)
	}
	m.x.reconcile(false, rs...)
}

// touch marks the job of engine job id (a job or its pre-run) for record.
func (m *machine) touch(id cluster.JobID) {
	if id >= 0 && int(id) < len(m.byEID) && m.byEID[id] != nil {
		m.touched[m.byEID[id]] = true
	}
}

// record notes the state changes of jobs (and their pre-runs) that the
// last entry caused.
func (m *machine) record() {
	if !m.scanAll {
		// Only the touched jobs, in submission order.
		list := make([]*job, 0, len(m.touched))
		for j := range m.touched {
			list = append(list, j)
		}
		sort.Slice(list, func(a, b int) bool { return list[a].eid < list[b].eid })
		for _, j := range list {
			m.recordJob(j)
		}
		clear(m.touched)
		if len(m.live) > 64 && m.finishedLive*2 > len(m.live) {
			m.prune()
		}
		return
	}
	m.scanAll = false
	clear(m.touched)
	for _, j := range m.live {
		m.recordJob(j)
	}
	m.prune()
}

// prune drops ended jobs from the live list.
func (m *machine) prune() {
	keep := m.live[:0]
	for _, j := range m.live {
		if !j.last.Terminal() || (j.probe != nil && !j.lastPR.Terminal()) {
			keep = append(keep, j)
		}
	}
	clear(m.live[len(keep):])
	m.live = keep
	m.finishedLive = 0
}

func (m *machine) recordJob(j *job) {
	ej := m.eng.Job(j.eid)
	if ej.State != j.last {
		m.change(j, "", j.last, ej.State, ej.Reason)
		j.last = ej.State
	}
	if j.probe != nil {
		pj := m.eng.Job(j.probe.eid)
		if pj.State != j.lastPR {
			m.change(j, "prerun ", j.lastPR, pj.State, pj.Reason)
			j.lastPR = pj.State
		}
	}
	if j.last.Terminal() && (j.probe == nil || j.lastPR.Terminal()) && !j.ended {
		j.ended = true
		m.finishedLive++
		m.unended[j.rec.User]--
		j.endT = m.now
		m.endedFull[j.rec.User]++
		m.retained = append(m.retained, j)
		m.userRetained[j.rec.User] = append(m.userRetained[j.rec.User], j)
	}
}

func (m *machine) change(j *job, prefix string, from, to cluster.JobState, reason string) {
	ch := change{Seq: m.seq, Job: j.rec.ID, T: m.now, From: prefix + from.String(), To: prefix + to.String(), Reason: reason}
	m.changes = append(m.changes, ch)
	j.history = append(j.history, api.Change{At: m.wall(m.now), From: ch.From, To: ch.To, Reason: reason})
}

// takeChanges returns and clears the changes recorded since the last call.
func (m *machine) takeChanges() []change {
	out := m.changes
	m.changes = nil
	return out
}

func (j *job) note(s string) {
	if len(j.notes) > 0 && j.notes[len(j.notes)-1] == s {
		return
	}
	if len(j.notes) >= 50 {
		j.notes = j.notes[1:]
	}
	j.notes = append(j.notes, s)
}

// progressed records that the job's rank 0 had done done mini-batches at
// time now.
func (j *job) progressed(done, now float64) {
	if done > j.done {
		j.done = done
	}
	target := 100.0
	if it := j.rec.Request.Iters; it > 0 && it < target {
		target = it
	}
	if j.t100 < 0 && j.done >= target {
		j.t100 = now
	}
}

// records builds the per-job records package metrics summarises, from the
// jobs' engine records and what their agents reported, as of the
// machine's time:
//   - Work is done × the job's declared seconds per mini-batch
//     (JobRequest.IterTime) × GPUs; a job that declared none counts its
//     last measured seconds per mini-batch instead (GPU-seconds on the GPUs
//     it ran on, not reference GPUs).
//   - T100 is the time of the report in which the job's rank 0 had done
//     min(100, its mini-batches); Busy is the GPU-seconds the engine counts
//     it held GPUs (its pre-run's included, also in PreRun).
//   - The run ends at the last job's end when every job has ended, else now.
func (m *machine) records(policy string) *metrics.Run {
	st := m.eng.Stats()
	r := &metrics.Run{Policy: policy, Perf: "live", Cluster: m.c.Name, GPUs: m.c.NumGPUs(), End: m.now,
		Preemptions: st.Suspends, Migrations: st.Migrations, Packs: st.Packs, Retries: st.Retries,
		Events: st.Events, RejectedActions: m.rejected}
	ended, last := true, math.Inf(-1)
	for i, j := range m.order {
		ej := m.eng.Job(j.eid)
		if i == 0 {
			r.Start = ej.Submitted
		}
		spec := ej.Spec
		it := spec.IterTime
		if it == 0 {
			it = j.iterTime
		}
		rec := metrics.Job{Name: j.rec.ID, User: j.rec.User, Group: spec.Group, GPUs: spec.GPUs, Submit: ej.Submitted,
			FirstStart: ej.FirstStart, End: -1, State: ej.State, Done: j.done, Iters: spec.Iters,
			Work: j.done * it * float64(spec.GPUs), T100: j.t100, Busy: ej.Attained(m.now),
			Suspends: ej.Suspends, Migrations: ej.Migrations, Attempts: ej.Attempts, Packs: ej.Packs, Metric: ej.Metric,
			Spread: j.spread, Duration: spec.Duration()}
		if j.probe != nil {
			pj := m.eng.Job(j.probe.eid)
			rec.PreRun = pj.Attained(m.now)
			rec.Busy += rec.PreRun
			ended = ended && pj.State.Terminal()
			last = max(last, pj.Ended)
		}
		if ej.State.Terminal() {
			rec.End = ej.Ended
			last = max(last, ej.Ended)
		} else {
			ended = false
		}
		r.Jobs = append(r.Jobs, rec)
	}
	if ended && len(m.order) > 0 {
		r.End = last
	}
	return r
}

// family is a job's start-up family (cluster.JobSpec.Family): its user and
// its command up to the first flag ("python3 train.py" of "python3 train.py
// --lr 0.1"), so that a job run again, or the next of a sweep whose jobs
// differ in their flags, is expected to start up as the last one did.
func family(user string, command []string) string {
	key := user
	for _, a := range command {
		if strings.HasPrefix(a, "-") {
			break
		}
		key += "\x00" + a
	}
	if key == user {
		return ""
	}
	h := sha256.Sum256([]byte(key))
	return fmt.Sprintf("%x", h[:8])
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// nextJobID is the ID the next submission gets.
func (m *machine) nextJobID() string { return fmt.Sprintf("j%d", m.submits+1) }

// idemKey is machine.idem's key: keys are per user, so one user's key never
// finds another user's job.
func idemKey(user, key string) string { return user + "\x00" + key }
