package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/policy/registry"
	"github.com/gandiva-sched/gandiva/internal/server"
)

// serverProc is a `gandiva server` subprocess.
type serverProc struct {
	t       *testing.T
	args    []string
	cmd     *exec.Cmd
	logPath string
	url     string
	data    string
}

// startServerProc starts `gandiva server` as a process on a fresh store and
// port, with the extra flags; at the test's end it is killed, and its log
// shown if the test failed.
func startServerProc(t *testing.T, extra ...string) *serverProc {
	t.Helper()
	data := t.TempDir()
	addr := freePort(t)
	p := &serverProc{t: t, url: "http://" + addr, logPath: filepath.Join(t.TempDir(), "server.log"), data: data,
		args: append([]string{"server", "--listen", addr, "--data-dir", data, "--checkpoint-root", openDir(t)}, extra...)}
	p.start()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log:\n%s", p.tail())
		}
		p.kill9()
	})
	return p
}

// token reads a token file of the server's store (admin.token, agent.token).
func (p *serverProc) token(name string) string {
	p.t.Helper()
	b, err := os.ReadFile(filepath.Join(p.data, name))
	if err != nil {
		p.t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func (p *serverProc) start() {
	p.t.Helper()
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		p.t.Fatal(err)
	}
	p.cmd = exec.Command(bin, p.args...)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	logf.Close()
	waitHealthy(p.t, p.url, 20*time.Second)
}

func (p *serverProc) kill9() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	p.cmd.Wait()
}

func (p *serverProc) tail() string {
	data, _ := os.ReadFile(p.logPath)
	if len(data) > 6000 {
		data = data[len(data)-6000:]
	}
	return string(data)
}

func killPolicy() string {
	for _, n := range registry.Names() {
		if n == "gandiva" {
			return "gandiva:quantum=2;cooldown=5"
		}
	}
	return "fifo"
}

