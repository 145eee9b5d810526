package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/server"
)

// mechanisms is a test-only policy that forces Gandiva's mechanisms
// deterministically, independent of any real policy's heuristics, on two
// nodes of two GPUs (GPUs 0-1 on the first node, 2-3 on the second):
//
//   - j1 runs on GPU 0 and j5 is packed onto it (Share);
//   - j2, j3 and j6 are time-sliced on GPU 2, round-robin, one quantum each;
//   - j4 starts on GPU 3 (second node) and, once it reports `moveAt`
//     mini-batches done, migrates to GPU 1 (first node).
type mechanisms struct {
	quantum float64
	moveAt  float64
	sliced  []string
	turn    int
	since   float64
	moved   bool
}

var _ policy.Policy = (*mechanisms)(nil)

func (p *mechanisms) Name() string { return "e2e-mechanisms" }

func (p *mechanisms) Schedule(s *cluster.Snapshot) cluster.Decision {
	var d cluster.Decision
	byName := map[string]*cluster.Job{}
	for _, j := range s.Active() {
		byName[j.Spec.Name] = j
	}
	start := func(name string, gpu cluster.GPUID, share bool) {
		j := byName[name]
		if j == nil || !j.State.Waiting() || j.NotBefore > s.Now {
			return
		}
		kind := cluster.Start
		if j.State == cluster.Suspended {
			kind = cluster.Resume
		}
		d.Actions = append(d.Actions, cluster.Action{Kind: kind, Job: j.ID, GPUs: []cluster.GPUID{gpu}, Share: share, Reason: "script"})
	}
	if s.Cluster.NumGPUs() < 4 {
		return d
	}
	start("j1", 0, false)
	start("j5", 0, true)
	start("j4", 3, false)
	if j := byName["j4"]; j != nil && !p.moved && j.State == cluster.Running && j.Done >= p.moveAt {
		d.Actions = append(d.Actions, cluster.Action{Kind: cluster.Migrate, Job: j.ID, GPUs: []cluster.GPUID{1}, Reason: "script: move to the other node"})
		p.moved = true
	}
	// Round-robin on GPU 2.
	var live []*cluster.Job
	for _, n := range p.sliced {
		if j := byName[n]; j != nil {
			live = append(live, j)
		}
	}
	var running *cluster.Job
	for _, j := range live {
		if j.State.Holding() {
			running = j
		}
	}
	next := func() *cluster.Job {
		for i := 1; i <= len(p.sliced); i++ {
			n := p.sliced[(p.turn+i)%len(p.sliced)]
			if j := byName[n]; j != nil && j.State.Waiting() && j.NotBefore <= s.Now {
				p.turn = (p.turn + i) % len(p.sliced)
				return j
			}
		}
		return nil
	}
	switch {
	case running == nil:
		if j := next(); j != nil {
			start(j.Spec.Name, 2, false)
			p.since = s.Now
		}
	case running.State == cluster.Running && s.Now >= p.since+p.quantum-1e-9:
		if j := next(); j != nil {
			d.Actions = append(d.Actions, cluster.Action{Kind: cluster.Suspend, Job: running.ID, Reason: "quantum"})
			start(j.Spec.Name, 2, false)
			p.since = s.Now
		}
	}
	if len(live) > 0 {
		d.WakeAt = p.since + p.quantum
		if d.WakeAt <= s.Now {
			d.WakeAt = s.Now + p.quantum
		}
	}
	return d
}

