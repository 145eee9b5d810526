package jobproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/gandiva-sched/gandiva/client/protocol"
)

// Proc is one attempt of one job on this node. See the package comment for
// its states and contracts.
type Proc struct {
	reqs    chan *request
	inbox   chan inboxItem
	lease   chan time.Duration // Renew's latest, for the loop (buffered: 1)
	done    chan struct{}      // closed once exit is set
	events  *eventQueue
	started time.Time
	log     *slog.Logger

	mu   sync.Mutex
	info Info
	exit *Exit
}

type reqKind uint8

const (
	reqSuspend reqKind = iota
	reqResume
	reqCheckpoint
	reqSave
	reqKill
)

var reqNames = [...]string{"suspend", "resume", "checkpoint", "save", "kill"}

type request struct {
	kind  reqKind
	opts  SuspendOptions
	gpus  []int
	at    time.Time
	reply chan reply // buffered: the loop never blocks on it
}

type reply struct {
	susp Suspension
	res  Resumption
	ckpt Checkpoint
	exit *Exit
	err  error
}

// Suspend stops the job and frees its GPUs: by default at its next
// mini-batch boundary through the in-job client, with its state in host
// memory; with SIGSTOP when the job has no client or o.Unaligned is set.
// Suspending a suspended job returns the current Suspension. It returns
// ErrBusy, ErrExited (the job ended first, e.g. it finished at that
// boundary), or the client's error if the job could not save its state (it
// then keeps running).
func (p *Proc) Suspend(ctx context.Context, o SuspendOptions) (Suspension, error) {
	r, err := p.do(ctx, &request{kind: reqSuspend, opts: o})
	return r.susp, err
}

// Resume continues a suspended job on gpus. On the GPUs it had, a job
// suspended in memory restores its state in place and a stopped one gets
// SIGCONT. On other GPUs, or after a suspension to disk, the process is
// restarted with Restore from a fresh checkpoint (taken from the host copy)
// when the job has the client, and from scratch otherwise: the Resumption
// says which. Resuming a running job on the GPUs it has is a no-op; on other
// GPUs it is ErrState.
func (p *Proc) Resume(ctx context.Context, gpus []int) (Resumption, error) {
	r, err := p.do(ctx, &request{kind: reqResume, gpus: slices.Clone(gpus)})
	return r.res, err
}

// Checkpoint ends the Proc for a migration: a job with the client writes its
// state to the checkpoint directory at its next boundary (at once if
// suspended) and exits; a job without it (or whose save fails) is killed and
// Exit.Restart is set. It returns the Exit, whose Outcome is Checkpointed,
// once the process is gone. If the job ends otherwise first (finished,
// failed), it returns that Exit with ErrExited. Checkpointing a Proc that
// has already ended Checkpointed returns the same Exit.
func (p *Proc) Checkpoint(ctx context.Context) (*Exit, error) {
	r, err := p.do(ctx, &request{kind: reqCheckpoint})
	if errors.Is(err, ErrExited) && r.exit != nil && r.exit.Outcome == Checkpointed {
		return r.exit, nil
	}
	return r.exit, err
}

// Save asks a job with the client for a checkpoint at its next boundary
// (at once when suspended in memory) and returns it; the job continues.
// It returns ErrNoClient for a job without the client.
func (p *Proc) Save(ctx context.Context) (Checkpoint, error) {
	r, err := p.do(ctx, &request{kind: reqSave})
	return r.ckpt, err
}

// Kill ends the job at once: SIGKILL to its process group. It does not wait;
// Wait or Done tell when the process is gone. Killing an ended Proc does
// nothing.
func (p *Proc) Kill() {
	r := &request{kind: reqKill, at: time.Now(), reply: make(chan reply, 1)}
	select {
	case p.reqs <- r:
	case <-p.done:
	}
}