// TestKill9 runs 50 jobs while the server process is killed with SIGKILL at
// random moments and restarted on the same store: every job finishes exactly
// once with the checksum of an uninterrupted run, none is lost, and no two
// copies of a job ever run at the same time (each trainer holds an exclusive
// lock while it runs and records an overlap if it cannot take it).
func TestKill9(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("GANDIVA_E2E_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (rerun with GANDIVA_E2E_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	pol := killPolicy()
	// (snapshots every 20 entries: restarts read one and replay the rest)
	p := startServerProc(t, "--policy", pol, "--node-timeout", "8s", "--checkpoint-every", "1", "--retry-backoff", "1",
		"--snapshot-every", "20")
	tok := p.token
	admin := api.NewClient(p.url, tok("admin.token"))
	work := openDir(t)
	startAgent(t, p.url, tok("agent.token"), "node-a", "2xV100", work+"/a", nil)
	startAgent(t, p.url, tok("agent.token"), "node-b", "2xV100", work+"/b", nil)
	waitNodes(t, admin, 2, 10*time.Second)

	dir := jobDir(t)
	var jobs []*trainerJob
	ctx := context.Background()
	for i := 0; i < 50; i++ {
		j := &trainerJob{name: fmt.Sprintf("k%02d", i), steps: 20 + rng.IntN(25), stepTime: 40 * time.Millisecond,
			seed: uint64(1000 + i), dir: dir, gpus: 1 + rng.IntN(2)/1*boolInt(i%7 == 3)}
		j.reference(t)
		jobs = append(jobs, j)
		if _, err := admin.Submit(ctx, j.request()); err != nil {
			t.Fatal(err)
		}
	}
	// Kill and restart the server at random moments while the jobs run.
	kills := 4
	for k := 0; k < kills; k++ {
		time.Sleep(time.Duration(500+rng.IntN(3500)) * time.Millisecond)
		p.kill9()
		t.Logf("kill -9 #%d of the server", k+1)
		time.Sleep(time.Duration(rng.IntN(600)) * time.Millisecond)
		p.start()
	}
	done := waitJobs(t, admin, len(jobs), 150*time.Second)
	restarts := 0
	for _, j := range jobs {
		v := done[j.name]
		if v.State != "finished" {
			t.Errorf("%s (%s): %s: %s", j.name, v.ID, v.State, v.Reason)
		}
		l := checkExactlyOnce(t, j)
		for _, st := range l.Starts {
			if !strings.HasSuffix(st, " 0") {
				restarts++ // a process that started from a checkpoint
			}
		}
	}
	t.Logf("%d jobs finished exactly once across %d server kills (%d processes restored from checkpoints), policy %s", len(jobs), kills, restarts, pol)
	if m := metric(t, p.url, tok("admin.token"), "gandiva_replay_divergences"); m != "0" {
		t.Errorf("the last replay diverged from the recorded history: gandiva_replay_divergences %s", m)
	}
	if m := metric(t, p.url, tok("admin.token"), "gandiva_start_snapshot_entry"); m == "0" || m == "(missing)" {
		t.Errorf("the last start read no snapshot (gandiva_start_snapshot_entry %s); it should have, with --snapshot-every 20", m)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// metric reads one unlabelled metric from /metrics.
func metric(t *testing.T, url, token, name string) string {
	t.Helper()
	rq, _ := http.NewRequest("GET", url+"/metrics", nil)
	rq.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(rq)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(body), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == name {
			return f[1]
		}
	}
	return "(missing)"
}

// TestAgentKilled: an agent (a real process) is killed with SIGKILL while
// its jobs run; its jobs die with it, the server declares the node lost
// after its time-out, and the jobs resume on the other agent from their last
// checkpoints (not from scratch), finishing exactly once with the right
// checksum.
func TestAgentKilled(t *testing.T) {
	fp := engine.DefaultFailurePolicy()
	fp.Backoff = 1
	s, url := inProcServer(t, server.Config{Policy: "fifo", PreRun: false, CheckpointEvery: 0.5, Failure: &fp, NodeTimeout: 3 * time.Second})
	admin := api.NewClient(url, s.AdminToken)
	work := openDir(t)
	// node-a is a separate process, so that it can be killed with -9.
	a := agentProc(t, url, s.AgentToken, "node-a", "2xV100", work+"/a")
	waitNodes(t, admin, 1, 10*time.Second)
	dir := jobDir(t)
	var jobs []*trainerJob
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		j := &trainerJob{name: fmt.Sprintf("a%d", i), steps: 120, stepTime: 40 * time.Millisecond, seed: uint64(7 + i), dir: dir, noPreRun: true}
		j.reference(t)
		jobs = append(jobs, j)
		if _, err := admin.Submit(ctx, j.request()); err != nil {
			t.Fatal(err)
		}
	}
	// Both run on node-a (the only node); wait for progress and a checkpoint.
	waitRunning(t, admin, 2, 20*time.Second, func(j api.Job) bool { return j.Done >= 40 })
	startAgent(t, url, s.AgentToken, "node-b", "2xV100", work+"/b", nil)
	waitNodes(t, admin, 2, 10*time.Second)
	a.Process.Signal(syscall.SIGKILL)
	a.Wait()
	killedAt := time.Now()
	done := waitJobs(t, admin, 2, 60*time.Second)
	for _, j := range jobs {
		if v := done[j.name]; v.State != "finished" {
			t.Errorf("%s: %s: %s", j.name, v.State, v.Reason)
		}
		l := checkExactlyOnce(t, j)
		if len(l.Starts) != 2 {
			t.Errorf("%s: starts %v, want two (node-a, then node-b)", j.name, l.Starts)
			continue
		}
		_, from, _ := strings.Cut(l.Starts[1], " ")
		if n, _ := strconv.Atoi(from); n < 20 {
			t.Errorf("%s resumed from mini-batch %s, want its last checkpoint (≥ 20 of 120)", j.name, from)
		}
	}
	ns, _ := admin.Nodes(ctx)
	for _, n := range ns {
		if n.Name == "node-a" && n.Up {
			t.Errorf("node-a still up after its agent was killed")
		}
	}
	// The agent comes back under the same name: the node is up again.
	startAgent(t, url, s.AgentToken, "node-a", "2xV100", work+"/a", nil)
	waitNodes(t, admin, 2, 10*time.Second)
	t.Logf("both jobs resumed on node-b from their checkpoints and finished %.1f s after node-a was killed", time.Since(killedAt).Seconds())
}

// TestServerDownPastLease: the server stays down longer than the agents'
// lease, so they kill their jobs (a job must never run unsupervised while
// the server may restart it elsewhere); when the server returns, the jobs
// are requeued without losing an attempt and finish exactly once from their
// checkpoints.
func TestServerDownPastLease(t *testing.T) {
	p := startServerProc(t, "--policy", "fifo", "--node-timeout", "3s", "--checkpoint-every", "0.5", "--retry-backoff", "0.5", "--prerun=false")
	tok := p.token
	admin := api.NewClient(p.url, tok("admin.token"))
	startAgent(t, p.url, tok("agent.token"), "node-a", "2xV100", openDir(t), nil)
	waitNodes(t, admin, 1, 10*time.Second)
	dir := jobDir(t)
	var jobs []*trainerJob
	for i := 0; i < 2; i++ {
		j := &trainerJob{name: fmt.Sprintf("l%d", i), steps: 100, stepTime: 40 * time.Millisecond, seed: uint64(70 + i), dir: dir}
		j.reference(t)
		jobs = append(jobs, j)
		if _, err := admin.Submit(context.Background(), j.request()); err != nil {
			t.Fatal(err)
		}
	}
	waitState(t, admin, "j1", "running")
	time.Sleep(1500 * time.Millisecond) // progress and checkpoints
	p.kill9()
	time.Sleep(3500 * time.Millisecond) // past the lease (2 s): the agent kills its jobs
	p.start()
	done := waitJobs(t, admin, 2, 60*time.Second)
	for _, j := range jobs {
		v := done[j.name]
		if v.State != "finished" {
			t.Errorf("%s: %s: %s", j.name, v.State, v.Reason)
		}
		l := checkExactlyOnce(t, j)
		if len(l.Starts) < 2 {
			t.Errorf("%s: starts %v: the lease should have stopped it once", j.name, l.Starts)
		}
		full, err := admin.Get(context.Background(), v.ID)
		if err != nil {
			t.Fatal(err)
		}
		lost := false
		for _, h := range full.History {
			lost = lost || strings.Contains(h.Reason, "no contact with the server")
		}
		if !lost {
			t.Errorf("%s: history does not say the agent stopped it for lack of contact: %+v", j.name, full.History)
		}
	}
}

// TestSubmitRetriedAcrossKill9: submissions with idempotency keys, retried
// until answered while the server process is killed with SIGKILL and
// restarted, leave exactly one job per key; and a submission whose answer
// was lost (the server killed right after it) is found again by its key
// after the restart, without a second job.
func TestSubmitRetriedAcrossKill9(t *testing.T) {
	p := startServerProc(t, "--policy", "fifo")
	admin := api.NewClient(p.url, p.token("admin.token"))
	startAgent(t, p.url, p.token("agent.token"), "node-a", "4xV100", openDir(t), nil) // (no node, no job: the cluster must hold it)
	waitNodes(t, admin, 1, 10*time.Second)
	req := func(i int) *api.JobRequest {
		return &api.JobRequest{Name: fmt.Sprintf("r%02d", i), Command: []string{"true"}, GPUs: 1, WorkDir: "/tmp",
			IdempotencyKey: fmt.Sprintf("retry-%02d", i)}
	}

	// A lost answer: submitted, then the server dies; the retry after the
	// restart gets the same job.
	first, err := admin.Submit(t.Context(), req(0))
	if err != nil {
		t.Fatal(err)
	}
	p.kill9()
	p.start()
	again, err := admin.Submit(t.Context(), req(0))
	if err != nil || again.ID != first.ID {
		t.Fatalf("retry after kill -9: %v, %v; want job %s", again, err, first.ID)
	}

	// A burst retried through kills.
	const n = 40
	ids := make([]string, n)
	retries := 0
	errs := make(chan error, 1)
	go func() {
		defer close(errs)
		deadline := time.Now().Add(60 * time.Second)
		for i := 1; i < n; i++ {
			for {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				j, err := admin.Submit(ctx, req(i))
				cancel()
				if err == nil {
					ids[i] = j.ID
					time.Sleep(10 * time.Millisecond) // spread the burst over the kills
					break
				}
				var ae *api.Error
				if errors.As(err, &ae) && ae.Status < 500 {
					errs <- fmt.Errorf("submission %d: %w", i, err) // refused, not lost
					return
				}
				if time.Now().After(deadline) {
					errs <- fmt.Errorf("submission %d: no answer within a minute: %w", i, err)
					return
				}
				retries++
				time.Sleep(20 * time.Millisecond)
			}
		}
	}()
	for k := 0; k < 4; k++ {
		time.Sleep(80 * time.Millisecond)
		p.kill9()
		p.start()
	}
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("%d submissions retried after a failure", retries)
	jobs, err := admin.List(t.Context(), api.ListOptions{All: true})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string][]string{}
	for _, j := range jobs {
		byName[j.Name] = append(byName[j.Name], j.ID)
	}
	if len(jobs) != n {
		t.Errorf("%d jobs for %d keys: %v", len(jobs), n, byName)
	}
	for i := 1; i < n; i++ {
		if got := byName[fmt.Sprintf("r%02d", i)]; len(got) != 1 || got[0] != ids[i] {
			t.Errorf("r%02d: jobs %v, the answered submission said %s", i, got, ids[i])
		}
	}
}

// waitRunning waits until n jobs run with ready true of them (their
// progress), failing the test after within.
func waitRunning(t *testing.T, admin *api.Client, n int, within time.Duration, ready func(api.Job) bool) {
	t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(50 * time.Millisecond) {
		list, _ := admin.List(context.Background(), api.ListOptions{})
		got := 0
		for _, j := range list {
			if j.State == "running" && ready(j) {
				got++
			}
		}
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("jobs did not make progress on node-a: %+v", list)
		}
	}
}
