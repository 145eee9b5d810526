package jobproc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gandiva-sched/gandiva/client/protocol"
)

// trainerBin is the deterministic trainer (examples/trainer), built once.
var trainerBin string

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		helperAgent()
		return
	}
	dir, err := os.MkdirTemp("", "jobproc-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	trainerBin = filepath.Join(dir, "trainer")
	if err := buildTrainer(trainerBin); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func buildTrainer(out string) error {
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	b, err := exec.Command(gobin, "build", "-o", out, "github.com/gandiva-sched/gandiva/examples/trainer").CombinedOutput()
	if err != nil {
		return fmt.Errorf("building the trainer: %v\n%s", err, b)
	}
	return nil
}

var (
	expectMu sync.Mutex
	expected = map[string]string{}
)

// expect returns the checksum of an uninterrupted standalone run.
func expect(t *testing.T, seed, dim, steps int) string {
	t.Helper()
	key := fmt.Sprint(seed, dim, steps)
	expectMu.Lock()
	defer expectMu.Unlock()
	if s, ok := expected[key]; ok {
		return s
	}
	cmd := exec.Command(trainerBin, "-steps", fmt.Sprint(steps), "-dim", fmt.Sprint(dim), "-seed", fmt.Sprint(seed), "-step-time", "0")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")} // no GANDIVA_*: standalone
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("uninterrupted run: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	last := lines[len(lines)-1]
	sum, ok := strings.CutPrefix(strings.Fields(last)[0], "checksum=")
	if !ok {
		t.Fatalf("uninterrupted run printed %q", last)
	}
	expected[key] = sum
	return sum
}

type trainerArgs struct{ seed, dim, steps int }

func (a trainerArgs) flags() []string {
	return []string{"-seed", fmt.Sprint(a.seed), "-dim", fmt.Sprint(a.dim), "-steps", fmt.Sprint(a.steps)}
}

// node returns a Spec for the trainer in node directory root (work and log
// under it) with the shared checkpoint directory ckpt.
func node(root, ckpt string, a trainerArgs, stepTime time.Duration, extra ...string) Spec {
	cmd := append([]string{trainerBin, "-out", "result.json", "-step-time", stepTime.String()}, a.flags()...)
	os.MkdirAll(filepath.Join(root, "work"), 0o755) // (Start never creates a working directory)
	return Spec{
		Job: "job-1", Attempt: 1,
		Command:       append(cmd, extra...),
		WorkDir:       filepath.Join(root, "work"),
		CheckpointDir: ckpt,
		LogPath:       filepath.Join(root, "logs", "job-1.log"),
		GPUs:          []int{0},
		ReportEvery:   10 * time.Millisecond,
	}
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func launch(t *testing.T, s Spec) *Proc {
	t.Helper()
	p, err := Start(ctxT(t, 5*time.Second), s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Kill()
		p.Wait(context.Background())
	})
	return p
}

func wait(t *testing.T, p *Proc) *Exit {
	t.Helper()
	e, err := p.Wait(ctxT(t, 60*time.Second))
	if err != nil {
		t.Fatalf("waiting for the job: %v", err)
	}
	return e
}

// waitDone waits until the job has reported at least n mini-batches.
func waitDone(t *testing.T, p *Proc, n int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for p.Info().Done < n {
		if time.Now().After(deadline) {
			t.Fatalf("job reported %d mini-batches after 30s, want %d", p.Info().Done, n)
		}
		select {
		case <-p.Done():
			t.Fatalf("job ended before %d mini-batches: %+v", n, p.Exit())
		case <-time.After(2 * time.Millisecond):
		}
	}
}

func checksum(t *testing.T, s Spec) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.WorkDir, "result.json"))
	if err != nil {
		t.Fatalf("no result: %v", err)
	}
	var r struct{ Checksum string }
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r.Checksum
}

func wantFinished(t *testing.T, e *Exit, steps int64) {
	t.Helper()
	if e.Outcome != Finished || e.Code != 0 || e.Done != steps {
		t.Fatalf("exit %v code %d done %d (%s), want finished with %d mini-batches\n%s", e.Outcome, e.Code, e.Done, e.Reason, steps, e.LogTail)
	}
}

