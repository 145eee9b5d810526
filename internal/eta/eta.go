package eta

import (
	"errors"
	"fmt"
	"math"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/sim"
)

// Job is one job of the state being forked, as a live system knows it.
type Job struct {
	// Spec is the job as submitted. Iters and IterTime are its length when
	// declared; Iters 0 means unknown (Known false ignores them too).
	Spec *cluster.JobSpec
	// Known says the job's length (Spec.Iters × Spec.IterTime) may be used.
	Known bool
	State cluster.JobState
	// Done is the mini-batches it has done, as reported; IterTime its last
	// measured seconds per mini-batch (0: never measured); Ran the seconds
	// it has held GPUs.
	Done, IterTime, Ran float64
	// NotBefore holds a job that backs off after a failure (0 or less:
	// not held; +Inf: held by its pre-run, which the fork assumes passes).
	NotBefore float64
}

// State is what is forked: the cluster and its jobs that have not ended,
// as of Now.
type State struct {
	Now     float64
	Cluster *cluster.Cluster
	// Jobs are the jobs that have not ended (pre-run probes left out), in
	// order of submission.
	Jobs []Job
	// Finished are the run times (seconds holding GPUs) of jobs that
	// finished, by user: the history UserHistory draws on.
	Finished map[string][]float64
}

// Config configures Predict.
type Config struct {
	// Policy builds a fresh instance of the policy the cluster runs.
	Policy func() (policy.Policy, error)
	// Perf is the performance model (zero: sim.DefaultPerf()).
	Perf sim.PerfModel
	// Horizon bounds the simulated time after Now (0: 30 days); a job that
	// has not started (or finished) by then has no estimate of it.
	Horizon float64
	// Prior gives the length of jobs of unknown length (nil: the user's
	// history, UserHistory{Finished: st.Finished}, falling back on
	// PhillyPrior()).
	Prior Prior
	// Seed seeds the simulation (the model's random draws).
	Seed uint64
	// Want, when set, ends the forecast as soon as these jobs (by name)
	// have all started: their starts are all the caller wants.
	Want []string
	// Stop, when set, is asked after every simulated round whether to end
	// the forecast there (a caller's bound on its wall-clock time: Predict
	// reads no clock). Jobs the forecast has not reached have no estimate.
	Stop func() bool
}

// DefaultHorizon is how far ahead Predict simulates by default.
const DefaultHorizon = 30 * 86400

// Estimate is one job's forecast, in the state's time (engine seconds).
type Estimate struct {
	// Start is when a waiting job is expected to get GPUs, Finish when the
	// job is expected to end; +Inf: not within the horizon. For a job that
	// holds GPUs, Start is Now.
	Start, Finish float64
	// Note states what the estimate rests on.
	Note string
}

// Predict forks st into the simulator and runs it forward; it returns an
// estimate for every job of st, by name.
func Predict(st *State, cfg Config) (map[string]Estimate, error) {
	if st == nil || st.Cluster == nil || cfg.Policy == nil {
		return nil, errors.New("eta: a state with a cluster and a policy are required")
	}
	pol, err := cfg.Policy()
	if err != nil {
		return nil, fmt.Errorf("eta: %w", err)
	}
	prior := cfg.Prior
	if prior == nil {
		prior = UserHistory{Finished: st.Finished, Fallback: PhillyPrior()}
	}
	horizon := cfg.Horizon
	if horizon <= 0 {
		horizon = DefaultHorizon
	}
	perf := cfg.Perf
	if perf.Name == "" {
		perf = sim.DefaultPerf()
	}
	f := fork(st, prior, perf.Startup)
	out := make(map[string]Estimate, len(st.Jobs))
	if len(f.specs) == 0 {
		return out, nil
	}
	stopped := false
	stop := func(_ float64, e *engine.Engine) bool {
		if cfg.Stop != nil && cfg.Stop() {
			stopped = true
			return true
		}
		if len(cfg.Want) == 0 {
			return false
		}
		for _, name := range cfg.Want {
			if j, ok := e.Lookup(name); ok && j.FirstStart < 0 {
				return false
			}
		}
		stopped = true
		return true
	}
	res, err := sim.Run(sim.Config{Cluster: st.Cluster, Jobs: f.specs, Policy: pol, Perf: perf, Seed: cfg.Seed,
		Horizon: st.Now + horizon, Stop: stop})
	if err != nil {
		return nil, fmt.Errorf("eta: running the fork forward: %w", err)
	}
	for _, r := range res.Jobs {
		e := Estimate{Start: math.Inf(1), Finish: math.Inf(1), Note: f.notes[r.Name]}
		if r.FirstStart >= 0 {
			e.Start = r.FirstStart
		}
		if r.End >= 0 {
			e.Finish = r.End
		}
		if f.holding[r.Name] {
			e.Start = st.Now
		}
		if math.IsInf(e.Finish, 1) {
			if stopped {
				e.Note += "; the forecast ended before it did"
			} else {
				e.Note += fmt.Sprintf("; not within the forecast's %.3g days", horizon/86400)
			}
		}
		out[r.Name] = e
	}
	return out, nil
}
