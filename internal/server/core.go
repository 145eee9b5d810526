package server

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/policy"
)

// coreConfig is what the core's behaviour depends on besides its log. It
// must be the same when the log is replayed (Server checks the policy).
type coreConfig struct {
	Policy         policy.Policy
	PreRun         bool
	Failure        *engine.FailurePolicy
	CheckpointRoot string
	Epoch          time.Time
	Log            *slog.Logger
}

// core is the server's deterministic state machine: the engine with its
// policy, the jobs' records and histories, the nodes, and the live
// executor's workers. Its only inputs are log entries (apply); it reads no
// clock and does no I/O, so replaying the log rebuilds it exactly. It is
// not safe for concurrent use: Server guards it with a lock.
type core struct {
	cfg  coreConfig
	c    *cluster.Cluster
	eng  *engine.Engine
	jobs map[string]*job
	// idem finds a job by its submitter and idempotency key (idemKey).
	idem  map[string]*job
	order []*job
	live  []*job // jobs not yet terminal (with their pre-runs), in order
	// touched are the jobs whose engine state an entry may have changed
	// (record looks at them only); scanAll makes it look at every live job.
	touched      map[*job]bool
	scanAll      bool
	finishedLive int    // ended jobs still in live
	runs         []*run // by engine JobID (a job's run and its pre-run's)
	nodes        map[string]*node
	byID         []*node // by ServerID

	workers map[wkey]*worker
	busy    map[*run]bool // runs with workers (current or leaving)

	now    float64
	seq    uint64 // the entry being applied
	attK   int64  // attempts created by this entry
	wakeAt float64
	// events counts engine events applied since the last round: a round
	// is due when it is positive or the policy's wake-up time has come.
	events int

	changes  []change // recorded since the shell last took them
	rejected int
	stale    int
}

// job is one submitted job.
type job struct {
	rec     *Record
	eid     cluster.JobID
	run     *run
	probe   *run // nil without a pre-run
	last    cluster.JobState
	lastPR  cluster.JobState
	history []api.Change
	notes   []string
	// from reports: mini-batches done, seconds per mini-batch, metric
	done, iterTime float64
	metric         *float64
	lastCkpt       float64 // mini-batches done at the last checkpoint saved, -1: none
	ended          bool    // it and its pre-run are terminal (counted in finishedLive)
	// attempts are every attempt of the job and of its pre-run, in order:
	// where each ran, for logs.
	attempts []attemptInfo
}

type attemptInfo struct {
	attempt int64
	probe   bool
	nodes   []string // by rank
}

// run is what the executor tracks for one engine job (a job, or its pre-run).
type run struct {
	j       *job
	eid     cluster.JobID
	probe   bool
	attempt int64
	workers []*worker // the current attempt, by rank
	leaving []*worker // earlier workers that must confirm they are gone
	moving  bool      // the engine has it Migrating: ActionDone when all started
}

type wkey struct {
	job     string
	attempt int64
	rank    int
}

// worker is one node's part of a run's attempt.
type worker struct {
	r       *run
	n       *node
	rank    int
	world   int
	attempt int64
	gpus    []int // node-local devices wanted
	want    api.Want
	toDisk  bool
	unalign bool
	// pub is what the agent currently sees (nil: nothing yet, or killed).
	pub *api.Assignment
	// phase is what the node last said: assigned, running, suspending,
	// suspended, checkpointing, killing.
	phase   string
	started bool
	leaving bool
}

// node is one agent's machine.
type node struct {
	name        string
	sid         cluster.ServerID
	gpuType     string
	addr        string
	logKey      string
	incarnation string
	session     string
	// confirmed: registered since this server process started (always
	// false right after a replay); until then nothing new starts on it.
	confirmed bool
	repSeq    uint64
	workers   []*worker
	// strays are processes the agent runs that no worker wants (an older
	// attempt); they hold their GPUs until the agent reports them gone.
	strays  map[wkey][]int
	version uint64
}

