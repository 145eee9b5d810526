// Package client makes a Go training loop Gandiva-aware. The job calls Step
// once per mini-batch; the client reports progress to the node agent and,
// at that boundary, carries out what the agent asks: save the job's state to
// host memory and free the accelerator (suspend), restore it (resume), or
// write a checkpoint and stop (migration). docs/CLIENT.md is the guide;
// client/protocol is the wire protocol.
//
//	c, err := client.New(client.Hooks{Save: m.Save, Load: m.Load, Release: m.Release})
//	if err != nil { ... }           // New has already restored a checkpoint if asked to
//	defer c.Close()
//	for c.Done() < total {
//		loss := m.TrainOneMiniBatch(c.Done())
//		c.SetMetric(loss)
//		if err := c.Step(); err != nil {
//			if errors.Is(err, client.ErrStop) {
//				return nil // checkpointed for a migration: exit with status 0
//			}
//			return err
//		}
//	}
//
// In a pod of a Kubernetes shared node (GANDIVA_AGENT_SOCKET in the
// environment, no GANDIVA_FD) the client attaches to the node's agent: see
// New.
//
// Outside Gandiva (no GANDIVA_FD in the environment) the client runs
// standalone: Step counts mini-batches and takes the periodic checkpoints
// that GANDIVA_CHECKPOINT_DIR and GANDIVA_CHECKPOINT_EVERY ask for, and New
// restores when GANDIVA_RESTORE=1, so the same program runs anywhere.
//
// Standalone with a checkpoint directory and a Save hook, the client also
// turns SIGTERM into a checkpoint: the next Step writes one and returns
// ErrTerminated. That is how a Kubernetes Job that `gandiva kube` suspends
// (its pods are deleted, so they receive SIGTERM) keeps its work; the pod's
// terminationGracePeriodSeconds must cover a mini-batch and a checkpoint.
//
// A Client is not safe for concurrent use: call it from the training loop.
package client

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gandiva-sched/gandiva/client/protocol"
)

// ErrStop is returned by Step when the job must now exit with status 0:
// it has written its checkpoint for a migration (or a suspension to disk)
// and will continue elsewhere from it, or it was a pre-run of the first
// mini-batch (GANDIVA_PRERUN=1) and that mini-batch is done.
var ErrStop = errors.New("gandiva: the job must exit now (status 0)")

// ErrTerminated is returned by Step after the process received SIGTERM
// (standalone, with a checkpoint directory and a Save hook): the checkpoint
// is written and the job must exit now with a non-zero status (143, as a
// process killed by SIGTERM), so that Kubernetes does not count the pod as
// succeeded. A later start with GANDIVA_RESTORE=1 continues from it.
var ErrTerminated = errors.New("gandiva: checkpointed after SIGTERM; the job must exit now (status 143)")

// ErrAgentLost is returned by Step when the connection to the agent has
// closed: the agent died, and the job will be restarted elsewhere from its
// last checkpoint, so this copy must stop (exit with a non-zero status).
var ErrAgentLost = errors.New("gandiva: lost the connection to the agent; the job must exit")

// ErrLeaseLapsed is returned by Step (wrapped with ErrAgentLost, so
// errors.Is(err, ErrAgentLost) holds too) when the agent has not renewed
// its lease on the job in time: the agent is frozen or cut off from the
// server, which restarts the job elsewhere once its node time-out passes.
// This copy must stop before then; it exits with a non-zero status.
var ErrLeaseLapsed = errors.New("gandiva: the agent's lease on the job lapsed")

// ErrSuperseded is returned by Step when a checkpoint could not be written
// because a later attempt of the job has written one
// (protocol.ErrStaleCheckpoint): this copy is stale and must exit with a
// non-zero status.
var ErrSuperseded = errors.New("gandiva: a later attempt of this job has taken over; this copy must exit")

