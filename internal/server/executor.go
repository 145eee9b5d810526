package server

import (
	"cmp"
	"fmt"
	"iter"
	"net/url"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/handoff"
)

// executor is the live executor: the engine.Executor of the live server,
// as internal/sim's executor is the simulator's.
//
// Contract: Execute turns the engine's applied actions into workers, one
// per node of a gang, or one per GPU for a job that asks for a rank per
// GPU (rank, world size, rank 0's node as the master and a port there no
// other gang's rank 0 on that node holds), each
// with what its agent should do (run, suspend, checkpoint, kill); publish
// shows the agents the workers that may take effect now (see publish for
// the safety rules) as per-node assignments, level-triggered and versioned;
// report turns what the agents report back into engine events, handed to
// emit. It never calls into the engine: it reads job states through state
// and its cluster only, and Execute reads nothing but its actions.
//
// It is part of the replicated state: the machine drives it from log
// entries (begin, addRun, addNode, connect, confirm, disconnect, report,
// reconcile, publish), so it is deterministic, reads no clock and does no
// I/O, and a replay rebuilds it. Attempts are numbered by the entry that
// created them, so every process start has an identity no other start
// shares.
type executor struct {
	c        *cluster.Cluster
	ckptRoot string
	state    func(cluster.JobID) cluster.JobState // a job's engine state
	emit     func(cluster.Event)                  // an event for the engine, applied at once

	seq  uint64  // the entry being applied
	now  float64 // its time
	attK int64   // attempts created by this entry

	runs    []*run // by engine JobID (a job's run and its pre-run's)
	nodes   map[string]*node
	byID    []*node // by ServerID
	workers map[wkey]*worker
	busy    map[*run]bool // runs with workers (current or leaving)
	// dirty holds every run with a worker whose assignment may differ from
	// what its agent sees (worker.stale): those publish looks at. A run
	// joins when one of its workers is made or changes its want, GPUs or
	// way of suspending, and leaves once none of its workers is stale.
	dirty map[*run]bool
}

var _ engine.Executor = (*executor)(nil)

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

// wkey names one worker (one rank of one attempt of a job), as agents do.
type wkey struct {
	job     string
	attempt int64
	rank    int
}

// compare orders keys by job, attempt and rank.
func (k wkey) compare(o wkey) int {
	return cmp.Or(strings.Compare(k.job, o.job), cmp.Compare(k.attempt, o.attempt), cmp.Compare(k.rank, o.rank))
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
	// ready: its process reported the end of its start-up (RepReady).
	ready    bool
	took     float64 // that start-up, in seconds
	noClient bool    // it said no in-job client's hello in time
	// port is the gang's MASTER_PORT, the same for every worker of an
	// attempt (0: one process, or a worker restored from a snapshot of a
	// build that did not keep it: masterPort derives it).
	port int
	// held: the agent said its process is suspended (or held warm) under
	// the order it was last told (pub), and has been told nothing since.
	// A suspension wanted again before any other order reached the agent
	// (a resume the hand-off fence held back, then superseded) is
	// acknowledged already: the agent, told nothing new, will not say it
	// again. (false in snapshots of builds that did not keep it: such a
	// worker waits for its agent's next report, as those builds did.)
	held bool
}

func (w *worker) key() wkey { return wkey{w.r.j.rec.ID, w.attempt, w.rank} }

