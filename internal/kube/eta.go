package kube

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"math"
	"sync"
	"time"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/eta"
)

// ETAs on Kubernetes (package eta): when each waiting workload is expected
// to start and end, from the engine's state forked into the simulator and
// run forward under the scheduler's policy, as a median with its p10–p90
// band (widened by the policy's calibration, eta.WideningFor) when a
// length is unknown (a Job declares none unless its pods'
// annotations give its work). A waiting workload's pending pods show it in
// their PodScheduled condition's message, after why they wait ("; ETA:
// start ~17:52 UTC (p10–p90 17:40–18:55 UTC), end ..."), which is what
// `kubectl describe pod` and `gandiva jobs/explain --kube` show.
//
// Bounded like the live server's forecasts: the loop copies the engine's
// state (O(jobs)) and a goroutine of its own runs the forecast, at most
// one at a time, at most every kubeETAEvery (or twice its own duration),
// and only when the jobs' states changed or kubeETAStale passed; each is
// bounded to kubeETAHorizon of simulated time and kubeETABudget of wall
// time. Writes are bounded too: a workload's shown ETA changes only when
// the forecast moved materially (etaMoved), and its pods' condition is
// rewritten at most once per waitRetell (with the waiting reason).
// The fork knows nothing of Kubernetes' constraints (taints, selectors,
// affinity) nor of shared nodes: it sees the schedulable GPUs only.

const (
	kubeETAEvery   = 10 * time.Second
	kubeETAStale   = time.Minute
	kubeETABudget  = 5 * time.Second
	kubeETAHorizon = 7 * 86400.0
)

// etaState is the latest forecast (guarded by mu: the forecast's goroutine
// writes it, the loop reads it).
type etaState struct {
	mu      sync.Mutex
	est     map[string]eta.Estimate // by engine job name
	version uint64                  // forecasts made
	fresh   bool                    // a forecast the loop has not shown yet
	running bool
	next    time.Time // no forecast starts before (loop goroutine)
	sig     uint64    // the jobs' states at the last forecast (loop goroutine)
	stale   time.Time // a forecast is made at the latest then (loop goroutine)
	// due is when the loop calls forecastSoon again for a stale
	// re-forecast, with or without a round (zero: none due; loop
	// goroutine). It never makes a round of its own.
	due time.Time
	// staleAfter is how long a forecast holds when nothing changes
	// (kubeETAStale; tests shorten it).
	staleAfter time.Duration
	err        string
}

func (s *Scheduler) etaLock() func() {
	s.fc.mu.Lock()
	return s.fc.mu.Unlock
}

// forecastSoon starts a forecast when one is due (loop goroutine, after a
// round, and when a forecast came); it returns at once, with the engine
// time at which to call it again when one will be due then (0: none). A
// stale re-forecast (nothing changed for kubeETAStale) is no reason for a
// round: for it, forecastSoon sets s.fc.due instead, when the loop calls
// it again, round or not.
func (s *Scheduler) forecastSoon() float64 {
	unlock := s.etaLock()
	running := s.fc.running
	unlock()
	if running {
		s.fc.due = time.Time{}
		return 0 // (its end wakes the loop)
	}
	wall := time.Now()
	snap := s.eng.Snapshot()
	sig := jobsSig(snap)
	if sig == s.fc.sig && wall.Before(s.fc.stale) {
		s.fc.due = s.fc.stale
		return 0
	}
	if wall.Before(s.fc.next) {
		if sig == s.fc.sig {
			s.fc.due = s.fc.next // (stale only: no round for it)
			return 0
		}
		return s.clk.of(s.fc.next)
	}
	if sig == s.fc.sig {
		// a stale re-forecast: nothing changed since the last round, so
		// the engine's time is that round's; forecast from now
		cp := *snap
		cp.Now = max(cp.Now, s.clk.of(wall))
		snap = &cp
	}
	s.fc.due = time.Time{}
	st, err := eta.FromSnapshot(snap, true)
	if err != nil {
		s.log.Warn("ETA forecast", "err", err)
		return 0
	}
	s.fc.sig, s.fc.stale = sig, wall.Add(cmp.Or(s.fc.staleAfter, kubeETAStale))
	unlock = s.etaLock()
	s.fc.running = true
	unlock()
	newPolicy, widen := s.o.newPolicy, eta.WideningFor(s.pol.Name())
	go func() {
		start := time.Now()
		deadline := start.Add(kubeETABudget)
		est, err := eta.Predict(st, eta.Config{Policy: newPolicy, Horizon: kubeETAHorizon, Seed: 1,
			Stop: func() bool { return time.Now().After(deadline) }, Widen: widen})
		took := time.Since(start)
		unlock := s.etaLock()
		s.fc.running = false
		s.fc.next = time.Now().Add(max(kubeETAEvery, 2*took))
		if err != nil {
			if s.fc.err != err.Error() {
				s.log.Warn("ETA forecast failed", "err", err)
			}
			s.fc.err = err.Error()
		} else {
			s.fc.est, s.fc.fresh, s.fc.err = est, true, ""
			s.fc.version++
		}
		unlock()
		s.log.Debug("ETA forecast", "jobs", len(st.Jobs), "took", took.Round(time.Millisecond))
		s.q.poke()
	}()
	return 0
}

