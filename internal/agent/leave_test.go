package agent_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gandiva-sched/gandiva/client/protocol"
	"github.com/gandiva-sched/gandiva/internal/agent"
	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/server"
)

// TestLeaveKeepsLease: an agent stopping (SIGTERM) gives its job the whole
// grace to checkpoint while the server can be reached, even when that is
// longer than the lease. It used to stop polling as soon as it began to
// leave, so nothing renewed the lease: the job's guard (and its in-job
// client) ended the job once the lease ran out, before it reached the
// mini-batch boundary where it writes its checkpoint, whatever the grace.
// Now the agent keeps polling while it leaves (starting nothing), renewing
// the lease from that contact, and the server keeps the node up (it does
// not restart the job elsewhere) until the agent says it leaves.
func TestLeaveKeepsLease(t *testing.T) {
	e := slowJob(t)
	admin, stop, res, ckRoot := e.admin, e.stop, e.res, e.ckRoot
	stop()
	began := time.Now()

	// Past the node time-out, the agent still checkpoints its job, and the
	// server still counts the node as up: it has not given the job up.
	select {
	case err := <-res:
		res <- err
	case <-time.After(slowNodeTimeout + 500*time.Millisecond):
		ns, err := admin.Nodes(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range ns {
			if n.Name == "n1" && !n.Up {
				t.Errorf("node n1 declared down while its agent was still checkpointing (%s after SIGTERM): %s", time.Since(began), n.Reason)
			}
		}
	}
	select {
	case err := <-res:
		if err != nil {
			t.Fatalf("the agent ended with %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the agent did not leave")
	}
	took := time.Since(began)

	meta, found := findCheckpoint(t, ckRoot)
	if !found || meta.Done < 1 {
		t.Fatalf("no checkpoint written at the shutdown (the agent left %s after SIGTERM; lease %s): %+v", took, slowLease, meta)
	}
	if took < slowLease {
		t.Errorf("the agent left %s after SIGTERM: the checkpoint should have needed about a step (%s)", took, slowStep)
	}
	ns, _ := admin.Nodes(context.Background())
	for _, n := range ns {
		if n.Name == "n1" && (n.Up || !strings.Contains(n.Reason, "its agent left")) {
			t.Errorf("node n1 after its agent left: up=%v reason %q", n.Up, n.Reason)
		}
	}
	if v, err := admin.Get(context.Background(), "j1"); err != nil || v.State != "queued" {
		t.Errorf("the job after its agent left: %+v %v, want it requeued", v, err)
	}
}

const slowLease, slowNodeTimeout, slowStep = 2 * time.Second, 3 * time.Second, 6 * time.Second

// slowJobEnv is a server (lease 2 s) and an agent (grace 30 s) running a
// job with the in-job client whose mini-batches take 6 s, just after one.
type slowJobEnv struct {
	admin  *api.Client
	hs     *httptest.Server
	stop   func()     // SIGTERM
	res    chan error // Run's result
	ckRoot string     // the server's checkpoint root
}

// slowJob starts the server and the agent, and the job, and waits until it
// has done its first mini-batch: its next boundary, where it can
// checkpoint, is then about a step (three times the lease) away.
func slowJob(t *testing.T) *slowJobEnv {
	t.Helper()
	if testing.Short() {
		t.Skip("runs a job through a lease (seconds)")
	}
	bin := openDir(t)
	trainer := filepath.Join(bin, "trainer")
	if b, err := exec.Command("go", "build", "-o", trainer, "github.com/gandiva-sched/gandiva/examples/trainer").CombinedOutput(); err != nil {
		t.Fatalf("building the trainer: %v\n%s", err, b)
	}
	ckRoot := openDir(t)
	s, err := server.Open(server.Config{DataDir: t.TempDir(), Policy: "fifo", NoSync: true, NodeTimeout: slowNodeTimeout, Lease: slowLease,
		CheckpointRoot: ckRoot})
	if err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithCancel(context.Background())
	sdone := make(chan struct{})
	go func() { s.Run(sctx); close(sdone) }()
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(func() { hs.Close(); scancel(); <-sdone; s.Close() })
	admin := api.NewClient(hs.URL, s.AdminToken)

	g, _ := agent.ParseFakeGPUs("1xV100")
	rule := agent.RunAs{Self: true, SelfUsers: []string{"*"}}
	if os.Geteuid() == 0 {
		rule = agent.RunAs{Pattern: "nobody"}
	}
	a, err := agent.New(agent.Config{Server: hs.URL, Token: s.AgentToken, Name: "n1", GPUs: g, WorkRoot: openDir(t),
		PollWait: time.Second, RunAs: rule, Grace: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	res := make(chan error, 2)
	go func() { res <- a.Run(ctx) }()
	waitUp(t, admin, "n1", true)

	no := false
	if _, err := admin.Submit(context.Background(), &api.JobRequest{Name: "slow", GPUs: 1, MemGiB: 1, PreRun: &no,
		Command: []string{trainer, "-steps", "1000", "-dim", "64", "-step-time", slowStep.String()}}); err != nil {
		t.Fatal(err)
	}
	// (Return just after a mini-batch.)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		v, err := admin.Get(context.Background(), "j1")
		if err == nil && v.State == "running" && v.Done >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job made no progress: %+v %v", v, err)
		}
	}
	return &slowJobEnv{admin: admin, hs: hs, stop: stop, res: res, ckRoot: ckRoot}
}

// TestLeaveLapsesUnreachable: the lease still lapses while an agent leaves
// when the server cannot be reached: the job is ended then (the server will
// restart it elsewhere after its node time-out), whatever the grace.
func TestLeaveLapsesUnreachable(t *testing.T) {
	e := slowJob(t)
	e.hs.Close()
	e.stop()
	began := time.Now()
	select {
	case err := <-e.res:
		if err != nil {
			t.Fatalf("the agent ended with %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the agent did not leave")
	}
	if took := time.Since(began); took > slowLease+2*time.Second {
		t.Errorf("the agent, cut off from the server, left %s after SIGTERM: want its job ended within the lease (%s)", took, slowLease)
	}
	if meta, found := findCheckpoint(t, e.ckRoot); found {
		t.Errorf("a checkpoint was written after the lease lapsed: %+v", meta)
	}
}

// findCheckpoint finds a committed checkpoint under root.
func findCheckpoint(t *testing.T, root string) (meta protocol.Meta, found bool) {
	t.Helper()
	filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() || found {
			return nil
		}
		if m, f, err := protocol.ReadCheckpoint(path); err == nil {
			f.Close()
			meta, found = m, true
		} else if !errors.Is(err, protocol.ErrNoCheckpoint) {
			t.Errorf("checkpoint in %s: %v", path, err)
		}
		return nil
	})
	return meta, found
}