// node is one agent's machine.
type node struct {
	name    string
	sid     cluster.ServerID
	gpuType string
	addr    string
	peer    string // the IP address it registered from ("": unknown)
	// removed: an admin removed it (and has not let it enrol and register
	// again): its GPUs are not the cluster's (machine.capacity).
	removed     bool
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

func newExecutor(c *cluster.Cluster, ckptRoot string, state func(cluster.JobID) cluster.JobState, emit func(cluster.Event)) *executor {
	return &executor{c: c, ckptRoot: ckptRoot, state: state, emit: emit, nodes: map[string]*node{},
		workers: map[wkey]*worker{}, busy: map[*run]bool{}, dirty: map[*run]bool{}}
}

// begin starts applying entry seq, at time now.
func (x *executor) begin(seq uint64, now float64) { x.seq, x.now, x.attK = seq, now, 0 }

// addRun tracks engine job eid: job j, or its pre-run.
func (x *executor) addRun(j *job, eid cluster.JobID, probe bool) *run {
	for int(eid) >= len(x.runs) {
		x.runs = append(x.runs, nil)
	}
	r := &run{j: j, eid: eid, probe: probe}
	x.runs[eid] = r
	return r
}

// --- nodes ---

// checkRegister validates a registration against the known nodes.
func (x *executor) checkRegister(r *api.Registration) error {
	n := x.nodes[r.Name]
	if n == nil {
		return nil
	}
	sv := x.c.Servers[n.sid]
	if sv.NumGPUs != len(r.GPUs) || !strings.EqualFold(n.gpuType, r.GPUs[0].Type) {
		return api.Conflict("node %s registered before with %d %s GPUs, now with %d %s: give it another --name",
			r.Name, sv.NumGPUs, n.gpuType, len(r.GPUs), r.GPUs[0].Type)
	}
	return nil
}

// addNode adds the node of a new server.
func (x *executor) addNode(name string, sid cluster.ServerID, gpuType string) *node {
	n := &node{name: name, sid: sid, gpuType: gpuType, strays: map[wkey][]int{}}
	x.nodes[name] = n
	x.byID = append(x.byID, n)
	return n
}

// connect starts n's new session with the agent that registered r, and
// reports whether that agent is a new process (its reports are numbered
// afresh, and its predecessor's job processes are gone).
func (x *executor) connect(n *node, r *api.Registration) (fresh bool) {
	fresh = n.incarnation != r.Incarnation
	n.addr, n.peer, n.logKey = r.Addr, r.Peer, r.LogKey
	n.session = fmt.Sprintf("%s.%d", r.Name, x.seq)
	if fresh {
		n.incarnation = r.Incarnation
		n.repSeq = 0
	}
	return fresh
}

// confirm compares what n's agent runs with what we want there, after a
// registration: a worker whose process ran and is gone with no report
// lost it; a process no worker wants is a stray. Then n may start new
// processes.
func (x *executor) confirm(n *node, procs []api.Running) {
	running := map[wkey]api.Running{}
	for _, p := range procs {
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
				w.held = w.toldHold()
			case p.State == "suspended" && w.want == api.WantWarm:
				w.phase = "warm"
				w.held = w.toldHold()
			case p.State == "running" && w.want == api.WantRun:
				w.phase = "running"
			}
			continue
		}
		if w.started {
			// It ran, it is gone, and no report says how: lost.
			x.gone(w, api.Report{Kind: api.RepExited, Outcome: "failed", Message: "the process vanished (agent lost track of it)"})
		}
	}
	for k, p := range running {
		n.strays[k] = slices.Clone(p.GPUs)
	}
	n.confirmed = true
	n.version++
}

// disconnect ends n's session: the node was declared lost.
func (x *executor) disconnect(n *node, reason string) {
	x.dropNode(n, reason)
	n.confirmed = false
	n.session = ""
}

// voidSessions makes every node register again before anything new starts
// on it (after a replay: the sessions were the previous process's).
func (x *executor) voidSessions() {
	for _, n := range x.nodes {
		n.confirmed = false
		n.session = ""
	}
}

// dropNode forgets every worker and stray on n: its processes are gone, or
// will be killed by the agent's lease, or are strays when it returns.
func (x *executor) dropNode(n *node, reason string) {
	for _, w := range slices.Clone(n.workers) {
		if !w.leaving {
			w.r.j.note(fmt.Sprintf("lost its worker on %s (%s)", n.name, reason))
		}
		w.r.j.attemptEnded(w.attempt, x.now, fmt.Sprintf("lost with node %s (%s)", n.name, reason))
		x.remove(w)
	}
	n.strays = map[wkey][]int{}
	n.version++
}

// --- reports ---

