package client

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gandiva-sched/gandiva/client/protocol"
)

// agent is the test's side of the socket pair.
type agent struct {
	t    *testing.T
	conn net.Conn
	sc   *bufio.Scanner
}

func pair(t *testing.T) (net.Conn, *agent) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	conns := make([]net.Conn, 2)
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "pair")
		conns[i], err = net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { conns[0].Close(); conns[1].Close() })
	return conns[0], &agent{t: t, conn: conns[1], sc: bufio.NewScanner(conns[1])}
}

func (a *agent) recv() protocol.Msg {
	a.t.Helper()
	a.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if !a.sc.Scan() {
		a.t.Fatalf("agent: no message: %v", a.sc.Err())
	}
	m, err := protocol.Decode(a.sc.Bytes())
	if err != nil {
		a.t.Fatal(err)
	}
	return m
}

// recvKind skips progress messages.
func (a *agent) recvKind(k protocol.Kind) protocol.Msg {
	a.t.Helper()
	for {
		m := a.recv()
		if m.Kind == k {
			return m
		}
		if m.Kind != protocol.Progress {
			a.t.Fatalf("agent: got %+v, want %s", m, k)
		}
	}
}

func (a *agent) send(m protocol.Msg) {
	a.t.Helper()
	if _, err := a.conn.Write(protocol.Encode(m)); err != nil {
		a.t.Fatal(err)
	}
}

func envOf(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }

// job is a fake training state: a counter that Release wipes.
type job struct {
	state             int64
	saves, loads, rel int
}

func (j *job) hooks() Hooks {
	return Hooks{
		Save: func(w io.Writer) error { j.saves++; return binary.Write(w, binary.LittleEndian, j.state) },
		Load: func(r io.Reader) error { j.loads++; return binary.Read(r, binary.LittleEndian, &j.state) },
		Release: func() error {
			j.rel++
			j.state = -1
			return nil
		},
	}
}

// stepAsync runs Step in a goroutine (it blocks while suspended).
func stepAsync(c *Client) chan error {
	ch := make(chan error, 1)
	go func() { ch <- c.Step() }()
	return ch
}