func newCore(cfg coreConfig) *core {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	c := &core{cfg: cfg, c: &cluster.Cluster{Name: "live"}, jobs: map[string]*job{}, idem: map[string]*job{}, nodes: map[string]*node{},
		workers: map[wkey]*worker{}, busy: map[*run]bool{}, touched: map[*job]bool{}}
	c.eng = engine.New(c.c, cfg.Policy, c, engine.Options{Failure: cfg.Failure, PreRun: cfg.PreRun, Log: cfg.Log,
		PreRunIf: func(s *cluster.JobSpec) bool {
			j := c.jobs[s.Name]
			return j != nil && j.rec.PreRun
		}})
	return c
}

// wall converts engine time to wall-clock time.
func (c *core) wall(t float64) time.Time {
	return c.cfg.Epoch.Add(time.Duration(t * float64(time.Second))).UTC()
}

// apply applies one log entry. Errors are for entries that could not be
// applied at all (a corrupt log); the shell validates requests first.
func (c *core) apply(seq uint64, e *entry) error {
	c.seq, c.attK = seq, 0
	if e.T > c.now {
		c.now = e.T
	}
	var err error
	switch e.Kind {
	case entSubmit:
		err = c.submit(e.Job)
	case entCancel:
		err = c.cancel(e.ID)
	case entRegister:
		err = c.register(e.Reg)
	case entReport:
		n := c.nodes[e.Node]
		if n == nil {
			return fmt.Errorf("report from unknown node %q", e.Node)
		}
		for _, r := range e.Reports {
			c.report(n, r)
		}
	case entNodeDown:
		c.nodeDown(e.Node, e.Reason)
	case entUndrain:
		if n := c.nodes[e.Node]; n != nil {
			err = c.eng.Undrain(n.sid)
			c.events++
		}
	case entSetting:
		err = c.event(cluster.Event{Kind: cluster.EvSetting, Key: e.Key, Value: e.Value, Job: cluster.NoJob, Node: cluster.NoServer})
	case entRound:
		c.round()
	default:
		err = fmt.Errorf("unknown entry kind %q", e.Kind)
	}
	c.reconcile()
	c.publish()
	c.record()
	return err
}

// event applies one engine event at the current time.
func (c *core) event(ev cluster.Event) error {
	ev.Time = c.now
	c.touch(ev.Job)
	if ev.Kind == cluster.EvNodeDown || ev.Kind == cluster.EvNodeUp {
		c.scanAll = true
	}
	err := c.eng.Apply(ev)
	if err == nil {
		c.events++
	} else if isStale(err) {
		c.stale++
		return nil
	}
	return err
}

// roundDue reports whether the shell should append a round entry at time t.
func (c *core) roundDue(t float64) bool {
	return c.events > 0 || (c.wakeAt > 0 && t >= c.wakeAt)
}

func (c *core) round() {
	c.events = 0
	res, err := c.eng.Round(c.now)
	if err != nil {
		c.cfg.Log.Error("round", "err", err)
		return
	}
	c.wakeAt = res.WakeAt
	c.rejected += len(res.Rejected)
}

