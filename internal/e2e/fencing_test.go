package e2e_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/server"
)

// TestAgentStopped: an agent (a real process) is stopped with SIGSTOP past
// its lease and the server's node time-out, while two of its jobs run: one
// with the in-job client, one without. The server restarts both on the
// other node; the stopped agent's copies must have stopped computing
// before that (the client's copy by itself, at a boundary, once its lease
// lapsed; the other by its guard, a process outside the agent), so no two
// copies of a job ever run at once (the trainers' ledger locks), and each
// job finishes exactly once with the checksum of an uninterrupted run.
// When the agent is continued it starts nothing again.
func TestAgentStopped(t *testing.T) {
	fp := engine.DefaultFailurePolicy()
	fp.Backoff = 1
	s, url := inProcServer(t, server.Config{Policy: "fifo", PreRun: false, CheckpointEvery: 0.5, Failure: &fp, NodeTimeout: 3 * time.Second})
	admin := api.NewClient(url, s.AdminToken)
	work := openDir(t)
	a := agentProc(t, url, s.AgentToken, "node-a", "2xV100", work+"/a")
	waitNodes(t, admin, 1, 10*time.Second)
	dir := jobDir(t)
	ctx := context.Background()
	jobs := []*trainerJob{
		{name: "client", steps: 150, stepTime: 40 * time.Millisecond, seed: 21, dir: dir, noPreRun: true},
		{name: "noclient", steps: 150, stepTime: 40 * time.Millisecond, seed: 22, dir: dir, noPreRun: true, extra: []string{"-no-client"}},
	}
	for _, j := range jobs {
		j.reference(t)
		if _, err := admin.Submit(ctx, j.request()); err != nil {
			t.Fatal(err)
		}
	}
	// Both run on node-a; the client's job has made progress and checkpointed.
	waitRunning(t, admin, 2, 30*time.Second, func(j api.Job) bool { return j.Name == "noclient" || j.Done >= 30 })
	startAgent(t, url, s.AgentToken, "node-b", "2xV100", work+"/b", nil)
	waitNodes(t, admin, 2, 10*time.Second)
	if err := a.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stoppedAt := time.Now()
	continued := false
	defer func() {
		if !continued {
			a.Process.Signal(syscall.SIGCONT)
		}
	}()
	done := waitJobs(t, admin, 2, 120*time.Second)
	// The agent comes back: it must not run the jobs again.
	a.Process.Signal(syscall.SIGCONT)
	continued = true
	for _, j := range jobs {
		if v := done[j.name]; v.State != "finished" {
			t.Errorf("%s: %s: %s", j.name, v.State, v.Reason)
		}
		l := checkExactlyOnce(t, j)
		if len(l.SpawnAt) != 2 {
			t.Errorf("%s: spawns %v, want two (node-a, then node-b)", j.name, l.Spawns)
			continue
		}
		second := l.SpawnAt[1]
		lastOld := 0.0 // the end of the first copy's last mini-batches
		for _, b := range l.Busy {
			if b[0] < second {
				lastOld = max(lastOld, b[1])
			}
		}
		if lastOld > second {
			t.Errorf("%s: the first copy computed until %.3f, after the second started at %.3f", j.name, lastOld, second)
		}
		stop := float64(stoppedAt.UnixNano()) / 1e9
		gap := "no mini-batch recorded (killed)"
		if lastOld > 0 {
			gap = fmt.Sprintf("its last mini-batch ended %.2f s after SIGSTOP", lastOld-stop)
		}
		t.Logf("%s: first copy: %s; second copy started %.2f s after SIGSTOP; overlaps %d; completions %v (uninterrupted: %s)",
			j.name, gap, second-stop, len(l.Overlaps), l.Done, j.checksum)
	}
	// Nothing of node-a's copies runs or runs again after SIGCONT: the
	// ledgers stay as they are while the agent reconnects.
	before := map[string]string{}
	for _, j := range jobs {
		b, _ := os.ReadFile(filepath.Join(j.dir, j.name+".ledger"))
		before[j.name] = string(b)
	}
	waitReconnected(t, admin, "node-a", 30*time.Second)
	for _, j := range jobs {
		b, _ := os.ReadFile(filepath.Join(j.dir, j.name+".ledger"))
		if string(b) != before[j.name] {
			t.Errorf("%s: the ledger changed after node-a was continued:\n%s", j.name, b[len(before[j.name]):])
		}
	}
}

// waitReconnected waits until node is up again.
func waitReconnected(t *testing.T, cl *api.Client, node string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		ns, err := cl.Nodes(context.Background())
		for _, n := range ns {
			if err == nil && n.Name == node && n.Up {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s did not come back within %s", node, within)
}
