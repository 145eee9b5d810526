package eta

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"

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
	// history, UserHistory{Finished: st.Finished, Running: the times run
	// of st.Jobs}, falling back on PhillyPrior()).
	Prior Prior
	// Seed seeds the simulation (the model's random draws) and the draws
	// of the unknown lengths.
	Seed uint64
	// Samples is the number of forks run when some job's length is unknown
	// (0: DefaultSamples; 1: one fork, every unknown length at its
	// prior's median).
	Samples int
	// Want, when set, ends the forecast as soon as these jobs (by name)
	// have all started: their starts are all the caller wants.
	Want []string
	// WantEnds, when set, ends the forecast as soon as these jobs have all
	// ended (or, with Want, when both are met).
	WantEnds []string
	// Stop, when set, is asked after every simulated round whether to end
	// the forecast there (a caller's bound on its wall-clock time: Predict
	// reads no clock). Jobs the forecast has not reached have no estimate.
	Stop func() bool
	// Widen widens every band by its calibration (the zero Widening: the
	// forks' own p10–p90, which hold the truth far less than 80% of the
	// time; WideningFor gives the one fitted for a policy).
	Widen Widening
}

// DefaultHorizon is how far ahead Predict simulates by default.
const DefaultHorizon = 30 * 86400

// DefaultSamples is the number of forks Predict runs by default when some
// job's length is unknown.
const DefaultSamples = 20

// Estimate is one job's forecast, in the state's time (engine seconds).
// When every job's length is known it is one forecast (the band is the
// point); else Start and Finish are medians over Samples forecasts that
// draw the unknown lengths from their priors, with the 80% band between
// their 10th and 90th percentiles (StartLow–StartHigh, FinishLow–
// FinishHigh), widened by Config.Widen when set. +Inf: not within the horizon (in the median, or in the
// band's top: a band may be open-ended).
type Estimate struct {
	// Start is when a waiting job is expected to get GPUs, Finish when the
	// job is expected to end. For a job that holds GPUs, Start is Now.
	Start, Finish float64
	// The p10 and p90 of Start and Finish.
	StartLow, StartHigh, FinishLow, FinishHigh float64
	// Samples is the number of forecasts the quantiles are over (1: one
	// forecast, every length known or a single draw asked for).
	Samples int
	// Note states what the estimate rests on: the job's length, declared
	// or drawn from which prior (over how many jobs, given how long it has
	// run); how many forecasts; that no other job arrives.
	Note string
}

