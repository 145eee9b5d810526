package e2e_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/server"
	"github.com/gandiva-sched/gandiva/internal/torchtest"
)

// needTorch returns a Python with torch (torchtest.Python: the test is
// skipped without one, or fails under CI=true); -short skips the test.
func needTorch(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs PyTorch gangs for minutes")
	}
	return torchtest.Python(t)
}

// ddpJob is one examples/pytorch/ddp.py job.
type ddpJob struct {
	name     string
	py       string // a Python with torch
	steps    int
	stepTime float64 // seconds slept per mini-batch
	seed     int
	dir      string // its working directory: --out and --loss-log go there
	script   string
	// gpus, minGPUs, maxGPUs: the request's; every job runs a rank per GPU
	gpus, minGPUs, maxGPUs int
}

func (j *ddpJob) args(dir string) []string {
	return []string{j.py, j.script, "--steps", strconv.Itoa(j.steps), "--seed", strconv.Itoa(j.seed),
		"--step-time", strconv.FormatFloat(j.stepTime, 'g', -1, 64),
		"--out", filepath.Join(dir, j.name+".json"), "--loss-log", filepath.Join(dir, j.name+".loss"),
		"--gang-timeout", "60"} // (a rank left waiting fails within a minute, not five)
}

func (j *ddpJob) request() *api.JobRequest {
	no := false
	return &api.JobRequest{Name: j.name, Command: j.args(j.dir), GPUs: j.gpus, MinGPUs: j.minGPUs, MaxGPUs: j.maxGPUs,
		MemGiB: 1, WorkDir: j.dir, PreRun: &no, RankPerGPU: true, Env: map[string]string{"PYTHONDONTWRITEBYTECODE": "1"}}
}