func (c *core) submit(rec *Record) error {
	if rec == nil || c.jobs[rec.ID] != nil {
		return fmt.Errorf("submit: bad or duplicate record")
	}
	req := &rec.Request
	spec := &cluster.JobSpec{Name: rec.ID, User: rec.User, Group: req.Group, GPUs: req.GPUs, MinGPUs: req.MinGPUs,
		MaxGPUs: req.MaxGPUs, Submit: c.now, MemGiB: req.MemGiB, Priority: req.Priority}
	if req.IterTime > 0 {
		spec.Iters, spec.IterTime = req.Iters, req.IterTime
	}
	j := &job{rec: rec, lastCkpt: -1}
	c.jobs[rec.ID] = j
	eid, err := c.eng.Submit(c.now, spec)
	if err != nil {
		delete(c.jobs, rec.ID)
		return fmt.Errorf("submit %s: %w", rec.ID, err)
	}
	c.order = append(c.order, j)
	if k := req.IdempotencyKey; k != "" {
		c.idem[idemKey(rec.User, k)] = j
	}
	c.live = append(c.live, j)
	c.events++
	j.eid = eid
	j.last = cluster.Queued
	j.run = c.addRun(j, eid, false)
	j.history = append(j.history, api.Change{At: c.wall(c.now), To: "queued", Reason: "submitted"})
	c.changes = append(c.changes, change{Seq: c.seq, Job: rec.ID, T: c.now, To: "queued", Reason: "submitted"})
	if pr := c.eng.Job(eid).PreRun; pr != cluster.NoJob {
		j.probe = c.addRun(j, pr, true)
		j.lastPR = cluster.Queued
	}
	return nil
}

func (c *core) addRun(j *job, eid cluster.JobID, probe bool) *run {
	for int(eid) >= len(c.runs) {
		c.runs = append(c.runs, nil)
	}
	r := &run{j: j, eid: eid, probe: probe}
	c.runs[eid] = r
	return r
}

func (c *core) cancel(id string) error {
	j := c.jobs[id]
	if j == nil {
		return fmt.Errorf("cancel: no job %s", id)
	}
	return c.event(cluster.Event{Kind: cluster.EvCancel, Job: j.eid, Node: cluster.NoServer})
}

// checkRegister validates a registration against the known nodes.
func (c *core) checkRegister(r *api.Registration) error {
	n := c.nodes[r.Name]
	if n == nil {
		return nil
	}
	sv := c.c.Servers[n.sid]
	if sv.NumGPUs != len(r.GPUs) || !strings.EqualFold(n.gpuType, r.GPUs[0].Type) {
		return api.Conflict("node %s registered before with %d %s GPUs, now with %d %s: give it another --name",
			r.Name, sv.NumGPUs, n.gpuType, len(r.GPUs), r.GPUs[0].Type)
	}
	return nil
}

func (c *core) register(r *api.Registration) error {
	if r == nil {
		return fmt.Errorf("register: empty")
	}
	if err := c.checkRegister(r); err != nil {
		return err
	}
	n := c.nodes[r.Name]
	wasUp := false
	if n == nil {
		typ := r.GPUs[0].Type
		if c.c.TypeIndex(typ) < 0 {
			if _, err := cluster.LookupGPUType(typ); err != nil {
				// A type we have no speed for: counted as a reference GPU.
				c.c.Types = append(c.c.Types, cluster.GPUType{Name: typ, Speed: 1, MemGiB: r.GPUs[0].MemGiB})
			}
		}
		rack := r.Rack
		if rack == "" {
			rack = "rack-" + r.Name
		}
		sid, err := c.c.AddServer(r.Name, typ, len(r.GPUs), rack, r.Domain, r.HostMemGiB)
		if err != nil {
			return fmt.Errorf("register %s: %w", r.Name, err)
		}
		c.eng.AddServer()
		n = &node{name: r.Name, sid: sid, gpuType: typ, strays: map[wkey][]int{}}
		c.nodes[r.Name] = n
		c.byID = append(c.byID, n)
	} else {
		wasUp = c.eng.Snapshot().Servers[n.sid].Up
	}
	fresh := n.incarnation != r.Incarnation
	n.addr, n.logKey = r.Addr, r.LogKey
	n.session = fmt.Sprintf("%s.%d", r.Name, c.seq)
	if fresh {
		n.incarnation = r.Incarnation
		n.repSeq = 0
		if wasUp {
			// A new agent process: the old one's job processes died with it.
			c.event(cluster.Event{Kind: cluster.EvNodeDown, Node: n.sid, Reason: "agent restarted"})
		}
		c.dropNode(n, "agent restarted")
	} else {
		for _, rep := range r.Reports {
			c.report(n, rep)
		}
	}
	if !c.eng.Snapshot().Servers[n.sid].Up {
		c.event(cluster.Event{Kind: cluster.EvNodeUp, Node: n.sid})
	}
	// What the agent runs against what we want there.
	running := map[wkey]api.Running{}
	for _, p := range r.Running {
		running[wkey{p.Job, p.Attempt, p.Rank}] = p
	}
	for _, w := range slices.Clone(n.workers) {
		k := w.key()
		p, ok := running[k]
		if ok {
			delete(running, k)
			w.started = true
			switch {
			case p.State == "suspended" && w.want == api.WantSuspend:
				w.phase = "suspended"
			case p.State == "running" && w.want == api.WantRun:
				w.phase = "running"
			}
			continue
		}
		if w.started {
			// It ran, it is gone, and no report says how: lost.
			c.gone(w, api.Report{Kind: api.RepExited, Outcome: "failed", Message: "the process vanished (agent lost track of it)"})
		}
	}
	for k, p := range running {
		n.strays[k] = slices.Clone(p.GPUs)
	}
	n.confirmed = true
	n.version++
	return nil
}

