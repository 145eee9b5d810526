package e2e_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/server"
)

// The start-up gate: on one node with one fake GPU, four
// trainers that each need a 10 s start-up before their first mini-batch
// boundary and about 8 s of mini-batches, under the gandiva policy with a
// 10 s quantum and pre-runs on (as `gandiva up`):
//   - all finish within 1.35 × (one start-up + the sum of their mini-batch
//     time): start-ups overlap with other jobs' running;
//   - every job's 100th mini-batch comes within one start-up + 2 quanta of
//     its submission (early feedback);
//   - every job's process starts exactly once (the pre-run's process is the
//     job's; no start-up is paid twice), and no job is judged to lack the
//     in-job client;
//   - every checksum equals that of an uninterrupted run.
//
// The figures come from the jobs themselves (their ledgers: process starts,
// the time of their 100th mini-batch, the stretches in which they ran
// mini-batches), not from the scheduler's account. The GPU-busy fraction
// (time in which some job runs mini-batches ÷ wall time) is logged:
// docs/PERFORMANCE.md records it.
const (
	gateQuantum = 10.0 // seconds
	gateJobs    = 4
	gateSteps   = 400
	gateStep    = 20 * time.Millisecond
)

// startupJob is one job of the gate: its command and its own figures.
type startupJob struct {
	name, dir string
	seed      uint64
	command   []string
	checksum  string
}

func (j *startupJob) ledger() string { return filepath.Join(j.dir, j.name+".ledger") }

