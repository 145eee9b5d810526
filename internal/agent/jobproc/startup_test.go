package jobproc

import (
	"path/filepath"
	"testing"
	"time"
)

// startUpSuspended suspends a process at once after its launch, while it is
// still starting up (startup before its hello, firstBatch in its first
// mini-batch): the suspension waits for the hello and stops the process at
// its first boundary, in memory, never by SIGSTOP; EvReady reports the
// start-up; a resume goes on to the uninterrupted run's checksum.
func startUpSuspended(t *testing.T, s Spec, a trainerArgs, startup time.Duration) {
	p := launch(t, s)
	events := p.Events()
	sus, err := p.Suspend(ctxT(t, 30*time.Second), SuspendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sus.Mode != Memory || !sus.Waited || sus.Done != 1 || sus.Reason != "" {
		t.Fatalf("suspension during the start-up: %+v, want one in memory at the first boundary (done 1) that waited for the hello", sus)
	}
	var ready *Event
	for ev := range events {
		if ev.Kind == EvReady {
			e := ev
			ready = &e
		}
		if ev.Kind == EvSuspended {
			break
		}
	}
	if ready == nil || ready.NoClient || ready.StartUp < startup || ready.Done != 1 {
		t.Fatalf("ready event %+v, want one at mini-batch 1 after at least %s", ready, startup)
	}
	time.Sleep(50 * time.Millisecond)
	if d := p.Info().Done; d != 1 {
		t.Fatalf("progressed while held at its first boundary: done %d", d)
	}
	if _, err := p.Resume(ctxT(t, 10*time.Second), s.GPUs); err != nil {
		t.Fatal(err)
	}
	go func() {
		for range events {
		}
	}()
	e := wait(t, p)
	wantFinished(t, e, int64(a.steps))
	if got, want := checksum(t, s), expect(t, a.seed, a.dim, a.steps); got != want {
		t.Fatalf("checksum %s, want %s", got, want)
	}
}

func TestSuspendDuringStartUp(t *testing.T) {
	t.Parallel()
	a := trainerArgs{seed: 31, dim: 64, steps: 40}
	root := t.TempDir()
	s := node(root, filepath.Join(root, "ckpt"), a, time.Millisecond, "-startup", "300ms", "-first-batch", "200ms")
	startUpSuspended(t, s, a, 500*time.Millisecond)
}

// The same with the Python trainer, which sleeps before it even imports
// the client.
func TestSuspendDuringStartUpPython(t *testing.T) {
	t.Parallel()
	a := trainerArgs{seed: 33, dim: 64, steps: 40}
	root := t.TempDir()
	s := pyNode(t, root, filepath.Join(root, "ckpt"), a, time.Millisecond, "--startup", "500ms")
	startUpSuspended(t, s, a, 500*time.Millisecond)
}

// A process that says no hello within the client deadline is ready
// (NoClient) at the deadline, and a suspension waiting for it falls back to
// SIGSTOP then.
func TestClientDeadline(t *testing.T) {
	t.Parallel()
	a := trainerArgs{seed: 35, dim: 64, steps: 2000}
	root := t.TempDir()
	s := node(root, filepath.Join(root, "ckpt"), a, time.Millisecond, "-no-client")
	s.ClientDeadline = 200 * time.Millisecond
	p := launch(t, s)
	events := p.Events()
	sus, err := p.Suspend(ctxT(t, 10*time.Second), SuspendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sus.Mode != Signal || sus.Reason != "no in-job client after 200ms" {
		t.Fatalf("suspension %+v", sus)
	}
	for ev := range events {
		if ev.Kind == EvReady {
			if !ev.NoClient || ev.StartUp < 200*time.Millisecond {
				t.Fatalf("ready %+v", ev)
			}
			break
		}
		if ev.Kind == EvSuspended {
			t.Fatal("suspended before it was found to lack the client")
		}
	}
	go func() {
		for range events {
		}
	}()
}

// holdAndResume launches s as a warm start (Hold) of a job whose mini-batches
// take no time: it holds itself at its first boundary, however fast, and a
// suspension asked at once waits for that hold; a resume then finishes it.
func holdAndResume(t *testing.T, s Spec, a trainerArgs) {
	s.Hold = true
	p := launch(t, s)
	go func() {
		for range p.Events() {
		}
	}()
	sus, err := p.Suspend(ctxT(t, 30*time.Second), SuspendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sus.Mode != Memory || !sus.Waited || sus.Done != 1 {
		t.Fatalf("warm start: %+v, want held in memory at its first boundary", sus)
	}
	time.Sleep(50 * time.Millisecond)
	if d := p.Info().Done; d != 1 {
		t.Fatalf("ran on to mini-batch %d while held", d)
	}
	if _, err := p.Resume(ctxT(t, 10*time.Second), s.GPUs); err != nil {
		t.Fatal(err)
	}
	wantFinished(t, wait(t, p), int64(a.steps))
	if got, want := checksum(t, s), expect(t, a.seed, a.dim, a.steps); got != want {
		t.Fatalf("checksum %s, want %s", got, want)
	}
}

func TestHold(t *testing.T) {
	t.Parallel()
	a := trainerArgs{seed: 37, dim: 64, steps: 30}
	root := t.TempDir()
	holdAndResume(t, node(root, filepath.Join(root, "ckpt"), a, 0), a)
}

func TestHoldPython(t *testing.T) {
	t.Parallel()
	a := trainerArgs{seed: 39, dim: 64, steps: 30}
	root := t.TempDir()
	holdAndResume(t, pyNode(t, root, filepath.Join(root, "ckpt"), a, 0), a)
}
