package timeline_test

import (
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/timeline"
)

// The engine's reasons name other jobs ("preempted by b", "packed with
// a,b"): Redact hides the names of jobs whose users the viewer may not see,
// whole words only.
func TestRedact(t *testing.T) {
	r := timeline.NewRecorder(timeline.Options{})
	c, _ := cluster.NewBuilder("x", nil).Add(cluster.ServerGroup{Type: "V100", Count: 1, GPUs: 1}).Build()
	e := engine.New(c, mustPolicy(t, "fifo"), nil, engine.Options{})
	for _, s := range []*cluster.JobSpec{{Name: "a", User: "alice", GPUs: 1}, {Name: "b", User: "bob", GPUs: 1}, {Name: "ab", User: "alice", GPUs: 1}} {
		if _, err := e.Submit(0, s); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Observe(e.Snapshot()); err != nil {
		t.Fatal(err)
	}
	alice := func(u string) bool { return u == "alice" }
	for _, c := range []struct{ in, want string }{
		{"preempted by b (turn over)", "preempted by another user's job (turn over)"},
		{"resumed, packed with a,b (pack-trial)", "resumed, packed with a,another user's job (pack-trial)"},
		{"packed with ab", "packed with ab"},
		{"bob's job b", "bob's job another user's job"},
		{"", ""},
	} {
		if got := r.Redact(c.in, alice); got != c.want {
			t.Errorf("Redact(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if got := r.Redact("preempted by b", nil); got != "preempted by b" {
		t.Errorf("no visibility rule: %q", got)
	}
}
