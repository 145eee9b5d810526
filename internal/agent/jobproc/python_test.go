package jobproc

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// pyTrainer returns the command line of examples/python/trainer.py, or skips
// the test where python3 is missing.
func pyTrainer(t *testing.T, a trainerArgs, stepTime time.Duration, extra ...string) []string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed")
	}
	script, err := filepath.Abs("../../../examples/python/trainer.py")
	if err != nil {
		t.Fatal(err)
	}
	cmd := []string{py, script, "--out", "result.json", "--step-time", stepTime.String()}
	return append(append(cmd, a.flags()...), extra...)
}

func pyNode(t *testing.T, root, ckpt string, a trainerArgs, stepTime time.Duration, extra ...string) Spec {
	s := node(root, ckpt, a, stepTime)
	s.Command = pyTrainer(t, a, stepTime, extra...)
	s.Env = map[string]string{"PYTHONDONTWRITEBYTECODE": "1"}
	return s
}

// The Python trainer under jobproc: suspended and resumed in memory, then
// migrated to another node; its checksum is the Go trainer's.
func TestPythonTrainer(t *testing.T) {
	t.Parallel()
	a := trainerArgs{seed: 21, dim: 64, steps: 120}
	base := t.TempDir()
	ckpt := filepath.Join(base, "ckpt")
	s1 := pyNode(t, filepath.Join(base, "n1"), ckpt, a, 2*time.Millisecond)
	p1 := launch(t, s1)
	for _, at := range []int64{10, 30} {
		waitDone(t, p1, at)
		sus, err := p1.Suspend(ctxT(t, 10*time.Second), SuspendOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if sus.Mode != Memory || !sus.Released || sus.Bytes != 8*(4+64) {
			t.Fatalf("suspension %+v", sus)
		}
		time.Sleep(20 * time.Millisecond)
		if d := p1.Info().Done; d != sus.Done {
			t.Fatalf("progressed while suspended: %d -> %d", sus.Done, d)
		}
		if _, err := p1.Resume(ctxT(t, 10*time.Second), []int{0}); err != nil {
			t.Fatal(err)
		}
	}
	waitDone(t, p1, 50)
	e, err := p1.Checkpoint(ctxT(t, 10*time.Second))
	if err != nil || e.Outcome != Checkpointed || e.Checkpoint == nil {
		t.Fatalf("checkpoint: %+v %v", e, err)
	}
	s2 := pyNode(t, filepath.Join(base, "n2"), ckpt, a, 2*time.Millisecond)
	s2.Restore, s2.GPUs = true, []int{1}
	e2 := wait(t, launch(t, s2))
	wantFinished(t, e2, 120)
	if got, want := checksum(t, s2), expect(t, 21, 64, 120); got != want {
		t.Fatalf("Python checksum %s after suspensions and a migration, Go trainer's %s", got, want)
	}
}

// A job migrates from the Go trainer to the Python one: the checkpoint
// format is the same in both clients.
func TestCheckpointFormatIsShared(t *testing.T) {
	t.Parallel()
	a := trainerArgs{seed: 23, dim: 48, steps: 80}
	base := t.TempDir()
	ckpt := filepath.Join(base, "ckpt")
	p1 := launch(t, node(filepath.Join(base, "go"), ckpt, a, 2*time.Millisecond))
	waitDone(t, p1, 20)
	if _, err := p1.Checkpoint(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	s2 := pyNode(t, filepath.Join(base, "py"), ckpt, a, 0)
	s2.Restore = true
	wantFinished(t, wait(t, launch(t, s2)), 80)
	if got, want := checksum(t, s2), expect(t, 23, 48, 80); got != want {
		t.Fatalf("checksum %s, want %s", got, want)
	}
}

// An exception before the first mini-batch is a user error, and the
// client's exception hook names it.
func TestPythonExceptionIsReported(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	s := pyNode(t, root, filepath.Join(root, "ckpt"), trainerArgs{1, 8, 20}, 0, "--raise-at", "0")
	e := wait(t, launch(t, s))
	if e.Outcome != Failed || e.Code != 1 || !e.UserError || !e.Client ||
		!strings.Contains(e.Reason, "before the attempt's first mini-batch: ValueError: injected exception before mini-batch 0") {
		t.Fatalf("exit %+v", e)
	}
	if !strings.Contains(e.LogTail, "Traceback") {
		t.Errorf("log tail lacks the traceback: %q", e.LogTail)
	}
	// After progress: not a user error, and the count is exact (the hook
	// reports progress before the error).
	s = pyNode(t, t.TempDir(), filepath.Join(root, "ckpt2"), trainerArgs{1, 8, 20}, 0, "--raise-at", "7")
	e = wait(t, launch(t, s))
	if e.Outcome != Failed || e.UserError || e.Done != 7 {
		t.Fatalf("exit %+v", e)
	}
}

func TestPythonPreRun(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	s := pyNode(t, root, filepath.Join(root, "ckpt"), trainerArgs{1, 8, 1000}, time.Millisecond)
	s.PreRun = true
	if e := wait(t, launch(t, s)); e.Outcome != Finished || e.Steps != 1 || !strings.HasPrefix(e.Reason, "pre-run passed") {
		t.Fatalf("pre-run exit %+v", e)
	}
}
