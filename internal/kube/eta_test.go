package kube

import (
	"math"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gandiva-sched/gandiva/internal/eta"
	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
	"github.com/gandiva-sched/gandiva/internal/kube/kubetest"
)

// TestETAMoved: a forecast replaces the one shown only when an edge moved
// by more than a minute and a fifth of how far ahead it lies, or came
// within (or went beyond) the horizon.
func TestETAMoved(t *testing.T) {
	const now = 1000.0
	base := eta.Estimate{Start: now + 3600, StartLow: now + 1800, StartHigh: now + 7200, Finish: now + 7200,
		FinishLow: now + 3600, FinishHigh: math.Inf(1), Samples: 20}
	for _, c := range []struct {
		name  string
		edit  func(*eta.Estimate)
		moved bool
	}{
		{"same", func(*eta.Estimate) {}, false},
		{"median by 5 min of an hour", func(e *eta.Estimate) { e.Start += 300 }, false},
		{"median by 20 min of an hour", func(e *eta.Estimate) { e.Start += 1200 }, true},
		{"p90 of the end now within the horizon", func(e *eta.Estimate) { e.FinishHigh = now + 86400 }, true},
		{"p10 by 30 s of 30 min", func(e *eta.Estimate) { e.StartLow += 30 }, false},
	} {
		e := base
		c.edit(&e)
		if got := etaMoved(base, e, now); got != c.moved {
			t.Errorf("%s: moved %v, want %v", c.name, got, c.moved)
		}
	}
	// near its time, a minute still does not count
	near := eta.Estimate{Start: now + 10, StartLow: now + 5, StartHigh: now + 20, Finish: now + 100, FinishLow: now + 50, FinishHigh: now + 200, Samples: 20}
	later := near
	later.Start += 50
	if etaMoved(near, later, now) {
		t.Error("a start 10 s ahead that moved by 50 s counts as moved")
	}
}

// TestETAText: the band is shown in wall-clock minutes, open when beyond
// the horizon; one forecast has no band.
func TestETAText(t *testing.T) {
	at := float64(time.Date(2026, 11, 27, 17, 0, 0, 0, time.UTC).Unix())
	e := eta.Estimate{Start: at + 600, StartLow: at + 60, StartHigh: at + 3600, Finish: at + 4000, FinishLow: at + 700,
		FinishHigh: math.Inf(1), Samples: 20}
	got := etaText(e)
	for _, want := range []string{"ETA: start ~Nov 27 17:10 UTC (p10–p90 Nov 27 17:01 UTC – Nov 27 18:00 UTC)",
		"end ~Nov 27 18:07 UTC (p10–p90 Nov 27 17:12 UTC – later)"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q does not say %q", got, want)
		}
	}
	e.Samples = 1
	if got := etaText(e); strings.Contains(got, "p10") || !strings.Contains(got, "start ~Nov 27 17:10 UTC") {
		t.Errorf("one forecast: %q", got)
	}
}

// TestWaitingShowsETA: a waiting Job's pending pod's PodScheduled message
// (what `kubectl describe pod` and `gandiva explain --kube` show) carries
// its ETA as a band, and the view the CLI reads has it; a job arriving
// behind it (which under FIFO does not change when it starts) does not
// rewrite it.
func TestWaitingShowsETA(t *testing.T) {
	t.Parallel() // a control plane of its own; it mostly waits
	p := kubetest.Start(t, cplane.Options{Kwok: true, Controllers: true})
	cs := kubetest.Client(t, p)
	kubetest.AddNodes(t, cs, kubetest.Nodes{Count: 1, GPUs: 2})
	kubetest.Namespace(t, cs, "team-a")
	g := runGandiva(t, p, Options{Policy: "fifo"})
	createJob(t, cs, jobSpec{ns: "team-a", name: "a", pods: 1, gpus: 2})
	kubetest.Eventually(t, 60*time.Second, "job a bound", func() (bool, error) {
		return boundCount(t, cs, "team-a", "a") == 1, nil
	})
	createJob(t, cs, jobSpec{ns: "team-a", name: "b", pods: 1, gpus: 2})
	band := regexp.MustCompile(`ETA: start ~[^;]*\(p10–p90 [^)]*\), end ~[^;]*\(p10–p90 [^)]*\)`)
	var msg string
	kubetest.Eventually(t, 90*time.Second, "b's waiting message carries its ETA", func() (bool, error) {
		m, err := waitingMessage(cs, "team-a", "b")
		msg = m
		return band.MatchString(m), err
	})
	t.Logf("b waits: %s", msg)
	if !strings.HasPrefix(msg, "Gandiva: queued: needs 2 GPUs") {
		t.Errorf("b's message %q lost its waiting reason", msg)
	}
	shown := band.FindString(msg)
	kubetest.Eventually(t, 60*time.Second, "the view shows b's ETA", func() (bool, error) {
		v, err := Describe(t.Context(), cs, "team-a", "b")
		return err == nil && strings.Contains(v.Reason, shown), err
	})
	var v0 uint64
	g.mu.Lock()
	v0 = g.s.ETAVersion()
	g.mu.Unlock()
	createJob(t, cs, jobSpec{ns: "team-a", name: "c", pods: 1, gpus: 2})
	kubetest.Eventually(t, 90*time.Second, "c's waiting message carries its ETA", func() (bool, error) {
		m, err := waitingMessage(cs, "team-a", "c")
		return band.MatchString(m), err
	})
	g.mu.Lock()
	v1 := g.s.ETAVersion()
	g.mu.Unlock()
	if v1 <= v0 {
		t.Fatalf("no forecast made after c arrived (%d, then %d)", v0, v1)
	}
	// b was told again when c arrived (its place unchanged, the class too;
	// told at most every waitRetell): its ETA, as shown, is the same
	m, err := waitingMessage(cs, "team-a", "b")
	if err != nil {
		t.Fatal(err)
	}
	if got := band.FindString(m); got != shown {
		t.Errorf("b's ETA moved when a job arrived behind it under FIFO: %q, then %q", shown, got)
	}
}
