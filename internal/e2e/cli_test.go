package e2e_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gandiva-sched/gandiva/internal/agent"
	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/server"
)

// cli runs the gandiva binary's client commands against a server.
func cli(t *testing.T, url, token string, args ...string) (string, error) {
	t.Helper()
	flags := []string{"--server", url, "--token", token}
	if len(args) > 0 && args[0] == "submit" {
		// submit checks, as the account the jobs run as, that it can use
		// the workdir and the command: these tests' agents' (testRunAs)
		acct := "none"
		if os.Geteuid() == 0 {
			acct = "nobody"
		}
		flags = append(flags, "--job-account", acct)
	}
	i := len(args)
	for k, a := range args {
		if a == "--" {
			i = k // flags go before the job's command
			break
		}
	}
	full := append(append(append([]string{}, args[:i]...), flags...), args[i:]...)
	cmd := exec.Command(bin, full...)
	// submit's default working directory is the current one: make it one
	// the jobs' account may enter and write (this package's directory may
	// be inside a checkout only its owner can reach, and CI runs the jobs
	// as nobody)
	cmd.Dir = jobDir(t)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func mustCLI(t *testing.T, url, token string, args ...string) string {
	t.Helper()
	out, err := cli(t, url, token, args...)
	if err != nil {
		t.Fatalf("gandiva %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// TestPreRunAndCLI drives the live scheduler through the command line:
// submit (flags and a YAML spec), jobs, status, explain, logs, nodes,
// cancel, and the pre-run: a job whose code fails at its first mini-batch
// fails in its one-GPU pre-run, without its 4-GPU gang ever starting; a job
// without the in-job client passes its pre-run by running long enough.
func TestPreRunAndCLI(t *testing.T) {
	fp := engine.DefaultFailurePolicy()
	fp.Backoff = 0.3
	s, url := inProcServer(t, server.Config{Policy: "fifo", PreRun: true, CheckpointEvery: 0, Failure: &fp, NodeTimeout: 10 * time.Second})
	admin := api.NewClient(url, s.AdminToken)
	startAgent(t, url, s.AgentToken, "gpu-node", "4xV100", openDir(t), func(c *agent.Config) { c.PreRunWindow = 5 * time.Second }) // (a no-client job passes its pre-run after 5 s; a loaded machine may take over a second to a hello)
	waitNodes(t, admin, 1, 10*time.Second)
	alice := firstLine(mustCLI(t, url, s.AdminToken, "token", "create", "--user", "alice"))
	if !strings.HasPrefix(alice, "gdv_") {
		t.Fatalf("token create printed %q", alice)
	}
	dir := jobDir(t)

	// A bad call names its field and fails.
	if out, err := cli(t, url, alice, "submit", "--gpus", "0", "--", "true"); err == nil || !strings.Contains(out, "gpus:") {
		t.Fatalf("submit --gpus 0: err=%v, output %q should name gpus", err, out)
	}
	if out, err := cli(t, url, "gdv_nope", "jobs"); err == nil || !strings.Contains(out, "invalid token") {
		t.Fatalf("jobs with a bad token: err=%v %q", err, out)
	}

	// j1: its code fails before the first mini-batch: caught by the pre-run.
	bad := &trainerJob{name: "bad", steps: 30, stepTime: 20 * time.Millisecond, seed: 1, dir: dir, extra: []string{"-fail-at", "0"}}
	id := strings.TrimSpace(mustCLI(t, url, alice, append([]string{"submit", "--gpus", "4", "--name", "bad", "--"}, bad.args()...)...))
	// j2: a good job from a YAML spec, two GPUs.
	good := &trainerJob{name: "good", steps: 40, stepTime: 20 * time.Millisecond, seed: 2, dir: dir}
	good.reference(t)
	spec := "name: good\ngpus: 2\nworkdir: " + dir + "\ncommand:\n"
	for _, a := range good.args() {
		spec += "  - " + a + "\n"
	}
	os.WriteFile(filepath.Join(dir, "good.yaml"), []byte(spec), 0o644)
	id2 := strings.TrimSpace(mustCLI(t, url, alice, "submit", "-f", filepath.Join(dir, "good.yaml")))
	// j3: no in-job client.
	plain := &trainerJob{name: "plain", steps: 30, stepTime: 50 * time.Millisecond, seed: 3, dir: dir, extra: []string{"-no-client"}}
	plain.reference(t)
	// (its working directory one the jobs' account may enter: the default,
	// this directory, may be inside a checkout only its owner can reach)
	id3 := strings.TrimSpace(mustCLI(t, url, alice, append([]string{"submit", "--name", "plain", "--workdir", dir, "--"}, plain.args()...)...))
	if id != "j1" || id2 != "j2" || id3 != "j3" {
		t.Fatalf("job IDs %q %q %q", id, id2, id3)
	}
	// A typo in a spec is caught, naming the field.
	os.WriteFile(filepath.Join(dir, "typo.yaml"), []byte("gpu: 2\ncommand: [true]\n"), 0o644)
	if out, err := cli(t, url, alice, "submit", "-f", filepath.Join(dir, "typo.yaml")); err == nil || !strings.Contains(out, "gpu") {
		t.Fatalf("a spec with a typo: err=%v %q", err, out)
	}

	done := waitJobs(t, admin, 3, 60*time.Second)
	b := done["bad"]
	if b.State != "failed" || !strings.Contains(b.Reason, "pre-run failed") || b.PreRun != "failed" {
		t.Errorf("bad job: %s %q prerun=%s; want failed by its pre-run", b.State, b.Reason, b.PreRun)
	}
	if b.Attempts != 0 {
		t.Errorf("bad job's gang started %d times; the pre-run should have stopped it", b.Attempts)
	}
	for _, j := range []*trainerJob{good, plain} {
		v := done[j.name]
		if v.State != "finished" || v.PreRun != "passed" {
			t.Errorf("%s: %s prerun=%s (%s)", j.name, v.State, v.PreRun, v.Reason)
		}
		checkExactlyOnce(t, j)
	}

	out := mustCLI(t, url, alice, "jobs")
	for _, want := range []string{"j1", "bad", "failed", "j2", "good", "finished", "j3"} {
		if !strings.Contains(out, want) {
			t.Errorf("gandiva jobs lacks %q:\n%s", want, out)
		}
	}
	out = mustCLI(t, url, alice, "status", "j2")
	for _, want := range []string{"j2 (good) of alice: finished", "prerun queued → prerun running", "queued → running", "running → finished", "pre-run:   passed"} {
		if !strings.Contains(out, want) {
			t.Errorf("gandiva status j2 lacks %q:\n%s", want, out)
		}
	}
	if out := mustCLI(t, url, alice, "logs", "j2"); !strings.Contains(out, "checksum="+good.checksum) {
		t.Errorf("gandiva logs j2 lacks the checksum line:\n%s", out)
	}
	if out := mustCLI(t, url, s.AdminToken, "nodes"); !strings.Contains(out, "gpu-node") || !strings.Contains(out, "4×V100") {
		t.Errorf("gandiva nodes:\n%s", out)
	}

	// A job that waits: explain says why; cancel stops it.
	long := &trainerJob{name: "long", steps: 100000, stepTime: 50 * time.Millisecond, seed: 4, dir: dir, noPreRun: true}
	mustCLI(t, url, alice, append([]string{"submit", "--gpus", "4", "--no-prerun", "--name", "long", "--"}, long.args()...)...)
	wide := &trainerJob{name: "wide", steps: 10, seed: 5, dir: dir}
	mustCLI(t, url, alice, append([]string{"submit", "--gpus", "4", "--no-prerun", "--name", "wide", "--"}, wide.args()...)...)
	waitState(t, admin, "j4", "running")
	// j5's process is warmed meanwhile: started, and held at its first
	// mini-batch boundary until its turn
	waitState(t, admin, "j5", "suspended")
	out = mustCLI(t, url, alice, "explain", "j5")
	for _, want := range []string{"j5: warm: 0 of 4 GPUs are free, it needs 4", "held at its first mini-batch boundary", "place 1 of 1 waiting", "✗  gpu-node  0 of 4 GPUs free"} {
		if !strings.Contains(out, want) {
			t.Errorf("gandiva explain j5 lacks %q:\n%s", want, out)
		}
	}
	if out, err := cli(t, url, s.AdminToken, "cancel", "j4", "j5"); err != nil || !strings.Contains(out, "j4 cancelled") {
		t.Errorf("cancel: %v %s", err, out)
	}
	// Another user sees none of it.
	bob := firstLine(mustCLI(t, url, s.AdminToken, "token", "create", "--user", "bob"))
	if out := mustCLI(t, url, bob, "jobs"); strings.Contains(out, "j1") {
		t.Errorf("bob sees alice's jobs:\n%s", out)
	}
	if out, err := cli(t, url, bob, "cancel", "j2"); err == nil || !strings.Contains(out, "another user") {
		t.Errorf("bob cancelling alice's job: %v %s", err, out)
	}
	waitJobs(t, admin, 5, 20*time.Second)

	// A submission retried with its idempotency key is the same job.
	k1 := strings.TrimSpace(mustCLI(t, url, bob, "submit", "--idempotency-key", "bob-1", "--no-prerun", "--workdir", dir, "--", "true"))
	k2 := strings.TrimSpace(mustCLI(t, url, bob, "submit", "--idempotency-key", "bob-1", "--no-prerun", "--workdir", dir, "--", "true"))
	if k1 != "j6" || k2 != k1 {
		t.Errorf("a submission and its retry: %q and %q, want j6 twice", k1, k2)
	}
	if out, err := cli(t, url, bob, "submit", "--idempotency-key", "bob-1", "--no-prerun", "--workdir", dir, "--", "false"); err == nil || !strings.Contains(out, "j6") {
		t.Errorf("another command under bob-1: err=%v %q; want a refusal naming j6", err, out)
	}
	// Admin commands: undrain and set; users may not.
	if out, err := cli(t, url, bob, "nodes", "undrain", "gpu-node"); err == nil || !strings.Contains(out, "admin") {
		t.Errorf("bob undraining: err=%v %q", err, out)
	}
	if out := mustCLI(t, url, s.AdminToken, "nodes", "undrain", "gpu-node"); !strings.Contains(out, "gpu-node undrained") {
		t.Errorf("nodes undrain: %q", out)
	}
	if out, err := cli(t, url, s.AdminToken, "nodes", "undrain", "nowhere"); err == nil || !strings.Contains(out, "nowhere") {
		t.Errorf("undraining an unknown node: err=%v %q", err, out)
	}
	if out, err := cli(t, url, bob, "set", "tickets/bob", "9"); err == nil || !strings.Contains(out, "admin") {
		t.Errorf("bob changing a setting: err=%v %q", err, out)
	}
	if out, err := cli(t, url, s.AdminToken, "set", "tickets/alice", "4"); err == nil || !strings.Contains(out, "policy fifo reads none") {
		t.Errorf("set of a key fifo does not read: err=%v %q", err, out)
	}
	if out := mustCLI(t, url, s.AdminToken, "set", "quota/queued-jobs/alice", "40"); !strings.Contains(out, "quota/queued-jobs/alice = 40") {
		t.Errorf("set: %q", out)
	}

	// Tokens: listed without secrets, revoked by ID; then refused.
	out = mustCLI(t, url, s.AdminToken, "token", "list")
	for _, want := range []string{"admin", "alice", "bob", "node:gpu-node", "node", "agent:agents"} {
		if !strings.Contains(out, want) {
			t.Errorf("token list lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, bob) || strings.Contains(out, "gdv_") {
		t.Errorf("token list shows a secret:\n%s", out)
	}
	if out, err := cli(t, url, bob, "token", "list"); err == nil || !strings.Contains(out, "admin") {
		t.Errorf("bob listing tokens: err=%v %q", err, out)
	}
	var bobID string
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) >= 3 && f[1] == "bob" {
			bobID = f[0]
		}
	}
	if out := mustCLI(t, url, s.AdminToken, "token", "revoke", bobID[:8]); !strings.Contains(out, "revoked "+bobID) {
		t.Errorf("token revoke: %q", out)
	}
	if out, err := cli(t, url, bob, "jobs"); err == nil || !strings.Contains(out, "invalid token") {
		t.Errorf("a revoked token still works: err=%v %q", err, out)
	}
	// Agent tokens: limited in uses and time, shown in the list.
	if out, err := cli(t, url, s.AdminToken, "token", "create", "--user", "carol", "--uses", "2"); err == nil || !strings.Contains(out, "--agent") {
		t.Errorf("a user token with --uses: err=%v %q", err, out)
	}
	if out := mustCLI(t, url, s.AdminToken, "token", "create", "--agent", "--label", "gpu-9", "--uses", "2", "--ttl", "1h"); !strings.Contains(out, "enrols 2 nodes, until") {
		t.Errorf("token create --agent --uses 2: %q", out)
	}
	if out := mustCLI(t, url, s.AdminToken, "token", "list"); !regexp.MustCompile(`agent:gpu-9\s+agent\s+gpu-9\s+\S+ \S+\s+2\s+\d{4}-`).MatchString(out) {
		t.Errorf("token list lacks the agent token for gpu-9 with 2 uses and its expiry:\n%s", out)
	}
	// Nodes: drain and undrain; remove (then the agent's credential is refused).
	if out := mustCLI(t, url, s.AdminToken, "nodes", "drain", "gpu-node"); !strings.Contains(out, "gpu-node drained") {
		t.Errorf("nodes drain: %q", out)
	}
	if out := mustCLI(t, url, s.AdminToken, "nodes"); !strings.Contains(out, "drained") || !strings.Contains(out, "drained by an admin") {
		t.Errorf("nodes after a drain:\n%s", out)
	}
	mustCLI(t, url, s.AdminToken, "nodes", "undrain", "gpu-node")
	if out, err := cli(t, url, alice, "nodes", "remove", "gpu-node"); err == nil || !strings.Contains(out, "admin") {
		t.Errorf("alice removing a node: err=%v %q", err, out)
	}
	if out := mustCLI(t, url, s.AdminToken, "nodes", "remove", "gpu-node"); !strings.Contains(out, "gpu-node removed") {
		t.Errorf("nodes remove: %q", out)
	}
	if out := mustCLI(t, url, s.AdminToken, "nodes"); !strings.Contains(out, "down") || !strings.Contains(out, "removed by an admin") {
		t.Errorf("nodes after a removal:\n%s", out)
	}
	if out := mustCLI(t, url, s.AdminToken, "token", "list"); strings.Contains(out, "node:gpu-node") {
		t.Errorf("the removed node's credential is still listed:\n%s", out)
	}
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return strings.TrimSpace(l)
}

func waitState(t *testing.T, cl *api.Client, id, state string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if j, err := cl.Get(t.Context(), id); err == nil && j.State == state {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s did not become %s", id, state)
}
