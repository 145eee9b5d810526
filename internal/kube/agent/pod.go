package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/gandiva-sched/gandiva/client/protocol"
	"github.com/gandiva-sched/gandiva/internal/agent/jobproc"
	"github.com/gandiva-sched/gandiva/internal/kube/shared"
)

type agent struct {
	cs  kubernetes.Interface
	o   Options
	log *slog.Logger

	mu   sync.Mutex
	pods map[types.UID]*pod
}

// update handles a pod of this node as the informer saw it.
func (a *agent) update(ctx context.Context, obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok || p.Spec.NodeName != a.o.Node {
		return
	}
	if _, isShared := p.Annotations[shared.AnnGPUs]; !isShared || p.Spec.SchedulerName != shared.SchedulerName {
		return // not a shared pod Gandiva placed: not the agent's
	}
	terminal := p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	a.mu.Lock()
	st := a.pods[p.UID]
	switch {
	case st == nil && terminal:
		a.mu.Unlock()
		return
	case st != nil && terminal:
		delete(a.pods, p.UID)
		a.mu.Unlock()
		st.stop(true)
		return
	case st == nil:
		var err error
		if st, err = newPod(ctx, a, p); err != nil {
			a.mu.Unlock()
			a.log.Error("cannot serve a shared pod", "pod", p.Namespace+"/"+p.Name, "err", err)
			a.event(ctx, p, "SocketFailed", err.Error())
			return
		}
		a.pods[p.UID] = st
	}
	a.mu.Unlock()
	st.set(p)
}

// gone handles a pod deleted from the API server.
func (a *agent) gone(uid types.UID) {
	a.mu.Lock()
	st := a.pods[uid]
	delete(a.pods, uid)
	a.mu.Unlock()
	if st != nil {
		st.stop(true)
	}
}

// event records a Warning Event on the pod (best effort: a failure is logged).
func (a *agent) event(ctx context.Context, p *corev1.Pod, reason, msg string) {
	now := metav1.NewTime(time.Now())
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace,
			Name: p.Name + "." + strconv.FormatInt(time.Now().UnixNano(), 16)},
		InvolvedObject: corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID},
		Reason:         reason, Message: msg, Type: corev1.EventTypeWarning,
		Source:         corev1.EventSource{Component: "gandiva-agent", Host: a.o.Node},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
		ReportingController: "gandiva.io/agent", ReportingInstance: a.o.Node,
	}
	if _, err := a.cs.CoreV1().Events(p.Namespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil && ctx.Err() == nil {
		a.log.Warn("recording an event", "pod", p.Namespace+"/"+p.Name, "reason", reason, "err", err)
	}
}

// pod serves one shared pod: its socket and its attached job. It is three
// parts: what it is and how it is reached (podSetup, fixed at creation),
// what its job reported (podProgress, guarded by mu), and the state its
// goroutine (run) owns (podRun).
type pod struct {
	podSetup
	podProgress
	podRun
}

// podSetup is fixed when the pod's server is made.
type podSetup struct {
	a      *agent
	uid    types.UID
	ns     string
	name   string
	dir    string
	ln     net.Listener
	ctx    context.Context
	cancel context.CancelFunc
	log    *slog.Logger
	conns  chan attachReq
	wake   chan struct{}
	ended  chan struct{}
}

// podProgress is the pod as last seen and its job's progress, from the
// Proc's events; mu guards it.
type podProgress struct {
	mu       sync.Mutex
	obj      *corev1.Pod
	removeIt bool // remove the socket's directory when stopped (the pod is gone)
	done     int64
	lastDone int64
	iterSum  float64
	iterN    int64
	ready    bool
}

// podRun is owned by the pod's goroutine (run).
type podRun struct {
	assign    *shared.Assign
	badAssign string // the last bad value reported
	proc      *jobproc.Proc
	gpus      []int // the GPUs the attached job was welcomed with
	carried   int64
	state     string
	failed    string // the error of a Failed status; for good unless soft
	soft      bool   // failed only for want of a good assignment yet
	busy      bool
	results   chan result
	waiting   *attachReq
	helloed   bool
	deadline  *time.Timer
	published *shared.Status
	lastPub   time.Time
}

type attachReq struct {
	conn  net.Conn
	hello protocol.Msg
	pid   int
}

type result struct {
	gen   int64
	state string
	done  int64 // where the job stopped or continued
	err   error
}

