package client

import (
	"encoding/binary"
	"errors"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/gandiva-sched/gandiva/client/protocol"
)

// stepUntilError calls Step until it fails (within a generous bound).
func stepUntilError(t *testing.T, c *Client) error {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if err := c.Step(); err != nil {
			return err
		}
		time.Sleep(5 * time.Millisecond) // (a mini-batch)
	}
	t.Fatal("Step never failed")
	return nil
}

// stepLoop calls Step in a goroutine, mini-batch after mini-batch (so a
// command is carried out whenever it arrives), until it fails.
func stepLoop(c *Client) chan error {
	ch := make(chan error, 1)
	go func() {
		for {
			if err := c.Step(); err != nil {
				ch <- err
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	return ch
}

// TestLeaseLapseStopsAtBoundary: a client whose agent stops renewing its
// lease (a frozen agent) stops at its next boundary once the lease has
// passed, with ErrLeaseLapsed (and ErrAgentLost), though the connection is
// still open; while renewed, it keeps running.
func TestLeaseLapseStopsAtBoundary(t *testing.T) {
	conn, a := pair(t)
	j := &job{}
	c, err := newClient(j.hooks(), envOf(map[string]string{protocol.EnvReportEvery: "1000"}), conn)
	if err != nil {
		t.Fatal(err)
	}
	if h := a.recv(); h.Kind != protocol.Hello || !h.Leases {
		t.Fatalf("hello %+v: want Leases set", h)
	}
	go func() { // drain what the client sends
		for a.sc.Scan() {
		}
	}()
	// Renewed every 20 ms for 1 s of work: it runs on.
	stop := make(chan struct{})
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				a.conn.Write(protocol.Encode(protocol.Msg{Kind: protocol.Lease, LeaseSeconds: 1}))
			}
		}
	}()
	for t0 := time.Now(); time.Since(t0) < 1500*time.Millisecond; {
		if err := c.Step(); err != nil {
			t.Fatalf("Step while the lease is renewed: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(stop)
	<-renewed
	// The agent freezes: one last lease of 0.3 s, then nothing.
	a.send(protocol.Msg{Kind: protocol.Lease, LeaseSeconds: 0.3})
	sent := time.Now()
	err = stepUntilError(t, c)
	if !errors.Is(err, ErrLeaseLapsed) || !errors.Is(err, ErrAgentLost) {
		t.Fatalf("Step: %v, want ErrLeaseLapsed and ErrAgentLost", err)
	}
	if since := time.Since(sent); since < 300*time.Millisecond {
		t.Fatalf("stopped %s after a lease of 0.3 s", since)
	}
	if err := c.Step(); err == nil {
		t.Fatal("Step after the lapse succeeded")
	}
}

// TestLeaseLapseWhileSuspended: a suspended job (waiting for a command)
// ends when its agent's lease lapses.
func TestLeaseLapseWhileSuspended(t *testing.T) {
	conn, a := pair(t)
	j := &job{}
	c, err := newClient(j.hooks(), envOf(nil), conn)
	if err != nil {
		t.Fatal(err)
	}
	a.recvKind(protocol.Hello)
	a.send(protocol.Msg{Kind: protocol.Lease, LeaseSeconds: 30})
	a.send(protocol.Msg{Kind: protocol.Suspend, Seq: 1})
	ch := stepLoop(c)
	if m := a.recvKind(protocol.Suspended); m.Seq != 1 {
		t.Fatalf("%+v", m)
	}
	a.send(protocol.Msg{Kind: protocol.Lease, LeaseSeconds: 0.2}) // then silence
	select {
	case err := <-ch:
		if !errors.Is(err, ErrLeaseLapsed) {
			t.Fatalf("Step: %v, want ErrLeaseLapsed", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a suspended job outlived its agent's lease")
	}
}

// TestStaleCheckpointStops: asked to checkpoint, a copy of the job whose
// attempt is older than the checkpoint on disk writes nothing, says why,
// and stops with ErrSuperseded.
func TestStaleCheckpointStops(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ck")
	newer, err := protocol.WriteCheckpoint(dir, protocol.Meta{Job: "j", Attempt: 1024, Done: 7}, writeState(99))
	if err != nil {
		t.Fatal(err)
	}
	conn, a := pair(t)
	j := &job{state: 5}
	c, err := newClient(j.hooks(), envOf(map[string]string{protocol.EnvCheckpointDir: dir, protocol.EnvJob: "j", protocol.EnvAttempt: "512"}), conn)
	if err != nil {
		t.Fatal(err)
	}
	a.recvKind(protocol.Hello)
	a.send(protocol.Msg{Kind: protocol.Checkpoint, Seq: 1, Exit: true})
	ch := stepLoop(c)
	if m := a.recvKind(protocol.Error); m.Seq != 1 {
		t.Fatalf("%+v", m)
	}
	if err := <-ch; !errors.Is(err, ErrSuperseded) || !errors.Is(err, protocol.ErrStaleCheckpoint) {
		t.Fatalf("Step: %v, want ErrSuperseded", err)
	}
	meta, f, err := protocol.ReadCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if meta.Attempt != 1024 || meta.File != newer.File {
		t.Fatalf("checkpoint on disk %+v, want attempt 1024's", meta)
	}
}

func writeState(v int64) func(io.Writer) error {
	return func(w io.Writer) error { return binary.Write(w, binary.LittleEndian, v) }
}
