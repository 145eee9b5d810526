package kube

import (
	"math"
	"testing"
	"time"

	"github.com/gandiva-sched/gandiva/internal/eta"
	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
	"github.com/gandiva-sched/gandiva/internal/kube/kubetest"
)

// The engine's clock: at speed 1 (and for the zero clock) it is the wall
// clock, value for value; at speed S it runs S times faster from its
// origin, a wall duration is S times as many engine seconds and back, and
// what people are shown is on the wall clock again. Speeds that are not
// finite numbers > 0 are refused.
func TestClock(t *testing.T) {
	origin := time.Unix(1_790_000_000, 123_456_789)
	later := origin.Add(90*time.Second + 7*time.Millisecond)
	one, err := newClock(1, origin)
	if err != nil {
		t.Fatal(err)
	}
	def, _ := newClock(0, origin)
	for _, c := range []clock{one, def, {}} {
		if got, want := c.of(later), float64(later.UnixNano())/1e9; got != want {
			t.Errorf("speed %v: of = %v, want the wall clock's %v", c.speed, got, want)
		}
		if got := c.wall(12.5); got != 12500*time.Millisecond {
			t.Errorf("speed %v: wall(12.5) = %v", c.speed, got)
		}
		if got := c.engineSecs(3 * time.Second); got != 3 {
			t.Errorf("speed %v: engineSecs(3s) = %v", c.speed, got)
		}
		if x := 1.79e9 + 0.1; c.unix(x) != x || c.at(x) != x {
			t.Errorf("speed %v: not the identity", c.speed)
		}
	}
	fast, err := newClock(20, origin)
	if err != nil {
		t.Fatal(err)
	}
	o := float64(origin.UnixNano()) / 1e9
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-3 }
	if got := fast.of(later); !near(got-o, 20*90.007) {
		t.Errorf("speed 20: %v engine seconds after the origin, want %v", got-o, 20*90.007)
	}
	if got := fast.of(origin.Add(-time.Second)); !near(got-o, -20) {
		t.Errorf("speed 20: a second before the origin is %v engine seconds after it, want -20", got-o)
	}
	if got := fast.wall(100); got != 5*time.Second {
		t.Errorf("speed 20: 100 engine seconds last %v, want 5s", got)
	}
	if got := fast.engineSecs(5 * time.Second); got != 100 {
		t.Errorf("speed 20: 5 s are %v engine seconds, want 100", got)
	}
	if x := fast.of(later); !near(fast.unix(x), float64(later.UnixNano())/1e9) {
		t.Errorf("speed 20: unix(of(t)) = %v, want t = %v", fast.unix(x), float64(later.UnixNano())/1e9)
	}
	e := fast.shown(eta.Estimate{Start: o + 200, StartLow: o + 100, StartHigh: math.Inf(1), Finish: o + 400, FinishLow: o, FinishHigh: o + 2000, Samples: 3})
	if !near(e.Start, o+10) || !near(e.StartLow, o+5) || !math.IsInf(e.StartHigh, 1) || !near(e.Finish, o+20) || !near(e.FinishLow, o) || !near(e.FinishHigh, o+100) || e.Samples != 3 {
		t.Errorf("speed 20: shown %+v", e)
	}
	for _, bad := range []float64{-1, math.NaN(), math.Inf(1)} {
		if _, err := newClock(bad, origin); err == nil {
			t.Errorf("speed %v: no error", bad)
		}
	}
	if _, err := newScheduler(nil, nil, Options{Policy: "fifo", ClockSpeed: -2}, nil); err == nil {
		t.Errorf("a scheduler with clock speed -2: no error")
	}
}

// A policy's time constants are in engine seconds: with the clock 100
// times faster than the wall clock, tiresias-l's 300 GPU·s threshold is
// crossed about 3 wall seconds into a 1-GPU job's run, and the job
// waiting behind it preempts it (the wake-up is converted back to wall
// time). On the wall clock the same threshold takes 5 minutes, far past
// the 60 s this test waits.
func TestClockSpeedDrivesPolicyTime(t *testing.T) {
	t.Parallel() // a control plane of its own; it mostly waits
	p := kubetest.Start(t, cplane.Options{Kwok: true, Controllers: true})
	cs := kubetest.Client(t, p)
	kubetest.AddNodes(t, cs, kubetest.Nodes{Count: 1, GPUs: 1})
	kubetest.Namespace(t, cs, "team-a")
	kubetest.Namespace(t, cs, "gandiva-system")
	runGandiva(t, p, Options{Policy: "tiresias-l:limits=300/10000000", ClockSpeed: 100})
	createJob(t, cs, jobSpec{ns: "team-a", name: "long", pods: 1, gpus: 1, preemptible: true, grace: 1})
	createJob(t, cs, jobSpec{ns: "team-a", name: "next", pods: 1, gpus: 1, preemptible: true, grace: 1})
	kubetest.Eventually(t, 60*time.Second, "long running, next waiting", func() (bool, error) {
		return boundCount(t, cs, "team-a", "long") == 1 && boundCount(t, cs, "team-a", "next") == 0, nil
	})
	bound := time.Now()
	kubetest.Eventually(t, 60*time.Second, "next bound, preempting long at its threshold", func() (bool, error) {
		return boundCount(t, cs, "team-a", "next") == 1, nil
	})
	t.Logf("next bound %.1f s after long was seen running", time.Since(bound).Seconds())
}
