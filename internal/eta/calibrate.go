package eta

import (
	"math"
	"slices"
)

// Widening makes the forecasts' p10–p90 bands honest. The bands of the
// forks alone hold the truth far less often than 80% of the time (see
// BenchmarkCalibration): they count only the uncertainty of the unknown
// lengths, not the jobs that will arrive after the forecast (that pass the
// waiting ones under LAS, Tiresias or time-slicing), nor the priors'
// mismatch with the cluster's jobs, nor the fork's own errors (policy
// state started afresh, running jobs started again). Widening corrects
// them as a conformal calibration does: each edge's distance from the
// forecast's time is scaled by a factor fitted on one set of forecasts
// (FitWidening) so that 10% of the truths fall below the p10 and 10% above
// the p90, and checked on forecasts it was not fitted on. The median is
// left as the forks give it.
//
// A factor of 1 leaves an edge alone; the zero Widening is no widening. An
// edge beyond the horizon (+Inf) counts as at the horizon for a low edge
// (the job may well start before: the forks only say not within the
// horizon) and stays open for a high one.
type Widening struct {
	// Policy names the policy the factors were fitted under ("" for
	// DefaultWidening's envelope).
	Policy string
	// The factors of the p10 and p90 of the start and of the finish.
	StartLow, StartHigh, FinishLow, FinishHigh float64
}

// Apply widens e's bands, forecast at now with horizon (seconds after
// now). An estimate of one forecast (no band) is left as it is; a band
// never leaves its median out.
func (w Widening) Apply(e Estimate, now, horizon float64) Estimate {
	if e.Samples <= 1 || w == (Widening{}) {
		return e
	}
	e.StartLow, e.StartHigh = w.band(e.Start, e.StartLow, e.StartHigh, w.StartLow, w.StartHigh, now, horizon)
	e.FinishLow, e.FinishHigh = w.band(e.Finish, e.FinishLow, e.FinishHigh, w.FinishLow, w.FinishHigh, now, horizon)
	return e
}

func (w Widening) band(mid, lo, hi, flo, fhi, now, horizon float64) (float64, float64) {
	if math.IsInf(lo, 1) {
		lo = now + horizon
	}
	if flo > 0 {
		lo = now + flo*math.Max(lo-now, 0)
	}
	if fhi > 0 && !math.IsInf(hi, 1) {
		hi = now + fhi*math.Max(hi-now, 0)
	}
	return math.Min(lo, mid), math.Max(hi, mid)
}

// Calibrated are the factors fitted by FitWidening on the embedded Philly
// sample (850 jobs, its 64-GPU preset, seed 1, every job's length unknown,
// forecasts 7 days ahead, the jobs of one submission time in 4 asked
// about, under gandiva one in 8), on the forecasts of the even-numbered
// submission times asked at, rounded outwards (a low factor down, a high
// one up) to three digits. BenchmarkCalibration reports their coverage on
// the odd-numbered ones and on the trace read with another seed.
var Calibrated = []Widening{
	{Policy: "fifo", StartLow: 0.646, StartHigh: 1.63, FinishLow: 0.704, FinishHigh: 1.53},
	{Policy: "tiresias-l", StartLow: 0.571, StartHigh: 1.12, FinishLow: 1.06, FinishHigh: 1.84},
	{Policy: "gandiva", StartLow: 0.2, StartHigh: 1, FinishLow: 0.635, FinishHigh: 1.78},
}

// WideningFor is the widening for the policy named: its own fitted
// factors, else the envelope of all of them (the widest band of each
// edge: a policy not measured gets the most cautious band measured).
func WideningFor(policy string) Widening {
	env := Widening{StartLow: 1, StartHigh: 1, FinishLow: 1, FinishHigh: 1}
	for _, w := range Calibrated {
		if w.Policy == policy {
			return w
		}
		env.StartLow, env.StartHigh = min(env.StartLow, w.StartLow), max(env.StartHigh, w.StartHigh)
		env.FinishLow, env.FinishHigh = min(env.FinishLow, w.FinishLow), max(env.FinishHigh, w.FinishHigh)
	}
	return env
}

