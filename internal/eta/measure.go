package eta

import (
	"fmt"
	"math"
	"slices"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/registry"
	"github.com/gandiva-sched/gandiva/internal/sim"
)

// MeasureConfig is an accuracy experiment: a trace simulated under a
// policy, with an ETA asked for every job at its submission (just after
// the round at its submission time, as a user asking at once would get
// it), compared with when it really started (and, with Ends, ended) in
// that simulation: the median's error (Accuracy.Errors) and how often the
// truth fell in the p10–p90 band (Accuracy.Coverage).
type MeasureConfig struct {
	Cluster *cluster.Cluster
	Jobs    []*cluster.JobSpec
	Policy  string
	Params  map[string]string
	// Lengths: the jobs' lengths are declared (the fork uses them); else
	// every job is of unknown length to the fork (the prior decides).
	Lengths bool
	Seed    uint64
	// Horizon is Predict's (0: DefaultHorizon).
	Horizon float64
	// Limit, when positive, stops asking after that many submissions
	// (the simulation still runs to its end); Every, when above 1, asks at
	// one time with submissions in Every (a sample of a long trace).
	Limit, Every int
	// Samples is Predict's (0: DefaultSamples).
	Samples int
	// Prior is Predict's (nil: the user's finished jobs, else the Philly
	// trace's run times).
	Prior Prior
	// Ends: each forecast runs until the jobs asked about have ended (not
	// only started), so that their finish is forecast too.
	Ends bool
}

// Sample is one job's forecast at its submission and what happened.
// Predicted is the median start, Low–High its p10–p90 band (a point when
// one forecast was made); Finish, FinishLow and FinishHigh the same of the
// end (with MeasureConfig.Ends). +Inf: beyond the horizon. Actual and End
// are when the job started and ended in the simulation (-1: never).
type Sample struct {
	Job                       string
	Submit, Predicted, Actual float64
	Low, High                 float64
	Finish, FinishLow         float64
	FinishHigh, End           float64
}

// Coverage counts how often the truth fell in the band: in it, below its
// p10, above its p90 (a band open beyond the horizon has no top), over the
// samples keep is true for that have a truth (a job that never started, or
// ended, is left out); ends chooses the end rather than the start.
func (a *Accuracy) Coverage(keep func(Sample) bool, ends bool) (in, below, above int) {
	for _, s := range a.Samples {
		if keep != nil && !keep(s) {
			continue
		}
		truth, lo, hi := s.Actual, s.Low, s.High
		if ends {
			truth, lo, hi = s.End, s.FinishLow, s.FinishHigh
		}
		switch {
		case truth < 0:
		case truth < lo:
			below++
		case truth > hi:
			above++
		default:
			in++
		}
	}
	return in, below, above
}

// Accuracy is the outcome of Measure.
type Accuracy struct {
	Samples []Sample
	// Forks is the number of forks run (one per time with submissions).
	Forks int
}

// Errors are the absolute errors |predicted − actual| of the samples that
// keep is true for (jobs that never started, or were predicted beyond the
// horizon, are left out and counted in missed).
func (a *Accuracy) Errors(keep func(Sample) bool) (errs []float64, missed int) {
	for _, s := range a.Samples {
		if keep != nil && !keep(s) {
			continue
		}
		if s.Actual < 0 || math.IsInf(s.Predicted, 1) {
			missed++
			continue
		}
		errs = append(errs, math.Abs(s.Predicted-s.Actual))
	}
	slices.Sort(errs)
	return errs, missed
}

// Quantile is the empirical quantile q of sorted values (rank round(q ×
// (n−1))), 0 for none.
func Quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(math.Round(q*float64(len(sorted)-1)))]
}

// Measure runs the experiment.
func Measure(cfg MeasureConfig) (*Accuracy, error) {
	newPolicy := func() (policy.Policy, error) {
		return registry.New(cfg.Policy, policy.Config{Seed: cfg.Seed, Params: cfg.Params})
	}
	pol, err := newPolicy()
	if err != nil {
		return nil, err
	}
	acc := &Accuracy{}
	index := map[string]int{} // sample of each job asked about
	seen := 0                 // engine jobs looked at
	times := 0                // times with submissions
	var ferr error
	observe := func(now float64, e *engine.Engine) {
		jobs := e.Jobs()
		var fresh []string
		for ; seen < len(jobs); seen++ {
			if j := jobs[seen]; !j.Probe && (cfg.Limit <= 0 || len(acc.Samples) < cfg.Limit) {
				fresh = append(fresh, j.Spec.Name)
			}
		}
		if len(fresh) == 0 || ferr != nil {
			return
		}
		if times++; cfg.Every > 1 && (times-1)%cfg.Every != 0 {
			return
		}
		st, err := FromSnapshot(e.Snapshot(), cfg.Lengths)
		if err != nil {
			ferr = err
			return
		}
		want := fresh
		if cfg.Ends {
			want = nil
		}
		est, err := Predict(st, Config{Policy: newPolicy, Horizon: cfg.Horizon, Seed: cfg.Seed, Samples: cfg.Samples, Prior: cfg.Prior, Want: want, WantEnds: ends(cfg.Ends, fresh)})
		if err != nil {
			ferr = fmt.Errorf("fork at %.0f s: %w", now, err)
			return
		}
		acc.Forks++
		for _, name := range fresh {
			index[name] = len(acc.Samples)
			e := est[name]
			acc.Samples = append(acc.Samples, Sample{Job: name, Submit: now, Predicted: e.Start, Low: e.StartLow, High: e.StartHigh,
				Finish: e.Finish, FinishLow: e.FinishLow, FinishHigh: e.FinishHigh, Actual: -1, End: -1})
		}
	}
	res, err := sim.Run(sim.Config{Cluster: cfg.Cluster, Jobs: cfg.Jobs, Policy: pol, Seed: cfg.Seed, Observe: observe})
	if err != nil {
		return nil, err
	}
	if ferr != nil {
		return nil, ferr
	}
	for _, r := range res.Jobs {
		if i, ok := index[r.Name]; ok {
			acc.Samples[i].Actual, acc.Samples[i].End = r.FirstStart, r.End
		}
	}
	return acc, nil
}

// ends is the jobs a forecast runs until they end: fresh, when asked.
func ends(asked bool, fresh []string) []string {
	if asked {
		return fresh
	}
	return nil
}