func TestHelloProgressAndMetric(t *testing.T) {
	conn, a := pair(t)
	j := &job{}
	c, err := newClient(j.hooks(), envOf(map[string]string{protocol.EnvReportEvery: "0"}), conn)
	if err != nil {
		t.Fatal(err)
	}
	h := a.recv()
	if h.Kind != protocol.Hello || h.Version != protocol.Version || !h.Hooks || h.Done != 0 || h.PID != os.Getpid() {
		t.Fatalf("hello %+v", h)
	}
	for i := int64(1); i <= 3; i++ {
		c.SetMetric(float64(i) / 10)
		if err := c.Step(); err != nil {
			t.Fatal(err)
		}
		m := a.recv()
		if m.Kind != protocol.Progress || m.Done != i || m.Metric == nil || *m.Metric != float64(i)/10 || m.IterTime <= 0 {
			t.Fatalf("progress %d: %+v", i, m)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if m := a.recv(); m.Kind != protocol.Progress || m.Done != 3 {
		t.Fatalf("last report %+v", m)
	}
}

func TestProgressIsRateLimited(t *testing.T) {
	conn, a := pair(t)
	c, err := newClient(Hooks{}, envOf(map[string]string{protocol.EnvReportEvery: "3600"}), conn)
	if err != nil {
		t.Fatal(err)
	}
	a.recv() // hello
	for i := 0; i < 100; i++ {
		c.Step()
	}
	c.Close()
	if m := a.recv(); m.Done != 1 {
		t.Fatalf("first report %+v, want done=1", m)
	}
	if m := a.recv(); m.Done != 100 || m.IterTime <= 0 {
		t.Fatalf("closing report %+v, want done=100", m)
	}
}

func TestSuspendReleaseResume(t *testing.T) {
	conn, a := pair(t)
	j := &job{state: 42}
	c, err := newClient(j.hooks(), envOf(nil), conn)
	if err != nil {
		t.Fatal(err)
	}
	a.recv()
	a.send(protocol.Msg{Kind: protocol.Suspend, Seq: 1})
	time.Sleep(10 * time.Millisecond) // let the command arrive before the boundary
	ch := stepAsync(c)
	s := a.recvKind(protocol.Suspended)
	if s.Seq != 1 || s.Done != 1 || s.Bytes != 8 || !s.Released {
		t.Fatalf("suspended %+v", s)
	}
	select {
	case err := <-ch:
		t.Fatalf("Step returned while suspended: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	if j.state != -1 || j.rel != 1 {
		t.Fatalf("state %d after release", j.state)
	}
	// A repeated suspend is answered again; an unknown command is an error.
	a.send(protocol.Msg{Kind: protocol.Suspend, Seq: 2})
	if m := a.recv(); m.Kind != protocol.Suspended || m.Seq != 2 {
		t.Fatalf("%+v", m)
	}
	a.send(protocol.Msg{Kind: "grow", Seq: 3})
	if m := a.recv(); m.Kind != protocol.Error || m.Seq != 3 || !strings.Contains(m.Message, "grow") {
		t.Fatalf("%+v", m)
	}
	a.send(protocol.Msg{Kind: protocol.Resume, Seq: 4})
	if m := a.recv(); m.Kind != protocol.Resumed || m.Seq != 4 || m.Done != 1 {
		t.Fatalf("resumed %+v", m)
	}
	if err := <-ch; err != nil {
		t.Fatal(err)
	}
	if j.state != 42 || j.loads != 1 {
		t.Fatalf("state %d after resume (loads %d)", j.state, j.loads)
	}
}

func TestSuspendAtBoundary(t *testing.T) {
	conn, a := pair(t)
	j := &job{}
	c, _ := newClient(j.hooks(), envOf(map[string]string{protocol.EnvReportEvery: "3600"}), conn)
	a.recv()
	a.send(protocol.Msg{Kind: protocol.Suspend, Seq: 1, At: 4})
	time.Sleep(10 * time.Millisecond)
	for i := 0; i < 3; i++ {
		if err := c.Step(); err != nil {
			t.Fatal(err)
		}
	}
	ch := stepAsync(c) // the 4th boundary
	if s := a.recvKind(protocol.Suspended); s.Done != 4 {
		t.Fatalf("suspended at %d, want 4", s.Done)
	}
	a.send(protocol.Msg{Kind: protocol.Resume, Seq: 2})
	a.recvKind(protocol.Resumed)
	if err := <-ch; err != nil {
		t.Fatal(err)
	}
}

func TestCheckpointAndStop(t *testing.T) {
	for _, suspended := range []bool{false, true} {
		conn, a := pair(t)
		dir := t.TempDir()
		j := &job{state: 7}
		c, _ := newClient(j.hooks(), envOf(map[string]string{protocol.EnvCheckpointDir: dir, protocol.EnvJob: "j", protocol.EnvAttempt: "2"}), conn)
		a.recv()
		if err := c.Step(); err != nil {
			t.Fatal(err)
		}
		var ch chan error
		if suspended {
			a.send(protocol.Msg{Kind: protocol.Suspend, Seq: 1})
			time.Sleep(10 * time.Millisecond)
			ch = stepAsync(c)
			a.recvKind(protocol.Suspended)
			saves := j.saves
			a.send(protocol.Msg{Kind: protocol.Checkpoint, Seq: 2})
			if m := a.recvKind(protocol.Saved); m.Seq != 2 || m.Done != 2 {
				t.Fatalf("saved %+v", m)
			}
			if j.saves != saves {
				t.Fatal("a checkpoint of a suspended job called Save again instead of using the host copy")
			}
			a.send(protocol.Msg{Kind: protocol.Checkpoint, Seq: 3, Exit: true})
		} else {
			a.send(protocol.Msg{Kind: protocol.Checkpoint, Seq: 3, Exit: true})
			time.Sleep(10 * time.Millisecond)
			ch = stepAsync(c)
		}
		m := a.recvKind(protocol.Saved)
		if m.Seq != 3 || m.Bytes != 8 || m.Path == "" {
			t.Fatalf("saved %+v", m)
		}
		if err := <-ch; !errors.Is(err, ErrStop) {
			t.Fatalf("Step after a checkpoint with exit: %v", err)
		}
		if err := c.Step(); !errors.Is(err, ErrStop) {
			t.Fatalf("Step after stopping: %v", err)
		}
		meta, f, err := protocol.ReadCheckpoint(dir)
		if err != nil {
			t.Fatal(err)
		}
		var v int64
		binary.Read(f, binary.LittleEndian, &v)
		f.Close()
		if meta.Done != 2 || meta.Job != "j" || meta.Attempt != 2 || v != 7 {
			t.Fatalf("suspended=%v: checkpoint %+v holding %d", suspended, meta, v)
		}
	}
}

func TestCheckpointWithoutHooksIsAnError(t *testing.T) {
	conn, a := pair(t)
	c, _ := newClient(Hooks{}, envOf(map[string]string{protocol.EnvCheckpointDir: t.TempDir()}), conn)
	if h := a.recv(); h.Hooks {
		t.Fatal("hello says hooks without any")
	}
	a.send(protocol.Msg{Kind: protocol.Checkpoint, Seq: 1, Exit: true})
	time.Sleep(10 * time.Millisecond)
	if err := c.Step(); err != nil {
		t.Fatal(err)
	}
	if m := a.recvKind(protocol.Error); m.Seq != 1 || !strings.Contains(m.Message, "no Save hook") {
		t.Fatalf("%+v", m)
	}
	// Suspending without hooks keeps the job waiting at the boundary.
	a.send(protocol.Msg{Kind: protocol.Suspend, Seq: 2})
	time.Sleep(10 * time.Millisecond)
	ch := stepAsync(c)
	if m := a.recvKind(protocol.Suspended); m.Released || m.Bytes != 0 {
		t.Fatalf("%+v", m)
	}
	a.send(protocol.Msg{Kind: protocol.Resume, Seq: 3})
	a.recvKind(protocol.Resumed)
	if err := <-ch; err != nil {
		t.Fatal(err)
	}
}

func TestAgentLost(t *testing.T) {
	conn, a := pair(t)
	c, _ := newClient(Hooks{}, envOf(map[string]string{protocol.EnvReportEvery: "3600"}), conn)
	a.recv()
	a.conn.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := c.Step()
		if errors.Is(err, ErrAgentLost) {
			break
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("Step after the agent left: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
	// While suspended too.
	conn, a = pair(t)
	c, _ = newClient(Hooks{}, envOf(nil), conn)
	a.recv()
	a.send(protocol.Msg{Kind: protocol.Suspend, Seq: 1})
	time.Sleep(10 * time.Millisecond)
	ch := stepAsync(c)
	a.recvKind(protocol.Suspended)
	a.conn.Close()
	if err := <-ch; !errors.Is(err, ErrAgentLost) {
		t.Fatalf("suspended Step after the agent left: %v", err)
	}
}

func TestRestoreOnNew(t *testing.T) {
	dir := t.TempDir()
	if _, err := protocol.WriteCheckpoint(dir, protocol.Meta{Done: 17}, func(w io.Writer) error {
		return binary.Write(w, binary.LittleEndian, int64(99))
	}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{protocol.EnvCheckpointDir: dir, protocol.EnvRestore: "1"}
	conn, a := pair(t)
	j := &job{}
	c, err := newClient(j.hooks(), envOf(env), conn)
	if err != nil {
		t.Fatal(err)
	}
	if h := a.recv(); h.Done != 17 || c.Done() != 17 || !c.Restored() || j.state != 99 {
		t.Fatalf("hello %+v, done %d, state %d", h, c.Done(), j.state)
	}
	c.Step()
	if m := a.recv(); m.Done != 18 {
		t.Fatalf("first progress after restore %+v", m)
	}
	// Without RESTORE the checkpoint is ignored.
	env[protocol.EnvRestore] = "0"
	c, _ = newClient(j.hooks(), envOf(env), nil)
	if c.Done() != 0 || c.Restored() {
		t.Fatal("restored without GANDIVA_RESTORE=1")
	}
	// Restore with no Load hook, or a damaged checkpoint, fails loudly.
	env[protocol.EnvRestore] = "1"
	if _, err := newClient(Hooks{}, envOf(env), nil); err == nil || !strings.Contains(err.Error(), "Load is nil") {
		t.Fatalf("restore without Load: %v", err)
	}
	os.WriteFile(dir+"/"+protocol.MetaFile, []byte("{"), 0o644)
	if _, err := newClient(j.hooks(), envOf(env), nil); err == nil {
		t.Fatal("restore from damaged metadata succeeded")
	}
	// An empty directory: nothing to restore, start from 0.
	env[protocol.EnvCheckpointDir] = t.TempDir()
	if c, err := newClient(j.hooks(), envOf(env), nil); err != nil || c.Done() != 0 {
		t.Fatalf("restore from an empty directory: %v", err)
	}
}

func TestPeriodicCheckpoints(t *testing.T) {
	dir := t.TempDir()
	j := &job{}
	c, err := newClient(j.hooks(), envOf(map[string]string{protocol.EnvCheckpointDir: dir, protocol.EnvCheckpointEvery: "0.02"}), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		j.state = int64(i)
		c.Step()
		time.Sleep(5 * time.Millisecond)
	}
	if j.saves < 1 || j.saves > 4 {
		t.Fatalf("%d periodic checkpoints in ~50 ms at one per 20 ms", j.saves)
	}
	meta, f, err := protocol.ReadCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if meta.Done < 2 {
		t.Fatalf("last checkpoint at %d", meta.Done)
	}
}

func TestPreRunStopsAfterFirstMiniBatch(t *testing.T) {
	conn, a := pair(t)
	c, _ := newClient(Hooks{}, envOf(map[string]string{protocol.EnvPreRun: "1", protocol.EnvReportEvery: "3600"}), conn)
	a.recv()
	if err := c.Step(); !errors.Is(err, ErrStop) {
		t.Fatalf("first Step of a pre-run: %v", err)
	}
	if m := a.recv(); m.Kind != protocol.Progress || m.Done != 1 {
		t.Fatalf("%+v", m)
	}
	// Standalone too.
	c, _ = newClient(Hooks{}, envOf(map[string]string{protocol.EnvPreRun: "1"}), nil)
	if err := c.Step(); !errors.Is(err, ErrStop) {
		t.Fatalf("standalone pre-run: %v", err)
	}
}

// A warm start (GANDIVA_HOLD=1) holds the job at its first boundary by
// itself, without waiting for a command: Suspended with Seq 0 after its
// first mini-batch's progress, then a Resume lets it go on.
func TestHoldAtFirstBoundary(t *testing.T) {
	conn, a := pair(t)
	done := make(chan error, 1)
	go func() {
		c, err := newClient(Hooks{}, envOf(map[string]string{protocol.EnvHold: "1", protocol.EnvReportEvery: "3600"}), conn)
		if err != nil {
			done <- err
			return
		}
		for range 3 {
			if err := c.Step(); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	if m := a.recv(); m.Kind != protocol.Hello {
		t.Fatalf("%+v", m)
	}
	if m := a.recvKind(protocol.Suspended); m.Seq != 0 || m.Done != 1 {
		t.Fatalf("hold: %+v, want Suspended with Seq 0 at mini-batch 1", m)
	}
	select {
	case err := <-done:
		t.Fatalf("the job went on while held: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	a.send(protocol.Msg{Kind: protocol.Resume, Seq: 1})
	if m := a.recvKind(protocol.Resumed); m.Seq != 1 {
		t.Fatalf("%+v", m)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Standalone with a checkpoint directory (a pod of a Kubernetes Job), SIGTERM
// becomes a checkpoint at the next boundary and ErrTerminated; the default
// action comes back after it.
func TestSIGTERMCheckpoints(t *testing.T) {
	dir := t.TempDir()
	j := &job{}
	c, err := newClient(j.hooks(), envOf(map[string]string{protocol.EnvCheckpointDir: dir}), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := 0; i < 3; i++ {
		j.state = int64(i)
		if err := c.Step(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		j.state++
		err := c.Step()
		if errors.Is(err, ErrTerminated) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("SIGTERM never reached Step")
		}
		time.Sleep(time.Millisecond)
	}
	meta, f, err := protocol.ReadCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if meta.Done != c.Done() || j.saves != 1 {
		t.Fatalf("checkpoint at %d after %d mini-batches, %d saves; want one at the last boundary", meta.Done, c.Done(), j.saves)
	}
	if err := c.Step(); !errors.Is(err, ErrTerminated) {
		t.Fatalf("a Step after the checkpoint: %v, want ErrTerminated again", err)
	}
}
