package agent

import (
	"os"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/api"
)

// An assignment this node never started is answered "never started" for
// each different thing the server wants of it: a suspend (the server then
// counts it as suspended), then a kill or a checkpoint (the server keeps the
// worker as leaving, holding its GPUs and its job's next attempt, until it
// hears it is gone). Answering only the first want left the second waiting
// for ever: in TestKill9, a pre-run suspended before its agent had started
// it, then moved, never started again ("waiting for its pre-run" until the
// test's time-out).
func TestNeverStartedAnsweredPerWant(t *testing.T) {
	g, _ := ParseFakeGPUs("1xV100")
	rule := RunAs{Self: true, SelfUsers: []string{"*"}}
	if os.Geteuid() == 0 {
		rule = RunAs{Pattern: "nobody"}
	}
	work, err := os.MkdirTemp("", "gandiva-agent-test-") // (reachable by the jobs' account)
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(work, 0o755)
	t.Cleanup(func() { os.RemoveAll(work) })
	a, err := New(Config{Server: "http://127.0.0.1:1", Name: "n1", GPUs: g, WorkRoot: work, RunAs: rule})
	if err != nil {
		t.Fatal(err)
	}
	it := api.Assignment{Job: "j1", Attempt: 7, Rank: 0, Command: []string{"true"}, GPUs: []int{0}}
	steps := []struct {
		want          api.Want
		kind, outcome string // the report, "" for none
	}{
		{api.WantSuspend, string(api.RepSuspended), ""},
		{api.WantSuspend, "", ""}, // the same want again: answered already
		{api.WantCheckpoint, string(api.RepCheckpointed), "not-started"},
		{api.WantKill, string(api.RepExited), "not-started"},
		{api.WantKill, "", ""},
	}
	for i, s := range steps {
		it.Want = s.want
		before := len(a.pending)
		a.reconcile([]api.Assignment{it})
		got := a.pending[before:]
		switch {
		case s.kind == "" && len(got) != 0:
			t.Fatalf("step %d (%s): reports %+v, want none", i, s.want, got)
		case s.kind != "" && (len(got) != 1 || string(got[0].Kind) != s.kind || got[0].Outcome != s.outcome || got[0].Job != "j1" || got[0].Attempt != 7):
			t.Fatalf("step %d (%s): reports %+v, want one %s (outcome %q) of j1 attempt 7", i, s.want, got, s.kind, s.outcome)
		}
	}
	if len(a.workers) != 0 {
		t.Fatalf("a process was started for an assignment never asked to run: %v", a.workers)
	}
}
