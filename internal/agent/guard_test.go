package agent

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestMain lets this test binary serve as a job guard (startGuard runs it
// again with envGuard set).
func TestMain(m *testing.M) {
	GuardMain()
	os.Exit(m.Run())
}

// jobGroup starts a stand-in job: a shell with a child, in a process group
// of its own (as jobproc starts jobs).
func jobGroup(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sh", "-c", "sleep 1000 & sleep 1000; wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	})
	return cmd
}

// waitGroupGone waits until no process of the group is left.
func waitGroupGone(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the guard did not kill the job's process")
	}
	deadline := time.Now().Add(60 * time.Second)
	for syscall.Kill(-cmd.Process.Pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatal("a process of the job's group outlived the guard's kill")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// alive says whether the group still has its leader running.
func alive(cmd *exec.Cmd) bool {
	return procStart(cmd.Process.Pid) != "" && syscall.Kill(cmd.Process.Pid, 0) == nil
}

// TestGuardKillsOnLapse: a guard whose lease is not renewed (the agent is
// stopped) kills the job's whole process group; the real thing, started
// as the agent starts it (this binary run again).
func TestGuardKillsOnLapse(t *testing.T) {
	job := jobGroup(t)
	g, err := startGuard(job.Process.Pid, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer g.stop()
	waitGroupGone(t, job)
}

// TestGuardRenewedThenReleased: renewals keep the job alive past the first
// lease; a release, then the pipe closed (the agent ended the job), makes
// the guard exit without killing.
func TestGuardRenewedThenReleased(t *testing.T) {
	job := jobGroup(t)
	pid := job.Process.Pid
	r, w := io.Pipe()
	status := make(chan int, 1)
	go func() {
		status <- runGuard(strconv.Itoa(pid)+":"+procStart(pid)+":1", "", r, io.Discard)
	}()
	for t0 := time.Now(); time.Since(t0) < 1500*time.Millisecond; time.Sleep(20 * time.Millisecond) {
		if _, err := w.Write([]byte("1\n")); err != nil {
			t.Fatal(err)
		}
		select {
		case <-status:
			t.Fatal("the guard ended while renewed")
		default:
		}
	}
	w.Write([]byte(guardRelease + "\n"))
	w.Close()
	if s := <-status; s != 0 {
		t.Fatalf("status %d", s)
	}
	if !alive(job) {
		t.Fatal("the guard killed a job whose lease was renewed")
	}
	g, err := startGuard(pid, time.Minute) // (the real thing: stop releases)
	if err != nil {
		t.Fatal(err)
	}
	g.stop()
	g.cmd.Process.Wait()
	if !alive(job) {
		t.Fatal("the guard killed a job its agent released")
	}
}

// TestGuardEndsJobOfDeadAgent: the guard's pipe closed without a release
// is the agent's death (kill -9, a crash): the job's leader dies with the
// agent, but not what it started, and the server restarts the job
// elsewhere, so the guard ends the job's group at once, long before the
// lease (every process the job had started used to run on).
func TestGuardEndsJobOfDeadAgent(t *testing.T) {
	job := jobGroup(t)
	g, err := startGuard(job.Process.Pid, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	g.w.Close() // (as the kernel closes a dead agent's end)
	waitGroupGone(t, job)
	g.cmd.Wait()
}

// TestGuardSparesAnotherProcess: a guard whose process has been replaced
// (another start time under the same ID) kills nothing.
func TestGuardSparesAnotherProcess(t *testing.T) {
	job := jobGroup(t)
	pid := job.Process.Pid
	r, _ := io.Pipe()
	if s := runGuard(strconv.Itoa(pid)+":1:0.05", "", r, io.Discard); s != 0 {
		t.Fatalf("status %d", s)
	}
	if !alive(job) {
		t.Fatal("the guard killed a process it was not started for")
	}
	if _, err := startGuard(1<<30, time.Second); err == nil {
		t.Fatal("a guard for a missing process started")
	}
}

func TestGuardWithoutReexec(t *testing.T) {
	guardMu.Lock()
	reexec = false
	guardMu.Unlock()
	defer func() { guardMu.Lock(); reexec = true; guardMu.Unlock() }()
	if _, err := startGuard(os.Getpid(), time.Second); !errors.Is(err, errNoGuard) {
		t.Fatalf("err %v, want errNoGuard", err)
	}
}