// Hooks are the job's own save and load functions. Every hook is optional,
// but without Save and Load the job can neither be suspended to host memory
// with its accelerator freed nor checkpointed (its migration is then a
// restart from scratch).
type Hooks struct {
	// Save writes everything the job needs to continue exactly where it is
	// (model, optimizer, data position, random generators) to w. It is used
	// for checkpoints and, when Offload is nil, to keep the state in host
	// memory during a suspension.
	Save func(w io.Writer) error
	// Load restores what Save wrote, replacing the job's current state.
	Load func(r io.Reader) error
	// Release, when set, is called after Save during a suspension to free
	// the accelerator's memory; Load must then rebuild what it freed.
	Release func() error
	// Offload and Reload, when both set, replace Save+Release and Load for
	// suspensions: Offload moves the state to host memory and frees the
	// accelerator, returning the bytes it moved; Reload moves it back.
	// Save must still work while offloaded (checkpoints of suspended jobs).
	Offload func() (int64, error)
	Reload  func() error
}

// Client is one job process's connection to its agent.
type Client struct {
	hooks       Hooks
	env         func(string) string
	conn        net.Conn
	cmds        chan protocol.Msg
	lost        chan struct{}
	job         string
	attempt     int
	ckptDir     string
	ckptEvery   time.Duration
	reportEvery time.Duration
	preRun      bool

	done, start int64
	metric      *float64
	lastReturn  time.Time
	lastReport  time.Time
	lastCkpt    time.Time
	iterSum     time.Duration
	iterN       int
	deferred    *protocol.Msg // a Suspend waiting for its At
	stopped     bool
	closed      bool
	restored    bool
	term        chan os.Signal // SIGTERM, standalone or attached, with a checkpoint directory
	gpus        []int
	hold        bool // the welcome said to hold at the first boundary

	leaseMu    sync.Mutex
	leaseUntil time.Time // the agent's hold on the job ends (zero: no lease heard)
}

// New connects to the agent (when started by one, or, in a pod of a
// Kubernetes shared node, attached to the node's agent: see below) and
// restores the checkpoint in GANDIVA_CHECKPOINT_DIR when GANDIVA_RESTORE=1
// and there is one, calling hooks.Load. Build the model and the optimizer
// before calling New. It fails if a checkpoint must be restored but cannot
// be.
//
// Attached (GANDIVA_AGENT_SOCKET set, no GANDIVA_FD): New dials the socket,
// says which pod it is in, and waits for the agent's welcome, which gives
// the job its GPUs; it sets CUDA_VISIBLE_DEVICES and GANDIVA_GPUS to them
// before it calls hooks.Load and returns. So in a shared pod, nothing may
// initialise the GPU before New returns: build the model on the host (or
// lazily) and move it to the device after New. New fails if no agent
// welcomes it within GANDIVA_ATTACH_TIMEOUT seconds (default 120) or the
// agent refuses it.
func New(hooks Hooks) (*Client, error) {
	var conn net.Conn
	if v := os.Getenv(protocol.EnvFD); v != "" {
		fd, err := strconv.Atoi(v)
		if err != nil || fd < 0 {
			return nil, fmt.Errorf("gandiva: %s=%q is not a file descriptor", protocol.EnvFD, v)
		}
		f := os.NewFile(uintptr(fd), "gandiva-agent")
		conn, err = net.FileConn(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("gandiva: connecting to the agent on fd %d: %w", fd, err)
		}
	} else if path := os.Getenv(protocol.EnvAgentSocket); path != "" {
		timeout := durationEnv(os.Getenv, protocol.EnvAttachTimeout, time.Duration(protocol.DefaultAttachTimeout*float64(time.Second)))
		deadline := time.Now().Add(timeout)
		conn, err := dial(path, deadline)
		if err != nil {
			return nil, err
		}
		return newClientMode(hooks, os.Getenv, conn, &attach{setenv: os.Setenv, deadline: deadline})
	}
	return newClient(hooks, os.Getenv, conn)
}

// attach is what an attached client needs besides the connection.
type attach struct {
	setenv   func(k, v string) error
	deadline time.Time
}

