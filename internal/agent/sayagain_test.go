package agent

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/gandiva-sched/gandiva/internal/api"
)

// A suspension asked again of a process already suspended (on other GPUs:
// a resume the agent never saw moved it) is said again: the server,
// having published a new order, waits to hear "suspended" before it lets
// another job onto those GPUs. The agent used to find nothing to do and
// say nothing, and the server waited for ever.
func TestSuspendedAlreadySaidAgain(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a trainer")
	}
	bin, err := os.MkdirTemp("", "gandiva-agent-test-") // (reachable by the jobs' account)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(bin) })
	trainer := filepath.Join(bin, "trainer")
	if b, err := exec.Command("go", "build", "-o", trainer, "github.com/gandiva-sched/gandiva/examples/trainer").CombinedOutput(); err != nil {
		t.Fatalf("building the trainer: %v\n%s", err, b)
	}
	os.Chmod(bin, 0o755)
	g, _ := ParseFakeGPUs("2xV100")
	rule := RunAs{Self: true, SelfUsers: []string{"*"}}
	if os.Geteuid() == 0 {
		rule = RunAs{Pattern: "nobody"}
	}
	work, err := os.MkdirTemp("", "gandiva-agent-test-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(work, 0o755)
	t.Cleanup(func() { os.RemoveAll(work) })
	a, err := New(Config{Server: "http://127.0.0.1:1", Name: "n1", GPUs: g, WorkRoot: work, RunAs: rule})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.killAll("test over", false) })
	ck, err := os.MkdirTemp("", "gandiva-agent-test-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(ck, 0o755)
	t.Cleanup(func() { os.RemoveAll(ck) })
	a.ckRoot, a.ckLocal = ck, ck // (as a registration sets them)
	// a server heard a moment ago, with a lease longer than the test
	a.mu.Lock()
	a.lease, a.contact = time.Hour, time.Now()
	a.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go a.watchdog(ctx)
	it := api.Assignment{Job: "j1", Attempt: 3, User: "admin", Command: []string{trainer, "-steps", "100000", "-dim", "16", "-step-time", "20ms"},
		CheckpointDir: filepath.Join(ck, "admin", "j1"), GPUs: []int{0}, Want: api.WantRun}
	a.reconcile([]api.Assignment{it})
	// reports since mark of kind k
	count := func(from int, k api.ReportKind) int {
		a.mu.Lock()
		defer a.mu.Unlock()
		n := 0
		for _, r := range a.pending[from:] {
			if r.Kind == k && r.Job == "j1" {
				n++
			}
		}
		return n
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(90 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				a.mu.Lock()
				pending := append([]api.Report(nil), a.pending...)
				a.mu.Unlock()
				t.Fatalf("%s: reports %+v", what, pending)
			}
		}
	}
	waitFor("the trainer made no progress", func() bool { return count(0, api.RepProgress) > 0 })
	it.Want = api.WantSuspend
	a.reconcile([]api.Assignment{it})
	waitFor("no suspension reported", func() bool { return count(0, api.RepSuspended) == 1 })
	a.mu.Lock()
	mark := len(a.pending)
	a.mu.Unlock()
	// The same order again: nothing new to say.
	a.reconcile([]api.Assignment{it})
	time.Sleep(1500 * time.Millisecond) // (the worker acts at least every second)
	if n := count(mark, api.RepSuspended); n != 0 {
		t.Fatalf("the same suspension said %d more times", n)
	}
	// A suspension on the other GPU (the server resumed it there, unseen,
	// and suspended it again): said again, once.
	it.GPUs = []int{1}
	a.reconcile([]api.Assignment{it})
	waitFor("a suspension found carried out was not said again", func() bool { return count(mark, api.RepSuspended) == 1 })
	time.Sleep(1500 * time.Millisecond)
	if n := count(mark, api.RepSuspended); n != 1 {
		t.Fatalf("said %d times, want once", n)
	}
}