// gate runs the scenario with jobs made by mk (given the job, it returns
// its command) and checks the gate. A job's start-up is what its own
// process took from its start to its first mini-batch boundary (its
// ledger's spawn and ready lines: nominal is the jobs' configured one; on a
// loaded machine a Python interpreter alone can take seconds more); "one
// start-up" in the makespan's bound is that of the job that started first.
// A job's mini-batch time is what its ledger's busy stretches add up to
// (its first mini-batch, part of its start-up, excluded).
func gate(t *testing.T, nominal time.Duration, mk func(j *startupJob) []string) {
	dir := jobDir(t)
	s, url := inProcServer(t, server.Config{Policy: "gandiva", PolicyParams: map[string]string{"quantum": fmt.Sprint(gateQuantum)},
		PreRun: true, CheckpointEvery: 0, NodeTimeout: 30 * time.Second})
	admin := api.NewClient(url, s.AdminToken)
	startAgent(t, url, s.AgentToken, "gpu-node", "1xV100", openDir(t), nil)
	waitNodes(t, admin, 1, 10*time.Second)

	jobs := make([]*startupJob, gateJobs)
	for i := range jobs {
		j := &startupJob{name: fmt.Sprintf("s%d", i+1), dir: dir, seed: uint64(i + 11)}
		j.command = mk(j)
		ref := &trainerJob{name: j.name, steps: gateSteps, seed: j.seed}
		ref.reference(t)
		j.checksum = ref.checksum
		jobs[i] = j
	}
	submitted := map[string]time.Time{}
	for _, j := range jobs {
		out, err := admin.Submit(context.Background(), &api.JobRequest{Name: j.name, Command: j.command, GPUs: 1, MemGiB: 2,
			Iters: gateSteps, IterTime: gateStep.Seconds(), WorkDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		submitted[j.name] = out.Submitted
	}
	final := waitJobs(t, admin, gateJobs, 4*time.Minute)

	var first, last time.Time
	var work, firstSpawn, S float64
	var busy [][2]float64
	for _, j := range jobs {
		v := final[j.name]
		if v.State != "finished" {
			t.Errorf("%s ended %s: %s", j.name, v.State, v.Reason)
			continue
		}
		full, err := admin.Get(context.Background(), v.ID)
		if err != nil {
			t.Fatal(err)
		}
		if first.IsZero() || v.Submitted.Before(first) {
			first = v.Submitted
		}
		if v.Ended != nil && v.Ended.After(last) {
			last = *v.Ended
		}
		l := readLedger(t, j.ledger())
		if !l.Once(j.checksum) {
			t.Errorf("%s: completions %v, overlaps %v; want one with checksum %s", j.name, l.Done, l.Overlaps, j.checksum)
		}
		if len(l.Spawns) != 1 || len(l.SpawnAt) != 1 || len(l.Ready) != 1 {
			t.Errorf("%s: %d process starts (%v), %d ends of start-ups; want 1: a job must not pay its start-up twice", j.name, len(l.Spawns), l.Spawns, len(l.Ready))
			continue
		}
		// the start-up as the job saw it, or as its agent measured it from
		// the process's start (an interpreter's own start-up included)
		su := max(l.Ready[0]-l.SpawnAt[0], full.StartUp)
		if firstSpawn == 0 || l.SpawnAt[0] < firstSpawn {
			firstSpawn, S = l.SpawnAt[0], su
		}
		for _, text := range append(slices.Clone(full.Notes), historyText(full.History)...) {
			if strings.Contains(text, "no in-job client") {
				t.Errorf("%s uses the in-job client, but was judged without it: %q", j.name, text)
			}
		}
		if len(l.T100) == 0 {
			t.Errorf("%s: no 100th mini-batch in its ledger", j.name)
		} else {
			at := l.T100[0] - unix(submitted[j.name])
			t.Logf("%s: start-up %.1f s (nominal %.0f s); 100th mini-batch %.1f s after its submission (bound %.1f s); %d suspends, %d packs",
				j.name, su, nominal.Seconds(), at, su+2*gateQuantum, v.Suspends, v.Packs)
			if at > su+2*gateQuantum {
				t.Errorf("%s: 100th mini-batch %.1f s after its submission, want within one start-up + 2 quanta = %.1f s", j.name, at, su+2*gateQuantum)
			}
			if testing.Verbose() || at > su+2*gateQuantum {
				for _, h := range full.History {
					t.Logf("  %s +%.1f s: %s → %s (%s)", j.name, h.At.Sub(first).Seconds(), h.From, h.To, h.Reason)
				}
			}
		}
		mine := 0.0
		for _, b := range l.Busy {
			mine += b[1] - b[0]
		}
		t.Logf("%s: %.1f s of mini-batches in %d stretches", j.name, mine, len(l.Busy))
		work += mine
		busy = append(busy, l.Busy...)
	}
	if t.Failed() && (first.IsZero() || S == 0) {
		return
	}
	makespan := last.Sub(first).Seconds()
	bound := 1.35 * (S + work)
	frac := union(busy) / makespan
	t.Logf("makespan %.1f s for %.1f s of mini-batches after a %.1f s start-up: %.2f × the ideal (bound 1.35 × = %.1f s); GPU busy %.0f%% of the wall time (GOMAXPROCS %d)",
		makespan, work, S, makespan/(S+work), bound, 100*frac, runtime.GOMAXPROCS(0))
	if makespan > bound {
		t.Errorf("makespan %.1f s, want within 1.35 × (start-up %.1f s + mini-batches %.1f s) = %.1f s", makespan, S, work, bound)
	}
}

// historyText is each history entry as text.
func historyText(h []api.Change) []string {
	var out []string
	for _, c := range h {
		out = append(out, c.From+" → "+c.To+": "+c.Reason)
	}
	return out
}

func unix(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// union is the length of the union of intervals.
func union(iv [][2]float64) float64 {
	iv = slices.Clone(iv)
	slices.SortFunc(iv, func(a, b [2]float64) int {
		switch {
		case a[0] < b[0]:
			return -1
		case a[0] > b[0]:
			return 1
		}
		return 0
	})
	total, end := 0.0, 0.0
	for i, x := range iv {
		switch {
		case i == 0 || x[0] > end:
			total += x[1] - x[0]
			end = x[1]
		case x[1] > end:
			total += x[1] - end
			end = x[1]
		}
	}
	return total
}

// TestStartUpGateGo: the gate with the Go trainer, whose start-up is like
// PyTorch's: its client says hello after 4 s, and its first mini-batch
// (autotuning) takes 6 s more.
func TestStartUpGateGo(t *testing.T) {
	t.Parallel()
	gate(t, 10*time.Second, func(j *startupJob) []string {
		return []string{bin, "trainer", "-steps", fmt.Sprint(gateSteps), "-step-time", gateStep.String(), "-dim", "512",
			"-seed", fmt.Sprint(j.seed), "-startup", "4s", "-first-batch", "6s",
			"-out", filepath.Join(j.dir, j.name+".json"), "-ledger", j.ledger()}
	})
}

// TestStartUpGatePython: the gate with the Python trainer and client, a
// script that sleeps 10 s before it imports the client.
func TestStartUpGatePython(t *testing.T) {
	t.Parallel()
	py := jobPython(t)
	// The script and the client, copied where the jobs' account can read
	// them (the checkout may be inside a directory only its owner can
	// enter); the script finds the client at ../../python from itself.
	root := openDir(t)
	copyFile(t, "../../examples/python/trainer.py", filepath.Join(root, "examples", "python", "trainer.py"))
	pkg, err := filepath.Glob("../../python/gandiva/*.py")
	if err != nil || len(pkg) == 0 {
		t.Fatalf("the Python client: %v (%d files)", err, len(pkg))
	}
	for _, f := range pkg {
		copyFile(t, f, filepath.Join(root, "python", "gandiva", filepath.Base(f)))
	}
	script := filepath.Join(root, "examples", "python", "trainer.py")
	gate(t, 10*time.Second, func(j *startupJob) []string {
		return []string{py, script, "--steps", fmt.Sprint(gateSteps), "--step-time", "20ms", "--dim", "512",
			"--seed", fmt.Sprint(j.seed), "--startup", "10s",
			"--out", filepath.Join(j.dir, j.name+".json"), "--ledger", j.ledger()}
	})
}

// jobPython is a python3 that the jobs' account can run: the one on the
// PATH, else the system's (as root the jobs run as nobody, who may not
// reach an interpreter under /root).
func jobPython(t *testing.T) string {
	t.Helper()
	var cands []string
	if p, err := exec.LookPath("python3"); err == nil {
		cands = append(cands, p)
	}
	cands = append(cands, "/usr/bin/python3", "/usr/local/bin/python3")
	for _, p := range cands {
		cmd := exec.Command(p, "-c", "pass")
		if os.Geteuid() == 0 {
			u, err := user.Lookup("nobody")
			if err != nil {
				t.Fatal(err)
			}
			uid, _ := strconv.Atoi(u.Uid)
			gid, _ := strconv.Atoi(u.Gid)
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
			cmd.Dir = "/"
		}
		if cmd.Run() == nil {
			return p
		}
	}
	t.Skip("no python3 that the jobs' account can run")
	return ""
}

// copyFile copies src to dst, readable by every account, making dst's
// directories (0755).
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