// reference runs j uninterrupted outside Gandiva, with world ranks
// started by env as the agent starts them, and returns rank 0's result
// and loss log.
func (j *ddpJob) reference(t *testing.T, world int) (torchtest.Result, []torchtest.LossLine) {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res := torchtest.Run(ctx, t, torchtest.Ranks{Python: j.py, Args: j.args(dir)[1:], Out: filepath.Join(dir, j.name+".json"),
		Env: append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1"), World: world})
	return res, torchtest.ReadLossLog(t, filepath.Join(dir, j.name+".loss"))
}

// retryingServer starts an in-process fifo server (no pre-runs, no warm
// starts) that retries a failed attempt after 1 s and loses a node after
// nodeTimeout without a heartbeat; it returns the server, its URL and an
// admin client.
func retryingServer(t *testing.T, nodeTimeout time.Duration) (*server.Server, string, *api.Client) {
	t.Helper()
	fp := engine.DefaultFailurePolicy()
	fp.Backoff = 1
	s, url := inProcServer(t, server.Config{Policy: "fifo", PreRun: false, Failure: &fp, NodeTimeout: nodeTimeout, WarmStarts: -1})
	return s, url, api.NewClient(url, s.AdminToken)
}

// waitRetried waits (3 minutes at most) for the gang, job j1 named ddp,
// to end, noting its layouts in seen, and fails the test unless it
// finished after 2 attempts or more; it returns the job.
func waitRetried(t *testing.T, admin *api.Client, seen *layouts) *api.Job {
	t.Helper()
	done := watchJobs(t, admin, 1, "ddp", seen, 3*time.Minute)
	v, err := admin.Get(context.Background(), "j1")
	if err != nil {
		t.Fatal(err)
	}
	if done["ddp"].State != "finished" || v.Attempts < 2 {
		t.Fatalf("ddp: %s (%s) after %d attempts, want finished after at least 2", v.State, v.Reason, v.Attempts)
	}
	return v
}

// submitCheckpointed submits a copy of gang, in a directory of its own,
// that checkpoints every second, and returns the copy.
func submitCheckpointed(t *testing.T, admin *api.Client, gang *ddpJob) *ddpJob {
	t.Helper()
	j := *gang
	j.dir = jobDir(t)
	rq := j.request()
	every := 1.0
	rq.CheckpointEvery = &every
	if _, err := admin.Submit(context.Background(), rq); err != nil {
		t.Fatal(err)
	}
	return &j
}

// ddpSlicer is a test-only policy that puts a gang through the mechanisms
// in a fixed order, whatever the timing, in phases: (0) the gang runs on
// home; once it has done sliceAt mini-batches, (1) it is suspended and the
// other job runs on its GPUs (time-slicing); once that job has done
// otherFor, (2) the other is suspended and the gang resumed in place;
// once the gang has done moveAt, (3) it migrates to away and the other
// resumes on home. Each call it asks for what the phase wants and not yet
// is (an action refused is asked again), suspensions first.
type ddpSlicer struct {
	gang, other     string
	home, away      []cluster.GPUID
	sliceAt, moveAt float64
	otherFor        float64

	mu       sync.Mutex
	phase    int
	refusals []string // every refusal heard, for the test's log
	last     string   // the jobs as the last call saw them
}

var _ policy.Policy = (*ddpSlicer)(nil)

func (p *ddpSlicer) Name() string { return "e2e-ddp-slicer" }

func (p *ddpSlicer) Schedule(s *cluster.Snapshot) cluster.Decision {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range s.Rejected {
		p.refusals = append(p.refusals, fmt.Sprintf("t=%.1f %s of job %d: %s", s.Now, r.Action.Kind, r.Action.Job, r.Reason))
	}
	d := cluster.Decision{WakeAt: s.Now + 0.5}
	var g, o *cluster.Job
	p.last = fmt.Sprintf("t=%.1f:", s.Now)
	for _, j := range s.Active() {
		p.last += fmt.Sprintf(" %s %s on %v done %.0f notbefore %.1f;", j.Spec.Name, j.State, j.GPUs, j.Done, j.NotBefore)
		switch j.Spec.Name {
		case p.gang:
			g = j
		case p.other:
			o = j
		}
	}
	if g == nil || o == nil {
		if o != nil && p.phase == 3 { // the gang is done
			p.want(&d, s.Now, o, p.home)
		}
		return d
	}
	at := func(j *cluster.Job, gpus []cluster.GPUID) bool {
		return j.State == cluster.Running && slices.Equal(j.GPUs, gpus)
	}
	switch {
	case p.phase == 0 && at(g, p.home) && g.Done >= p.sliceAt:
		p.phase = 1
	case p.phase == 1 && at(o, p.home) && g.State == cluster.Suspended && o.Done >= p.otherFor:
		p.phase = 2
	case p.phase == 2 && at(g, p.home) && o.State == cluster.Suspended && g.Done >= p.moveAt:
		p.phase = 3
	}
	switch p.phase {
	case 0:
		p.want(&d, s.Now, g, p.home)
	case 1:
		p.want(&d, s.Now, g, nil)
		p.want(&d, s.Now, o, p.home)
	case 2:
		p.want(&d, s.Now, o, nil)
		p.want(&d, s.Now, g, p.home)
	case 3:
		p.want(&d, s.Now, g, p.away)
		p.want(&d, s.Now, o, p.home)
	}
	slices.SortStableFunc(d.Actions, func(a, b cluster.Action) int {
		return cmpBool(a.Kind != cluster.Suspend, b.Kind != cluster.Suspend)
	})
	p.last += fmt.Sprintf(" asked %v", d.Actions)
	return d
}

// want adds the action that takes j towards running on gpus (nil: being
// suspended), if it is not there and not on its way.
func (p *ddpSlicer) want(d *cluster.Decision, now float64, j *cluster.Job, gpus []cluster.GPUID) {
	if j == nil {
		return
	}
	add := func(kind cluster.ActionKind, gpus []cluster.GPUID) {
		d.Actions = append(d.Actions, cluster.Action{Kind: kind, Job: j.ID, GPUs: gpus, Reason: fmt.Sprintf("script: phase %d", p.phase)})
	}
	switch {
	case gpus == nil && j.State == cluster.Running:
		add(cluster.Suspend, nil)
	case gpus == nil:
	case j.State == cluster.Queued && j.NotBefore <= now:
		add(cluster.Start, gpus)
	case j.State == cluster.Suspended:
		add(cluster.Resume, gpus)
	case j.State == cluster.Running && !slices.Equal(j.GPUs, gpus):
		add(cluster.Migrate, gpus)
	}
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

func (p *ddpSlicer) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return fmt.Sprintf("phase %d; last saw %s; refusals:\n%s", p.phase, p.last, strings.Join(p.refusals, "\n"))
}

// layouts records where a job's ranks ran, as api.WorkersText, each once.
type layouts []string

func (l *layouts) see(ws []api.Worker) {
	if len(ws) == 0 {
		return
	}
	ws = slices.Clone(ws)
	slices.SortFunc(ws, func(a, b api.Worker) int { return a.Rank - b.Rank })
	s := api.WorkersText(ws)
	if !slices.Contains(*l, s) {
		*l = append(*l, s)
	}
}

// watchJobs waits until n jobs are terminal, recording the layouts of job
// name's ranks while it runs, and returns the jobs by name.
func watchJobs(t *testing.T, cl *api.Client, n int, name string, seen *layouts, within time.Duration) map[string]api.Job {
	t.Helper()
	deadline := time.Now().Add(within)
	ctx := context.Background()
	for time.Now().Before(deadline) {
		jobs, err := cl.List(ctx, api.ListOptions{All: true})
		if err == nil {
			ended := 0
			out := map[string]api.Job{}
			for _, j := range jobs {
				out[j.Name] = j
				switch j.State {
				case "finished", "failed", "cancelled":
					ended++
				}
				if j.Name == name && j.State == "running" {
					seen.see(j.Workers)
				}
			}
			if len(jobs) >= n && ended == len(jobs) {
				return out
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return waitJobs(t, cl, n, time.Second) // (fails, listing them)
}

// TestDDPGangLive: a 2-rank ddp.py gang (a rank per GPU, gloo on the CPU)
// under a live server and real agents, on one node and spread over two
// agents of one GPU each: time-sliced against another job (both ranks
// suspended at the same mini-batch and resumed in place, from memory),
// then migrated (a gang checkpoint, restored by a new attempt on other
// GPUs). Its final weights are bit-identical to an uninterrupted 2-rank
// run's, and its loss curve, mini-batch by mini-batch, too.
func TestDDPGangLive(t *testing.T) {
	py := needTorch(t)
	script := torchtest.ReadableScript(t, "../..")
	gang := &ddpJob{name: "ddp", py: py, steps: 60, stepTime: 0.1, seed: 7, gpus: 2, script: script}
	ref, refLoss := gang.reference(t, 2)
	for _, tc := range []struct {
		name   string
		agents []string // each agent's GPUs, in the order they register (GPU IDs follow)
		home   string   // the gang's ranks before and after the migration (api.WorkersText)
		away   string
	}{
		{"one-node", []string{"2xV100", "2xV100"}, "a0:0 a0:1", "a1:0 a1:1"},
		{"two-agents", []string{"1xV100", "1xV100", "1xV100", "1xV100"}, "a0:0 a1:0", "a2:0 a3:0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A policy each call: the server's is the first; its ETAs run
			// forks of the engine, each with a policy of its own.
			var (
				mu   sync.Mutex
				live *ddpSlicer
			)
			newPolicy := func() (policy.Policy, error) {
				// (the engine's jobs are named by their IDs)
				p := &ddpSlicer{gang: "j1", other: "j2", home: []cluster.GPUID{0, 1}, away: []cluster.GPUID{2, 3},
					sliceAt: 8, otherFor: 10, moveAt: 30}
				mu.Lock()
				if live == nil {
					live = p
				}
				mu.Unlock()
				return p, nil
			}
			t.Cleanup(func() {
				mu.Lock()
				defer mu.Unlock()
				if t.Failed() && live != nil {
					t.Logf("the script's %s", live.log())
				}
			})
			fp := engine.DefaultFailurePolicy()
			fp.Backoff = 1
			s, url := inProcServer(t, server.Config{Policy: "e2e-ddp-slicer", NewPolicy: newPolicy, PreRun: false,
				Failure: &fp, NodeTimeout: 30 * time.Second, WarmStarts: -1})
			admin := api.NewClient(url, s.AdminToken)
			defer func() {
				if t.Failed() {
					logHistories(t, admin, "j1", "j2")
				}
			}()
			work := openDir(t)
			for i, gpus := range tc.agents {
				name := fmt.Sprintf("a%d", i)
				startAgent(t, url, s.AgentToken, name, gpus, filepath.Join(work, name), nil)
				waitNodes(t, admin, i+1, 30*time.Second) // (in order: GPU IDs follow)
			}
			dir := jobDir(t)
			j := *gang
			j.dir = dir
			other := &trainerJob{name: "other", steps: 40, stepTime: 50 * time.Millisecond, seed: 11, gpus: 2, dir: dir, noPreRun: true}
			other.reference(t)
			ctx := context.Background()
			for i, rq := range []*api.JobRequest{j.request(), other.request()} {
				v, err := admin.Submit(ctx, rq)
				if err != nil {
					t.Fatal(err)
				}
				if want := fmt.Sprintf("j%d", i+1); v.ID != want {
					t.Fatalf("job %s got ID %s, want %s", rq.Name, v.ID, want)
				}
			}
			var seen layouts
			for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
				if v, err := admin.Get(ctx, "j1"); err == nil && v.State != "queued" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the gang did not start within a minute")
				}
			}
			done := watchJobs(t, admin, 2, "ddp", &seen, 4*time.Minute)
			g := done["ddp"]
			if g.State != "finished" || done["other"].State != "finished" {
				t.Fatalf("ddp %s (%s), other %s (%s): want both finished", g.State, g.Reason, done["other"].State, done["other"].Reason)
			}
			checkExactlyOnce(t, other)
			if g.Suspends < 1 || g.Resumes < 1 || g.Migrations != 1 {
				t.Errorf("ddp: %d suspensions, %d resumptions, %d migrations: want at least 1, 1, and 1", g.Suspends, g.Resumes, g.Migrations)
			}
			if !slices.Contains(seen, tc.home) || !slices.Contains(seen, tc.away) {
				t.Errorf("ddp's ranks ran on %q, want %q then %q (a rank per GPU)", seen, tc.home, tc.away)
			}
			res := torchtest.ReadResult(t, filepath.Join(dir, "ddp.json"))
			t.Logf("ddp: ranks on %q; %d suspensions, %d resumptions, %d migrations; result %+v", seen, g.Suspends, g.Resumes, g.Migrations, res)
			if res.Checksum != ref.Checksum || res.Steps != gang.steps || res.WorldSize != 2 || !res.Restored {
				t.Errorf("ddp's result %+v, want checksum %s of an uninterrupted 2-rank run, %d steps, world 2, restored (migrated)", res, ref.Checksum, gang.steps)
			}
			loss := torchtest.ReadLossLog(t, filepath.Join(dir, "ddp.loss"))
			torchtest.CheckContiguous(t, "ddp", loss, gang.steps)
			for i := range min(len(loss), len(refLoss)) {
				if loss[i] != refLoss[i] {
					t.Errorf("ddp's loss line %d is %+v, an uninterrupted run's %+v", i+1, loss[i], refLoss[i])
					break
				}
			}
		})
	}
	t.Run("rank-killed", func(t *testing.T) { ddpRankKilled(t, gang, ref, refLoss) })
	t.Run("agent-killed", func(t *testing.T) { ddpAgentKilled(t, gang, ref) })
}

// ddpAgentKilled: the agent of rank 1 of a 2-rank gang spread over two
// agents (processes of one GPU each, a third one idle) is killed with
// SIGKILL mid-run, and its rank with it. The gang's attempt ends (rank 0
// stops, by itself or killed by its agent on the server's word), and the
// gang starts again from its last checkpoint on the two agents left, to
// the weights of an uninterrupted run.
func ddpAgentKilled(t *testing.T, gang *ddpJob, ref torchtest.Result) {
	s, url, admin := retryingServer(t, 5*time.Second)
	defer func() {
		if t.Failed() {
			logHistories(t, admin, "j1")
		}
	}()
	work := openDir(t)
	var agents []*exec.Cmd
	for i := range 3 {
		name := fmt.Sprintf("a%d", i)
		agents = append(agents, agentProc(t, url, s.AgentToken, name, "1xV100", filepath.Join(work, name)))
		waitNodes(t, admin, i+1, 60*time.Second) // (in order: GPU i is a<i>'s)
	}
	j := submitCheckpointed(t, admin, gang)
	ctx := context.Background()
	var seen layouts
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		v, err := admin.Get(ctx, "j1")
		if err == nil {
			seen.see(v.Workers)
			if v.Done >= 20 {
				break
			}
		}
		if err == nil && v.State != "running" && v.State != "queued" || time.Now().After(deadline) {
			t.Fatalf("the gang did not reach mini-batch 20 (%+v, %v)", v, err)
		}
	}
	if !slices.Equal(seen, layouts{"a0:0 a1:0"}) {
		t.Fatalf("the gang ran on %q, want a0:0 a1:0", seen)
	}
	if err := agents[1].Process.Kill(); err != nil {
		t.Fatal(err)
	}
	t.Log("killed a1, the agent of rank 1")
	v := waitRetried(t, admin, &seen)
	if !slices.Contains(seen, "a0:0 a2:0") {
		t.Errorf("ddp ran on %q, want a0:0 a2:0 after a1's loss", seen)
	}
	res := torchtest.ReadResult(t, filepath.Join(j.dir, "ddp.json"))
	t.Logf("ddp: ranks on %q, %d attempts; result %+v", seen, v.Attempts, res)
	if res.Checksum != ref.Checksum || !res.Restored || res.Start == 0 {
		t.Errorf("ddp's result %+v, want checksum %s of an uninterrupted run, restored from a checkpoint past mini-batch 0", res, ref.Checksum)
	}
}

// ddpRankKilled: rank 1 of a 2-rank gang (one node, checkpoints every
// second) is killed with SIGKILL mid-run. Its peer must not hang in a
// collective: the server fails the gang's attempt, has rank 0 killed if it
// has not stopped by itself, and restarts the whole gang from its last
// checkpoint (a new attempt, once every process of the old one is gone),
// which ends with the weights of an uninterrupted run: the mini-batches
// after the checkpoint are trained again, to the same losses.
func ddpRankKilled(t *testing.T, gang *ddpJob, ref torchtest.Result, refLoss []torchtest.LossLine) {
	s, url, admin := retryingServer(t, 30*time.Second)
	defer func() {
		if t.Failed() {
			logHistories(t, admin, "j1")
		}
	}()
	startAgent(t, url, s.AgentToken, "a0", "2xV100", openDir(t), nil)
	waitNodes(t, admin, 1, 30*time.Second)
	j := submitCheckpointed(t, admin, gang)
	ctx := context.Background()
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		v, err := admin.Get(ctx, "j1")
		if err == nil && v.Done >= 20 {
			break
		}
		if err == nil && v.State != "running" && v.State != "queued" || time.Now().After(deadline) {
			t.Fatalf("the gang did not reach mini-batch 20 (%+v, %v)", v, err)
		}
	}
	pid := rankPID(t, "j1", 1)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed rank 1 (pid %d)", pid)
	var seen layouts
	v := waitRetried(t, admin, &seen)
	var hist []string
	for _, h := range v.History {
		hist = append(hist, h.To)
	}
	if !strings.Contains(strings.Join(hist, " "), "running queued running finished") {
		t.Errorf("ddp's history %v lacks the failed attempt requeued and run again", hist)
	}
	res := torchtest.ReadResult(t, filepath.Join(j.dir, "ddp.json"))
	t.Logf("ddp: %d attempts; result %+v", v.Attempts, res)
	if res.Checksum != ref.Checksum || !res.Restored || res.Start == 0 {
		t.Errorf("ddp's result %+v, want checksum %s of an uninterrupted run, restored from a checkpoint past mini-batch 0", res, ref.Checksum)
	}
	// every mini-batch's loss, each time it was trained, as an
	// uninterrupted run's; the last one trained again is the checkpoint's
	// next
	loss := torchtest.ReadLossLog(t, filepath.Join(j.dir, "ddp.loss"))
	next := 1
	for _, l := range loss {
		if l.Step < 1 || l.Step > len(refLoss) || l != refLoss[l.Step-1] || l.Step > next {
			t.Fatalf("ddp's loss line %+v: want an uninterrupted run's line of its mini-batch, mini-batches in order from a checkpoint's (next new one %d)", l, next)
		}
		next = max(next, l.Step+1)
	}
	if next != gang.steps+1 {
		t.Errorf("ddp's loss log ends at mini-batch %d, want %d", next-1, gang.steps)
	}
}