func TestUninterrupted(t *testing.T) {
	t.Parallel()
	a := trainerArgs{seed: 3, dim: 64, steps: 40}
	root := t.TempDir()
	s := node(root, filepath.Join(root, "ckpt"), a, time.Millisecond)
	p := launch(t, s)
	var kinds []EventKind
	for ev := range p.Events() {
		if ev.Job != "job-1" || ev.Attempt != 1 {
			t.Errorf("event %v for job %q attempt %d", ev.Kind, ev.Job, ev.Attempt)
		}
		if len(kinds) == 0 || kinds[len(kinds)-1] != ev.Kind {
			kinds = append(kinds, ev.Kind)
		}
	}
	if got := fmt.Sprint(kinds); got != "[started connected ready progress exited]" {
		t.Errorf("events %s", got)
	}
	e := wait(t, p)
	wantFinished(t, e, 40)
	if !e.Client || e.Steps != 40 || e.UserError {
		t.Errorf("exit %+v", e)
	}
	if got, want := checksum(t, s), expect(t, 3, 64, 40); got != want {
		t.Fatalf("checksum %s, want %s", got, want)
	}
	log, _ := os.ReadFile(s.LogPath)
	if !strings.Contains(string(log), "=== gandiva: job job-1 attempt 1: starting") || !strings.Contains(string(log), "checksum=") {
		t.Errorf("log lacks the header or the job's output:\n%s", log)
	}
}