func (w *worker) key() wkey { return wkey{w.r.j.rec.ID, w.attempt, w.rank} }

// nodeDown handles a node the shell declared lost (no contact for longer
// than the node time-out).
func (c *core) nodeDown(name, reason string) {
	n := c.nodes[name]
	if n == nil {
		return
	}
	if c.eng.Snapshot().Servers[n.sid].Up {
		c.event(cluster.Event{Kind: cluster.EvNodeDown, Node: n.sid, Reason: reason})
	}
	c.dropNode(n, reason)
	n.confirmed = false
	n.session = ""
}

// dropNode forgets every worker and stray on n: its processes are gone, or
// will be killed by the agent's lease, or are strays when it returns.
func (c *core) dropNode(n *node, reason string) {
	for _, w := range slices.Clone(n.workers) {
		if !w.leaving {
			w.r.j.note(fmt.Sprintf("lost its worker on %s (%s)", n.name, reason))
		}
		c.remove(w)
	}
	n.strays = map[wkey][]int{}
	n.version++
}

// report applies one agent report.
func (c *core) report(n *node, rep api.Report) {
	if rep.Seq != 0 {
		if rep.Seq <= n.repSeq {
			return // a resend of a report already applied
		}
		n.repSeq = rep.Seq
	}
	k := wkey{rep.Job, rep.Attempt, rep.Rank}
	w := c.workers[k]
	if w == nil || w.n != n {
		if rep.Kind == api.RepExited || rep.Kind == api.RepCheckpointed {
			if _, ok := n.strays[k]; ok {
				delete(n.strays, k)
				n.version++
			}
		}
		return
	}
	j := w.r.j
	switch rep.Kind {
	case api.RepStarted:
		w.started = true
		if w.want == api.WantRun {
			w.phase = "running"
		}
		c.maybeMoved(w.r)
	case api.RepProgress:
		w.started = true
		if w.rank != 0 || w.leaving || w.r.probe {
			return
		}
		if rep.Done >= j.done {
			j.done = rep.Done
		}
		if rep.IterTime > 0 {
			j.iterTime = rep.IterTime
		}
		if rep.Metric != nil {
			m := *rep.Metric
			j.metric = &m
		}
		if ej := c.eng.Job(w.r.eid); ej.State.Holding() {
			ev := cluster.Event{Kind: cluster.EvProfile, Job: w.r.eid, Node: cluster.NoServer, Done: rep.Done, IterTime: rep.IterTime}
			if rep.Metric != nil {
				ev.Metric, ev.HasMetric = *rep.Metric, true
			}
			c.event(ev)
		}
	case api.RepSuspended:
		w.started = true
		if w.want == api.WantSuspend {
			w.phase = "suspended"
		}
		if rep.Mode == "signal" {
			j.note("suspended with SIGSTOP (" + orDefault(rep.Message, "no in-job client") + "): GPU memory stays allocated")
		}
		n.version++ // barriers may clear
	case api.RepResumed:
		if w.want == api.WantRun {
			w.phase = "running"
		}
	case api.RepSaved:
		if w.rank == 0 && !w.r.probe {
			j.lastCkpt = rep.Done
		}
	case api.RepCheckpointed, api.RepExited:
		c.gone(w, rep)
	}
}