// report applies one agent report.
func (x *executor) report(n *node, rep api.Report) {
	if rep.Seq != 0 {
		if rep.Seq <= n.repSeq {
			return // a resend of a report already applied
		}
		n.repSeq = rep.Seq
	}
	k := wkey{rep.Job, rep.Attempt, rep.Rank}
	w := x.workers[k]
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
		w.held = false
		if w.want == api.WantRun {
			w.phase = "running"
		}
		x.maybeMoved(w.r)
	case api.RepReady:
		w.started = true
		x.ready(w, rep)
	case api.RepProgress:
		w.started = true
		if w.rank != 0 || w.leaving || w.r.probe {
			return
		}
		j.progressed(rep.Done, x.now)
		if rep.IterTime > 0 {
			j.iterTime = rep.IterTime
		}
		if rep.Metric != nil {
			m := *rep.Metric
			j.metric = &m
		}
		if x.state(w.r.eid).Holding() {
			ev := cluster.Event{Kind: cluster.EvProfile, Job: w.r.eid, Node: cluster.NoServer, Done: rep.Done, IterTime: rep.IterTime}
			if rep.Metric != nil {
				ev.Metric, ev.HasMetric = *rep.Metric, true
			}
			x.emit(ev)
		}
	case api.RepSuspended:
		w.started = true
		switch w.want {
		case api.WantSuspend:
			w.phase = "suspended"
		case api.WantWarm:
			w.phase = "warm"
		}
		w.held = w.toldHold()
		if rep.Mode == "signal" {
			j.note("suspended with SIGSTOP (" + orDefault(rep.Message, "no in-job client") + "): GPU memory stays allocated")
		}
		n.version++ // barriers may clear
	case api.RepResumed:
		w.held = false // (running again, whatever it was told)
		if w.want == api.WantRun {
			w.phase = "running"
		}
	case api.RepSaved:
		if w.rank == 0 && !w.r.probe {
			j.lastCkpt = rep.Done
		}
	case api.RepCheckpointed, api.RepExited:
		x.gone(w, rep)
	}
}

// ready records a worker's RepReady and sends EvReady once every worker of
// its attempt is ready (the engine ignores it when the job is not starting
// up, as after a resume in place).
func (x *executor) ready(w *worker, rep api.Report) {
	if w.leaving || w.ready {
		return
	}
	w.ready, w.took, w.noClient = true, rep.Took, rep.NoClient
	if rep.Message != "" {
		w.r.j.note("ready: " + rep.Message)
	}
	took, none := 0.0, false
	for _, o := range w.r.workers {
		if !o.ready {
			return
		}
		took, none = max(took, o.took), none || o.noClient
	}
	x.emit(cluster.Event{Kind: cluster.EvReady, Job: w.r.eid, Node: cluster.NoServer, StartUp: took, Done: rep.Done, NoClient: none, Reason: rep.Message})
}

// maybeMoved sends EvActionDone once every worker of a moving run started.
func (x *executor) maybeMoved(r *run) {
	if !r.moving || len(r.workers) == 0 {
		return
	}
	for _, w := range r.workers {
		if !w.started {
			return
		}
	}
	r.moving = false
	if x.state(r.eid) == cluster.Migrating {
		x.emit(cluster.Event{Kind: cluster.EvActionDone, Job: r.eid, Node: cluster.NoServer})
	}
}

// gone handles a worker whose process ended (exited or checkpointed).
func (x *executor) gone(w *worker, rep api.Report) {
	r, j := w.r, w.r.j
	if o := exitOutcome(w, rep); o != "" {
		j.attemptEnded(w.attempt, x.now, o)
	}
	x.remove(w)
	if rep.Kind == api.RepCheckpointed && rep.Restart {
		j.note("moved by restart: " + orDefault(rep.Message, "no in-job client to save its state") + " (continues from its previous checkpoint, or from scratch)")
	}
	st := x.state(r.eid)
	if w.leaving {
		// Asked to go. A job whose process finished its work before it
		// could be checkpointed (to move or resize) has finished.
		if rep.Outcome == "finished" && w.rank == 0 && w.want == api.WantCheckpoint && st.Holding() {
			x.emit(cluster.Event{Kind: cluster.EvFinish, Job: r.eid, Node: cluster.NoServer, Done: rep.Done})
		}
		return
	}
	switch {
	case rep.Outcome == "finished" && (w.rank == 0 || r.probe):
		if !r.probe {
			j.progressed(rep.Done, x.now)
		}
		x.emit(cluster.Event{Kind: cluster.EvFinish, Job: r.eid, Node: cluster.NoServer, Done: rep.Done})
	case rep.Outcome == "finished":
		// A non-zero rank ends with its gang; rank 0's exit decides.
	case rep.Outcome == "lost" && st.Holding():
		// The agent stopped it for lack of contact with us (its lease): not
		// the job's fault, and not the node's; requeue it without using up
		// an attempt.
		x.emit(cluster.Event{Kind: cluster.EvActionFailed, Job: r.eid, Node: w.n.sid, Reason: orDefault(rep.Message, "lost by its agent")})
	case st == cluster.Suspended:
		// The process of a suspended job died: its host-memory state is
		// lost; the next resume starts a new attempt from the checkpoint.
		j.note("its suspended process ended (" + orDefault(rep.Message, rep.Outcome) + "); it will resume from its checkpoint")
	default:
		reason := rep.Message
		if reason == "" {
			reason = fmt.Sprintf("%s (exit %d)", rep.Outcome, rep.Code)
		}
		user := rep.UserError && rep.Outcome == "failed"
		x.emit(cluster.Event{Kind: cluster.EvFail, Job: r.eid, Node: w.n.sid, UserError: user, Done: rep.Done, Reason: reason})
	}
}