func TestSuspendResumeKeepsChecksum(t *testing.T) {
	t.Parallel()
	a := trainerArgs{seed: 5, dim: 256, steps: 1200}
	root := t.TempDir()
	s := node(root, filepath.Join(root, "ckpt"), a, 3*time.Millisecond)
	p := launch(t, s)
	for i, at := range []int64{10, 40, 80} {
		waitDone(t, p, at)
		sus, err := p.Suspend(ctxT(t, 10*time.Second), SuspendOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if sus.Mode != Memory || !sus.Released || sus.Bytes != 8*(4+256) || sus.Done < at {
			t.Fatalf("suspension %d: %+v", i, sus)
		}
		if p.Info().State != Suspended {
			t.Fatalf("state %v", p.Info().State)
		}
		// Suspending again is a no-op that returns the same suspension.
		if again, err := p.Suspend(ctxT(t, time.Second), SuspendOptions{}); err != nil || again.Done != sus.Done {
			t.Fatalf("second suspend: %+v %v", again, err)
		}
		time.Sleep(30 * time.Millisecond) // ten mini-batches' time: none may happen
		if d := p.Info().Done; d != sus.Done {
			t.Fatalf("job progressed while suspended: %d -> %d", sus.Done, d)
		}
		res, err := p.Resume(ctxT(t, 10*time.Second), []int{0})
		if err != nil {
			t.Fatal(err)
		}
		if res.Restarted || res.From != Memory || res.Done != sus.Done {
			t.Fatalf("resumption %d: %+v", i, res)
		}
	}
	wantFinished(t, wait(t, p), int64(a.steps))
	if got, want := checksum(t, s), expect(t, a.seed, a.dim, a.steps); got != want {
		t.Fatalf("checksum %s after suspensions, want %s", got, want)
	}
}

// Migration: checkpoint on one node, restore on another node's directories
// (same shared checkpoint directory), on other GPUs.
func TestMigrateKeepsChecksum(t *testing.T) {
	t.Parallel()
	a := trainerArgs{seed: 9, dim: 128, steps: 90}
	base := t.TempDir()
	ckpt := filepath.Join(base, "shared", "ckpt")
	s1 := node(filepath.Join(base, "node1"), ckpt, a, 2*time.Millisecond)
	p1 := launch(t, s1)
	waitDone(t, p1, 30)
	e, err := p1.Checkpoint(ctxT(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if e.Outcome != Checkpointed || e.Restart || e.Checkpoint == nil || e.Checkpoint.Done < 30 || e.Checkpoint.Bytes != 8*(4+128) {
		t.Fatalf("checkpoint exit %+v", e)
	}
	if _, err := os.Stat(filepath.Join(s1.WorkDir, "result.json")); err == nil {
		t.Fatal("the migrated job finished on the first node")
	}
	// Checkpoint is idempotent once done.
	if e2, err := p1.Checkpoint(ctxT(t, time.Second)); err != nil || e2 != e {
		t.Fatalf("second checkpoint: %v %v", e2, err)
	}
	s2 := node(filepath.Join(base, "node2"), ckpt, a, 2*time.Millisecond)
	s2.Attempt, s2.Restore, s2.GPUs = 1, true, []int{1}
	p2 := launch(t, s2)
	var connected int64 = -1
	for ev := range p2.Events() {
		if ev.Kind == EvConnected {
			connected = ev.Done
		}
	}
	if connected != e.Checkpoint.Done {
		t.Fatalf("restored at %d, checkpoint at %d", connected, e.Checkpoint.Done)
	}
	e2 := wait(t, p2)
	wantFinished(t, e2, 90)
	if e2.Steps != 90-e.Checkpoint.Done {
		t.Errorf("second node did %d mini-batches, want %d", e2.Steps, 90-e.Checkpoint.Done)
	}
	if got, want := checksum(t, s2), expect(t, 9, 128, 90); got != want {
		t.Fatalf("checksum %s after migration, want %s", got, want)
	}
}

func TestResumeElsewhereAndToDisk(t *testing.T) {
	t.Parallel()
	a := trainerArgs{seed: 11, dim: 64, steps: 1000}
	root := t.TempDir()
	s := node(root, filepath.Join(root, "ckpt"), a, 2*time.Millisecond)
	p := launch(t, s)
	waitDone(t, p, 20)
	if _, err := p.Suspend(ctxT(t, 10*time.Second), SuspendOptions{}); err != nil {
		t.Fatal(err)
	}
	pid := p.Info().PID
	res, err := p.Resume(ctxT(t, 10*time.Second), []int{2, 3})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Restarted || res.FromScratch || res.From != Memory || fmt.Sprint(res.GPUs) != "[2 3]" {
		t.Fatalf("resume on other GPUs: %+v", res)
	}
	if p.Info().PID == pid {
		t.Fatal("resume on other GPUs kept the process")
	}
	waitDone(t, p, 50)
	sus, err := p.Suspend(ctxT(t, 10*time.Second), SuspendOptions{ToDisk: true})
	if err != nil {
		t.Fatal(err)
	}
	if sus.Mode != Disk || p.Info().PID != 0 || sus.Bytes != 8*(4+64) {
		t.Fatalf("suspend to disk: %+v, pid %d", sus, p.Info().PID)
	}
	if _, err := p.Resume(ctxT(t, 10*time.Second), []int{1}); err != nil {
		t.Fatal(err)
	}
	wantFinished(t, wait(t, p), int64(a.steps))
	if got, want := checksum(t, s), expect(t, a.seed, a.dim, a.steps); got != want {
		t.Fatalf("checksum %s, want %s", got, want)
	}
}

func TestSaveAndPeriodicCheckpointsSurviveNodeLoss(t *testing.T) {
	t.Parallel()
	a := trainerArgs{seed: 13, dim: 64, steps: 1500}
	base := t.TempDir()
	ckpt := filepath.Join(base, "ckpt")
	s := node(filepath.Join(base, "n1"), ckpt, a, 2*time.Millisecond)
	s.CheckpointEvery = 40 * time.Millisecond
	p := launch(t, s)
	waitDone(t, p, 10)
	c, err := p.Save(ctxT(t, 10*time.Second))
	if err != nil || c.Done < 10 {
		t.Fatalf("save: %+v %v", c, err)
	}
	waitDone(t, p, 60)
	// The node dies: the process is killed without warning.
	p.Kill()
	e := wait(t, p)
	if e.Outcome != Killed {
		t.Fatalf("exit %+v", e)
	}
	meta, f, err := protocol.ReadCheckpoint(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if meta.Done <= c.Done {
		t.Fatalf("no periodic checkpoint after the explicit one at %d (last at %d)", c.Done, meta.Done)
	}
	s2 := node(filepath.Join(base, "n2"), ckpt, a, time.Millisecond)
	s2.Attempt, s2.Restore = 2, true
	p2 := launch(t, s2)
	e2 := wait(t, p2)
	wantFinished(t, e2, int64(a.steps))
	if e2.Steps != int64(a.steps)-meta.Done {
		t.Errorf("restarted job did %d mini-batches from checkpoint %d", e2.Steps, meta.Done)
	}
	if got, want := checksum(t, s2), expect(t, a.seed, a.dim, a.steps); got != want {
		t.Fatalf("checksum %s, want %s", got, want)
	}
}

func procState(pid int) byte {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return 0
	}
	return s[i+2]
}

func waitProcState(t *testing.T, pid int, want func(byte) bool, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !want(procState(pid)) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d is in state %q, want %s", pid, procState(pid), what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestNoClientFallsBackToSignalsAndRestart(t *testing.T) {
	t.Parallel()
	a := trainerArgs{seed: 17, dim: 64, steps: 150}
	base := t.TempDir()
	ckpt := filepath.Join(base, "ckpt")
	s := node(filepath.Join(base, "n1"), ckpt, a, 2*time.Millisecond, "-no-client")
	s.ClientDeadline = 20 * time.Millisecond // no hello by then: no client
	p := launch(t, s)
	time.Sleep(50 * time.Millisecond)
	sus, err := p.Suspend(ctxT(t, 5*time.Second), SuspendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sus.Mode != Signal || sus.Reason != "no in-job client after 20ms" || sus.Released {
		t.Fatalf("suspension %+v", sus)
	}
	pid := p.Info().PID
	waitProcState(t, pid, func(c byte) bool { return c == 'T' }, "stopped")
	if _, err := p.Resume(ctxT(t, 5*time.Second), []int{0}); err != nil {
		t.Fatal(err)
	}
	waitProcState(t, pid, func(c byte) bool { return c != 'T' && c != 0 }, "running")
	// Migration without the client is a restart from scratch.
	e, err := p.Checkpoint(ctxT(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if e.Outcome != Checkpointed || !e.Restart || e.Checkpoint != nil || e.Client {
		t.Fatalf("exit %+v", e)
	}
	s2 := node(filepath.Join(base, "n2"), ckpt, a, time.Millisecond, "-no-client")
	s2.Restore = true
	p2 := launch(t, s2)
	e2 := wait(t, p2)
	if e2.Outcome != Finished || e2.Client || e2.Done != 0 {
		t.Fatalf("exit %+v", e2)
	}
	if got, want := checksum(t, s2), expect(t, 17, 64, 150); got != want {
		t.Fatalf("checksum %s, want %s", got, want)
	}
	// Suspended by signal and resumed elsewhere: a restart from scratch.
	s3 := node(filepath.Join(base, "n3"), filepath.Join(base, "ckpt3"), a, time.Millisecond, "-no-client")
	s3.ClientDeadline = 20 * time.Millisecond // the suspension waits this long for a hello
	p3 := launch(t, s3)
	if _, err := p3.Suspend(ctxT(t, 5*time.Second), SuspendOptions{}); err != nil {
		t.Fatal(err)
	}
	res, err := p3.Resume(ctxT(t, 5*time.Second), []int{1})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Restarted || !res.FromScratch || res.From != Signal {
		t.Fatalf("resumption %+v", res)
	}
	if e := wait(t, p3); e.Outcome != Finished || checksum(t, s3) != expect(t, 17, 64, 150) {
		t.Fatalf("exit %+v", e)
	}
}

func TestUnalignedSuspendOfClientJob(t *testing.T) {
	t.Parallel()
	a := trainerArgs{seed: 19, dim: 64, steps: 800}
	root := t.TempDir()
	s := node(root, filepath.Join(root, "ckpt"), a, 2*time.Millisecond)
	p := launch(t, s)
	waitDone(t, p, 10)
	sus, err := p.Suspend(ctxT(t, 5*time.Second), SuspendOptions{Unaligned: true})
	if err != nil || sus.Mode != Signal || sus.Reason != "unaligned" {
		t.Fatalf("suspension %+v %v", sus, err)
	}
	waitProcState(t, p.Info().PID, func(c byte) bool { return c == 'T' }, "stopped")
	// A checkpoint of a stopped client job continues it to its boundary.
	if _, err := p.Resume(ctxT(t, 5*time.Second), []int{0}); err != nil {
		t.Fatal(err)
	}
	wantFinished(t, wait(t, p), int64(a.steps))
	if got, want := checksum(t, s), expect(t, a.seed, a.dim, a.steps); got != want {
		t.Fatalf("checksum %s, want %s", got, want)
	}
}

func TestKill(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	s := node(root, filepath.Join(root, "ckpt"), trainerArgs{1, 8, 100000}, 10*time.Millisecond)
	p := launch(t, s)
	waitDone(t, p, 1)
	pid := p.Info().PID
	p.Kill()
	e := wait(t, p)
	if e.Outcome != Killed || e.Signal != "killed" || e.UserError {
		t.Fatalf("exit %+v", e)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("process %d still exists after Kill: %v", pid, err)
	}
	if _, err := p.Suspend(ctxT(t, time.Second), SuspendOptions{}); !errors.Is(err, ErrExited) {
		t.Fatalf("suspend after exit: %v", err)
	}
	p.Kill() // no-op
}

func TestExitsAndUserErrors(t *testing.T) {
	t.Parallel()
	a := trainerArgs{seed: 1, dim: 8, steps: 50}
	cases := []struct {
		name      string
		cmd       []string
		window    time.Duration
		code      int
		signal    string
		userError bool
		reason    string
	}{
		{"client, before first mini-batch", []string{"-fail-at", "0"}, 0, 3, "", true, "exit status 3 before the attempt's first mini-batch"},
		// The client reports the first mini-batch at once and later ones
		// every ReportEvery, so the count last reported is 1 to 5.
		{"client, after progress", []string{"-fail-at", "5"}, 0, 3, "", false, `exit status 3 after at least [1-5] mini-batches \(as last reported\)`},
		{"no client, early", []string{"sh", "-c", "echo bad input >&2; exit 7"}, 0, 7, "", true, "exit status 7 "},
		{"no client, late", []string{"sh", "-c", "sleep 0.1; exit 7"}, time.Millisecond, 7, "", false, "exit status 7 "},
		{"signal", []string{"sh", "-c", "kill -SEGV $$"}, 0, -1, "segmentation fault", true, "killed by signal segmentation fault"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			s := node(root, filepath.Join(root, "ckpt"), a, time.Millisecond)
			if c.cmd[0] == "sh" {
				s.Command = c.cmd
			} else {
				s.Command = append(s.Command, c.cmd...)
			}
			s.UserErrorWindow = c.window
			e := wait(t, launch(t, s))
			if e.Outcome != Failed || e.Code != c.code || e.Signal != c.signal || e.UserError != c.userError || !regexp.MustCompile(c.reason).MatchString(e.Reason) {
				t.Fatalf("exit %v code %d signal %q user error %v reason %q; want code %d signal %q user error %v reason ~%q",
					e.Outcome, e.Code, e.Signal, e.UserError, e.Reason, c.code, c.signal, c.userError, c.reason)
			}
		})
	}
	t.Run("tail", func(t *testing.T) {
		root := t.TempDir()
		s := node(root, filepath.Join(root, "ckpt"), a, 0)
		s.Command = []string{"sh", "-c", "echo bad input >&2; exit 7"}
		if e := wait(t, launch(t, s)); !strings.Contains(e.LogTail, "bad input") {
			t.Fatalf("log tail %q", e.LogTail)
		}
	})
}

func TestStartErrors(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	good := node(root, filepath.Join(root, "ckpt"), trainerArgs{1, 8, 5}, 0)
	for _, c := range []struct {
		mod  func(*Spec)
		want string
	}{
		{func(s *Spec) { s.Job = "" }, "job: required"},
		{func(s *Spec) { s.Command = nil }, "command: required"},
		{func(s *Spec) { s.WorkDir = "" }, "work_dir: required"},
		{func(s *Spec) { s.CheckpointDir = "" }, "checkpoint_dir: required"},
		{func(s *Spec) { s.LogPath = "" }, "log_path: required"},
		{func(s *Spec) { s.GPUs = []int{1, 1} }, "gpus: bad or repeated device index 1"},
		{func(s *Spec) { s.Env = map[string]string{"GANDIVA_FD": "9"} }, "env: GANDIVA_FD is set by the agent"},
		{func(s *Spec) { s.Env = map[string]string{"CUDA_VISIBLE_DEVICES": "0"} }, "env: CUDA_VISIBLE_DEVICES"},
		{func(s *Spec) { s.Rank, s.WorldSize = 2, 2 }, "rank: 2 is outside world size 2"},
		{func(s *Spec) { s.Command = []string{"/nonexistent/program"} }, `starting "/nonexistent/program"`},
		{func(s *Spec) { s.LogPath = "/proc/nope/x.log" }, "log_path:"},
		{func(s *Spec) { s.WorkDir = filepath.Join(root, "missing") }, "work_dir: " + filepath.Join(root, "missing") + ": stat"},
	} {
		s := good
		c.mod(&s)
		p, err := Start(context.Background(), s)
		if err == nil {
			p.Kill()
			t.Errorf("Start succeeded, want %q", c.want)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %q, want %q", err, c.want)
		}
	}
	// A working directory that does not exist is the job's error, and is
	// not created.
	s := good
	s.WorkDir = filepath.Join(root, "missing")
	_, err := Start(context.Background(), s)
	var se *StartError
	if !errors.As(err, &se) || !se.UserError || se.Field != "work_dir" {
		t.Errorf("a missing working directory: %#v, want a user error naming work_dir", err)
	}
	if _, err := os.Stat(s.WorkDir); !os.IsNotExist(err) {
		t.Errorf("the missing working directory was created")
	}
}

func TestEnvironment(t *testing.T) {
	t.Setenv("GANDIVA_AGENT_TOKEN", "secret")
	t.Setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
	root := t.TempDir()
	s := node(root, "rel-ckpt", trainerArgs{1, 8, 5}, 0)
	s.Command = []string{"sh", "-c", "env > env.txt; pwd >> env.txt; ls -l /proc/self/fd/3 >> env.txt 2>&1"}
	s.GPUs = []int{3, 1}
	s.Env = map[string]string{"FOO": "bar"}
	s.Rank, s.WorldSize, s.MasterAddr, s.MasterPort = 1, 2, "10.0.0.1", 29500
	s.CheckpointEvery = 1500 * time.Millisecond
	s.Restore = true
	t.Chdir(root)
	if e := wait(t, launch(t, s)); e.Outcome != Finished {
		t.Fatalf("exit %+v", e)
	}
	b, err := os.ReadFile(filepath.Join(s.WorkDir, "env.txt"))
	if err != nil {
		t.Fatal(err)
	}
	env := string(b)
	for _, want := range []string{
		"\nCUDA_VISIBLE_DEVICES=3,1\n", "\nGANDIVA_GPUS=3,1\n", "\nGANDIVA_FD=3\n", "\nGANDIVA_JOB=job-1\n",
		"\nGANDIVA_ATTEMPT=1\n", "\nGANDIVA_CHECKPOINT_DIR=" + filepath.Join(root, "rel-ckpt") + "\n",
		"\nGANDIVA_RESTORE=1\n", "\nGANDIVA_CHECKPOINT_EVERY=1.5\n", "\nGANDIVA_REPORT_EVERY=0.01\n",
		"\nFOO=bar\n", "\nRANK=1\n", "\nWORLD_SIZE=2\n", "\nMASTER_ADDR=10.0.0.1\n", "\nMASTER_PORT=29500\n",
		"\n" + s.WorkDir + "\n", "socket:",
	} {
		if !strings.Contains("\n"+env, want) {
			t.Errorf("job environment lacks %q", strings.TrimSpace(want))
		}
	}
	if strings.Contains(env, "secret") || strings.Contains(env, "0,1,2,3") {
		t.Errorf("the agent's GANDIVA_* or CUDA_VISIBLE_DEVICES leaked into the job:\n%s", env)
	}
}

func TestBusyAndContextEnds(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	s := node(root, filepath.Join(root, "ckpt"), trainerArgs{1, 8, 30}, 300*time.Millisecond)
	p := launch(t, s)
	waitDone(t, p, 1)
	// The boundary is up to 300 ms away: a 10 ms wait ends first, but the
	// request stands and the job still suspends.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := p.Suspend(ctx, SuspendOptions{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("suspend with a short deadline: %v", err)
	}
	if _, err := p.Suspend(ctxT(t, time.Second), SuspendOptions{}); !errors.Is(err, ErrBusy) {
		t.Fatalf("second request while one is pending: %v", err)
	}
	for ev := range p.Events() {
		if ev.Kind == EvSuspended {
			break
		}
	}
	if p.Info().State != Suspended {
		t.Fatalf("state %v", p.Info().State)
	}
	if _, err := p.Resume(ctxT(t, time.Second), []int{5}); err != nil {
		t.Fatal(err) // a restart on GPU 5
	}
	if _, err := p.Resume(ctxT(t, time.Second), []int{0}); !errors.Is(err, ErrState) {
		t.Fatalf("resume of a running job onto other GPUs: %v", err)
	}
	p.Kill()
}

// helperEnv makes the test binary act as an agent that starts a long job
// and then waits to be killed.
const helperEnv = "JOBPROC_TEST_HELPER_AGENT"

// helperCmdEnv, when set, is the shell command of the helper agent's job.
const helperCmdEnv = "JOBPROC_TEST_HELPER_CMD"

func helperAgent() {
	dir := os.Getenv(helperEnv)
	command := []string{"sleep", "600"}
	if c := os.Getenv(helperCmdEnv); c != "" {
		command = []string{"sh", "-c", c}
	}
	p, err := Start(context.Background(), Spec{
		Job: "orphan", Command: command,
		WorkDir: dir, CheckpointDir: dir, LogPath: filepath.Join(dir, "log"),
	})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println(p.Info().PID)
	select {}
}

// When the agent dies, its jobs die with it: a job must never run on a node
// the server believes lost.
func TestJobDiesWithAgent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	agent := exec.Command(self)
	agent.Env = append(os.Environ(), helperEnv+"="+dir)
	out, err := agent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Fscan(out, &pid); err != nil || pid <= 0 {
		agent.Process.Kill()
		t.Fatalf("helper agent: pid %d, %v", pid, err)
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("job %d is not running: %v", pid, err)
	}
	agent.Process.Signal(syscall.SIGKILL)
	agent.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(pid, 0) == nil && procState(pid) != 'Z' {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("job %d survived its agent", pid)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Any sequence of suspensions (in memory, to disk, by signal), resumptions
// (in place, on other GPUs), checkpoints and migrations to another node ends
// with the checksum of the uninterrupted run.
func TestRandomSequencesKeepChecksum(t *testing.T) {
	t.Parallel()
	for trial := 0; trial < 4; trial++ {
		t.Run(fmt.Sprint("seed=", trial), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(trial), 99))
			a := trainerArgs{seed: 100 + trial, dim: 32 + r.IntN(200), steps: 200}
			base := t.TempDir()
			ckpt := filepath.Join(base, "ckpt")
			nodes := 0
			newNode := func(restore bool) (*Proc, Spec) {
				nodes++
				s := node(filepath.Join(base, fmt.Sprint("node", nodes)), ckpt, a, time.Millisecond)
				s.Attempt, s.Restore = nodes, restore
				return launch(t, s), s
			}
			p, s := newNode(false)
			var ops []string
			gpus := []int{0}
			for len(ops) < 8 {
				select {
				case <-p.Done():
				case <-time.After(time.Duration(r.IntN(15)) * time.Millisecond):
				}
				if p.Exit() != nil {
					break
				}
				ctx := ctxT(t, 10*time.Second)
				var err error
				switch op := r.IntN(6); op {
				case 0, 1, 2:
					o := SuspendOptions{Unaligned: op == 1, ToDisk: op == 2}
					if _, err = p.Suspend(ctx, o); err != nil {
						break
					}
					if r.IntN(2) == 0 {
						gpus = []int{r.IntN(4)}
					}
					_, err = p.Resume(ctx, gpus)
					ops = append(ops, fmt.Sprintf("suspend%+v+resume%v", o, gpus))
				case 3:
					// A restarted job may not have said hello yet: a save
					// then finds no client, which is right. Once the hello
					// came (it is never taken back), the save must work.
					hello := p.Info().Client
					_, err = p.Save(ctx)
					if !hello && errors.Is(err, ErrNoClient) {
						ops = append(ops, "save-before-hello")
						err = nil
						break
					}
					ops = append(ops, "save")
				default:
					var e *Exit
					if e, err = p.Checkpoint(ctx); err == nil {
						// Before the client's hello the job is killed
						// and restarts from its previous checkpoint (the
						// hello may still arrive while it dies, so Client
						// can be set on such an exit).
						if e.Outcome != Checkpointed || e.Restart != (e.Checkpoint == nil) {
							t.Fatalf("checkpoint: %+v", e)
						}
						p, s = newNode(true)
						if e.Restart {
							ops = append(ops, "migrate-by-restart")
						} else {
							ops = append(ops, fmt.Sprintf("migrate@%d", e.Checkpoint.Done))
						}
					}
				}
				if errors.Is(err, ErrExited) && p.Exit().Outcome == Finished {
					break // the job finished at that boundary
				}
				if err != nil {
					t.Fatalf("after %v: %v", ops, err)
				}
			}
			wantFinished(t, wait(t, p), int64(a.steps))
			if got, want := checksum(t, s), expect(t, a.seed, a.dim, a.steps); got != want {
				t.Fatalf("after %v: checksum %s, want %s", ops, got, want)
			}
			t.Logf("ops: %v", ops)
		})
	}
}

// A suspended job can be migrated: from host memory (the client writes the
// host copy), from SIGSTOP (continued to its boundary) and from disk.
func TestCheckpointWhileSuspended(t *testing.T) {
	t.Parallel()
	for _, o := range []SuspendOptions{{}, {Unaligned: true}, {ToDisk: true}} {
		t.Run(fmt.Sprintf("%+v", o), func(t *testing.T) {
			// 2,000 mini-batches of 2 ms: the job must still be running
			// when the test, on a loaded machine, suspends it (with 80 it
			// once ended first, under a CPU hog)
			a := trainerArgs{seed: 29, dim: 64, steps: 2000}
			base := t.TempDir()
			ckpt := filepath.Join(base, "ckpt")
			p := launch(t, node(filepath.Join(base, "n1"), ckpt, a, 2*time.Millisecond))
			waitDone(t, p, 15)
			if _, err := p.Suspend(ctxT(t, 10*time.Second), o); err != nil {
				t.Fatal(err)
			}
			e, err := p.Checkpoint(ctxT(t, 10*time.Second))
			if err != nil || e.Outcome != Checkpointed || e.Checkpoint == nil || e.Checkpoint.Done < 15 {
				t.Fatalf("checkpoint of a suspended job: %+v %v", e, err)
			}
			s2 := node(filepath.Join(base, "n2"), ckpt, a, time.Millisecond)
			s2.Restore = true
			wantFinished(t, wait(t, launch(t, s2)), int64(a.steps))
			if got, want := checksum(t, s2), expect(t, a.seed, a.dim, a.steps); got != want {
				t.Fatalf("checksum %s, want %s", got, want)
			}
		})
	}
}

// A pre-run stops by itself after the first mini-batch.
func TestPreRun(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	s := node(root, filepath.Join(root, "ckpt"), trainerArgs{1, 8, 1000}, time.Millisecond)
	s.PreRun = true
	e := wait(t, launch(t, s))
	if e.Outcome != Finished || e.Steps != 1 || e.Reason != "pre-run passed: the first mini-batch is done" {
		t.Fatalf("pre-run exit %+v", e)
	}
	s = node(t.TempDir(), filepath.Join(root, "ckpt2"), trainerArgs{1, 8, 1000}, time.Millisecond, "-fail-at", "0")
	s.PreRun = true
	if e := wait(t, launch(t, s)); e.Outcome != Failed || !e.UserError {
		t.Fatalf("failing pre-run exit %+v", e)
	}
}