// maybeMoved sends EvActionDone once every worker of a moving run started.
func (c *core) maybeMoved(r *run) {
	if !r.moving || len(r.workers) == 0 {
		return
	}
	for _, w := range r.workers {
		if !w.started {
			return
		}
	}
	r.moving = false
	if c.eng.Job(r.eid).State == cluster.Migrating {
		c.event(cluster.Event{Kind: cluster.EvActionDone, Job: r.eid, Node: cluster.NoServer})
	}
}

// gone handles a worker whose process ended (exited or checkpointed).
func (c *core) gone(w *worker, rep api.Report) {
	r, j := w.r, w.r.j
	c.remove(w)
	if rep.Kind == api.RepCheckpointed && rep.Restart {
		j.note("moved by restart: " + orDefault(rep.Message, "no in-job client to save its state") + " (continues from its previous checkpoint, or from scratch)")
	}
	ej := c.eng.Job(r.eid)
	if w.leaving {
		// Asked to go. A job whose process finished its work before it
		// could be checkpointed (to move or resize) has finished.
		if rep.Outcome == "finished" && w.rank == 0 && w.want == api.WantCheckpoint && ej.State.Holding() {
			c.event(cluster.Event{Kind: cluster.EvFinish, Job: r.eid, Node: cluster.NoServer, Done: rep.Done})
		}
		return
	}
	switch {
	case rep.Outcome == "finished" && (w.rank == 0 || r.probe):
		if rep.Done > j.done && !r.probe {
			j.done = rep.Done
		}
		c.event(cluster.Event{Kind: cluster.EvFinish, Job: r.eid, Node: cluster.NoServer, Done: rep.Done})
	case rep.Outcome == "finished":
		// A non-zero rank ends with its gang; rank 0's exit decides.
	case rep.Outcome == "lost" && ej.State.Holding():
		// The agent stopped it for lack of contact with us (its lease): not
		// the job's fault, and not the node's; requeue it without using up
		// an attempt.
		c.event(cluster.Event{Kind: cluster.EvActionFailed, Job: r.eid, Node: w.n.sid, Reason: orDefault(rep.Message, "lost by its agent")})
	case ej.State == cluster.Suspended:
		// The process of a suspended job died: its host-memory state is
		// lost; the next resume starts a new attempt from the checkpoint.
		j.note("its suspended process ended (" + orDefault(rep.Message, rep.Outcome) + "); it will resume from its checkpoint")
	default:
		reason := rep.Message
		if reason == "" {
			reason = fmt.Sprintf("%s (exit %d)", rep.Outcome, rep.Code)
		}
		user := rep.UserError && rep.Outcome == "failed"
		c.event(cluster.Event{Kind: cluster.EvFail, Job: r.eid, Node: w.n.sid, UserError: user, Done: rep.Done, Reason: reason})
	}
}

// remove forgets a worker.
func (c *core) remove(w *worker) {
	delete(c.workers, w.key())
	w.n.workers = removeWorker(w.n.workers, w)
	w.r.workers = removeWorker(w.r.workers, w)
	w.r.leaving = removeWorker(w.r.leaving, w)
	if len(w.r.workers) == 0 && len(w.r.leaving) == 0 {
		delete(c.busy, w.r)
	}
	if w.pub != nil {
		w.n.version++
	}
	w.pub = nil
}

func removeWorker(ws []*worker, w *worker) []*worker {
	if i := slices.Index(ws, w); i >= 0 {
		return slices.Delete(ws, i, i+1)
	}
	return ws
}

