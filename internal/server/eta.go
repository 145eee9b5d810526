package server

import (
	"math"
	"sync"
	"time"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/eta"
)

// ETAs (package eta): when the waiting jobs are expected to start and
// every job to finish, from the machine's state forked into the simulator
// and run forward under the server's policy; when a length is unknown, as
// a median with its p10–p90 band over eta.DefaultSamples forks that draw
// the unknown lengths, widened by the policy's calibration
// (eta.WideningFor) (the API's and the dashboard's band fields).
//
// Off the loop: a forecast copies the state under the lock (O(jobs), like
// a listing), then runs in a goroutine of its own with the lock released.
// At most one runs at a time; the loop asks for one after each committed
// step (forecastSoon, which does not block), and one starts when the
// state changed since the last and the last ended at least etaEvery ago
// (or twice its own duration, whichever is longer: a forecast never takes
// more than a third of a core). Each is bounded: etaHorizon of simulated
// time, etaBudget of wall-clock time. Readers (the API's job views and
// explanations, the dashboard's queue) read the latest forecast; they
// never wait for one.

const (
	etaEvery   = 5 * time.Second
	etaBudget  = 10 * time.Second
	etaHorizon = 7 * 86400.0
)

// forecasts holds the latest forecast.
type forecasts struct {
	mu      sync.Mutex
	est     map[string]eta.Estimate // by job ID (the engine's name)
	at      float64                 // engine time of the state forecast
	seq     uint64                  // log position of the state forecast
	version uint64                  // forecasts made
	running bool
	next    time.Time // no forecast starts before
	err     error
	every   time.Duration // etaEvery (tests shorten it)
}

// forecastSoon starts a forecast when one is due (see above); it returns
// at once. seq is the log position the loop has committed.
func (s *Server) forecastSoon(seq uint64) {
	f := &s.eta
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.running || seq == f.seq || time.Now().Before(f.next) {
		return
	}
	f.running = true
	go s.forecast()
}

// forecast makes one forecast and stores it.
func (s *Server) forecast() {
	start := time.Now()
	s.mu.Lock()
	seq := s.nextSeq
	st, err := eta.FromSnapshot(s.m.eng.Snapshot(), true)
	s.mu.Unlock()
	var est map[string]eta.Estimate
	if err == nil {
		deadline := start.Add(etaBudget)
		est, err = eta.Predict(st, eta.Config{Policy: s.cfg.newPolicy, Horizon: etaHorizon, Seed: 1,
			Stop: func() bool { return time.Now().After(deadline) }, Widen: eta.WideningFor(s.cfg.Policy)})
	}
	took := time.Since(start)
	f := &s.eta
	f.mu.Lock()
	defer f.mu.Unlock()
	f.running = false
	every := f.every
	if every <= 0 {
		every = etaEvery
	}
	f.next = time.Now().Add(max(every, 2*took))
	if err != nil {
		if f.err == nil || f.err.Error() != err.Error() {
			s.cfg.Log.Warn("ETA forecast failed", "err", err)
		}
		f.err = err
		return
	}
	f.est, f.at, f.seq, f.err = est, st.Now, seq, nil
	f.version++
	s.cfg.Log.Debug("ETA forecast", "jobs", len(st.Jobs), "took", took.Round(time.Millisecond))
}

// estimate returns job id's estimate from the latest forecast.
func (s *Server) estimate(id string) (eta.Estimate, float64, bool) {
	f := &s.eta
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.est[id]
	return e, f.at, ok
}

// etaVersion counts the forecasts made (the dashboard's version moves
// with it).
func (s *Server) etaVersion() uint64 {
	f := &s.eta
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.version
}

// apiETA is job id's estimate as the API shows it (nil: none yet). A
// waiting job's start is given; a running one's is not. A forecast over
// several draws of unknown lengths carries its band (api.ETA).
func (s *Server) apiETA(id string, waiting bool) *api.ETA {
	e, at, ok := s.estimate(id)
	if !ok {
		return nil
	}
	out := &api.ETA{Note: e.Note, Forecast: s.m.wall(at)}
	wall := func(x float64) *time.Time {
		if math.IsInf(x, 1) {
			return nil
		}
		t := s.m.wall(x)
		return &t
	}
	if waiting {
		out.Start = wall(e.Start)
	}
	out.Finish = wall(e.Finish)
	if e.Samples > 1 {
		out.Samples = e.Samples
		if waiting {
			out.StartLow, out.StartHigh = wall(e.StartLow), wall(e.StartHigh)
		}
		out.FinishLow, out.FinishHigh = wall(e.FinishLow), wall(e.FinishHigh)
	}
	return out
}

// finite is x, or nil when it is +Inf (beyond the forecast's reach).
func finite(x float64) *float64 {
	if math.IsInf(x, 1) {
		return nil
	}
	return &x
}
