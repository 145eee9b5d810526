package preempt

import (
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
)

// A live driver's timer fires a little after the wake-up asked for, never
// at the very instant: the wake-up still counts then (tiresias-l under
// gandiva kube used to let its queue thresholds pass unacted on); before it,
// with no wake-up asked for, or with one in the last plan's past, a call
// with only ticks does not.
func TestGateWakeUpDueAtOrAfter(t *testing.T) {
	ticks := []cluster.Event{{Kind: cluster.EvTick}}
	at := func(now float64) *cluster.Snapshot { return &cluster.Snapshot{Now: now, Events: ticks} }
	var g Gate
	g.Planned(10, 20)
	for _, c := range []struct {
		now  float64
		want bool
	}{{10, false}, {15, false}, {19.999, false}, {20, true}, {20.004, true}, {1e9, true}} {
		if got := g.Relevant(at(c.now), false); got != c.want {
			t.Errorf("planned at 10 asking to wake at 20: Relevant at %v = %v, want %v", c.now, got, c.want)
		}
	}
	g.Planned(20.004, 0)
	if g.Relevant(at(30), false) {
		t.Errorf("no wake-up asked for: Relevant at 30 with only ticks")
	}
	g.Planned(30, 25)
	if g.Relevant(at(40), false) {
		t.Errorf("a wake-up in the last plan's past (25, planned at 30): Relevant at 40 with only ticks")
	}
}

// A refusal of an action of the last plan is news at any instant, the
// plan's own included: the plan did not happen as planned.
func TestGateRefusalIsRelevant(t *testing.T) {
	var g Gate
	g.Planned(10, 0)
	ticks := []cluster.Event{{Kind: cluster.EvTick}}
	if g.Relevant(&cluster.Snapshot{Now: 10, Events: ticks}, false) {
		t.Fatal("only ticks at the plan's instant: relevant")
	}
	s := &cluster.Snapshot{Now: 10, Events: ticks, Rejected: []cluster.Rejection{
		{Action: cluster.Action{Kind: cluster.Start, Job: 1}, Code: cluster.RejectRetry, Reason: "node busy"}}}
	if !g.Relevant(s, false) {
		t.Error("a refusal of the last plan's start: not relevant")
	}
}