// Execute implements engine.Executor: it turns applied actions into
// workers. It runs inside engine.Round and never calls back into the engine.
func (c *core) Execute(_ float64, acts []engine.Applied) {
	for _, a := range acts {
		c.touch(a.Job)
		r := c.runs[a.Job]
		if r == nil {
			continue
		}
		switch a.Kind {
		case cluster.Start:
			c.retireAll(r, true)
			c.attempt(r, a.GPUs)
		case cluster.Suspend:
			for _, w := range slices.Clone(r.workers) {
				if w.pub == nil && !w.started {
					c.retire(w, true) // never ran: nothing to suspend
					continue
				}
				w.want, w.toDisk, w.unalign, w.phase = api.WantSuspend, a.Checkpointed, a.Unaligned, "suspending"
			}
		case cluster.Resume:
			if !a.Remote && c.sameNodes(r, a.GPUs) {
				for _, w := range r.workers {
					w.want, w.phase = api.WantRun, "resuming"
					w.gpus = c.local(w.n, a.GPUs)
				}
				break
			}
			c.retireAll(r, false)
			c.attempt(r, a.GPUs)
			r.moving = c.eng.Job(r.eid).State == cluster.Migrating
		case cluster.Migrate, cluster.Resize:
			c.retireAll(r, false)
			c.attempt(r, a.GPUs)
			r.moving = a.Kind == cluster.Migrate
		case cluster.Kill:
			c.retireAll(r, true)
			for _, w := range slices.Clone(r.leaving) {
				c.retire(w, true)
			}
		}
	}
}

// sameNodes reports whether gpus span exactly the nodes of r's live workers.
func (c *core) sameNodes(r *run, gpus []cluster.GPUID) bool {
	if len(r.workers) == 0 {
		return false
	}
	servers := cluster.ServersOf(c.c, gpus)
	if len(servers) != len(r.workers) {
		return false
	}
	for i, w := range r.workers {
		if w.n.sid != servers[i] {
			return false
		}
	}
	return true
}

// local returns the node-local indices of the GPUs of gpus on n.
func (c *core) local(n *node, gpus []cluster.GPUID) []int {
	first := c.c.Servers[n.sid].FirstGPU
	var out []int
	for _, g := range gpus {
		if c.c.ServerOf(g) == n.sid {
			out = append(out, int(g-first))
		}
	}
	return out
}

// attempt creates a new attempt of r on gpus: one worker per node, ranked
// by node, published once nothing stands in its way (publish).
func (c *core) attempt(r *run, gpus []cluster.GPUID) {
	r.attempt = int64(c.seq)<<8 | c.attK
	c.attK++
	servers := cluster.ServersOf(c.c, gpus)
	info := attemptInfo{attempt: r.attempt, probe: r.probe}
	for _, sid := range servers {
		info.nodes = append(info.nodes, c.byID[sid].name)
	}
	if len(r.j.attempts) >= 1000 {
		r.j.attempts = r.j.attempts[1:]
	}
	r.j.attempts = append(r.j.attempts, info)
	r.workers = r.workers[:0]
	for i, sid := range servers {
		n := c.byID[sid]
		w := &worker{r: r, n: n, rank: i, world: len(servers), attempt: r.attempt, gpus: c.local(n, gpus),
			want: api.WantRun, phase: "assigned"}
		r.workers = append(r.workers, w)
		n.workers = append(n.workers, w)
		c.workers[w.key()] = w
	}
	r.moving = false
	c.busy[r] = true
}

// retireAll retires r's current workers: killed, or checkpointed (their
// state saved for the next attempt).
func (c *core) retireAll(r *run, kill bool) {
	for _, w := range slices.Clone(r.workers) {
		c.retire(w, kill)
	}
}