// takeFresh reports whether a forecast came that the loop has not shown.
func (s *Scheduler) takeFresh() bool {
	unlock := s.etaLock()
	defer unlock()
	f := s.fc.fresh
	s.fc.fresh = false
	return f
}

// estimateOf is a job's latest estimate.
func (s *Scheduler) estimateOf(name string) (eta.Estimate, bool) {
	unlock := s.etaLock()
	defer unlock()
	e, ok := s.fc.est[name]
	return e, ok
}

// ETAVersion counts the forecasts made.
func (s *Scheduler) ETAVersion() uint64 {
	unlock := s.etaLock()
	defer unlock()
	return s.fc.version
}

// jobsSig is a fingerprint of the jobs' states and the servers'
// schedulability: a forecast is made again when it changes.
func jobsSig(snap *cluster.Snapshot) uint64 {
	h := fnv.New64a()
	for _, j := range snap.Active() {
		fmt.Fprintf(h, "%d:%d;", j.ID, j.State)
	}
	for i := range snap.Servers {
		fmt.Fprintf(h, "%t", snap.Servers[i].Schedulable())
	}
	return h.Sum64()
}

// etaMoved reports whether estimate b differs materially from a, seen at
// engine time now: a median or band edge moved by more than a minute and
// by more than a fifth of how far ahead it lies (so a forecast that wobbles
// by seconds, or by a little of a long wait, does not rewrite conditions).
func etaMoved(a, b eta.Estimate, now float64) bool {
	moved := func(x, y float64) bool {
		if math.IsInf(x, 1) || math.IsInf(y, 1) {
			return math.IsInf(x, 1) != math.IsInf(y, 1)
		}
		ahead := math.Max(math.Max(x, y)-now, 0)
		return math.Abs(x-y) > math.Max(60, ahead/5)
	}
	return moved(a.Start, b.Start) || moved(a.StartLow, b.StartLow) || moved(a.StartHigh, b.StartHigh) ||
		moved(a.Finish, b.Finish) || moved(a.FinishLow, b.FinishLow) || moved(a.FinishHigh, b.FinishHigh)
}

// etaText is a waiting job's estimate for people: "ETA: start ~17:52 UTC
// (p10–p90 17:40–18:55 UTC), end ~19:10 UTC (p10–p90 18:00 UTC–later)",
// in wall-clock minutes (the engine's time is Unix seconds).
func etaText(e eta.Estimate) string {
	at := func(x float64) string {
		if math.IsInf(x, 1) {
			return "not within 7 days"
		}
		return time.Unix(int64(math.Round(x/60)*60), 0).UTC().Format("Jan 2 15:04 UTC")
	}
	upper := func(x float64) string {
		if math.IsInf(x, 1) {
			return "later"
		}
		return at(x)
	}
	part := func(what string, mid, lo, hi float64) string {
		if e.Samples <= 1 {
			return fmt.Sprintf("%s ~%s", what, at(mid))
		}
		return fmt.Sprintf("%s ~%s (p10–p90 %s – %s)", what, at(mid), at(lo), upper(hi))
	}
	return "ETA: " + part("start", e.Start, e.StartLow, e.StartHigh) + ", " + part("end", e.Finish, e.FinishLow, e.FinishHigh) +
		" (a forecast: the jobs that declare no length are given one drawn from past run times; docs/KUBERNETES.md)"
}

// shownETA is the ETA text a waiting workload's condition shows: the
// latest forecast's when it moved materially from the one shown, else the
// one shown ("" before any).
func (s *Scheduler) shownETA(ws *wstate, j *cluster.Job, now float64) string {
	e, ok := s.estimateOf(j.Spec.Name)
	if !ok {
		return ws.shown.waitMsg
	}
	if ws.shown.waitMsg == "" || etaMoved(ws.shown.wait, e, now) {
		ws.shown.wait, ws.shown.waitMsg = e, etaText(s.clk.shown(e))
	}
	return ws.shown.waitMsg
}