// Renew tells the job's in-job client that the agent's hold on it stands
// for d more (protocol.Lease): the client stops by itself once that has
// passed without a newer renewal, so a job never computes on while its
// agent is frozen. Clients whose hello did not ask for leases are sent
// none. Renew never blocks: only the latest renewal is kept until the
// Proc's loop sends it.
func (p *Proc) Renew(d time.Duration) {
	if p.lease == nil {
		return
	}
	for {
		select {
		case p.lease <- d:
			return
		default:
		}
		select {
		case <-p.lease:
		default:
		}
	}
}

// Wait waits for the Proc to end and returns how it ended.
func (p *Proc) Wait(ctx context.Context) (*Exit, error) {
	select {
	case <-p.done:
		return p.Exit(), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Done is closed when the Proc has ended; Exit then says how.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exit says how the Proc ended, or nil while it has not.
func (p *Proc) Exit() *Exit {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exit
}

// Events returns the Proc's events, in order; the channel is closed after
// EvExited. All calls return the same channel. Once called, read it until
// it is closed: the goroutine that feeds it waits for the reader.
func (p *Proc) Events() <-chan Event { return p.events.channel() }

// Info returns a snapshot of the Proc.
func (p *Proc) Info() Info {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := p.info
	i.GPUs = slices.Clone(i.GPUs)
	return i
}

func (p *Proc) do(ctx context.Context, r *request) (reply, error) {
	r.at = time.Now()
	r.reply = make(chan reply, 1)
	select {
	case p.reqs <- r:
	case <-p.done:
		e := p.Exit()
		return reply{exit: e}, fmt.Errorf("%s job %s: %w (%s)", reqNames[r.kind], p.info.Job, ErrExited, e.Reason)
	case <-ctx.Done():
		return reply{}, fmt.Errorf("%s job %s: %w", reqNames[r.kind], p.info.Job, ctx.Err())
	}
	select {
	case rep := <-r.reply:
		if rep.err != nil {
			rep.err = fmt.Errorf("%s job %s: %w", reqNames[r.kind], p.info.Job, rep.err)
		}
		return rep, rep.err
	case <-ctx.Done():
		return reply{}, fmt.Errorf("%s job %s: %w (the request stands)", reqNames[r.kind], p.info.Job, ctx.Err())
	}
}

func start(ctx context.Context, s Spec) (*Proc, error) {
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("job spec: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.GPUs = slices.Clone(s.GPUs)
	s.Command = slices.Clone(s.Command)
	if s.UserErrorWindow == 0 {
		s.UserErrorWindow = DefaultUserErrorWindow
	}
	if s.StopGrace == 0 {
		s.StopGrace = DefaultStopGrace
	}
	if s.ClientDeadline == 0 {
		s.ClientDeadline = DefaultClientDeadline
	}
	p := &Proc{
		reqs:    make(chan *request),
		inbox:   make(chan inboxItem, 64),
		lease:   make(chan time.Duration, 1),
		done:    make(chan struct{}),
		events:  newEventQueue(),
		started: time.Now(),
		log:     slog.Default().With("job", s.Job, "attempt", s.Attempt),
	}
	l := &loop{p: p, spec: s}
	proc, err := spawn(&l.spec, 1, p.inbox)
	if err != nil {
		return nil, err
	}
	l.gen, l.cur = 1, proc
	p.info = Info{Job: s.Job, Attempt: s.Attempt, PID: proc.pid, State: Running, GPUs: slices.Clone(s.GPUs), Started: p.started}
	l.emit(Event{Kind: EvStarted, PID: proc.pid})
	l.armDeadline()
	go l.run()
	return p, nil
}

// purpose is what an outstanding request waits for.
type purpose uint8

const (
	pSuspend      purpose = iota // Suspended from the client
	pHold                        // the hold at its first boundary that a Hold process does by itself
	pSuspendDisk                 // Saved, then the process's exit
	pResume                      // Resumed from the client
	pMove                        // Saved (or a fall-back kill), exit, then a restart
	pRestartHello                // Hello from the restarted process
	pMigrate                     // Saved (or a fall-back kill), then exit
	pSave                        // Saved
)

type pending struct {
	req     *request
	purpose purpose
	seq     uint64
	saved   *Checkpoint
	from    Mode
	gpus    []int // target of a move
	scratch bool  // a move that restarts without a fresh checkpoint
	waited  bool  // a suspension asked of a process still starting up
	probing bool  // a move waiting for its look at the checkpoint (probe.go)
}

// loop owns all of a Proc's mutable state; only its goroutine touches it.
type loop struct {
	p    *Proc
	spec Spec // GPUs and Restore change on restarts
	cur  *process
	gen  int

	state    State
	mode     Mode
	susp     Suspension
	done     int64
	steps    int64
	client   bool // some process of this Proc said hello
	diskCkpt *Checkpoint
	lastErr  string
	seq      uint64
	pend     *pending
	killReq  bool
	grace    *time.Timer
	graceC   <-chan time.Time
	// start-up (startup.go): the generation whose EvReady was emitted, the
	// Done of the current process's hello, and the client deadline's timer
	readied   int
	helloDone int64
	deadline  *time.Timer
	deadlineC <-chan time.Time
	held      bool   // a Hold process held itself at its first boundary
	abandoned uint64 // a suspend command left to a process found without the client
	unstuck   uint64 // the resume sent to undo it
	// leases (Renew): the latest renewal and when it came, and the
	// generation of the process whose hello asked for them
	leaseFor time.Duration
	leaseAt  time.Time
	leaseGen int
}

func (l *loop) run() {
	for l.state != Exited {
		select {
		case r := <-l.p.reqs:
			l.request(r)
		case it := <-l.p.inbox:
			if it.gen != l.gen {
				continue // a message of a process already replaced
			}
			switch {
			case it.exit != nil:
				l.exited(it.exit)
			case it.probed != nil:
				l.probed(*it.probed)
			default:
				l.message(*it.msg)
			}
		case d := <-l.p.lease:
			l.leaseFor, l.leaseAt = d, time.Now()
			l.sendLease()
		case <-l.deadlineC:
			l.deadlineC = nil
			l.noHello()
		case <-l.graceC:
			l.graceC = nil
			if l.cur != nil {
				l.p.log.Warn("job did not exit after its checkpoint; killing it", "grace", l.spec.StopGrace)
				l.cur.fallback = true
				l.cur.signal(sigKill)
			}
		}
	}
}

func (l *loop) emit(e Event) {
	e.At = time.Now()
	e.Job, e.Attempt = l.spec.Job, l.spec.Attempt
	if e.PID == 0 && l.cur != nil {
		e.PID = l.cur.pid
	}
	if e.Done == 0 {
		e.Done = l.done
	}
	l.p.events.push(e)
}

func (l *loop) sync() {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	i := &l.p.info
	i.State, i.Mode, i.Done, i.Client = l.state, l.mode, l.done, l.client
	i.GPUs = slices.Clone(l.spec.GPUs)
	i.PID = 0
	if l.cur != nil {
		i.PID = l.cur.pid
	}
	i.Busy = ""
	if l.pend != nil {
		i.Busy = reqNames[l.pend.req.kind]
	}
}

// answer replies to the pending request, after publishing the state the
// reply reflects (a caller that reads Info once answered sees it).
func (l *loop) answer(rep reply) {
	if l.pend == nil {
		l.sync()
		return
	}
	ch := l.pend.req.reply
	l.pend = nil
	l.sync()
	ch <- rep
}

func (l *loop) send(m protocol.Msg) error {
	if l.cur == nil || l.cur.conn == nil {
		return fmt.Errorf("no connection to the job")
	}
	l.cur.conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := l.cur.conn.Write(protocol.Encode(m)); err != nil {
		return fmt.Errorf("sending %s to the job: %w", m.Kind, err)
	}
	return nil
}

// sendLease passes the latest renewal on to a client that asked for leases,
// less the time since it came. A client that does not read it within a
// short deadline misses it (it reads leases as they come, so only a job
// gone wrong does): the lease is a bound on how long a job may run on, and
// a missed renewal only makes that shorter.
func (l *loop) sendLease() {
	if l.leaseGen != l.gen || l.leaseAt.IsZero() || l.cur == nil || l.cur.conn == nil {
		return
	}
	left := max(l.leaseFor-time.Since(l.leaseAt), 0)
	l.cur.conn.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
	l.cur.conn.Write(protocol.Encode(protocol.Msg{Kind: protocol.Lease, LeaseSeconds: left.Seconds()}))
}

// command sends a command to the client and makes r pending on it.
func (l *loop) command(r *request, pu purpose, m protocol.Msg) {
	l.seq++
	m.Seq = l.seq
	if err := l.send(m); err != nil {
		r.reply <- reply{err: err}
		return
	}
	l.pend = &pending{req: r, purpose: pu, seq: m.Seq, from: l.mode}
	l.sync()
}

func (l *loop) request(r *request) {
	if r.kind == reqKill {
		l.kill()
		r.reply <- reply{}
		return
	}
	if l.pend != nil {
		r.reply <- reply{err: fmt.Errorf("%w (%s)", ErrBusy, reqNames[l.pend.req.kind])}
		return
	}
	switch r.kind {
	case reqSuspend:
		l.suspend(r)
	case reqResume:
		l.resume(r)
	case reqCheckpoint:
		l.checkpoint(r)
	case reqSave:
		switch {
		case l.cur == nil || !l.cur.client:
			r.reply <- reply{err: ErrNoClient}
		case l.state == Suspended && l.mode == Signal:
			r.reply <- reply{err: fmt.Errorf("%w: stopped by a signal", ErrState)}
		default:
			l.command(r, pSave, protocol.Msg{Kind: protocol.Checkpoint})
		}
	}
}

func (l *loop) suspend(r *request) {
	if l.state == Suspended {
		r.reply <- reply{susp: l.susp}
		return
	}
	if l.cur.attached && (r.opts.Unaligned || r.opts.ToDisk) {
		r.reply <- reply{err: fmt.Errorf("%w: %w: it can only be suspended in memory at a mini-batch boundary", ErrState, errAttached)}
		return
	}
	switch {
	case !r.opts.Unaligned && l.holding():
		// it holds itself at its first boundary (Spec.Hold): that answers
		l.pend = &pending{req: r, purpose: pHold, from: l.mode, waited: true}
		l.sync()
	case !r.opts.Unaligned && !l.cur.client && !l.helloOverdue():
		// still starting up: the command waits in the socket for its client,
		// which carries it out at its first boundary (startup.go)
		l.suspendEarly(r)
	case r.opts.Unaligned || !l.cur.client:
		reason := "unaligned"
		switch {
		case !l.cur.client && l.helloOverdue():
			reason = "no in-job client after " + l.spec.ClientDeadline.String()
			l.readyNoClient()
		case !l.cur.client:
			reason = "unaligned, before the in-job client's hello"
		}
		l.cur.signal(sigStop)
		l.cur.stopped = true
		waitStopped(l.cur.pid, true)
		l.state, l.mode = Suspended, Signal
		l.susp = Suspension{Mode: Signal, Done: l.done, Took: time.Since(r.at), Reason: reason}
		s := l.susp
		l.emit(Event{Kind: EvSuspended, Suspension: &s})
		l.sync()
		r.reply <- reply{susp: s}
	case r.opts.ToDisk:
		l.command(r, pSuspendDisk, protocol.Msg{Kind: protocol.Checkpoint, Exit: true})
	default:
		l.command(r, pSuspend, protocol.Msg{Kind: protocol.Suspend, At: r.opts.At})
	}
}

func (l *loop) resume(r *request) {
	same := slices.Equal(sorted(r.gpus), sorted(l.spec.GPUs))
	if l.state == Running {
		if same {
			r.reply <- reply{res: Resumption{Done: l.done, GPUs: slices.Clone(l.spec.GPUs)}}
		} else {
			r.reply <- reply{err: fmt.Errorf("%w: job is running on GPUs %v; checkpoint it to move it", ErrState, l.spec.GPUs)}
		}
		return
	}
	switch l.mode {
	case Signal:
		l.cur.signal(sigCont)
		l.cur.stopped = false
		waitStopped(l.cur.pid, false)
		switch {
		case same:
			l.state = Running
			res := Resumption{From: Signal, Done: l.done, GPUs: slices.Clone(l.spec.GPUs), Took: time.Since(r.at)}
			l.emit(Event{Kind: EvResumed, Resumption: &res})
			l.sync()
			r.reply <- reply{res: res}
		case l.cur.client:
			l.command(r, pMove, protocol.Msg{Kind: protocol.Checkpoint, Exit: true})
			if l.pend != nil {
				l.pend.gpus = r.gpus
			}
		default:
			l.pend = &pending{req: r, purpose: pMove, from: Signal, gpus: r.gpus, scratch: true}
			l.cur.fallback = true
			l.cur.signal(sigKill)
			l.sync()
		}
	case Memory:
		if same {
			l.command(r, pResume, protocol.Msg{Kind: protocol.Resume})
		} else if l.cur.attached {
			r.reply <- reply{err: fmt.Errorf("%w: %w: its GPUs %v are fixed; move it by a new process", ErrState, errAttached, l.spec.GPUs)}
		} else {
			l.command(r, pMove, protocol.Msg{Kind: protocol.Checkpoint, Exit: true})
			if l.pend != nil {
				l.pend.gpus = r.gpus
			}
		}
	case Disk:
		l.pend = &pending{req: r, purpose: pMove, from: Disk, gpus: r.gpus, saved: l.diskCkpt}
		l.restart()
	}
}

func (l *loop) checkpoint(r *request) {
	switch {
	case l.state == Suspended && l.mode == Disk:
		l.pend = &pending{req: r, purpose: pMigrate, saved: l.diskCkpt}
		l.finish(&Exit{Outcome: Checkpointed, Code: -1, Checkpoint: l.diskCkpt,
			Reason: fmt.Sprintf("checkpointed at mini-batch %d (suspended to disk)", l.diskCkpt.Done)})
	case l.cur.client && l.cur.hooks:
		if l.cur.stopped {
			l.cur.signal(sigCont)
			l.cur.stopped = false
		}
		l.command(r, pMigrate, protocol.Msg{Kind: protocol.Checkpoint, Exit: true})
	case l.cur.attached:
		r.reply <- reply{err: fmt.Errorf("%w: %w: it has no save and load hooks", ErrNoClient, errAttached)}
	default:
		l.pend = &pending{req: r, purpose: pMigrate}
		l.cur.fallback = true
		l.cur.signal(sigKill)
		l.sync()
	}
}

func (l *loop) kill() {
	l.killReq = true
	if l.cur != nil {
		l.cur.signal(sigKill)
		return
	}
	if l.state != Exited { // suspended to disk, or between two processes of a move
		reason := "killed on request while suspended to disk"
		if l.pend != nil && l.pend.probing {
			reason = "killed on request while being moved (between its processes)"
		}
		l.finish(&Exit{Outcome: Killed, Code: -1, Reason: reason})
	}
}

// restart starts a new process for the pending move, from the checkpoint
// directory.
func (l *loop) restart() {
	pe := l.pend
	l.spec.GPUs = slices.Clone(pe.gpus)
	l.spec.Restore = true
	l.spec.Hold = false // only the first process holds itself
	proc, err := spawn(&l.spec, l.gen+1, l.p.inbox)
	if err != nil {
		l.finish(&Exit{Outcome: Failed, Code: -1, Reason: fmt.Sprintf("restarting on GPUs %v: %v", pe.gpus, err)})
		return
	}
	l.gen++
	l.cur = proc
	l.emit(Event{Kind: EvStarted, PID: proc.pid})
	l.armDeadline()
	if l.client {
		pe.purpose = pRestartHello // Resumed once the client has loaded the state
		l.sync()
		return
	}
	l.resumed(Resumption{From: pe.from, Restarted: true, FromScratch: pe.scratch})
}

func (l *loop) resumed(res Resumption) {
	l.state = Running
	res.Done = l.done
	res.GPUs = slices.Clone(l.spec.GPUs)
	res.Took = time.Since(l.pend.req.at)
	l.emit(Event{Kind: EvResumed, Resumption: &res})
	l.answer(reply{res: res})
}

func (l *loop) message(m protocol.Msg) {
	pe := l.pend
	ours := pe != nil && m.Seq != 0 && m.Seq == pe.seq
	switch m.Kind {
	case protocol.Hello:
		l.cur.client, l.cur.hooks = true, m.Hooks
		l.cur.maxDone = m.Done
		l.client = true
		l.done = m.Done
		l.helloDone = m.Done
		l.emit(Event{Kind: EvConnected, Done: m.Done, Load: seconds(m.LoadSeconds)})
		if m.Leases {
			l.leaseGen = l.gen
			l.sendLease()
		}
		if pe != nil && pe.purpose == pRestartHello {
			l.resumed(Resumption{From: pe.from, Restarted: true, FromScratch: pe.scratch, Load: seconds(m.LoadSeconds)})
			return
		}
		l.sync()
	case protocol.Progress:
		l.progress(m.Done)
		l.maybeReady(m.Done)
		e := Event{Kind: EvProgress, Done: m.Done, IterTime: m.IterTime}
		if m.Metric != nil {
			e.Metric, e.HasMetric = *m.Metric, true
		}
		l.emit(e)
		l.sync()
	case protocol.Suspended:
		if m.Seq == 0 && l.spec.Hold && !l.held {
			l.hold(m)
			return
		}
		if !ours && m.Seq != 0 && m.Seq == l.abandoned {
			l.unstick(m.Seq)
			return
		}
		if !ours || pe.purpose != pSuspend {
			l.p.log.Warn("unexpected message from the job", "kind", m.Kind, "seq", m.Seq)
			return
		}
		l.progress(m.Done)
		l.maybeReady(m.Done)
		l.state, l.mode = Suspended, Memory
		l.susp = Suspension{Mode: Memory, Done: m.Done, Bytes: m.Bytes, Released: m.Released,
			Took: time.Since(pe.req.at), Save: seconds(m.SaveSeconds), Waited: pe.waited}
		s := l.susp
		l.emit(Event{Kind: EvSuspended, Suspension: &s})
		l.answer(reply{susp: s})
	case protocol.Resumed:
		if m.Seq != 0 && m.Seq == l.unstuck {
			return // the answer to unstick's resume
		}
		if !ours || pe.purpose != pResume {
			l.p.log.Warn("unexpected message from the job", "kind", m.Kind, "seq", m.Seq)
			return
		}
		l.resumed(Resumption{From: Memory, Load: seconds(m.LoadSeconds)})
	case protocol.Saved:
		l.progress(m.Done)
		c := &Checkpoint{Done: m.Done, Bytes: m.Bytes, Path: m.Path, Save: seconds(m.SaveSeconds)}
		l.emit(Event{Kind: EvSaved, Checkpoint: c})
		if !ours {
			l.sync()
			return
		}
		switch pe.purpose {
		case pSave:
			l.answer(reply{ckpt: *c})
		case pMigrate, pMove, pSuspendDisk:
			pe.saved = c // now wait for the process to exit, within the grace
			l.grace = time.NewTimer(l.spec.StopGrace)
			l.graceC = l.grace.C
		}
	case protocol.Error:
		if m.Seq == 0 && l.spec.Hold && !l.held && l.cur != nil && l.cur.client {
			// the hold at its first boundary failed (its save): the job runs on
			l.held = true
			if pe != nil && pe.purpose == pHold {
				l.answer(reply{err: fmt.Errorf("in-job client: %s", m.Message)})
			}
		}
		if !ours {
			l.lastErr = m.Message
			return
		}
		err := fmt.Errorf("in-job client: %s", m.Message)
		switch pe.purpose {
		case pMigrate, pMove:
			// The job could not save: migration falls back to a restart
			// from its previous checkpoint, if any.
			l.p.log.Warn("job could not save its state; restarting it instead", "err", m.Message)
			pe.scratch = true
			l.cur.fallback = true
			l.cur.signal(sigKill)
		default:
			l.answer(reply{err: err})
		}
	default:
		l.p.log.Warn("unknown message from the job", "kind", m.Kind)
	}
}

func (l *loop) progress(done int64) {
	if l.cur != nil && done > l.cur.maxDone {
		l.steps += done - l.cur.maxDone
		l.cur.maxDone = done
	}
	if done > l.done {
		l.done = done
	}
}

// exited handles the end of the current process.
func (l *loop) exited(pe *procExit) {
	proc := l.cur
	l.cur = nil
	if l.grace != nil {
		l.grace.Stop()
		l.grace, l.graceC = nil, nil
	}
	l.disarmDeadline()
	if pend := l.pend; pend != nil && (pend.purpose == pHold || pend.waited && pend.purpose == pSuspend) {
		// it died starting up: there is nothing to suspend; its exit says why
		l.pend = nil
		pend.req.reply <- reply{err: fmt.Errorf("%w: the job exited during its start-up", ErrExited)}
	}
	code, sig := pe.status()
	pend := l.pend
	intended := proc.fallback || (pend != nil && pend.saved != nil && (code == 0 || sig != "" || pe.disconnected))
	switch {
	case l.killReq && pe.disconnected:
		l.finish(&Exit{Outcome: Killed, Code: -1, Reason: "disconnected on request (attached: the job stops at its next boundary)"})
	case l.killReq:
		l.finish(&Exit{Outcome: Killed, Code: code, Signal: sig, Reason: "killed on request"})
	case pend != nil && pend.purpose == pSuspendDisk && intended:
		l.state, l.mode = Suspended, Disk
		l.diskCkpt = pend.saved
		l.susp = Suspension{Mode: Disk, Done: pend.saved.Done, Bytes: pend.saved.Bytes, Released: true,
			Took: time.Since(pend.req.at), Save: pend.saved.Save}
		s := l.susp
		l.emit(Event{Kind: EvSuspended, Suspension: &s})
		l.answer(reply{susp: s})
	case pend != nil && pend.purpose == pMove && intended:
		if pend.saved == nil {
			l.probe(pend) // then restarts (off this goroutine: the job's files)
			return
		}
		l.restart()
	case pend != nil && pend.purpose == pMigrate && intended:
		e := &Exit{Outcome: Checkpointed, Code: code, Signal: sig, Checkpoint: pend.saved, Restart: pend.saved == nil}
		if e.Restart {
			e.Reason = "stopped without a checkpoint (no in-job client, or its save failed): it restarts from its previous checkpoint or from scratch"
		} else {
			e.Reason = fmt.Sprintf("checkpointed at mini-batch %d", pend.saved.Done)
		}
		l.finish(e)
	case pe.disconnected:
		l.finish(l.disconnectedExit())
	case code == 0 && sig == "":
		reason := "exit status 0"
		if l.spec.PreRun && l.steps > 0 {
			reason = "pre-run passed: the first mini-batch is done"
		}
		l.finish(&Exit{Outcome: Finished, Code: 0, Reason: reason})
	default:
		e := &Exit{Outcome: Failed, Code: code, Signal: sig}
		what := fmt.Sprintf("exit status %d", code)
		if sig != "" {
			what = "killed by signal " + sig
		}
		if pe.err != nil && code == -1 && sig == "" {
			what = pe.err.Error()
		}
		ran := time.Since(proc.started)
		switch {
		case l.client && l.steps == 0:
			e.UserError = true
			what += " before the attempt's first mini-batch"
		case l.client:
			what += fmt.Sprintf(" after at least %d mini-batches (as last reported)", l.steps)
		case ran < l.spec.UserErrorWindow:
			e.UserError = true
			what += fmt.Sprintf(" %.1fs after the start (no in-job client)", ran.Seconds())
		default:
			what += fmt.Sprintf(" %.0fs after the start (no in-job client)", ran.Seconds())
		}
		if l.lastErr != "" {
			what += ": " + l.lastErr
		}
		e.Reason = what
		l.finish(e)
	}
}

func (l *loop) finish(e *Exit) {
	e.Done, e.Steps, e.Client = l.done, l.steps, l.client
	e.Ran = time.Since(l.p.started)
	e.LogTail = logTail(l.spec.LogPath, 4096)
	l.state = Exited
	pend := l.pend
	l.pend = nil
	l.sync()
	l.p.mu.Lock()
	l.p.exit = e // before the event, so that Exit() is set for its reader
	l.p.mu.Unlock()
	l.emit(Event{Kind: EvExited, Exit: e})
	l.p.events.close()
	if pend != nil {
		if pend.purpose == pMigrate && e.Outcome == Checkpointed {
			pend.req.reply <- reply{exit: e}
		} else {
			pend.req.reply <- reply{exit: e, err: fmt.Errorf("%w (%s)", ErrExited, e.Reason)}
		}
	}
	close(l.p.done)
	l.p.log.Debug("job process ended", "outcome", e.Outcome, "reason", e.Reason)
}

// waitStopped waits (at most 100 ms) until the process's state in /proc
// says it is stopped (or no longer stopped), so that a Signal suspension is
// reported once it has taken effect.
func waitStopped(pid int, stopped bool) {
	deadline := time.Now().Add(100 * time.Millisecond)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return // no /proc, or the process is gone
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) {
			return
		}
		st := b[i+2]
		if (st == 'T' || st == 't') == stopped || st == 'Z' || st == 'X' {
			return
		}
		time.Sleep(50 * time.Microsecond)
	}
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func sorted(g []int) []int {
	g = slices.Clone(g)
	slices.Sort(g)
	return g
}

func logTail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	off := st.Size() - n
	if off < 0 {
		off = 0
	}
	b := make([]byte, st.Size()-off)
	k, _ := f.ReadAt(b, off)
	return string(b[:k])
}

// eventQueue is an unbounded queue in front of the Events channel; the loop
// never blocks on it. The forwarding goroutine starts on the first call of
// channel.
type eventQueue struct {
	mu     sync.Mutex
	items  []Event
	closed bool
	wake   chan struct{}
	once   sync.Once
	out    chan Event
}

func newEventQueue() *eventQueue {
	return &eventQueue{wake: make(chan struct{}, 1), out: make(chan Event, 16)}
}

func (q *eventQueue) push(e Event) {
	q.mu.Lock()
	if n := len(q.items); e.Kind == EvProgress && n > 0 && q.items[n-1].Kind == EvProgress {
		q.items[n-1] = e
	} else {
		q.items = append(q.items, e)
	}
	q.mu.Unlock()
	q.notify()
}

func (q *eventQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.notify()
}

func (q *eventQueue) notify() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *eventQueue) channel() <-chan Event {
	q.once.Do(func() { go q.forward() })
	return q.out
}

func (q *eventQueue) forward() {
	for {
		q.mu.Lock()
		if len(q.items) == 0 {
			closed := q.closed
			q.mu.Unlock()
			if closed {
				close(q.out)
				return
			}
			<-q.wake
			continue
		}
		e := q.items[0]
		q.items = q.items[1:]
		q.mu.Unlock()
		q.out <- e
	}
}
