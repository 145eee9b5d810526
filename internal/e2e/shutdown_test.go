package e2e_test

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/server"
)

// TestAgentSIGTERM: an agent process sent SIGTERM checkpoints its job
// (which has the in-job client and no periodic checkpoints), tells the
// server it leaves, and the server requeues the job at once (it used to
// wait the node time-out, 30 s; here the time-out is 10 minutes, so only
// the leave can requeue it within the test). The job resumes on the other
// node from the checkpoint taken at the shutdown and finishes exactly once
// with the checksum of an uninterrupted run.
func TestAgentSIGTERM(t *testing.T) {
	fp := engine.DefaultFailurePolicy()
	s, url := inProcServer(t, server.Config{Policy: "fifo", PreRun: false, CheckpointEvery: 0, Failure: &fp, NodeTimeout: 10 * time.Minute})
	admin := api.NewClient(url, s.AdminToken)
	work := openDir(t)
	a := agentProc(t, url, s.AgentToken, "node-a", "1xV100", filepath.Join(work, "a"), "--grace", "30s")
	waitNodes(t, admin, 1, 10*time.Second)
	dir := jobDir(t)
	j := &trainerJob{name: "term", steps: 150, stepTime: 40 * time.Millisecond, seed: 11, dir: dir, noPreRun: true}
	j.reference(t)
	if _, err := admin.Submit(context.Background(), j.request()); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		v, err := admin.Get(context.Background(), "j1")
		if err == nil && v.State == "running" && v.Done >= 30 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job made no progress on node-a: %+v %v", v, err)
		}
	}
	startAgent(t, url, s.AgentToken, "node-b", "1xV100", filepath.Join(work, "b"), nil)
	waitNodes(t, admin, 2, 10*time.Second)
	a.Process.Signal(syscall.SIGTERM)
	if err := a.Wait(); err != nil {
		t.Fatalf("the agent after SIGTERM: %v", err)
	}
	ns, _ := admin.Nodes(context.Background())
	for _, n := range ns {
		if n.Name == "node-a" && (n.Up || !strings.Contains(n.Reason, "its agent left")) {
			t.Fatalf("node-a after its agent left: up=%v reason %q", n.Up, n.Reason)
		}
	}
	done := waitJobs(t, admin, 1, 60*time.Second)
	if v := done["term"]; v.State != "finished" {
		t.Fatalf("the job: %s (%s)", v.State, v.Reason)
	}
	l := checkExactlyOnce(t, j)
	if len(l.Starts) != 2 {
		t.Fatalf("starts %v, want two (node-a, then node-b)", l.Starts)
	}
	_, from, _ := strings.Cut(l.Starts[1], " ")
	if n, _ := strconv.Atoi(from); n < 30 {
		t.Fatalf("resumed from mini-batch %s: want the checkpoint taken at the shutdown (≥ 30)", from)
	}
	full, _ := admin.Get(context.Background(), "j1")
	said := false
	for _, n := range full.Notes {
		said = said || strings.Contains(n, "lost its worker on node-a (its agent left: shutting down)")
	}
	if !said || full.Attempts != 2 {
		t.Fatalf("the job's notes do not say its agent left, or it used %d attempts (want 2, the second not a retry): %+v", full.Attempts, full.Notes)
	}
}
