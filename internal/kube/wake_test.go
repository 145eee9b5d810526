package kube

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
	"github.com/gandiva-sched/gandiva/internal/kube/kubetest"
)

// A policy's time-driven decision happens when it asked to be woken, with
// no API event to prompt it: under tiresias-l with a 3 GPU·s
// threshold, job long holds the one GPU and job next waits behind it in
// queue 0; when long crosses the threshold it is demoted, and next
// preempts it. Nothing is applied after the two Jobs: only the scheduler's
// timer can bring the round. (Before the fix the wake-up round's policy
// ignored a wake-up that came later than the exact instant it asked for,
// as a live timer always does, and next waited until some unrelated event.)
// Then, with nothing happening, the dashboard's clock and the waiting
// job's waiting time still move with the wall clock.
func TestTiresiasThresholdPreemptsOnTime(t *testing.T) {
	t.Parallel() // each has a control plane of its own; they mostly wait
	p := kubetest.Start(t, cplane.Options{Kwok: true, Controllers: true})
	cs := kubetest.Client(t, p)
	kubetest.AddNodes(t, cs, kubetest.Nodes{Count: 1, GPUs: 1})
	kubetest.Namespace(t, cs, "team-a")
	kubetest.Namespace(t, cs, "gandiva-system")
	d := NewDashboard()
	runGandiva(t, p, Options{Policy: "tiresias-l:limits=3/100000", Dashboard: d})
	createJob(t, cs, jobSpec{ns: "team-a", name: "long", pods: 1, gpus: 1, preemptible: true, grace: 1})
	createJob(t, cs, jobSpec{ns: "team-a", name: "next", pods: 1, gpus: 1, preemptible: true, grace: 1})
	kubetest.Eventually(t, 60*time.Second, "long running, next waiting", func() (bool, error) {
		return boundCount(t, cs, "team-a", "long") == 1 && boundCount(t, cs, "team-a", "next") == 0, nil
	})
	bound := time.Now()
	// long crosses 3 GPU·s about 3 s after its start; the wake-up is
	// then due at once (a minute allows for a loaded machine, and is far
	// less than waiting for an event that never comes)
	kubetest.Eventually(t, 60*time.Second, "next bound, preempting long at its threshold", func() (bool, error) {
		return boundCount(t, cs, "team-a", "next") == 1, nil
	})
	t.Logf("next bound %.1f s after long was seen running", time.Since(bound).Seconds())
	// (long may be back by now: next crosses the threshold too, 3 s into
	// its run, and goes to the end of queue 1, behind long)
	kubetest.Eventually(t, 60*time.Second, "long's Preempted Event", func() (bool, error) {
		v, err := Describe(context.Background(), cs, "team-a", "long")
		return err == nil && slices.ContainsFunc(v.Events, func(e EventView) bool { return e.Reason == "Preempted" }), err
	})
	// the dashboard, 2 s apart: its clock and the waiting job's waiting
	// time moved by as much, whether or not the loop stepped in between
	ctx, admin := context.Background(), api.Principal{User: "admin", Admin: true}
	shown := func() (now, waited float64) {
		t.Helper()
		sum, err := d.Summary(ctx, admin)
		if err != nil {
			t.Fatal(err)
		}
		q, err := d.Queue(ctx, admin)
		if err != nil {
			t.Fatal(err)
		}
		if len(q.Jobs) != 1 {
			t.Fatalf("the dashboard's queue: %+v, want one job (long or next) waiting", q.Jobs)
		}
		return sum.Now, q.Jobs[0].Waited
	}
	// (after next's own threshold, 3 s into its run, when it goes to the
	// end of queue 1 and long, ahead of it there, resumes; and next's
	// notice of why it waits, 2 s into its wait: the loop then has nothing
	// to do; this wait only makes the check below telling, not right)
	for time.Since(bound) < 10*time.Second {
		time.Sleep(100 * time.Millisecond)
	}
	now1, waited1 := shown()
	for t0 := time.Now(); time.Since(t0) < 2*time.Second; {
		time.Sleep(100 * time.Millisecond)
	}
	now2, waited2 := shown()
	if now2-now1 < 2 || waited2-waited1 < 2 {
		t.Fatalf("2 s later the dashboard's clock moved %.3f s and the waiting job's waiting time %.3f s, want both at least 2 s", now2-now1, waited2-waited1)
	}
}