// exitOutcome says how the attempt of w ended, for people (status), when
// rep, w's exit, decides it: any rank's failure, rank 0's end; "" for a
// report that does not (another rank that finished).
func exitOutcome(w *worker, rep api.Report) string {
	why := rep.Message
	if why == "" && rep.Code != 0 {
		why = fmt.Sprintf("exit %d", rep.Code)
	}
	with := func(s string) string {
		if why == "" {
			return s
		}
		return s + ": " + why
	}
	switch {
	case rep.Kind == api.RepCheckpointed && rep.Restart:
		return "stopped without saving its state (no in-job client): to restart elsewhere"
	case rep.Kind == api.RepCheckpointed && w.want == api.WantCheckpoint:
		return "checkpointed: to move"
	case rep.Kind == api.RepCheckpointed:
		return "checkpointed: suspended"
	case rep.Outcome == "finished" && w.rank != 0 && !w.r.probe:
		return ""
	case rep.Outcome == "finished":
		return "finished"
	case rep.Outcome == "failed" && rep.UserError:
		return with("failed (the job's error)")
	case rep.Outcome == "lost":
		return with("lost: stopped by its agent")
	case rep.Outcome == "killed" && w.leaving:
		return "stopped, as asked"
	}
	return with(rep.Outcome)
}

