package engine_test

import (
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/harness"
)

// TestScenarios runs the golden scripts in testdata (rewrite with -rewrite).
func TestScenarios(t *testing.T) { harness.Run(t, "testdata") }

// TestTransitions pins the state machine: every legal transition, and that
// terminal states have none.
func TestTransitions(t *testing.T) {
	want := map[[2]cluster.JobState]bool{}
	for _, tr := range [][2]cluster.JobState{
		{cluster.Queued, cluster.Running}, {cluster.Queued, cluster.Failed}, {cluster.Queued, cluster.Cancelled},
		{cluster.Running, cluster.Running}, {cluster.Running, cluster.Suspended}, {cluster.Running, cluster.Migrating},
		{cluster.Running, cluster.Queued}, {cluster.Running, cluster.Finished}, {cluster.Running, cluster.Failed},
		{cluster.Running, cluster.Cancelled},
		{cluster.Suspended, cluster.Running}, {cluster.Suspended, cluster.Migrating}, {cluster.Suspended, cluster.Failed},
		{cluster.Suspended, cluster.Cancelled}, {cluster.Suspended, cluster.Finished},
		{cluster.Migrating, cluster.Running}, {cluster.Migrating, cluster.Queued}, {cluster.Migrating, cluster.Failed},
		{cluster.Migrating, cluster.Cancelled}, {cluster.Migrating, cluster.Finished},
		// warm starts (Options.Warm) and suspensions during a start-up
		{cluster.Queued, cluster.Warming}, {cluster.Running, cluster.Warming},
		{cluster.Warming, cluster.Suspended}, {cluster.Warming, cluster.Queued}, {cluster.Warming, cluster.Failed},
		{cluster.Warming, cluster.Cancelled}, {cluster.Warming, cluster.Finished},
	} {
		want[tr] = true
	}
	for f := cluster.Queued; f <= cluster.Cancelled; f++ {
		for to := cluster.Queued; to <= cluster.Cancelled; to++ {
			if got := cluster.CanTransition(f, to); got != want[[2]cluster.JobState{f, to}] {
				t.Errorf("CanTransition(%s, %s) = %v", f, to, got)
			}
		}
	}
	if n := len(cluster.Transitions()); n != len(want) {
		t.Errorf("Transitions() lists %d, want %d", n, len(want))
	}
}
