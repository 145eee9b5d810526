package jobproc

import "github.com/gandiva-sched/gandiva/client/protocol"

// A move of a job whose process could not save its state (no in-job
// client, or its save failed) restarts it from the checkpoint already in
// its directory, if there is one: the agent looks (Resumption.FromScratch
// says what it found). That directory is the job's, and the agent may be
// root: the look is protocol.ProbeCheckpoint (no link followed, no FIFO
// or device opened, bounded, nothing created, no lock waited for), and it
// runs on a goroutine of its own, so that no file of the job's can hold up
// the loop: a Kill meanwhile ends the Proc at once.

// probe looks at the checkpoint directory for pe, a move whose process
// has exited, and restarts it once the answer comes back (probed).
func (l *loop) probe(pe *pending) {
	pe.probing = true
	l.sync()
	dir, gen, inbox, done := l.spec.CheckpointDir, l.gen, l.p.inbox, l.p.done
	go func() {
		ok := hasCheckpoint(dir)
		select {
		case inbox <- inboxItem{gen: gen, probed: &ok}:
		case <-done: // killed meanwhile: nobody waits for the answer
		}
	}()
}

// probed restarts the move that waited for the probe, if it still does.
func (l *loop) probed(found bool) {
	pe := l.pend
	if pe == nil || !pe.probing || l.cur != nil {
		return
	}
	pe.probing = false
	pe.scratch = !found
	l.restart()
}

// hasCheckpoint reports whether dir holds a committed checkpoint whose
// payload is there, looking as protocol.ProbeCheckpoint does.
func hasCheckpoint(dir string) bool {
	_, err := probeCheckpoint(dir)
	return err == nil
}

// probeCheckpoint is protocol.ProbeCheckpoint (a test stands a look that
// never returns in for it: a hung file system).
var probeCheckpoint = protocol.ProbeCheckpoint
