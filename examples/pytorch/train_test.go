// Tests of examples/pytorch/train.py and ddp.py. The scripts always get a
// syntax check; running them needs a Python with torch
// (torchtest.Python: GANDIVA_TORCH_PYTHON, else /usr/bin/python3, Debian's
// python3-torch), and those tests skip without one, or fail under CI=true.
package pytorch_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gandiva-sched/gandiva/internal/agent/jobproc"
	"github.com/gandiva-sched/gandiva/internal/torchtest"
)

func TestScriptCompiles(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed")
	}
	for _, script := range []string{"train.py", "ddp.py"} {
		cmd := exec.Command(py, "-c", "import ast,sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])", script)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s does not parse: %v\n%s", script, err, out)
		}
	}
}

func trainArgs(steps string) []string {
	return []string{"--model", "tiny", "--device", "cpu", "--image-size", "32", "--batch", "4", "--classes", "10",
		"--steps", steps, "--deterministic", "--out", "result.json"}
}

func resultChecksum(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "result.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r struct{ Checksum string }
	json.Unmarshal(b, &r)
	return r.Checksum
}

// train.py under jobproc, on the CPU: suspended to host memory and resumed
// through the PyTorch hooks, then migrated (torch.save, a new process,
// torch.load); the final weights are bit-identical to an uninterrupted run.
func TestTrainSuspendMigrateOnCPU(t *testing.T) {
	py := torchtest.Python(t)
	script, _ := filepath.Abs("train.py")
	base := t.TempDir()
	ref := filepath.Join(base, "ref")
	for _, d := range []string{ref, filepath.Join(base, "n1"), filepath.Join(base, "n2")} {
		if err := os.MkdirAll(d, 0o755); err != nil { // jobproc never makes a job's work_dir
			t.Fatal(err)
		}
	}
	cmd := exec.Command(py, append([]string{script}, trainArgs("40")...)...)
	cmd.Dir = ref
	cmd.Env = append(os.Environ(), "GANDIVA_FD=", "PYTHONDONTWRITEBYTECODE=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("uninterrupted run: %v\n%s", err, out)
	}
	want := resultChecksum(t, ref)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	spec := func(n string, restore bool) jobproc.Spec {
		return jobproc.Spec{
			Job: "pytorch", Attempt: 1, Command: append([]string{py, script}, trainArgs("40")...),
			Env:     map[string]string{"PYTHONDONTWRITEBYTECODE": "1"},
			WorkDir: filepath.Join(base, n), CheckpointDir: filepath.Join(base, "ckpt"),
			LogPath: filepath.Join(base, n, "log"), Restore: restore, ReportEvery: 10 * time.Millisecond,
		}
	}
	waitDone := func(p *jobproc.Proc, n int64) {
		for p.Info().Done < n {
			select {
			case <-p.Done():
				t.Fatalf("job ended: %+v", p.Exit())
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	p, err := jobproc.Start(ctx, spec("n1", false))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	waitDone(p, 5)
	s, err := p.Suspend(ctx, jobproc.SuspendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Mode != jobproc.Memory || !s.Released || s.Bytes == 0 {
		t.Fatalf("suspension %+v", s)
	}
	if _, err := p.Resume(ctx, nil); err != nil {
		t.Fatal(err)
	}
	waitDone(p, s.Done+5)
	e, err := p.Checkpoint(ctx)
	if err != nil || e.Checkpoint == nil {
		t.Fatalf("checkpoint: %+v %v", e, err)
	}
	p2, err := jobproc.Start(ctx, spec("n2", true))
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Kill()
	e2, err := p2.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if e2.Outcome != jobproc.Finished || e2.Steps != 40-e.Checkpoint.Done {
		t.Fatalf("restored run: %+v", e2)
	}
	log, _ := os.ReadFile(filepath.Join(base, "n1", "log"))
	if !strings.Contains(string(log), "moved") {
		t.Errorf("no suspension line in the log:\n%s", log)
	}
	if got := resultChecksum(t, filepath.Join(base, "n2")); got != want {
		t.Fatalf("weights checksum %s after suspend and migration, uninterrupted %s", got, want)
	}
}