func newPod(ctx context.Context, a *agent, p *corev1.Pod) (*pod, error) {
	dir := filepath.Join(a.o.SocketDir, string(p.UID))
	// The directory outlives the agent (the pod's container has it
	// mounted); the socket file does not.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("socket directory: %w", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, fmt.Errorf("socket directory: %w", err)
	}
	sock := filepath.Join(dir, shared.SocketName)
	if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("removing an old socket: %w", err)
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return nil, fmt.Errorf("socket: %w", err)
	}
	// the job may run as any user: the directory, mounted into this pod
	// only, is what keeps others out
	if err := os.Chmod(sock, 0o666); err != nil {
		ln.Close()
		return nil, fmt.Errorf("socket: %w", err)
	}
	pctx, cancel := context.WithCancel(ctx)
	st := &pod{podSetup: podSetup{a: a, uid: p.UID, ns: p.Namespace, name: p.Name, dir: dir, ln: ln, ctx: pctx, cancel: cancel,
		log:   a.log.With("pod", p.Namespace+"/"+p.Name),
		conns: make(chan attachReq), wake: make(chan struct{}, 1), ended: make(chan struct{})},
		podProgress: podProgress{obj: p},
		podRun:      podRun{results: make(chan result, 1), state: shared.Starting}}
	if v, ok := p.Annotations[shared.AnnStatus]; ok {
		// an agent restarted: generations never go backwards
		if s, err := shared.ParseStatus(v); err == nil {
			st.carried = s.Gen
			st.published = &s
		}
	}
	go st.accept()
	go st.run()
	return st, nil
}

// set gives the goroutine the pod's latest object.
func (p *pod) set(obj *corev1.Pod) {
	p.mu.Lock()
	p.obj = obj
	p.mu.Unlock()
	p.poke()
}

func (p *pod) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// stop ends the pod's goroutines; remove also removes its socket directory
// (the pod is gone). It waits for run to finish.
func (p *pod) stop(remove bool) {
	p.mu.Lock()
	p.removeIt = remove
	p.mu.Unlock()
	p.cancel()
	<-p.ended
}

func (p *pod) accept() {
	for {
		conn, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		go p.handshake(conn)
	}
}

// handshake checks who connected and hands the connection to run.
func (p *pod) handshake(conn net.Conn) {
	pid, err := peerPID(conn)
	if err == nil {
		err = p.a.o.PeerCheck(pid, p.uid)
	}
	if err != nil {
		p.refuse(conn, fmt.Sprintf("peer check: %v", err))
		return
	}
	hello, err := jobproc.ReadHello(conn, time.Now().Add(p.a.o.HelloTimeout))
	if err != nil {
		p.refuse(conn, err.Error())
		return
	}
	if want := p.ns + "/" + p.name; hello.PodUID != string(p.uid) || hello.Pod != want {
		p.refuse(conn, fmt.Sprintf("the hello names pod %q (UID %q), but this socket is pod %s's (UID %s)",
			hello.Pod, hello.PodUID, want, p.uid))
		return
	}
	select {
	case p.conns <- attachReq{conn: conn, hello: hello, pid: pid}:
	case <-p.ctx.Done():
		conn.Close()
	}
}

// refuse answers a connection with an Error and closes it, and says so on
// the pod.
func (p *pod) refuse(conn net.Conn, why string) {
	conn.SetWriteDeadline(time.Now().Add(time.Second))
	conn.Write(protocol.Encode(protocol.Msg{Kind: protocol.Error, Message: "refused: " + why}))
	conn.Close()
	p.log.Warn("refused a connection", "why", why)
	p.mu.Lock()
	obj := p.obj
	p.mu.Unlock()
	p.a.event(p.ctx, obj, "Refused", "gandiva agent refused a connection to this pod's socket: "+why)
}