func (c *core) retire(w *worker, kill bool) {
	r := w.r
	r.workers = removeWorker(r.workers, w)
	if w.pub == nil && !w.started {
		// Never published: no process exists.
		c.remove(w)
		return
	}
	if !w.leaving {
		w.leaving = true
		r.leaving = append(r.leaving, w)
	}
	if kill {
		w.want, w.phase = api.WantKill, "killing"
	} else if w.want != api.WantKill {
		w.want, w.phase = api.WantCheckpoint, "checkpointing"
	}
}

// reconcile retires the workers of runs the engine no longer has running
// or suspended (failed, requeued after a node loss, cancelled, finished).
func (c *core) reconcile() {
	for r := range c.busy {
		if len(r.workers) == 0 {
			continue
		}
		switch c.eng.Job(r.eid).State {
		case cluster.Running, cluster.Migrating, cluster.Suspended:
		default:
			c.retireAll(r, true)
		}
	}
}

// publish shows the agents every worker whose assignment changed and may
// take effect now. Suspends, checkpoints and kills go at once; a worker
// that is to run waits until (1) its node has registered since this server
// started, (2) no other process of its job is alive anywhere (an earlier
// attempt, its pre-run, a stray), and (3) no process leaving its GPUs
// (suspending, checkpointing, being killed) is still on them.
func (c *core) publish() {
	var order []*run
	for r := range c.busy {
		order = append(order, r)
	}
	sort.Slice(order, func(a, b int) bool { return order[a].eid < order[b].eid })
	for _, r := range order {
		for _, w := range slices.Concat(r.workers, r.leaving) {
			want := c.assignment(w)
			if w.pub != nil && sameAssignment(w.pub, want) {
				continue
			}
			if want.Want == api.WantRun && !c.mayRun(w) {
				continue
			}
			w.pub = want
			w.n.version++
		}
	}
}

func sameAssignment(a, b *api.Assignment) bool {
	return a.Want == b.Want && slices.Equal(a.GPUs, b.GPUs) && a.ToDisk == b.ToDisk && a.Unaligned == b.Unaligned
}

func (c *core) mayRun(w *worker) bool {
	if !w.n.confirmed {
		return false
	}
	r := w.r
	if w.pub == nil { // a new process
		if len(r.leaving) > 0 {
			return false
		}
		for _, other := range []*run{r.j.run, r.j.probe} {
			if other != nil && other != r && (len(other.workers) > 0 || len(other.leaving) > 0) {
				return false
			}
		}
		for _, n := range c.byID {
			for k := range n.strays {
				if k.job == r.j.rec.ID {
					return false
				}
			}
		}
	}
	for _, x := range w.n.workers {
		if x == w || !overlap(x.gpus, w.gpus) || (x.pub == nil && !x.started) {
			continue // no process of x can be on these GPUs
		}
		if x.want == api.WantKill || x.want == api.WantCheckpoint || (x.want == api.WantSuspend && x.phase != "suspended") {
			return false
		}
	}
	for _, g := range w.n.strays {
		if overlap(g, w.gpus) {
			return false
		}
	}
	return true
}

func overlap(a, b []int) bool {
	for _, x := range a {
		if slices.Contains(b, x) {
			return true
		}
	}
	return false
}

// assignment is what the agent should see for w.
func (c *core) assignment(w *worker) *api.Assignment {
	r := w.r
	req := &r.j.rec.Request
	a := &api.Assignment{Job: r.j.rec.ID, Attempt: w.attempt, Rank: w.rank, World: w.world,
		Command: req.Command, Env: req.Env, WorkDir: req.WorkDir,
		CheckpointDir: filepath.Join(c.cfg.CheckpointRoot, r.j.rec.ID), GPUs: slices.Clone(w.gpus),
		Restore: !r.probe, PreRun: r.probe, Want: w.want, CheckpointEvery: r.j.rec.CkptEvery}
	if r.probe {
		a.CheckpointDir = filepath.Join(a.CheckpointDir, "prerun")
		a.CheckpointEvery = 0
	}
	if w.want == api.WantSuspend {
		a.ToDisk, a.Unaligned = w.toDisk, w.unalign
	}
	if w.world > 1 && len(r.workers) > 0 {
		a.MasterAddr = hostOf(r.workers[0].n.addr)
		a.MasterPort = 29500 + int(uint64(w.attempt)%1000)
	}
	return a
}