// TestMechanisms: two agents on localhost with two fake GPUs each, six
// deterministic trainers (real processes): three time-sliced on one GPU, one
// packed with another, one migrated between the agents. Every trainer's
// checksum equals its uninterrupted run's, each finished exactly once, and
// no two copies of a job ever ran at the same time. `gandiva logs -f`
// follows the migrated job across both attempts and nodes to its end (it
// returned at the migration), and `gandiva status` lists the attempts by
// number with their nodes, GPUs and outcomes.
func TestMechanisms(t *testing.T) {
	newPolicy := func() (policy.Policy, error) {
		return &mechanisms{quantum: 1.5, moveAt: 15, sliced: []string{"j2", "j3", "j6"}}, nil
	}
	fp := engine.DefaultFailurePolicy()
	fp.Backoff = 1
	// (no warm starts: this policy places each job on a GPU of its own
	// choosing, not where the engine would warm it; a warm process resumed
	// elsewhere restarts, and the test counts restarts)
	s, url := inProcServer(t, server.Config{Policy: "e2e-mechanisms", NewPolicy: newPolicy, PreRun: false,
		CheckpointEvery: 1, Failure: &fp, NodeTimeout: 10 * time.Second, WarmStarts: -1})
	admin := api.NewClient(url, s.AdminToken)
	work := openDir(t)
	startAgent(t, url, s.AgentToken, "node-a", "2xV100", work+"/a", nil)
	waitNodes(t, admin, 1, 10*time.Second) // node-a gets GPUs 0-1
	startAgent(t, url, s.AgentToken, "node-b", "2xV100", work+"/b", nil)
	waitNodes(t, admin, 2, 10*time.Second)

	dir := jobDir(t)
	var jobs []*trainerJob
	for i := 1; i <= 6; i++ {
		j := &trainerJob{name: fmt.Sprintf("t%d", i), steps: 40, stepTime: 60 * time.Millisecond, seed: uint64(100 + i), dir: dir}
		j.reference(t)
		jobs = append(jobs, j)
	}
	ctx := context.Background()
	for i, j := range jobs {
		v, err := admin.Submit(ctx, j.request())
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("j%d", i+1); v.ID != want {
			t.Fatalf("job %s got ID %s, want %s", j.name, v.ID, want)
		}
	}
	var follow, followErr bytes.Buffer
	logs := exec.Command(bin, "logs", "-f", "j4", "--server", url, "--token", s.AdminToken)
	logs.Stdout, logs.Stderr = &follow, &followErr
	if err := logs.Start(); err != nil {
		t.Fatal(err)
	}
	followed := make(chan error, 1)
	go func() { followed <- logs.Wait() }()
	done := waitJobs(t, admin, 6, 90*time.Second)
	select {
	case err := <-followed:
		if err != nil {
			t.Errorf("gandiva logs -f j4: %v\n%s", err, followErr.String())
		}
	case <-time.After(30 * time.Second):
		logs.Process.Kill()
		<-followed
		t.Errorf("gandiva logs -f j4 still ran 30 s after the job ended:\n%s\n%s", follow.String(), followErr.String())
	}
	for _, want := range []string{"starting at mini-batch 0 of 40", "restored from mini-batch", "mini-batch 40 loss"} {
		if !strings.Contains(follow.String(), want) {
			t.Errorf("gandiva logs -f j4 lacks %q: it stopped at the migration?\n%s\nstderr:\n%s", want, follow.String(), followErr.String())
		}
	}
	if want := "==> j4 attempt 1 on node-b GPU 1 <==\n==> j4 attempt 2 on node-a GPU 1 <==\n==> j4 finished <==\n"; followErr.String() != want {
		t.Errorf("gandiva logs -f j4's headers:\n%s\nwant:\n%s", followErr.String(), want)
	}
	st := mustCLI(t, url, s.AdminToken, "status", "j4")
	if !regexp.MustCompile(`\n +1  \S+  on node-b GPU 1: checkpointed: to move\n +2  \S+  on node-a GPU 1: finished\n`).MatchString(st) {
		t.Errorf("gandiva status j4 does not list its two attempts:\n%s", st)
	}
	for _, j := range jobs {
		v := done[j.name]
		if v.State != "finished" {
			t.Errorf("%s (%s): %s: %s", j.name, v.ID, v.State, v.Reason)
		}
		checkExactlyOnce(t, j)
	}
	// The mechanisms really happened.
	for _, n := range []string{"t2", "t3", "t6"} {
		if done[n].Suspends < 1 || done[n].Resumes < 1 {
			t.Errorf("%s was not time-sliced: %d suspends, %d resumes", n, done[n].Suspends, done[n].Resumes)
		}
	}
	if done["t5"].Packs < 1 {
		t.Errorf("t5 was not packed: %+v", done["t5"])
	}
	if done["t4"].Migrations != 1 {
		t.Errorf("t4: %d migrations, want 1", done["t4"].Migrations)
	}
	l := readLedger(t, jobs[3].dir+"/t4.ledger")
	if len(l.Starts) != 2 || strings.HasSuffix(l.Starts[1], " 0") {
		t.Errorf("t4 should have started twice, the second time from its checkpoint (mini-batch > 0): %v", l.Starts)
	}
	j4, err := admin.Get(ctx, "j4")
	if err != nil {
		t.Fatal(err)
	}
	var hist []string
	for _, h := range j4.History {
		hist = append(hist, h.To)
	}
	if !strings.Contains(strings.Join(hist, " "), "running migrating running finished") {
		t.Errorf("t4's history %v lacks running → migrating → running", hist)
	}
	// Time-slicing: a suspended job's state stays in memory; it resumes in
	// the same process (one ledger start) unless moved.
	for _, n := range []string{"t2", "t3", "t6"} {
		if l := readLedger(t, dir+"/"+n+".ledger"); len(l.Starts) != 1 {
			t.Errorf("%s restarted (%v): a time-sliced job resumes in place", n, l.Starts)
		}
	}
}