func (p *pod) run() {
	defer close(p.ended)
	tick := time.NewTicker(p.a.o.ReportEvery)
	defer tick.Stop()
	var procDone <-chan struct{}
	defer func() {
		p.ln.Close()
		if p.proc != nil {
			p.proc.Kill() // (disconnects: the agent is going away)
		}
		if p.waiting != nil {
			p.waiting.conn.Close()
		}
		if p.deadline != nil {
			p.deadline.Stop()
		}
		p.mu.Lock()
		remove := p.removeIt
		p.mu.Unlock()
		if remove {
			os.RemoveAll(p.dir)
		} else {
			os.Remove(filepath.Join(p.dir, shared.SocketName))
		}
	}()
	if p.published == nil {
		p.publish(true)
	}
	for {
		var deadlineC <-chan time.Time
		if p.deadline != nil {
			deadlineC = p.deadline.C
		}
		select {
		case <-p.ctx.Done():
			return
		case <-p.wake:
			p.observe()
		case r := <-p.conns:
			p.connected(r)
		case r := <-p.results:
			p.busy = false
			p.finished(r)
		case <-procDone:
			p.log.Info("the job's connection closed", "exit", p.proc.Exit().Reason)
			p.proc, procDone = nil, nil
			p.publish(true) // its last progress
		case <-deadlineC:
			p.deadline = nil
			if !p.helloed && (p.failed == "" || p.soft) {
				p.soft = false
				p.fail("NoClient", fmt.Sprintf("no hello from the pod's in-job client within %s of the pod running "+
					"(the job must use the Gandiva client, and the pod mount its socket: see deploy/examples/shared-job.yaml)", p.a.o.ClientDeadline))
			}
		case <-tick.C:
		}
		if p.proc != nil && procDone == nil {
			procDone = p.proc.Done()
		}
		p.step()
		p.publish(false)
	}
}

// observe reads the pod's latest object: its assignment and its phase.
func (p *pod) observe() {
	p.mu.Lock()
	obj := p.obj
	p.mu.Unlock()
	if p.deadline == nil && !p.helloed && (p.failed == "" || p.soft) && obj.Status.Phase == corev1.PodRunning && obj.DeletionTimestamp == nil {
		p.deadline = time.NewTimer(p.a.o.ClientDeadline)
	}
	v, ok := obj.Annotations[shared.AnnAssign]
	if !ok {
		return
	}
	a, err := shared.ParseAssign(v)
	if err == nil {
		// (the admission policies let only the scheduler write the
		// annotation; what asks for other GPUs than the pod does is not
		// its, and is not carried out)
		err = a.ForPod(obj.Annotations[shared.AnnGPUs])
	}
	if err != nil {
		if v != p.badAssign {
			p.badAssign = v
			p.a.event(p.ctx, obj, "BadAssign", err.Error())
			p.log.Warn("bad assignment", "err", err)
		}
		if p.assign == nil && (p.failed == "" || p.soft) {
			// nothing to carry out yet: the pod cannot start (until a
			// good assignment comes)
			p.failed, p.soft = err.Error(), true
			p.state = shared.Failed
		}
		return
	}
	if p.assign != nil && a.Gen < p.assign.Gen {
		p.log.Warn("ignoring an older assignment", "gen", a.Gen, "have", p.assign.Gen)
		return
	}
	if p.soft {
		// a good assignment after a bad one, before anything ran: start over
		p.failed, p.soft, p.state = "", false, shared.Starting
	}
	p.assign = &a
	if p.waiting != nil && p.failed == "" {
		r := *p.waiting
		p.waiting = nil
		p.attach(r)
	}
}

// connected handles a checked connection from the pod's client.
func (p *pod) connected(r attachReq) {
	switch {
	case p.failed != "" && !p.soft:
		p.refuse(r.conn, "the pod is reported failed: "+p.failed)
	case p.proc != nil:
		p.refuse(r.conn, fmt.Sprintf("the pod already has a connected process (pid %d): one in-job client per pod", p.proc.Info().PID))
	case p.waiting != nil:
		p.refuse(r.conn, fmt.Sprintf("the pod already has a process waiting for its assignment (pid %d)", p.waiting.pid))
	case p.assign == nil:
		p.waiting = &r // welcomed once the scheduler's assignment is there
	default:
		p.attach(r)
	}
}

func (p *pod) attach(r attachReq) {
	a := p.assign
	proc, err := jobproc.Attach(r.conn, r.hello, jobproc.AttachSpec{Job: p.ns + "/" + p.name, PID: r.pid,
		GPUs: a.GPUs, Hold: a.State == shared.Suspended})
	if err != nil {
		p.log.Warn("attaching", "err", err)
		return
	}
	p.log.Info("attached", "pid", r.pid, "gpus", a.GPUs, "state", a.State, "gen", a.Gen)
	p.proc, p.gpus, p.helloed = proc, slices.Clone(a.GPUs), true
	if p.deadline != nil {
		p.deadline.Stop()
		p.deadline = nil
	}
	p.state = shared.Starting
	p.mu.Lock()
	p.done, p.lastDone, p.iterSum, p.iterN = r.hello.Done, r.hello.Done, 0, 0
	p.ready = false
	p.mu.Unlock()
	go p.events(proc)
}

