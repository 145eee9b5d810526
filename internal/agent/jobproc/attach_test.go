package jobproc

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gandiva-sched/gandiva/client/protocol"
)

// attached is a trainer started by the test (as a kubelet would) that
// dials the test's socket, and the Proc attached to its connection.
type attached struct {
	p     *Proc
	cmd   *exec.Cmd
	dir   string
	exit  chan error
	ended chan struct{} // closed when the trainer has exited
}

// attachTrainer starts the trainer with GANDIVA_AGENT_SOCKET, reads its
// hello and attaches to it with s.
func attachTrainer(t *testing.T, a trainerArgs, stepTime time.Duration, s AttachSpec) *attached {
	t.Helper()
	sockDir, err := os.MkdirTemp("", "ja")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	path := filepath.Join(sockDir, "agent.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	dir := t.TempDir()
	cmd := exec.Command(trainerBin, append([]string{"-out", filepath.Join(dir, "result.json"), "-step-time", stepTime.String()}, a.flags()...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "CUDA_VISIBLE_DEVICES=0,1,2,3",
		protocol.EnvAgentSocket + "=" + path, protocol.EnvPodUID + "=uid-7", protocol.EnvPodName + "=p", protocol.EnvPodNamespace + "=ns",
		protocol.EnvCheckpointDir + "=" + filepath.Join(dir, "ckpt"), protocol.EnvReportEvery + "=0.01"}
	log, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	at := &attached{cmd: cmd, dir: dir, exit: make(chan error, 1), ended: make(chan struct{})}
	go func() { at.exit <- cmd.Wait(); log.Close(); close(at.ended) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-at.ended
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "log"))
			t.Logf("trainer's log:\n%s", b)
		}
	})
	conn, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	h, err := ReadHello(conn, time.Now().Add(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if h.PodUID != "uid-7" || h.Pod != "ns/p" || h.PID != cmd.Process.Pid {
		t.Fatalf("hello %+v", h)
	}
	if s.PID == 0 {
		s.PID = h.PID
	}
	at.p, err = Attach(conn, h, s)
	if err != nil {
		t.Fatal(err)
	}
	return at
}

// result waits for the trainer to exit (it writes its result after it
// closed its connection) and reads its result.
func (at *attached) result(t *testing.T) (sum, gpus string) {
	t.Helper()
	select {
	case <-at.ended:
	case <-time.After(60 * time.Second):
		t.Fatal("the trainer did not exit")
	}
	b, err := os.ReadFile(filepath.Join(at.dir, "result.json"))
	if err != nil {
		t.Fatalf("no result: %v", err)
	}
	var r struct{ Checksum, GPUs string }
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r.Checksum, r.GPUs
}

// An attached job: the welcome gives it its GPUs (CUDA_VISIBLE_DEVICES as
// the trainer saw it), it is suspended in memory and resumed three times,
// reports progress, and ends by closing its connection (Disconnected) with
// the checksum of an uninterrupted run.
func TestAttachSuspendResumeKeepsChecksum(t *testing.T) {
	t.Parallel()
	a := trainerArgs{seed: 5, dim: 128, steps: 120}
	at := attachTrainer(t, a, 3*time.Millisecond, AttachSpec{Job: "j", GPUs: []int{1, 3}})
	p := at.p
	var kinds []EventKind
	evDone := make(chan struct{})
	go func() {
		defer close(evDone)
		for ev := range p.Events() {
			if len(kinds) == 0 || kinds[len(kinds)-1] != ev.Kind {
				kinds = append(kinds, ev.Kind)
			}
		}
	}()
	if i := p.Info(); i.PID != at.cmd.Process.Pid || !i.Client || i.State != Running {
		t.Fatalf("info %+v", i)
	}
	for i, n := range []int64{10, 40, 80} {
		waitDone(t, p, n)
		sus, err := p.Suspend(ctxT(t, 10*time.Second), SuspendOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if sus.Mode != Memory || !sus.Released || sus.Done < n {
			t.Fatalf("suspension %d: %+v", i, sus)
		}
		if _, err := p.Resume(ctxT(t, time.Second), []int{0}); !errors.Is(err, ErrState) {
			t.Fatalf("resume on other GPUs: %v, want ErrState", err)
		}
		res, err := p.Resume(ctxT(t, 10*time.Second), []int{1, 3})
		if err != nil || res.Restarted || res.Done != sus.Done {
			t.Fatalf("resumption %d: %+v %v", i, res, err)
		}
	}
	e := wait(t, p)
	if e.Outcome != Disconnected || e.Done != 120 || !e.Client || !strings.Contains(e.Reason, "pod's phase") {
		t.Fatalf("exit %+v", e)
	}
	if err := <-at.exit; err != nil {
		t.Fatalf("the trainer: %v", err)
	}
	<-evDone
	if got := fmt.Sprint(kinds); !strings.HasPrefix(got, "[started connected ready progress") || !strings.HasSuffix(got, "exited]") ||
		!strings.Contains(got, "suspended resumed") {
		t.Errorf("events %s", got)
	}
	sum, gpus := at.result(t)
	if want := expect(t, 5, 128, 120); sum != want || gpus != "1,3" {
		t.Fatalf("checksum %s GPUs %q, want %s on 1,3", sum, gpus, want)
	}
}

// A warm start (Hold in the welcome): the job holds at its first boundary;
// a Suspend asked meanwhile is answered by that hold; Resume runs it on.
func TestAttachHold(t *testing.T) {
	t.Parallel()
	a := trainerArgs{seed: 3, dim: 32, steps: 30}
	at := attachTrainer(t, a, time.Millisecond, AttachSpec{Job: "j", GPUs: []int{0}, Hold: true})
	sus, err := at.p.Suspend(ctxT(t, 20*time.Second), SuspendOptions{})
	if err != nil || sus.Done != 1 || !sus.Waited {
		t.Fatalf("suspension %+v %v, want the hold at mini-batch 1", sus, err)
	}
	if _, err := at.p.Resume(ctxT(t, 10*time.Second), []int{0}); err != nil {
		t.Fatal(err)
	}
	if e := wait(t, at.p); e.Outcome != Disconnected || e.Done != 30 {
		t.Fatalf("exit %+v", e)
	}
	if sum, _ := at.result(t); sum != expect(t, 3, 32, 30) {
		t.Fatalf("checksum %s", sum)
	}
}

// What needs a process of the agent's own is refused (ErrState); Checkpoint
// works as for a spawned job (the job writes it and closes); Kill closes the
// connection and the client stops the job (exit status 1: agent lost).
func TestAttachRefusalsCheckpointAndKill(t *testing.T) {
	t.Parallel()
	a := trainerArgs{seed: 4, dim: 32, steps: 100000}
	at := attachTrainer(t, a, time.Millisecond, AttachSpec{Job: "j", GPUs: []int{0}})
	waitDone(t, at.p, 5)
	for _, o := range []SuspendOptions{{Unaligned: true}, {ToDisk: true}} {
		if _, err := at.p.Suspend(ctxT(t, time.Second), o); !errors.Is(err, ErrState) {
			t.Fatalf("suspend %+v: %v, want ErrState", o, err)
		}
	}
	e, err := at.p.Checkpoint(ctxT(t, 20*time.Second))
	if err != nil || e.Outcome != Checkpointed || e.Checkpoint == nil || e.Checkpoint.Done < 5 {
		t.Fatalf("checkpoint: %+v %v", e, err)
	}
	if err := <-at.exit; err != nil {
		t.Fatalf("the trainer after its checkpoint: %v", err)
	}

	at = attachTrainer(t, a, time.Millisecond, AttachSpec{Job: "k", GPUs: []int{0}})
	waitDone(t, at.p, 5)
	at.p.Kill()
	if e := wait(t, at.p); e.Outcome != Killed {
		t.Fatalf("exit %+v", e)
	}
	var ee *exec.ExitError
	if err := <-at.exit; !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("the trainer after Kill: %v, want exit status 1 (agent lost)", err)
	}
}

// ReadHello: a client that never says hello is an error at the deadline;
// anything but a hello first is refused; what follows the hello is left
// in the connection.
func TestReadHello(t *testing.T) {
	t.Parallel()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if _, err := ReadHello(a, time.Now().Add(50*time.Millisecond)); err == nil || !strings.Contains(err.Error(), "no hello") {
		t.Fatalf("silence: %v", err)
	}
	go b.Write([]byte(`{"kind":"progress","done":1}` + "\n"))
	if _, err := ReadHello(a, time.Now().Add(5*time.Second)); err == nil || !strings.Contains(err.Error(), `"progress"`) {
		t.Fatalf("progress first: %v", err)
	}
	go b.Write([]byte(`{"kind":"hello","pod_uid":"u","pod":"n/p","done":2}` + "\n" + `{"kind":"progress","done":3}` + "\n"))
	h, err := ReadHello(a, time.Now().Add(5*time.Second))
	if err != nil || h.PodUID != "u" || h.Pod != "n/p" || h.Done != 2 {
		t.Fatalf("%+v %v", h, err)
	}
	next := make([]byte, 64)
	n, _ := a.Read(next)
	if !strings.HasPrefix(string(next[:n]), `{"kind":"progress"`) {
		t.Fatalf("after the hello: %q", next[:n])
	}
	if _, err := Attach(a, protocol.Msg{Kind: protocol.Progress}, AttachSpec{Job: "j"}); err == nil {
		t.Fatal("Attach without a hello succeeded")
	}
}
