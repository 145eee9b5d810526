package jobproc

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"time"

	"github.com/gandiva-sched/gandiva/client/protocol"
)

// Attached mode: a Proc over a connection that the job's in-job client made
// to the agent, instead of a process the agent started (Kubernetes shared
// mode: the kubelet starts the pod's container, whose client dials the
// agent's socket for that pod). The state machine, the commands and their
// answers are the same; what differs:
//
//   - There is no process to signal or reap. The caller has read the
//     client's Hello (and checked who sent it) before Attach; Attach answers
//     it with a Welcome giving the job its GPUs and, when AttachSpec.Hold is
//     set, the order to hold at its first boundary (a warm start).
//   - The end is the connection closing. How the process ended is not known
//     here (its pod's phase says): Exit.Outcome is Disconnected, or
//     Checkpointed after a Checkpoint request, or Killed after Kill.
//   - Kill closes the connection: the client then stops the job at its next
//     boundary (ErrAgentLost). Nothing is forced.
//   - Unaligned suspensions (SIGSTOP), suspensions to disk and resumptions on
//     other GPUs need a process of the agent's own and return ErrState: a
//     pod's GPUs are fixed; the job moves by a new pod (checkpoint on SIGTERM
//     when the old pod is deleted).
//   - Checkpoint of a job without Save and Load hooks returns ErrNoClient
//     instead of killing it.

// AttachSpec says how to drive an attached job.
type AttachSpec struct {
	// Job names the job in events and logs; Attempt is for them too.
	Job     string
	Attempt int
	// PID is the peer's process id as the kernel gave it (SO_PEERCRED); 0
	// takes the Hello's.
	PID int
	// GPUs are the node-local indices the job may use (sent in the Welcome).
	GPUs []int
	// Hold makes the job hold itself at its first mini-batch boundary until
	// Resume (sent in the Welcome).
	Hold bool
	// StopGrace is how long the job may take to close its connection after
	// the checkpoint of a Checkpoint request before it is disconnected; 0
	// means DefaultStopGrace.
	StopGrace time.Duration
}

// Attach drives the job on the other end of conn, whose Hello the caller
// has read: it answers it with a Welcome and returns the Proc, already
// connected (EvStarted and EvConnected are its first events). The Proc owns
// conn from then on. It fails, closing conn, when hello is not a Hello, a
// GPU index is bad, or the Welcome cannot be written.
func Attach(conn net.Conn, hello protocol.Msg, s AttachSpec) (*Proc, error) {
	fail := func(err error) (*Proc, error) {
		conn.Close()
		return nil, err
	}
	if hello.Kind != protocol.Hello {
		return fail(fmt.Errorf("attaching job %s: the first message is %q, not a hello", s.Job, hello.Kind))
	}
	spec := Spec{Job: s.Job, Attempt: s.Attempt, GPUs: slices.Clone(s.GPUs), Hold: s.Hold, StopGrace: s.StopGrace,
		UserErrorWindow: DefaultUserErrorWindow, ClientDeadline: DefaultClientDeadline}
	if spec.StopGrace <= 0 {
		spec.StopGrace = DefaultStopGrace
	}
	seen := map[int]bool{}
	for _, g := range spec.GPUs {
		if g < 0 || seen[g] {
			return fail(fmt.Errorf("attaching job %s: gpus: bad or repeated device index %d", s.Job, g))
		}
		seen[g] = true
	}
	pid := s.PID
	if pid == 0 {
		pid = hello.PID
	}
	conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write(protocol.Encode(protocol.Msg{Kind: protocol.Welcome, GPUs: spec.GPUs, Hold: spec.Hold})); err != nil {
		return fail(fmt.Errorf("attaching job %s: sending the welcome: %w", s.Job, err))
	}
	conn.SetWriteDeadline(time.Time{})
	p := &Proc{
		reqs:    make(chan *request),
		inbox:   make(chan inboxItem, 64),
		done:    make(chan struct{}),
		events:  newEventQueue(),
		started: time.Now(),
		log:     slog.Default().With("job", s.Job, "attempt", s.Attempt, "attached", true),
	}
	l := &loop{p: p, spec: spec, gen: 1}
	l.cur = &process{pid: pid, conn: conn, started: p.started, attached: true,
		client: true, hooks: hello.Hooks, maxDone: hello.Done}
	l.client, l.done, l.helloDone = true, hello.Done, hello.Done
	p.info = Info{Job: s.Job, Attempt: s.Attempt, PID: pid, State: Running, GPUs: slices.Clone(spec.GPUs),
		Done: hello.Done, Client: true, Started: p.started}
	l.emit(Event{Kind: EvStarted, PID: pid})
	l.emit(Event{Kind: EvConnected, Done: hello.Done, Load: seconds(hello.LoadSeconds)})
	go func() {
		sc := bufio.NewScanner(conn)
		sc.Buffer(make([]byte, 4096), protocol.MaxLine+1)
		for sc.Scan() {
			m, err := protocol.Decode(sc.Bytes())
			if err != nil {
				continue
			}
			if m.Kind == protocol.Hello {
				continue // said once, before Attach
			}
			p.inbox <- inboxItem{gen: 1, msg: &m}
		}
		conn.Close()
		p.inbox <- inboxItem{gen: 1, exit: &procExit{disconnected: true, err: sc.Err()}}
	}()
	go l.run()
	return p, nil
}

// errAttached explains the requests an attached Proc cannot carry out.
var errAttached = errors.New("the job is attached (no process of the agent's own)")

// disconnectedExit is the Exit of an attached job whose connection closed
// by itself.
func (l *loop) disconnectedExit() *Exit {
	e := &Exit{Outcome: Disconnected, Code: -1,
		Reason: "the job closed its connection (attached: its pod's phase says how its process ended)"}
	if l.lastErr != "" {
		e.Reason += "; its last error: " + l.lastErr
	}
	return e
}

// ReadHello reads the first message of a connection made by an in-job
// client, which must be its Hello, before the deadline. It reads byte by
// byte, so that nothing after the Hello is consumed: conn can be handed to
// Attach afterwards.
func ReadHello(conn net.Conn, deadline time.Time) (protocol.Msg, error) {
	conn.SetReadDeadline(deadline)
	defer conn.SetReadDeadline(time.Time{})
	var line []byte
	b := make([]byte, 1)
	for {
		n, err := conn.Read(b)
		if n == 1 {
			if b[0] == '\n' {
				break
			}
			line = append(line, b[0])
			if len(line) > protocol.MaxLine {
				return protocol.Msg{}, fmt.Errorf("reading the hello: a line longer than %d bytes", protocol.MaxLine)
			}
			continue
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return protocol.Msg{}, fmt.Errorf("no hello from the in-job client in time: %w", err)
		}
		if err != nil {
			return protocol.Msg{}, fmt.Errorf("reading the hello: %w", err)
		}
	}
	m, err := protocol.Decode(line)
	if err != nil {
		return m, fmt.Errorf("reading the hello: %w", err)
	}
	if m.Kind != protocol.Hello {
		return m, fmt.Errorf("reading the hello: the first message is %q", m.Kind)
	}
	return m, nil
}
