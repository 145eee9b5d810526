package jobproc

import (
	"time"

	"github.com/gandiva-sched/gandiva/client/protocol"
)

// A process's start-up: from its launch to its first mini-batch boundary
// (PyTorch on an H100: 12.8 s to the client's hello, 37 s to the first
// boundary). The loop reports its end (EvReady) once per process: at the
// first progress report past the mini-batches it restored, or, when it
// says no hello within Spec.ClientDeadline, at the deadline with NoClient.
//
// A suspension is never turned into a SIGSTOP because the job's framework
// is slow to start. Asked of a process that has not said hello yet, the
// Suspend command (At 1: the first boundary, whatever it restored) is
// written to the socket at once, where it waits for the client, which reads
// it when it connects and carries it out at its first boundary. Only after
// the deadline does Suspend fall back to SIGSTOP; a process that says hello
// even later, stopped by a suspension it then carries out, is resumed.
//
// A warm start (Spec.Hold) does not depend on the command's timing: the
// agent sets GANDIVA_HOLD=1 and the client holds the job at its first
// boundary by itself (a Suspended with Seq 0), as if the command had come
// with the process; a Suspend asked meanwhile waits for that hold (pHold).

// armDeadline starts the current process's client deadline.
func (l *loop) armDeadline() {
	l.disarmDeadline()
	l.helloDone = 0
	l.deadline = time.NewTimer(l.spec.ClientDeadline)
	l.deadlineC = l.deadline.C
}

func (l *loop) disarmDeadline() {
	if l.deadline != nil {
		l.deadline.Stop()
		l.deadline, l.deadlineC = nil, nil
	}
}

// helloOverdue reports whether the current process has missed its
// client deadline without a hello.
func (l *loop) helloOverdue() bool {
	return l.cur != nil && !l.cur.client && time.Since(l.cur.started) >= l.spec.ClientDeadline
}

// holding reports whether the current process will hold itself at its
// first boundary (Spec.Hold) and has not yet: a suspension waits for it.
func (l *loop) holding() bool {
	return l.spec.Hold && !l.held && l.gen == 1 && l.state == Running && !l.helloOverdue()
}

// suspendEarly sends the Suspend of a process that has not said hello:
// its client carries it out at its first boundary.
func (l *loop) suspendEarly(r *request) {
	l.command(r, pSuspend, protocol.Msg{Kind: protocol.Suspend, At: 1})
	if l.pend != nil {
		l.pend.waited = true
	}
}

// hold handles a Hold process's Suspended with Seq 0: it holds itself at
// its first boundary; a suspension asked meanwhile is answered.
func (l *loop) hold(m protocol.Msg) {
	l.held = true
	l.progress(m.Done)
	l.maybeReady(m.Done)
	l.state, l.mode = Suspended, Memory
	l.susp = Suspension{Mode: Memory, Done: m.Done, Bytes: m.Bytes, Released: m.Released, Save: seconds(m.SaveSeconds), Waited: true}
	if pe := l.pend; pe != nil && pe.purpose == pHold {
		l.susp.Took = time.Since(pe.req.at)
	}
	s := l.susp
	l.emit(Event{Kind: EvSuspended, Suspension: &s})
	if pe := l.pend; pe != nil && pe.purpose == pHold {
		l.answer(reply{susp: s})
		return
	}
	l.sync()
}

// noHello handles a client deadline passed: a process that said no hello
// is ready (it has no client), and a suspension waiting for it stops it
// with SIGSTOP; a command already sent is left, to be undone (unstick) if
// the process ever carries it out.
func (l *loop) noHello() {
	if l.cur == nil || l.cur.client {
		return
	}
	l.readyNoClient()
	pe := l.pend
	if pe == nil || !(pe.purpose == pHold || pe.waited && pe.purpose == pSuspend) {
		return
	}
	if pe.purpose == pSuspend {
		l.abandoned = pe.seq
	}
	l.pend = nil
	l.suspend(pe.req)
}

// readyNoClient emits the EvReady (NoClient) of a current process past
// its client deadline without a hello, once: at the deadline, or first
// thing when a suspension finds the deadline passed before the timer's
// turn came (so that EvReady always precedes the SIGSTOP's EvSuspended).
func (l *loop) readyNoClient() {
	if l.readied == l.gen {
		return
	}
	l.readied = l.gen
	l.emit(Event{Kind: EvReady, StartUp: time.Since(l.cur.started), NoClient: true})
}

// unstick resumes a process that carried out a suspend command abandoned
// at its client deadline: it is stopped by a signal already, or running.
func (l *loop) unstick(seq uint64) {
	l.abandoned = 0
	l.seq++
	l.unstuck = l.seq
	if err := l.send(protocol.Msg{Kind: protocol.Resume, Seq: l.seq}); err != nil {
		l.p.log.Warn("could not resume a job held by a late suspension", "err", err)
	}
}

// maybeReady emits the current process's EvReady once it reports its
// first mini-batch past those it restored.
func (l *loop) maybeReady(done int64) {
	if l.cur == nil || l.readied == l.gen || done <= l.helloDone {
		return
	}
	l.readied = l.gen
	l.emit(Event{Kind: EvReady, StartUp: time.Since(l.cur.started), Done: done})
}