// rankPID finds the process of rank of job id's gang (by its environment:
// GANDIVA_JOB and RANK), failing the test if there is not exactly one.
func rankPID(t *testing.T, id string, rank int) int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		env := strings.Split(string(b), "\x00")
		if slices.Contains(env, "GANDIVA_JOB="+id) && slices.Contains(env, "RANK="+strconv.Itoa(rank)) {
			pids = append(pids, pid)
		}
	}
	if len(pids) != 1 {
		t.Fatalf("processes of job %s rank %d: %v, want one", id, rank, pids)
	}
	return pids[0]
}

// TestDDPGrowShrink: an elastic ddp.py job (1 to 2 GPUs, a rank per GPU)
// under the gandiva policy on one node of two GPUs grows onto the idle GPU
// (a gang checkpoint at one rank, restored by two), finds that its rate
// did not rise (the mini-batch is paced by --step-time, the global batch
// fixed) and shrinks back (restored by one rank): 1 → 2 → 1 ranks. It
// trains to the end with a loss curve that continues across each change:
// every mini-batch once, in order, each loss within 1e-5 of an
// uninterrupted one-process run's (the same samples per mini-batch
// whatever the world size; only the summation order of the gradients'
// all-reduce differs).
func TestDDPGrowShrink(t *testing.T) {
	py := needTorch(t)
	job := &ddpJob{name: "elastic", py: py, steps: 100, stepTime: 0.1, seed: 3, gpus: 1, minGPUs: 1, maxGPUs: 2, script: torchtest.ReadableScript(t, "../..")}
	_, refLoss := job.reference(t, 1)
	s, url := inProcServer(t, server.Config{Policy: "gandiva", PreRun: false, NodeTimeout: 30 * time.Second, WarmStarts: -1})
	admin := api.NewClient(url, s.AdminToken)
	startAgent(t, url, s.AgentToken, "a0", "2xV100", openDir(t), nil)
	waitNodes(t, admin, 1, 30*time.Second)
	job.dir = jobDir(t)
	// submitted by the command line, which asks for a rank per GPU
	id := strings.TrimSpace(mustCLI(t, url, s.AdminToken, append([]string{"submit", "--name", job.name, "--gpus", "1", "--min-gpus", "1",
		"--max-gpus", "2", "--rank-per-gpu", "--no-prerun", "--workdir", job.dir, "--env", "PYTHONDONTWRITEBYTECODE=1", "--"}, job.args(job.dir)...)...))
	if v, err := admin.Get(context.Background(), id); err != nil || !v.RankPerGPU {
		t.Fatalf("gandiva submit --rank-per-gpu made job %s: %+v, %v; want a rank per GPU", id, v, err)
	}
	var seen layouts
	done := watchJobs(t, admin, 1, "elastic", &seen, 6*time.Minute)
	if j := done["elastic"]; j.State != "finished" {
		t.Fatalf("elastic: %s (%s), want finished", j.State, j.Reason)
	}
	loss := torchtest.ReadLossLog(t, filepath.Join(job.dir, "elastic.loss"))
	torchtest.CheckContiguous(t, "elastic", loss, job.steps)
	var worlds []int
	for _, l := range loss {
		if len(worlds) == 0 || worlds[len(worlds)-1] != l.World {
			worlds = append(worlds, l.World)
		}
	}
	if !slices.Equal(worlds, []int{1, 2, 1}) {
		t.Errorf("elastic trained at world sizes %v (in turn), want 1, 2, 1 (layouts seen: %q)", worlds, seen)
	}
	worst := 0.0
	for i := range min(len(loss), len(refLoss)) {
		a, _ := strconv.ParseFloat(loss[i].Loss, 64)
		b, _ := strconv.ParseFloat(refLoss[i].Loss, 64)
		worst = max(worst, abs(a-b))
	}
	t.Logf("elastic: world sizes %v; largest difference of a mini-batch's loss from an uninterrupted one-process run's: %.3g", worlds, worst)
	if worst > 1e-5 {
		t.Errorf("elastic's loss strays from an uninterrupted run's by up to %g (want ≤ 1e-5): the curve does not continue across the changes", worst)
	}
	if r := torchtest.ReadResult(t, filepath.Join(job.dir, "elastic.json")); r.Steps != job.steps || r.WorldSize != 1 || !r.Restored {
		t.Errorf("elastic's result %+v, want %d steps, ended at world size 1, restored", r, job.steps)
	}
}

// logHistories logs the jobs' state changes and notes (for a failure).
func logHistories(t *testing.T, cl *api.Client, ids ...string) {
	t.Helper()
	for _, id := range ids {
		v, err := cl.Get(context.Background(), id)
		if err != nil {
			t.Logf("%s: %v", id, err)
			continue
		}
		var b strings.Builder
		for _, h := range v.History {
			fmt.Fprintf(&b, "\n  %s -> %s (%s)", h.From, h.To, h.Reason)
		}
		t.Logf("%s (%s): %s %s, notes %q%s", id, v.Name, v.State, v.Reason, v.Notes, b.String())
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