// FitWidening fits the factors on samples (each a forecast at its Submit
// with horizon, and what happened) for a band meant to hold the truth
// 80% of the time: for each edge, the conformal quantile of the ratios of
// the truth's distance from the forecast's time to the edge's (the 10%
// lowest for a p10, the 90% highest for a p90, at rank ⌈p(n+1)⌉ of n).
// Starts are fitted over the samples that waited (the others start at
// once, as forecast); a sample with no truth is left out. A ratio that
// cannot be computed (an edge at the forecast's time) is left out too.
func FitWidening(samples []Sample, horizon float64) Widening {
	var sl, sh, fl, fh []float64
	ratio := func(truth, edge, now float64) (float64, bool) {
		if math.IsInf(edge, 1) {
			return 0, false
		}
		d := edge - now
		if d <= 0 {
			return 0, false
		}
		return (truth - now) / d, true
	}
	for _, s := range samples {
		if s.Actual > s.Submit {
			lo := s.Low
			if math.IsInf(lo, 1) {
				lo = s.Submit + horizon
			}
			if r, ok := ratio(s.Actual, lo, s.Submit); ok {
				sl = append(sl, r)
			}
			if math.IsInf(s.High, 1) {
				sh = append(sh, 0) // an open band holds any truth above its p10
			} else if r, ok := ratio(s.Actual, s.High, s.Submit); ok {
				sh = append(sh, r)
			}
		}
		if s.End >= 0 {
			lo := s.FinishLow
			if math.IsInf(lo, 1) {
				lo = s.Submit + horizon
			}
			if r, ok := ratio(s.End, lo, s.Submit); ok {
				fl = append(fl, r)
			}
			if math.IsInf(s.FinishHigh, 1) {
				fh = append(fh, 0)
			} else if r, ok := ratio(s.End, s.FinishHigh, s.Submit); ok {
				fh = append(fh, r)
			}
		}
	}
	return Widening{StartLow: conformal(sl, 0.1), StartHigh: conformal(sh, 0.9),
		FinishLow: conformal(fl, 0.1), FinishHigh: conformal(fh, 0.9)}
}

// conformal is the value at rank ⌈p(n+1)⌉ (1-based, clamped to 1..n) of
// xs: the split-conformal quantile; 1 (no change) for none.
func conformal(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 1
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	k := int(math.Ceil(p*float64(len(s)+1))) - 1
	return s[min(max(k, 0), len(s)-1)]
}

// Widen is the samples with their bands widened by w (for measuring a
// widening on forecasts it was not fitted on).
func Widen(samples []Sample, w Widening, horizon float64) []Sample {
	out := make([]Sample, len(samples))
	for i, s := range samples {
		e := w.Apply(Estimate{Start: s.Predicted, StartLow: s.Low, StartHigh: s.High, Finish: s.Finish,
			FinishLow: s.FinishLow, FinishHigh: s.FinishHigh, Samples: 2}, s.Submit, horizon)
		s.Low, s.High, s.FinishLow, s.FinishHigh = e.StartLow, e.StartHigh, e.FinishLow, e.FinishHigh
		out[i] = s
	}
	return out
}

// SplitByForecast splits samples by the forecast they came from: those of
// the even-numbered submission times asked at (0, 2, ...), and those of
// the odd-numbered ones (a split that keeps both halves over the whole
// trace: a split in time fits on a cluster whose load the other half does
// not see).
func SplitByForecast(samples []Sample) (even, odd []Sample) {
	k, last := -1, math.NaN()
	for _, s := range samples {
		if s.Submit != last {
			k, last = k+1, s.Submit
		}
		if k%2 == 0 {
			even = append(even, s)
		} else {
			odd = append(odd, s)
		}
	}
	return even, odd
}