// events folds the Proc's events into the progress fields.
func (p *pod) events(proc *jobproc.Proc) {
	for ev := range proc.Events() {
		p.mu.Lock()
		switch ev.Kind {
		case jobproc.EvProgress:
			if d := ev.Done - p.lastDone; d > 0 && ev.IterTime > 0 {
				p.iterSum += ev.IterTime * float64(d)
				p.iterN += d
			}
			p.lastDone = ev.Done
		case jobproc.EvReady:
			if !p.ready {
				p.ready = true
			}
		}
		if ev.Done > p.done {
			p.done = ev.Done
		}
		p.mu.Unlock()
		if ev.Kind == jobproc.EvReady {
			p.poke()
		}
	}
}

// step carries out the assignment when the job's state differs from it.
func (p *pod) step() {
	if p.proc == nil || p.busy || p.assign == nil || p.failed != "" {
		return
	}
	a := *p.assign
	if !shared.Equal(a.GPUs, p.gpus) {
		p.carried = max(p.carried, a.Gen)
		p.fail("GPUsChanged", fmt.Sprintf("gpus changed from %v to %v; move the job by a new pod", p.gpus, a.GPUs))
		return
	}
	info := p.proc.Info()
	proc := p.proc
	switch {
	case info.State == jobproc.Exited:
	case a.State == shared.Running && info.State == jobproc.Suspended:
		p.busy = true
		go func() {
			res, err := proc.Resume(p.ctx, a.GPUs)
			p.results <- result{gen: a.Gen, state: shared.StatusRunning, done: res.Done, err: err}
		}()
	case a.State == shared.Suspended && info.State == jobproc.Running:
		p.busy = true
		go func() {
			sus, err := proc.Suspend(p.ctx, jobproc.SuspendOptions{})
			p.results <- result{gen: a.Gen, state: shared.StatusSuspended, done: sus.Done, err: err}
		}()
	default:
		p.carried = max(p.carried, a.Gen)
		p.state = a.State
	}
}

// finished takes a suspension's or resumption's result.
func (p *pod) finished(r result) {
	switch {
	case r.err == nil:
		p.carried = max(p.carried, r.gen)
		p.state = r.state
		p.mu.Lock()
		p.done = max(p.done, r.done) // (its events may not have been read yet)
		p.mu.Unlock()
		p.log.Info("carried out", "gen", r.gen, "state", r.state)
	case errors.Is(r.err, jobproc.ErrExited) || p.ctx.Err() != nil:
		// the job ended first: its pod's phase says how
	default:
		p.fail("AssignFailed", fmt.Sprintf("carrying out generation %d (%s): %v", r.gen, r.state, r.err))
	}
}

// fail reports the pod Failed (for good) with a Warning Event.
func (p *pod) fail(reason, msg string) {
	p.failed, p.state = msg, shared.Failed
	p.log.Warn("pod failed", "reason", reason, "err", msg)
	p.mu.Lock()
	obj := p.obj
	p.mu.Unlock()
	p.a.event(p.ctx, obj, reason, msg)
}

// publish writes the status annotation when it changed in anything but
// progress, or, with progress only, every ReportEvery; force writes it.
func (p *pod) publish(force bool) {
	p.mu.Lock()
	s := shared.Status{Gen: p.carried, State: p.state, Done: p.done, Ready: p.ready, Error: p.failed}
	iterSum, iterN := p.iterSum, p.iterN
	p.mu.Unlock()
	if p.state != shared.Starting || p.proc != nil {
		s.GPUs = slices.Clone(p.gpus)
	}
	old := p.published
	urgent := force || old == nil || old.Gen != s.Gen || old.State != s.State || old.Ready != s.Ready ||
		old.Error != s.Error || !shared.Equal(old.GPUs, s.GPUs)
	progressed := old != nil && old.Done != s.Done && time.Since(p.lastPub) >= p.a.o.ReportEvery
	if !urgent && !progressed {
		return
	}
	if iterN > 0 {
		s.IterTime = iterSum / float64(iterN)
	} else if old != nil && s.Done == old.Done {
		s.IterTime = old.IterTime
	}
	s.At = time.Now().UTC().Truncate(time.Millisecond)
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{shared.AnnStatus: s.String()}}})
	if err != nil {
		p.log.Error("encoding the status", "err", err)
		return
	}
	_, err = p.a.cs.CoreV1().Pods(p.ns).Patch(p.ctx, p.name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: "gandiva-agent"})
	if err != nil {
		if p.ctx.Err() == nil {
			p.log.Warn("writing the status (retried at the next report)", "err", err)
		}
		return
	}
	p.published, p.lastPub = &s, time.Now()
	p.mu.Lock()
	p.iterSum, p.iterN = 0, 0
	p.mu.Unlock()
}