// remove forgets a worker.
func (x *executor) remove(w *worker) {
	delete(x.workers, w.key())
	w.n.workers = removeWorker(w.n.workers, w)
	w.r.workers = removeWorker(w.r.workers, w)
	w.r.leaving = removeWorker(w.r.leaving, w)
	if len(w.r.workers) == 0 && len(w.r.leaving) == 0 {
		delete(x.busy, w.r)
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

// --- actions ---

// Execute implements engine.Executor: it turns applied actions into
// workers. It runs inside engine.Round and reads only its actions.
func (x *executor) Execute(_ float64, acts []engine.Applied) {
	for _, a := range acts {
		r := x.runs[a.Job]
		if r == nil {
			continue
		}
		switch a.Kind {
		case cluster.Start:
			x.retireAll(r, true)
			x.attempt(r, a.GPUs)
		case cluster.Suspend:
			for _, w := range slices.Clone(r.workers) {
				if a.StillStarting {
					// the engine has it Warming: its process goes on to its
					// first boundary and is held there (or starts so, if it
					// had not started yet)
					w.want, w.phase = api.WantWarm, "warming"
					if w.retell() {
						w.phase = "warm" // held already under this very order
					}
					x.dirty[r] = true
					continue
				}
				if w.pub == nil && !w.started {
					x.retire(w, true) // never ran: nothing to suspend
					continue
				}
				w.want, w.toDisk, w.unalign, w.phase = api.WantSuspend, a.Checkpointed, a.Unaligned, "suspending"
				if w.retell() {
					// its agent was told this very suspension, said it is
					// suspended, and has been told nothing since (a resume
					// in between was never published): acknowledged
					w.phase = "suspended"
				}
				x.dirty[r] = true
			}
		case cluster.Warm:
			x.retireAll(r, true)
			x.attempt(r, a.GPUs)
			for _, w := range r.workers {
				w.want, w.phase = api.WantWarm, "warming"
			}
		case cluster.Resume:
			if gs := x.inPlace(r, a.GPUs); gs != nil && !a.Remote {
				for i, w := range r.workers {
					w.want, w.phase = api.WantRun, "resuming"
					w.gpus = gs[i]
					x.dirty[r] = true
				}
				break
			}
			x.retireAll(r, false)
			x.attempt(r, a.GPUs)
			r.moving = a.Remote // the engine has it Migrating until every worker started
		case cluster.Migrate, cluster.Resize:
			x.retireAll(r, false)
			x.attempt(r, a.GPUs)
			r.moving = a.Kind == cluster.Migrate
		case cluster.Kill:
			x.retireAll(r, true)
			for _, w := range slices.Clone(r.leaving) {
				x.retire(w, true)
			}
		}
	}
}

// slot is where one worker of an attempt runs: its node and its
// node-local GPUs.
type slot struct {
	n    *node
	gpus []int
}

// places lays an attempt of r on gpus out as workers, by rank: one per
// node (in the order of gpus' servers) with its GPUs there, or, for a job
// that asks for a rank per GPU, one per GPU, in the order of gpus (the
// engine's: by server, then device). A pre-run runs one process.
func (x *executor) places(r *run, gpus []cluster.GPUID) []slot {
	var out []slot
	if r.j.rec.Request.RankPerGPU && !r.probe {
		for _, g := range gpus {
			n := x.byID[x.c.ServerOf(g)]
			out = append(out, slot{n, []int{int(g - x.c.Servers[n.sid].FirstGPU)}})
		}
		return out
	}
	for _, sid := range cluster.ServersOf(x.c, gpus) {
		n := x.byID[sid]
		out = append(out, slot{n, x.local(n, gpus)})
	}
	return out
}

// inPlace returns, by rank, the GPUs r's live workers resume on when r may
// be resumed where its processes are (nil: it may not, and a new attempt
// restores it from its checkpoint): gpus lay out on exactly the nodes of
// its workers, rank by rank, and, for a gang of several processes, leave
// every worker its GPUs. (A rank that resumed on other GPUs would restart
// from a checkpoint while its peers resumed from memory, and their
// collectives would never meet.)
func (x *executor) inPlace(r *run, gpus []cluster.GPUID) [][]int {
	ps := x.places(r, gpus)
	if len(r.workers) == 0 || len(ps) != len(r.workers) {
		return nil
	}
	out := make([][]int, len(ps))
	for i, w := range r.workers {
		if w.n != ps[i].n || w.world > 1 && !slices.Equal(w.gpus, ps[i].gpus) {
			return nil
		}
		out[i] = ps[i].gpus
	}
	return out
}

// local returns the node-local indices of the GPUs of gpus on n.
func (x *executor) local(n *node, gpus []cluster.GPUID) []int {
	first := x.c.Servers[n.sid].FirstGPU
	var out []int
	for _, g := range gpus {
		if x.c.ServerOf(g) == n.sid {
			out = append(out, int(g-first))
		}
	}
	return out
}

// attempt creates a new attempt of r on gpus: one worker per node, ranked
// by node, or one per GPU (places), published once nothing stands in its
// way (publish).
func (x *executor) attempt(r *run, gpus []cluster.GPUID) {
	// The attempt is also the job's epoch (GANDIVA_ATTEMPT, written into its
	// checkpoints, which an older epoch may not replace): a later attempt
	// of a job must have a greater number. It is made by a later entry, so
	// the entry's number is the high part. The low 8 bits number the
	// attempts of one entry, saturating at 255: a round may start more
	// than 256 jobs, and the 257th attempt of entry S must stay below the
	// attempts of entry S+1 (a later attempt of the same job may be among
	// them). Numbers need only be unique per job (worker keys and
	// checkpoint directories are per job), and an entry makes at most one
	// attempt of a job. (Below 256 attempts an entry, the numbers are those
	// of earlier releases: a store they wrote replays to the same ones.)
	r.attempt = int64(x.seq)<<8 | min(x.attK, 255)
	x.attK++
	servers := cluster.ServersOf(x.c, gpus)
	ps := x.places(r, gpus)
	info := attemptInfo{attempt: r.attempt, probe: r.probe, n: 1, start: x.now}
	if k := len(r.j.attempts); k > 0 {
		info.n = r.j.attempts[k-1].number(k-1) + 1
	}
	for _, p := range ps {
		info.nodes = append(info.nodes, p.n.name)
		info.gpus = append(info.gpus, slices.Clone(p.gpus))
	}
	if len(r.j.attempts) >= 1000 {
		r.j.attempts = r.j.attempts[1:]
	}
	r.j.attempts = append(r.j.attempts, info)
	if len(servers) > 1 && !r.probe {
		r.j.spread = true
	}
	r.workers = r.workers[:0]
	port := 0
	if len(ps) > 1 {
		port = x.freePort(ps[0].n, r.attempt)
	}
	for i, p := range ps {
		w := &worker{r: r, n: p.n, rank: i, world: len(ps), attempt: r.attempt, gpus: p.gpus,
			want: api.WantRun, phase: "assigned", port: port}
		r.workers = append(r.workers, w)
		p.n.workers = append(p.n.workers, w)
		x.workers[w.key()] = w
	}
	r.moving = false
	x.busy[r] = true
	x.dirty[r] = true
}

// retireAll retires r's current workers: killed, or checkpointed (their
// state saved for the next attempt).
func (x *executor) retireAll(r *run, kill bool) {
	for _, w := range slices.Clone(r.workers) {
		x.retire(w, kill)
	}
}

func (x *executor) retire(w *worker, kill bool) {
	r := w.r
	r.workers = removeWorker(r.workers, w)
	if w.pub == nil && !w.started {
		// Never published: no process exists.
		r.j.attemptEnded(w.attempt, x.now, "stopped before it started")
		x.remove(w)
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
	x.dirty[r] = true
}

// reconcile retires the workers of runs the engine no longer has running
// or suspended (failed, requeued after a node loss, cancelled, finished):
// of every busy run, or of rs only (the runs of the jobs an entry touched)
// when all is false.
func (x *executor) reconcile(all bool, rs ...*run) {
	if all {
		for r := range x.busy {
			x.reconcileRun(r)
		}
		return
	}
	for _, r := range rs {
		if r != nil && x.busy[r] {
			x.reconcileRun(r)
		}
	}
}

func (x *executor) reconcileRun(r *run) {
	if len(r.workers) == 0 {
		return
	}
	switch x.state(r.eid) {
	case cluster.Running, cluster.Migrating, cluster.Suspended, cluster.Warming:
	default:
		x.retireAll(r, true)
	}
}

// checkReconciled returns an error naming a busy run with workers whose
// job the engine no longer holds (a reconcile of the touched runs only
// missed it): tests call it after every entry.
func (x *executor) checkReconciled() error {
	for r := range x.busy {
		if len(r.workers) == 0 {
			continue
		}
		switch st := x.state(r.eid); st {
		case cluster.Running, cluster.Migrating, cluster.Suspended, cluster.Warming:
		default:
			return fmt.Errorf("run of engine job %d (%s) has workers while the engine has it %s", r.eid, r.j.rec.ID, st)
		}
	}
	// and the other way: a warming job's process is a worker until the
	// engine hears it ready or cools it (a reconcile that retired it left
	// the job warming for ever)
	for _, r := range x.runs {
		if r != nil && len(r.workers) == 0 && x.state(r.eid) == cluster.Warming {
			return fmt.Errorf("engine job %d (%s) is warming, but its run has no worker", r.eid, r.j.rec.ID)
		}
	}
	return nil
}

// --- assignments ---

// publish shows the agents every worker whose assignment changed and may
// take effect now. Suspends, checkpoints and kills go at once; a worker
// that is to run waits until (1) its node has registered since this server
// started, (2) no other process of its job is alive anywhere (an earlier
// attempt, its pre-run, a stray), and (3) no process leaving its GPUs
// (suspending, checkpointing, being killed) is still on them.
func (x *executor) publish() {
	// (only the dirty runs: with thousands of jobs suspended on their
	// nodes, looking at every busy run at every entry was most of what an
	// entry cost)
	order := make([]*run, 0, len(x.dirty))
	for r := range x.dirty {
		order = append(order, r)
	}
	sort.Slice(order, func(a, b int) bool { return order[a].eid < order[b].eid })
	for _, r := range order {
		left := false
		for _, w := range slices.Concat(r.workers, r.leaving) {
			if !w.stale() {
				continue
			}
			want := x.assignment(w)
			if (want.Want == api.WantRun || want.Want == api.WantWarm) && !x.mayRun(w) {
				left = true
				continue
			}
			w.pub = want
			w.held = false // a new order: what the agent said was of the last one
			w.n.version++
		}
		if !left {
			delete(x.dirty, r)
		}
	}
}

// markStale puts every busy run with a stale worker in dirty (after a
// restore, whatever the snapshot held of it).
func (x *executor) markStale() {
	for r := range x.busy {
		if slices.ContainsFunc(r.workers, (*worker).stale) || slices.ContainsFunc(r.leaving, (*worker).stale) {
			x.dirty[r] = true
		}
	}
}

// checkDirty returns an error naming a busy run with a stale worker that
// dirty lacks (publish would never look at it): tests call it after
// every entry.
func (x *executor) checkDirty() error {
	for r := range x.busy {
		if x.dirty[r] {
			continue
		}
		for _, w := range slices.Concat(r.workers, r.leaving) {
			if w.stale() {
				return fmt.Errorf("worker %v is stale (wants %s, agent sees %v) but its run is not dirty", w.key(), w.want, w.pub)
			}
		}
	}
	return nil
}

// stale reports whether what the agent sees of w (pub) is not what it
// should see: nothing yet, or another want, GPUs or way of suspending
// (the fields of assignment that change; the others are the job's and the
// attempt's, fixed): handoff.Stale of its occupant.
func (w *worker) stale() bool {
	o := w.occupant()
	return handoff.Stale(&o)
}

// mayRun reports whether w's process may run now: the hand-off fence
// (handoff.MayRun) over w's node, its workers and strays, with rule (2),
// no other process of its job alive, as the fence's Kin fact for a new
// process. A warm start runs its start-up beside the processes on its
// GPUs: only rules (1) and (2) hold for it.
func (x *executor) mayRun(w *worker) bool {
	f := handoff.Facts{Ready: w.n.confirmed}
	if f.Ready && w.pub == nil {
		f.Kin = x.kinAlive(w.r)
	}
	o := w.occupant()
	return handoff.MayRun(&o, f, x.others(w)).OK()
}

// kinAlive reports whether a process of r's job other than r's current
// attempt is alive: an earlier attempt still leaving, its pre-run (or the
// job's run, for a pre-run), a stray on any node.
func (x *executor) kinAlive(r *run) bool {
	if len(r.leaving) > 0 {
		return true
	}
	for _, other := range []*run{r.j.run, r.j.probe} {
		if other != nil && other != r && (len(other.workers) > 0 || len(other.leaving) > 0) {
			return true
		}
	}
	for _, n := range x.byID {
		for k := range n.strays {
			if k.job == r.j.rec.ID {
				return true
			}
		}
	}
	return false
}

// wantOrder maps a worker's want to the hand-off's orders.
func wantOrder(w api.Want) handoff.Order {
	switch w {
	case api.WantRun:
		return handoff.Run
	case api.WantWarm:
		return handoff.Warm
	case api.WantSuspend:
		return handoff.Suspend
	case api.WantCheckpoint:
		return handoff.Checkpoint
	case api.WantKill:
		return handoff.Kill
	}
	return handoff.None
}

// retell reports whether w, wanted suspended or held warm again, is so
// already under the order its agent was last told and acknowledged (held):
// a resume decided since, perhaps on other GPUs of its node, never reached
// the agent, so its process is still where that order left it, and w takes
// back those GPUs (the fence then counts the ones it really occupies).
func (w *worker) retell() bool {
	if !w.held || w.pub == nil || w.pub.Want != w.want {
		return false
	}
	w.gpus = slices.Clone(w.pub.GPUs)
	return !w.stale()
}

// toldHold reports whether w's agent was last told to suspend or to hold
// its process warm.
func (w *worker) toldHold() bool {
	return w.pub != nil && (w.pub.Want == api.WantSuspend || w.pub.Want == api.WantWarm)
}

// occupant is w as the hand-off fence sees it: what the executor wants of
// it, what its agent was told (pub) and, for a suspension, whether the
// agent said it is suspended (the phase; the server numbers no
// generations: an acknowledgement is of the current want, as Execute
// resets the phase with every new want). A process of w may exist once it
// was published or reported started.
func (w *worker) occupant() handoff.Occupant {
	o := handoff.Occupant{ID: w.r.j.rec.ID, Want: wantOrder(w.want), GPUs: w.gpus, Live: w.pub != nil || w.started}
	if w.want == api.WantSuspend {
		o.Mode = suspendMode(w.toDisk, w.unalign)
	}
	if p := w.pub; p != nil {
		o.Told = handoff.Told{Order: wantOrder(p.Want), GPUs: p.GPUs, Mode: suspendMode(p.ToDisk, p.Unaligned)}
	}
	if w.want == api.WantSuspend && w.phase == "suspended" {
		o.Ack = handoff.Ack{Order: handoff.Suspend}
	}
	return o
}

// suspendMode is the way of suspending as the hand-off's Mode of an
// order (assignment sets ToDisk and Unaligned on suspensions only).
func suspendMode(toDisk, unaligned bool) uint8 {
	var m uint8
	if toDisk {
		m |= 1
	}
	if unaligned {
		m |= 2
	}
	return m
}

// others yields the occupants of w's node but w: its other workers, then
// its strays (processes no order wants).
func (x *executor) others(w *worker) iter.Seq[*handoff.Occupant] {
	return func(yield func(*handoff.Occupant) bool) {
		var q handoff.Occupant // (one for all: the fence keeps none)
		for _, o := range w.n.workers {
			if o == w {
				continue
			}
			q = o.occupant()
			if !yield(&q) {
				return
			}
		}
		for k, g := range w.n.strays {
			q = handoff.Occupant{ID: k.job, Want: handoff.None, GPUs: g, Live: true}
			if !yield(&q) {
				return
			}
		}
	}
}

// assignment is what the agent should see for w.
func (x *executor) assignment(w *worker) *api.Assignment {
	r := w.r
	req := &r.j.rec.Request
	// Checkpoints go under a directory per user (the agent makes it
	// private to the account the user's jobs run as).
	a := &api.Assignment{Job: r.j.rec.ID, Attempt: w.attempt, Rank: w.rank, World: w.world, User: r.j.rec.User,
		Command: req.Command, Env: req.Env, WorkDir: req.WorkDir,
		CheckpointDir: filepath.Join(x.ckptRoot, r.j.rec.User, r.j.rec.ID), GPUs: slices.Clone(w.gpus),
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
		a.MasterPort = w.masterPort()
	}
	return a
}

// The gangs' master ports (MASTER_PORT, where rank 0 listens for its
// peers) are taken from [portBase, portBase+portSpan).
const (
	portBase = 29500
	portSpan = 1000
)

// masterPort is w's gang's MASTER_PORT: the port chosen for its attempt,
// or, for a worker from a snapshot of a build that chose none, the one
// that build derived from the attempt.
func (w *worker) masterPort() int {
	if w.port != 0 {
		return w.port
	}
	return portBase + int(uint64(w.attempt)%portSpan)
}

// freePort chooses the MASTER_PORT of a new attempt whose rank 0 runs on
// n: the first port from the attempt's own (portBase + attempt modulo
// portSpan, as earlier builds used) that no rank 0 of another gang on n
// holds (running, or leaving and maybe still bound to it), so that two
// gangs mastered on one node never share a port.
func (x *executor) freePort(n *node, attempt int64) int {
	held := map[int]bool{}
	for _, w := range n.workers {
		if w.rank == 0 && w.world > 1 {
			held[w.masterPort()] = true
		}
	}
	first := int(uint64(attempt) % portSpan)
	for i := range portSpan {
		if p := portBase + (first+i)%portSpan; !held[p] {
			return p
		}
	}
	return portBase + first // (more than portSpan gangs on one node)
}

func hostOf(addr string) string {
	if u, err := url.Parse(addr); err == nil && u.Hostname() != "" {
		return u.Hostname()
	}
	return addr
}

// assignments lists what node n should run, in a stable order.
func (x *executor) assignments(n *node) *api.Assignments {
	out := &api.Assignments{Version: n.version, Items: []api.Assignment{}}
	for _, w := range n.workers {
		if w.pub != nil {
			out.Items = append(out.Items, *w.pub)
		}
	}
	slices.SortFunc(out.Items, func(p, q api.Assignment) int {
		return wkey{p.Job, p.Attempt, p.Rank}.compare(wkey{q.Job, q.Attempt, q.Rank})
	})
	return out
}