// Predict forks st into the simulator and runs it forward; it returns an
// estimate for every job of st, by name.
//
// When some job's length is unknown it runs cfg.Samples forks (0:
// DefaultSamples), each drawing every unknown length from its prior, by
// Latin hypercube: job j's draw in fork k is at probability (π_j(k) + ½)/n
// for a permutation π_j of the n forks seeded by cfg.Seed and j's name. So
// each job's own length takes every stratum of its prior once, and the
// draws of a job depend only on its name and the seed: a forecast made
// again on an unchanged state is the same, and one made a little later
// moves only as much as the conditioned priors do (common random numbers).
// A Stop that ends a fork after the first drops that fork and keeps the
// ones before it.
func Predict(st *State, cfg Config) (map[string]Estimate, error) {
	if st == nil || st.Cluster == nil || cfg.Policy == nil {
		return nil, errors.New("eta: a state with a cluster and a policy are required")
	}
	prior := cfg.Prior
	if prior == nil {
		running := map[string][]float64{}
		for _, j := range st.Jobs {
			if j.Spec != nil && j.Ran > 0 {
				running[j.Spec.User] = append(running[j.Spec.User], j.Ran)
			}
		}
		prior = UserHistory{Finished: st.Finished, Running: running, Fallback: PhillyPrior()}
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
	if len(f.jobs) == 0 {
		return out, nil
	}
	n := cfg.Samples
	if n <= 0 {
		n = DefaultSamples
	}
	if f.unknown == 0 {
		n = 1
	}
	perms := make([][]int, len(f.jobs))
	if n > 1 {
		for i := range f.jobs {
			h := fnv.New64a()
			h.Write([]byte(f.jobs[i].spec.Name))
			perms[i] = rand.New(rand.NewPCG(cfg.Seed, h.Sum64())).Perm(n)
		}
	}
	starts := make([][]float64, len(f.jobs))
	ends := make([][]float64, len(f.jobs))
	stopped := false // a forecast ended early (Stop or Want)
	byName := make(map[string]int, len(f.jobs))
	for i := range f.jobs {
		byName[f.jobs[i].spec.Name] = i
	}
	for k := range n {
		pol, err := cfg.Policy()
		if err != nil {
			return nil, fmt.Errorf("eta: %w", err)
		}
		budget := false
		stop := func(_ float64, e *engine.Engine) bool {
			if cfg.Stop != nil && cfg.Stop() {
				budget = true
				return true
			}
			if len(cfg.Want) == 0 && len(cfg.WantEnds) == 0 {
				return false
			}
			for _, name := range cfg.Want {
				if j, ok := e.Lookup(name); ok && j.FirstStart < 0 {
					return false
				}
			}
			for _, name := range cfg.WantEnds {
				if j, ok := e.Lookup(name); ok && !j.State.Terminal() {
					return false
				}
			}
			return true
		}
		specs := f.specs(func(i int) float64 {
			if n == 1 {
				return 0.5
			}
			return (float64(perms[i][k]) + 0.5) / float64(n)
		})
		res, err := sim.Run(sim.Config{Cluster: st.Cluster, Jobs: specs, Policy: pol, Perf: perf, Seed: cfg.Seed,
			Horizon: st.Now + horizon, Stop: stop})
		if err != nil {
			return nil, fmt.Errorf("eta: running the fork forward: %w", err)
		}
		if budget && k > 0 {
			break
		}
		for _, r := range res.Jobs {
			i, ok := byName[r.Name]
			if !ok {
				continue
			}
			s, e := math.Inf(1), math.Inf(1)
			if r.FirstStart >= 0 {
				s = r.FirstStart
			}
			if r.End >= 0 {
				e = r.End
			}
			if f.holding[r.Name] {
				s = st.Now
			}
			if math.IsInf(e, 1) && (budget || len(cfg.Want) > 0 || len(cfg.WantEnds) > 0) {
				stopped = true
			}
			starts[i] = append(starts[i], s)
			ends[i] = append(ends[i], e)
		}
		if budget {
			break
		}
	}
	for i := range f.jobs {
		name := f.jobs[i].spec.Name
		if len(starts[i]) == 0 {
			continue
		}
		e := Estimate{Samples: len(starts[i]), Note: f.notes[name]}
		e.StartLow, e.Start, e.StartHigh = spread(starts[i])
		e.FinishLow, e.Finish, e.FinishHigh = spread(ends[i])
		if e.Samples > 1 {
			e.Note += fmt.Sprintf("; median and p10–p90 of %d forecasts that draw the unknown lengths (of %d %s) from their priors",
				e.Samples, f.unknown, plural(f.unknown, "job", "jobs"))
		}
		if math.IsInf(e.Finish, 1) {
			if stopped {
				e.Note += "; the forecast ended before it did"
			} else {
				e.Note += fmt.Sprintf("; not within the forecast's %.3g days", horizon/86400)
			}
		}
		if e.Samples > 1 && cfg.Widen != (Widening{}) {
			e = cfg.Widen.Apply(e, st.Now, horizon)
			under := "the policy's"
			if cfg.Widen.Policy == "" {
				under = "the widest of the policies'"
			}
			e.Note += fmt.Sprintf("; the band widened by %s calibration on the Philly trace (for jobs arriving later and the fork's errors)", under)
		}
		out[name] = e
	}
	return out, nil
}

// spread is the p10, median and p90 of xs, each forecast taken as the
// middle of its stratum (the value at probability (i + ½)/n, linear
// between neighbours); +Inf when a neighbour is.
func spread(xs []float64) (lo, mid, hi float64) {
	s := slices.Clone(xs)
	slices.Sort(s)
	q := func(p float64) float64 {
		x := min(max(p*float64(len(s))-0.5, 0), float64(len(s)-1))
		i := int(x)
		if i == len(s)-1 || x == float64(i) {
			return s[i]
		}
		if math.IsInf(s[i+1], 1) {
			return math.Inf(1)
		}
		return s[i] + (x-float64(i))*(s[i+1]-s[i])
	}
	return q(0.1), q(0.5), q(0.9)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
