package agent

import (
	"os"
	"testing"
	"time"

	"github.com/gandiva-sched/gandiva/internal/agent/jobproc"
	"github.com/gandiva-sched/gandiva/internal/api"
)

// A job that its guard (or its in-job client) ends once the lease lapsed is
// lost, not failed, also while its agent is shutting down: after SIGTERM
// the agent keeps polling, but when the server cannot be reached a --grace
// longer than what is left of the lease is cut short by the guard. That
// exit (killed by a signal, before the attempt's first mini-batch) was
// reported as the job's own failure, a user error that used up an attempt
// (the second ends the job), instead of requeueing it.
func TestLapsedWhileLeavingIsLost(t *testing.T) {
	g, _ := ParseFakeGPUs("1xV100")
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
	for _, leaving := range []bool{false, true} {
		a.mu.Lock()
		a.contact = time.Now().Add(-2 * a.lease) // the lease has lapsed
		a.pending = nil
		a.mu.Unlock()
		wk := newWorker(a, key{job: "j1", attempt: 7}, nil, api.Assignment{Job: "j1", Attempt: 7})
		if leaving {
			wk.lost = "its agent is shutting down" // as leave sets it
		}
		// (as jobproc reports a process its guard killed with SIGKILL)
		wk.exited(&jobproc.Exit{Outcome: jobproc.Failed, Code: -1, Signal: "killed", UserError: true,
			Reason: "killed by signal killed before the attempt's first mini-batch"})
		a.mu.Lock()
		got := a.pending
		a.mu.Unlock()
		if len(got) != 1 || got[0].Kind != api.RepExited || got[0].Outcome != "lost" {
			t.Fatalf("leaving %v: reports %+v, want one exit with outcome lost", leaving, got)
		}
	}
}
