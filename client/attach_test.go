package client

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gandiva-sched/gandiva/client/protocol"
)

// listen makes the agent's socket for one pod, under a short directory
// (Unix socket paths are limited to about 100 bytes).
func listen(t *testing.T, path string) net.Listener {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func sockPath(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "gc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "agent.sock")
}

func accept(t *testing.T, l net.Listener) *agent {
	t.Helper()
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &agent{t: t, conn: c, sc: bufio.NewScanner(c)}
}

// stepUntil calls Step until it fails or stop is closed (checked after
// each Step): a loop that reaches the boundary where a command waits
// whenever the command arrives, without guessing when.
func stepUntil(c *Client, stop <-chan struct{}) chan error {
	ch := make(chan error, 1)
	go func() {
		for {
			if err := c.Step(); err != nil {
				ch <- err
				return
			}
			select {
			case <-stop:
				ch <- nil
				return
			default:
			}
			time.Sleep(time.Millisecond)
		}
	}()
	return ch
}

type newResult struct {
	c   *Client
	err error
}

// New, attached: it dials the pod's socket (created after the process
// started: it retries), says hello naming the pod, waits for the welcome,
// and sets CUDA_VISIBLE_DEVICES and GANDIVA_GPUS from it before it returns;
// the conversation then goes on as with an inherited socket.
func TestAttachWelcomeSetsGPUs(t *testing.T) {
	path := sockPath(t)
	t.Setenv(protocol.EnvAgentSocket, path)
	t.Setenv(protocol.EnvPodUID, "uid-1")
	t.Setenv(protocol.EnvPodName, "p")
	t.Setenv(protocol.EnvPodNamespace, "team-a")
	t.Setenv(protocol.EnvReportEvery, "3600")
	t.Setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3") // NVIDIA_VISIBLE_DEVICES=all: every GPU
	t.Setenv(protocol.EnvGPUs, "")
	res := make(chan newResult, 1)
	j := &job{}
	go func() { c, err := New(j.hooks()); res <- newResult{c, err} }()
	time.Sleep(300 * time.Millisecond) // the agent has not made the socket yet
	a := accept(t, listen(t, path))
	h := a.recv()
	if h.Kind != protocol.Hello || h.PodUID != "uid-1" || h.Pod != "team-a/p" || h.PID != os.Getpid() || !h.Hooks {
		t.Fatalf("hello: %+v", h)
	}
	select {
	case r := <-res:
		t.Fatalf("New returned before the welcome: %v", r.err)
	case <-time.After(50 * time.Millisecond):
	}
	a.send(protocol.Msg{Kind: protocol.Welcome, GPUs: []int{1, 3}})
	r := <-res
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.c.Close()
	if got := os.Getenv("CUDA_VISIBLE_DEVICES"); got != "1,3" {
		t.Fatalf("CUDA_VISIBLE_DEVICES=%q, want 1,3", got)
	}
	if got := os.Getenv(protocol.EnvGPUs); got != "1,3" || !slices.Equal(r.c.GPUs(), []int{1, 3}) || !r.c.Managed() {
		t.Fatalf("GANDIVA_GPUS=%q GPUs()=%v", got, r.c.GPUs())
	}
	// the usual conversation: progress, suspend in memory, resume
	if err := r.c.Step(); err != nil {
		t.Fatal(err)
	}
	if m := a.recv(); m.Kind != protocol.Progress || m.Done != 1 {
		t.Fatalf("%+v", m)
	}
	a.send(protocol.Msg{Kind: protocol.Suspend, Seq: 1})
	stop := make(chan struct{})
	step := stepUntil(r.c, stop)
	if m := a.recvKind(protocol.Suspended); m.Seq != 1 || m.Done < 2 {
		t.Fatalf("%+v", m)
	}
	close(stop)
	a.send(protocol.Msg{Kind: protocol.Resume, Seq: 2})
	if m := a.recvKind(protocol.Resumed); m.Seq != 2 {
		t.Fatalf("%+v", m)
	}
	if err := <-step; err != nil {
		t.Fatal(err)
	}
}

// The agent refusing the hello (another pod's UID) is New's error; an agent
// that closes without a word too.
func TestAttachRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		agent func(a *agent)
		want  string
	}{
		{"error", func(a *agent) {
			a.send(protocol.Msg{Kind: protocol.Error, Message: "this socket is pod team-a/q's"})
			a.conn.Close()
		}, "refused this process: this socket is pod team-a/q's"},
		{"closed", func(a *agent) { a.conn.Close() }, "closed the connection without a welcome"},
		{"other", func(a *agent) { a.send(protocol.Msg{Kind: protocol.Resume, Seq: 1}) }, `with "resume"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := sockPath(t)
			l := listen(t, path)
			conn, err := dial(path, time.Now().Add(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			a := accept(t, l)
			res := make(chan newResult, 1)
			go func() {
				c, err := newClientMode(Hooks{}, envOf(map[string]string{protocol.EnvPodUID: "u"}), conn,
					&attach{setenv: func(k, v string) error { return nil }, deadline: time.Now().Add(5 * time.Second)})
				res <- newResult{c, err}
			}()
			if m := a.recv(); m.Kind != protocol.Hello {
				t.Fatalf("%+v", m)
			}
			tc.agent(a)
			r := <-res
			if r.err == nil || !strings.Contains(r.err.Error(), tc.want) {
				t.Fatalf("New: %v, want an error containing %q", r.err, tc.want)
			}
		})
	}
	// nobody listening: New gives up at the deadline, naming the socket
	path := sockPath(t)
	t.Setenv(protocol.EnvAgentSocket, path)
	t.Setenv(protocol.EnvAttachTimeout, "0.3")
	if _, err := New(Hooks{}); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("New with no agent: %v", err)
	}
}

// Attached and restoring: the hello carries the restored count (read from
// the checkpoint's metadata), Load runs only after the welcome set the GPUs,
// and a welcome with Hold holds the job at its first boundary.
func TestAttachRestoreAfterWelcomeAndHold(t *testing.T) {
	dir := t.TempDir()
	j := &job{state: 41}
	c0, err := newClient(j.hooks(), envOf(map[string]string{protocol.EnvCheckpointDir: dir}), nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if err := c0.Step(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c0.checkpoint(0, j.hooks().Save); err != nil {
		t.Fatal(err)
	}
	c0.Close()

	path := sockPath(t)
	l := listen(t, path)
	conn, err := dial(path, time.Now().Add(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	a := accept(t, l)
	var env []string
	j2 := &job{}
	h := j2.hooks()
	load := h.Load
	var envAtLoad []string
	h.Load = func(r io.Reader) error { envAtLoad = slices.Clone(env); return load(r) }
	res := make(chan newResult, 1)
	go func() {
		c, err := newClientMode(h, envOf(map[string]string{protocol.EnvCheckpointDir: dir, protocol.EnvRestore: "1",
			protocol.EnvReportEvery: "3600"}), conn,
			&attach{setenv: func(k, v string) error { env = append(env, k+"="+v); return nil }, deadline: time.Now().Add(5 * time.Second)})
		res <- newResult{c, err}
	}()
	if m := a.recv(); m.Kind != protocol.Hello || m.Done != 5 {
		t.Fatalf("hello: %+v, want Done 5 (restored)", m)
	}
	a.send(protocol.Msg{Kind: protocol.Welcome, GPUs: []int{2}, Hold: true})
	r := <-res
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.c.Close()
	if want := []string{"CUDA_VISIBLE_DEVICES=2", "GANDIVA_GPUS=2"}; !slices.Equal(envAtLoad, want) || j2.state != 41 || r.c.Done() != 5 {
		t.Fatalf("at Load the environment had %v (want %v); state %d done %d", envAtLoad, want, j2.state, r.c.Done())
	}
	step := stepAsync(r.c)
	if m := a.recvKind(protocol.Suspended); m.Seq != 0 || m.Done != 6 {
		t.Fatalf("hold: %+v", m)
	}
	a.send(protocol.Msg{Kind: protocol.Resume, Seq: 1})
	if m := a.recvKind(protocol.Resumed); m.Seq != 1 {
		t.Fatalf("%+v", m)
	}
	if err := <-step; err != nil {
		t.Fatal(err)
	}
}

// Attached and suspended, SIGTERM (the pod deleted to move the job) writes
// a checkpoint from the host copy and ends the job with ErrTerminated.
func TestAttachSIGTERMWhileSuspended(t *testing.T) {
	dir := t.TempDir()
	path := sockPath(t)
	l := listen(t, path)
	conn, err := dial(path, time.Now().Add(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	a := accept(t, l)
	j := &job{state: 7}
	res := make(chan newResult, 1)
	go func() {
		c, err := newClientMode(j.hooks(), envOf(map[string]string{protocol.EnvCheckpointDir: dir, protocol.EnvReportEvery: "3600"}), conn,
			&attach{setenv: func(k, v string) error { return nil }, deadline: time.Now().Add(5 * time.Second)})
		res <- newResult{c, err}
	}()
	a.recv()
	a.send(protocol.Msg{Kind: protocol.Welcome, GPUs: []int{0}})
	r := <-res
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.c.Close()
	a.send(protocol.Msg{Kind: protocol.Suspend, Seq: 1})
	step := stepUntil(r.c, nil)
	susp := a.recvKind(protocol.Suspended)
	if j.state != -1 {
		t.Fatalf("not released: %d", j.state)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-step; !errors.Is(err, ErrTerminated) {
		t.Fatalf("Step: %v, want ErrTerminated", err)
	}
	if m := a.recvKind(protocol.Saved); m.Done != susp.Done {
		t.Fatalf("%+v", m)
	}
	meta, f, err := protocol.ReadCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [8]byte
	if _, err := f.Read(b[:]); err != nil || meta.Done != susp.Done || b[0] != 7 {
		t.Fatalf("checkpoint %+v payload %v (%v), want the host copy (7) at %d", meta, b, err, susp.Done)
	}
}