func hostOf(addr string) string {
	if u, err := url.Parse(addr); err == nil && u.Hostname() != "" {
		return u.Hostname()
	}
	return addr
}

// assignments lists what node n should run, in a stable order.
func (c *core) assignments(n *node) *api.Assignments {
	out := &api.Assignments{Version: n.version, Items: []api.Assignment{}}
	for _, w := range n.workers {
		if w.pub != nil {
			out.Items = append(out.Items, *w.pub)
		}
	}
	sort.Slice(out.Items, func(a, b int) bool {
		x, y := out.Items[a], out.Items[b]
		if x.Job != y.Job {
			return x.Job < y.Job
		}
		if x.Attempt != y.Attempt {
			return x.Attempt < y.Attempt
		}
		return x.Rank < y.Rank
	})
	return out
}

// record notes the state changes of jobs (and their pre-runs) that the
// last entry caused.
// touch marks the job of engine job id (a job or its pre-run) for record.
func (c *core) touch(id cluster.JobID) {
	if id >= 0 && int(id) < len(c.runs) && c.runs[id] != nil {
		c.touched[c.runs[id].j] = true
	}
}

func (c *core) record() {
	if !c.scanAll {
		// Only the touched jobs, in submission order.
		list := make([]*job, 0, len(c.touched))
		for j := range c.touched {
			list = append(list, j)
		}
		sort.Slice(list, func(a, b int) bool { return list[a].eid < list[b].eid })
		for _, j := range list {
			c.recordJob(j)
		}
		clear(c.touched)
		if len(c.live) > 64 && c.finishedLive*2 > len(c.live) {
			c.prune()
		}
		return
	}
	c.scanAll = false
	clear(c.touched)
	for _, j := range c.live {
		c.recordJob(j)
	}
	c.prune()
}

// prune drops ended jobs from the live list.
func (c *core) prune() {
	keep := c.live[:0]
	for _, j := range c.live {
		if !j.last.Terminal() || (j.probe != nil && !j.lastPR.Terminal()) {
			keep = append(keep, j)
		}
	}
	clear(c.live[len(keep):])
	c.live = keep
	c.finishedLive = 0
}

func (c *core) recordJob(j *job) {
	{
		ej := c.eng.Job(j.eid)
		if ej.State != j.last {
			c.change(j, "", j.last, ej.State, ej.Reason)
			j.last = ej.State
		}
		if j.probe != nil {
			pj := c.eng.Job(j.probe.eid)
			if pj.State != j.lastPR {
				c.change(j, "prerun ", j.lastPR, pj.State, pj.Reason)
				j.lastPR = pj.State
			}
		}
		if j.last.Terminal() && (j.probe == nil || j.lastPR.Terminal()) && !j.ended {
			j.ended = true
			c.finishedLive++
		}
	}
}

func (c *core) change(j *job, prefix string, from, to cluster.JobState, reason string) {
	ch := change{Seq: c.seq, Job: j.rec.ID, T: c.now, From: prefix + from.String(), To: prefix + to.String(), Reason: reason}
	c.changes = append(c.changes, ch)
	j.history = append(j.history, api.Change{At: c.wall(c.now), From: ch.From, To: ch.To, Reason: reason})
}

// takeChanges returns and clears the changes recorded since the last call.
func (c *core) takeChanges() []change {
	out := c.changes
	c.changes = nil
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

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func isStale(err error) bool { return errors.Is(err, engine.ErrStale) }

// idemKey is core.idem's key: keys are per user, so one user's key never
// finds another user's job.
func idemKey(user, key string) string { return user + "\x00" + key }