// dial connects to the agent's socket for this pod, retrying while it is
// not there yet (the agent creates it when it sees the pod bound).
func dial(path string, deadline time.Time) (net.Conn, error) {
	for {
		conn, err := net.DialTimeout("unix", path, time.Until(deadline))
		if err == nil {
			return conn, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("gandiva: connecting to the agent at %s (%s): %w", path, protocol.EnvAgentSocket, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func newClient(hooks Hooks, env func(string) string, conn net.Conn) (*Client, error) {
	return newClientMode(hooks, env, conn, nil)
}

// newClientMode makes a client: standalone (conn nil), started by the
// agent (conn, at nil) or attached (conn and at).
func newClientMode(hooks Hooks, env func(string) string, conn net.Conn, at *attach) (*Client, error) {
	c := &Client{hooks: hooks, env: env, conn: conn, job: env(protocol.EnvJob), ckptDir: env(protocol.EnvCheckpointDir)}
	c.attempt, _ = strconv.Atoi(env(protocol.EnvAttempt))
	c.preRun = env(protocol.EnvPreRun) == "1"
	c.ckptEvery = durationEnv(env, protocol.EnvCheckpointEvery, 0)
	c.reportEvery = durationEnv(env, protocol.EnvReportEvery, time.Duration(protocol.DefaultReportEvery*float64(time.Second)))
	c.gpus = parseGPUs(env(protocol.EnvGPUs))
	var (
		meta    protocol.Meta
		ckpt    *os.File
		restore bool
	)
	if env(protocol.EnvRestore) == "1" && c.ckptDir != "" {
		var err error
		meta, ckpt, err = protocol.ReadCheckpoint(c.ckptDir)
		switch {
		case errors.Is(err, protocol.ErrNoCheckpoint):
		case err != nil:
			c.closeConn()
			return nil, fmt.Errorf("gandiva: restoring: %w", err)
		case hooks.Load == nil:
			ckpt.Close()
			c.closeConn()
			return nil, errors.New("gandiva: a checkpoint must be restored but Hooks.Load is nil")
		default:
			restore = true
		}
	}
	if c.conn != nil {
		c.cmds = make(chan protocol.Msg, 8)
		c.lost = make(chan struct{})
		go c.read()
	}
	if at != nil {
		// the hello first (the restored count is known from the metadata),
		// and the GPUs in the environment before the Load hook runs
		if err := c.attach(hooks, meta.Done, at); err != nil {
			if ckpt != nil {
				ckpt.Close()
			}
			c.closeConn()
			return nil, err
		}
	}
	var loadS float64
	if restore {
		t0 := time.Now()
		err := hooks.Load(bufio.NewReaderSize(ckpt, 1<<20))
		ckpt.Close()
		if err != nil {
			c.closeConn()
			return nil, fmt.Errorf("gandiva: restoring %s: %w", filepath.Join(c.ckptDir, meta.File), err)
		}
		c.done, c.restored = meta.Done, true
		loadS = time.Since(t0).Seconds()
	}
	c.start = c.done
	if (c.conn == nil || at != nil) && c.ckptDir != "" && hooks.Save != nil && !c.preRun {
		c.term = make(chan os.Signal, 1)
		signal.Notify(c.term, syscall.SIGTERM)
	}
	now := time.Now()
	c.lastReturn, c.lastReport, c.lastCkpt = now, now, now
	if c.conn != nil && (env(protocol.EnvHold) == "1" || c.hold) {
		// a warm start: hold at the first boundary, as if asked (Seq 0)
		c.deferred = &protocol.Msg{Kind: protocol.Suspend, At: c.done + 1}
	}
	if c.conn != nil && at == nil {
		err := c.send(protocol.Msg{Kind: protocol.Hello, Version: protocol.Version, PID: os.Getpid(),
			Hooks: hooks.Save != nil && hooks.Load != nil, Done: c.done, LoadSeconds: loadS, Leases: true})
		if err != nil {
			c.closeConn()
			return nil, err
		}
	}
	return c, nil
}

// attach says hello naming the pod and waits for the agent's welcome; it
// puts the GPUs the welcome gives in the environment.
func (c *Client) attach(hooks Hooks, done int64, at *attach) error {
	ns, name := c.env(protocol.EnvPodNamespace), c.env(protocol.EnvPodName)
	err := c.send(protocol.Msg{Kind: protocol.Hello, Version: protocol.Version, PID: os.Getpid(),
		Hooks: hooks.Save != nil && hooks.Load != nil, Done: done, Leases: true,
		PodUID: c.env(protocol.EnvPodUID), Pod: ns + "/" + name})
	if err != nil {
		return err
	}
	timer := time.NewTimer(time.Until(at.deadline))
	defer timer.Stop()
	var m protocol.Msg
	select {
	case m = <-c.cmds:
	case <-c.lost:
		select {
		case m = <-c.cmds:
		default:
			return errors.New("gandiva: the agent closed the connection without a welcome")
		}
	case <-timer.C:
		return fmt.Errorf("gandiva: no welcome from the agent in time (%s)", protocol.EnvAttachTimeout)
	}
	switch m.Kind {
	case protocol.Welcome:
	case protocol.Error:
		return fmt.Errorf("gandiva: the agent refused this process: %s", m.Message)
	default:
		return fmt.Errorf("gandiva: the agent answered the hello with %q, not %q", m.Kind, protocol.Welcome)
	}
	c.gpus, c.hold = slices.Clone(m.GPUs), m.Hold
	list := make([]string, len(m.GPUs))
	for i, g := range m.GPUs {
		list[i] = strconv.Itoa(g)
	}
	for _, k := range []string{"CUDA_VISIBLE_DEVICES", protocol.EnvGPUs} {
		if err := at.setenv(k, strings.Join(list, ",")); err != nil {
			return fmt.Errorf("gandiva: setting %s: %w", k, err)
		}
	}
	return nil
}

func parseGPUs(v string) []int {
	var out []int
	for _, f := range strings.Split(v, ",") {
		if g, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && g >= 0 {
			out = append(out, g)
		}
	}
	return out
}

func durationEnv(env func(string) string, key string, def time.Duration) time.Duration {
	f, err := strconv.ParseFloat(env(key), 64)
	if err != nil || f < 0 || f > 1e9 {
		return def
	}
	return time.Duration(f * float64(time.Second))
}

// Managed reports whether an agent started the job (or welcomed it,
// attached).
func (c *Client) Managed() bool { return c.conn != nil }

// GPUs returns the node-local GPU indices the job was given
// (GANDIVA_GPUS, or the attached agent's welcome); nil when none are known.
func (c *Client) GPUs() []int { return slices.Clone(c.gpus) }

// Restored reports whether New restored a checkpoint.
func (c *Client) Restored() bool { return c.restored }

// Done is the number of mini-batches done, counting those restored from a
// checkpoint: the index of the next mini-batch.
func (c *Client) Done() int64 { return c.done }

// SetMetric records the job's latest quality metric (a loss, an accuracy)
// for the next progress report.
func (c *Client) SetMetric(m float64) { c.metric = &m }

// Step marks the end of one mini-batch. It reports progress and carries out
// any request of the agent; during a suspension it blocks until the job is
// resumed. It returns ErrStop when the job must exit with status 0 (its
// checkpoint is written), ErrAgentLost when it must exit because its agent
// is gone, and otherwise an error only when a hook failed in a way that
// leaves the job's state unusable (a failed Load, a failed Release).
func (c *Client) Step() error {
	if c.stopped {
		if c.term != nil {
			return ErrTerminated
		}
		return ErrStop
	}
	now := time.Now()
	c.iterSum += now.Sub(c.lastReturn)
	c.iterN++
	c.done++
	if c.conn != nil && (c.done == c.start+1 || now.Sub(c.lastReport) >= c.reportEvery) {
		if err := c.report(now); err != nil {
			return err
		}
	}
	if c.ckptEvery > 0 && c.ckptDir != "" && c.hooks.Save != nil && now.Sub(c.lastCkpt) >= c.ckptEvery {
		if _, err := c.checkpoint(0, c.hooks.Save); errors.Is(err, protocol.ErrStaleCheckpoint) {
			return c.superseded(err)
		} else if err != nil {
			// A failed periodic checkpoint leaves the previous one; go on.
			fmt.Fprintf(os.Stderr, "gandiva: periodic checkpoint failed: %v\n", err)
		}
	}
	if c.term != nil {
		select {
		case <-c.term:
			if _, err := c.checkpoint(0, c.hooks.Save); err != nil {
				return fmt.Errorf("gandiva: checkpoint after SIGTERM: %w", err)
			}
			c.stopped = true
			c.stopSignals()
			return ErrTerminated
		default:
		}
	}
	err := c.boundary()
	c.lastReturn = time.Now()
	if err == nil && c.preRun {
		// The pre-run's first mini-batch is done (and reported above).
		c.stopped = true
		c.closeConn()
		return ErrStop
	}
	return err
}

// Close sends a last progress report and closes the connection.
func (c *Client) Close() error {
	if c.closed {
		return nil
	}
	c.closed = true
	c.stopSignals()
	var err error
	if c.conn != nil && !c.stopped {
		err = c.report(time.Now())
	}
	c.closeConn()
	return err
}

// stopSignals gives SIGTERM its default action back.
func (c *Client) stopSignals() {
	if c.term != nil {
		signal.Stop(c.term)
	}
}

func (c *Client) closeConn() {
	if c.conn != nil {
		c.conn.Close()
	}
}

func (c *Client) report(now time.Time) error {
	m := protocol.Msg{Kind: protocol.Progress, Done: c.done, Metric: c.metric}
	if c.iterN > 0 {
		m.IterTime = c.iterSum.Seconds() / float64(c.iterN)
	}
	c.iterSum, c.iterN, c.lastReport = 0, 0, now
	return c.send(m)
}

func (c *Client) send(m protocol.Msg) error {
	// A write blocked past the lease (an agent that stopped reading) fails.
	c.conn.SetWriteDeadline(c.leaseEnd())
	if _, err := c.conn.Write(protocol.Encode(m)); err != nil {
		if c.leaseLapsed() {
			return c.lapsed()
		}
		return fmt.Errorf("%w (%v)", ErrAgentLost, err)
	}
	return nil
}

func (c *Client) read() {
	defer close(c.lost)
	sc := bufio.NewScanner(c.conn)
	sc.Buffer(make([]byte, 4096), protocol.MaxLine+1)
	for sc.Scan() {
		m, err := protocol.Decode(sc.Bytes())
		if err != nil {
			continue
		}
		if m.Kind == protocol.Lease {
			// Read as it comes (not queued behind a long mini-batch).
			c.leaseMu.Lock()
			c.leaseUntil = time.Now().Add(time.Duration(min(m.LeaseSeconds, 1e6) * float64(time.Second)))
			c.leaseMu.Unlock()
			continue
		}
		c.cmds <- m
	}
}

// leaseEnd is when the agent's hold on the job ends; zero when the agent
// has sent no lease (an older agent: no fencing by the client).
func (c *Client) leaseEnd() time.Time {
	c.leaseMu.Lock()
	defer c.leaseMu.Unlock()
	return c.leaseUntil
}

func (c *Client) leaseLapsed() bool {
	end := c.leaseEnd()
	return !end.IsZero() && time.Now().After(end)
}

// lapsed stops the job for good: its agent's lease lapsed.
func (c *Client) lapsed() error {
	c.stopped = true
	c.closeConn()
	return fmt.Errorf("%w: %w: no renewal from the agent in time; the job may be restarted elsewhere, so this copy stops", ErrAgentLost, ErrLeaseLapsed)
}

// superseded stops the job for good: a later attempt has checkpointed.
func (c *Client) superseded(err error) error {
	c.stopped = true
	c.closeConn()
	return fmt.Errorf("%w: %w", ErrSuperseded, err)
}

// leaseTimer fires when the current lease ends, or in 250 ms if that is
// sooner (a renewal may have shortened it meanwhile: the caller checks
// leaseLapsed and waits again); never without a lease. Stop it when done.
func (c *Client) leaseTimer() (<-chan time.Time, func()) {
	end := c.leaseEnd()
	if end.IsZero() {
		return nil, func() {}
	}
	t := time.NewTimer(min(max(time.Until(end), 0)+time.Millisecond, 250*time.Millisecond))
	return t.C, func() { t.Stop() }
}

// boundary carries out the agent's pending requests.
func (c *Client) boundary() error {
	if c.conn == nil {
		return nil
	}
	if c.leaseLapsed() {
		return c.lapsed()
	}
	for {
		if d := c.deferred; d != nil && c.done >= d.At {
			c.deferred = nil
			if err := c.suspend(*d); err != nil {
				return err
			}
			continue
		}
		select {
		case m := <-c.cmds:
			if err := c.command(m); err != nil {
				return err
			}
		case <-c.lost:
			select {
			case m := <-c.cmds: // commands sent before the close still count
				if err := c.command(m); err != nil {
					return err
				}
				continue
			default:
			}
			return ErrAgentLost
		default:
			return nil
		}
	}
}

// command carries out one request while the job is running.
func (c *Client) command(m protocol.Msg) error {
	switch m.Kind {
	case protocol.Suspend:
		if m.At > c.done {
			c.deferred = &m
			return nil
		}
		return c.suspend(m)
	case protocol.Checkpoint:
		if c.hooks.Save == nil {
			return c.send(protocol.Msg{Kind: protocol.Error, Seq: m.Seq, Message: "the job has no Save hook"})
		}
		saved, err := c.checkpoint(m.Seq, c.hooks.Save)
		if err != nil {
			c.send(protocol.Msg{Kind: protocol.Error, Seq: m.Seq, Message: err.Error()})
			if errors.Is(err, protocol.ErrStaleCheckpoint) {
				return c.superseded(err)
			}
			return nil
		}
		if saved && m.Exit {
			c.stopped = true
			c.closeConn()
			return ErrStop
		}
		return nil
	case protocol.Resume:
		return c.send(protocol.Msg{Kind: protocol.Resumed, Seq: m.Seq, Done: c.done})
	default:
		return c.send(protocol.Msg{Kind: protocol.Error, Seq: m.Seq, Message: fmt.Sprintf("unknown command %q", m.Kind)})
	}
}

// checkpoint writes a checkpoint with save and reports it (seq 0: a periodic
// one). It returns whether it was committed.
func (c *Client) checkpoint(seq uint64, save func(io.Writer) error) (bool, error) {
	if c.ckptDir == "" {
		return false, fmt.Errorf("no checkpoint directory (%s)", protocol.EnvCheckpointDir)
	}
	t0 := time.Now()
	meta, err := protocol.WriteCheckpoint(c.ckptDir, protocol.Meta{Job: c.job, Attempt: c.attempt, Done: c.done}, func(w io.Writer) error {
		bw := bufio.NewWriterSize(w, 1<<20)
		if err := save(bw); err != nil {
			return err
		}
		return bw.Flush()
	})
	c.lastCkpt = time.Now()
	if err != nil {
		return false, err
	}
	if c.conn != nil {
		err = c.send(protocol.Msg{Kind: protocol.Saved, Seq: seq, Done: c.done, Bytes: meta.Bytes,
			Path: filepath.Join(c.ckptDir, protocol.MetaFile), SaveSeconds: time.Since(t0).Seconds()})
	}
	return true, err
}

// suspend saves the state to host memory, frees the accelerator, and waits
// for the agent's next command.
func (c *Client) suspend(m protocol.Msg) error {
	t0 := time.Now()
	var (
		host     []byte // the state, when saved with Save
		inHost   bool
		size     int64
		released bool
		err      error
	)
	h := c.hooks
	switch {
	case h.Offload != nil && h.Reload != nil:
		size, err = h.Offload()
		released = err == nil
	case h.Save != nil && h.Load != nil:
		var buf bytes.Buffer
		if err = h.Save(&buf); err == nil {
			host, inHost, size = buf.Bytes(), true, int64(buf.Len())
			if h.Release != nil {
				if rerr := h.Release(); rerr != nil {
					c.send(protocol.Msg{Kind: protocol.Error, Seq: m.Seq, Message: "release: " + rerr.Error()})
					return fmt.Errorf("gandiva: suspending: release: %w", rerr)
				}
				released = true
			}
		}
	}
	if err != nil {
		return c.send(protocol.Msg{Kind: protocol.Error, Seq: m.Seq, Message: "save: " + err.Error()})
	}
	if err := c.send(protocol.Msg{Kind: protocol.Suspended, Seq: m.Seq, Done: c.done, Bytes: size,
		Released: released, SaveSeconds: time.Since(t0).Seconds()}); err != nil {
		return err
	}
	for {
		var m protocol.Msg
		leaseC, stopLease := c.leaseTimer()
		select {
		case <-leaseC:
			stopLease()
			if c.leaseLapsed() {
				return c.lapsed()
			}
			continue // renewed meanwhile
		case <-c.term: // nil unless SIGTERM checkpoints (a pod being moved)
			save := h.Save
			if inHost {
				save = func(w io.Writer) error { _, err := w.Write(host); return err }
			}
			if _, err := c.checkpoint(0, save); err != nil {
				return fmt.Errorf("gandiva: checkpoint after SIGTERM (suspended): %w", err)
			}
			c.stopped = true
			c.stopSignals()
			return ErrTerminated
		case m = <-c.cmds:
		case <-c.lost:
			select {
			case m = <-c.cmds:
			default:
				stopLease()
				return ErrAgentLost
			}
		}
		stopLease()
		switch m.Kind {
		case protocol.Resume:
			t0 := time.Now()
			switch {
			case h.Offload != nil && h.Reload != nil:
				err = h.Reload()
			case inHost:
				err = h.Load(bytes.NewReader(host))
			}
			if err != nil {
				c.send(protocol.Msg{Kind: protocol.Error, Seq: m.Seq, Message: "load: " + err.Error()})
				return fmt.Errorf("gandiva: resuming: %w", err)
			}
			c.iterSum, c.iterN = 0, 0
			return c.send(protocol.Msg{Kind: protocol.Resumed, Seq: m.Seq, Done: c.done, LoadSeconds: time.Since(t0).Seconds()})
		case protocol.Checkpoint:
			save := h.Save
			if inHost {
				save = func(w io.Writer) error { _, err := w.Write(host); return err }
			}
			if save == nil {
				c.send(protocol.Msg{Kind: protocol.Error, Seq: m.Seq, Message: "the job has no Save hook"})
				continue
			}
			saved, err := c.checkpoint(m.Seq, save)
			if err != nil {
				c.send(protocol.Msg{Kind: protocol.Error, Seq: m.Seq, Message: err.Error()})
				if errors.Is(err, protocol.ErrStaleCheckpoint) {
					return c.superseded(err)
				}
				continue
			}
			if saved && m.Exit {
				c.stopped = true
				c.closeConn()
				return ErrStop
			}
		case protocol.Suspend:
			c.send(protocol.Msg{Kind: protocol.Suspended, Seq: m.Seq, Done: c.done, Bytes: size, Released: released})
		default:
			c.send(protocol.Msg{Kind: protocol.Error, Seq: m.Seq, Message: fmt.Sprintf("%q while suspended", m.Kind)})
		}
	}
}
