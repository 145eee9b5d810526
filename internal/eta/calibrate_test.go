package eta_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/eta"
)

// synthetic are forecasts whose bands are far too narrow, as the forks'
// are: each band is [0.8, 1.25] × the median delay, the truth the median
// × a log-normal factor of σ 1 (so the band holds it about 17% of the
// time), for starts and ends alike.
func synthetic(r *rand.Rand, n int) []eta.Sample {
	var out []eta.Sample
	for i := range n {
		now := float64(i) * 100
		mid := 600 + r.Float64()*5000
		truth := now + mid*math.Exp(r.NormFloat64())
		out = append(out, eta.Sample{Job: "j", Submit: now, Predicted: now + mid, Low: now + 0.8*mid, High: now + 1.25*mid, Actual: truth,
			Finish: now + 2*mid, FinishLow: now + 1.6*mid, FinishHigh: now + 2.5*mid, End: truth + mid})
	}
	return out
}

func coverage(t *testing.T, s []eta.Sample) (start, end float64) {
	t.Helper()
	a := &eta.Accuracy{Samples: s}
	in, below, above := a.Coverage(nil, false)
	start = float64(in) / float64(in+below+above)
	in, below, above = a.Coverage(nil, true)
	return start, float64(in) / float64(in+below+above)
}

// TestFitWideningCovers: a widening fitted on one set of too-narrow
// forecasts makes the bands of another set, drawn afresh, hold the truth
// close to 80% of the time (the conformal guarantee), with about 10% on
// each side; unwidened, they hold it far less.
func TestFitWideningCovers(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	fit, test := synthetic(r, 2000), synthetic(r, 2000)
	const horizon = 7 * 86400
	if s, e := coverage(t, test); s > 0.3 || e > 0.5 {
		t.Fatalf("the synthetic bands hold the truth %.0f%% (start) and %.0f%% (end): not too narrow", 100*s, 100*e)
	}
	w := eta.FitWidening(fit, horizon)
	if !(w.StartLow < 1 && w.StartHigh > 1 && w.FinishLow < 1 && w.FinishHigh > 1) {
		t.Fatalf("fitted %+v: every edge should widen", w)
	}
	wide := eta.Widen(test, w, horizon)
	s, e := coverage(t, wide)
	t.Logf("fitted %+v: start %.1f%%, end %.1f%% in the band", w, 100*s, 100*e)
	for _, c := range []float64{s, e} {
		if c < 0.76 || c > 0.84 {
			t.Errorf("widened bands hold the truth %.1f%% (start) and %.1f%% (end) of forecasts not fitted on; want about 80%%", 100*s, 100*e)
			break
		}
	}
	a := &eta.Accuracy{Samples: wide}
	in, below, above := a.Coverage(nil, false)
	if n := float64(in + below + above); math.Abs(float64(below)/n-0.1) > 0.03 || math.Abs(float64(above)/n-0.1) > 0.03 {
		t.Errorf("starts below the band %d, above %d of %.0f: want about 10%% each", below, above, n)
	}
}

// TestWideningApply: the edges' distances from the forecast's time scale
// by the factors; the median stays in the band; a p10 beyond the horizon
// counts as at the horizon, a p90 beyond it stays open; one forecast (no
// band) and the zero Widening change nothing.
func TestWideningApply(t *testing.T) {
	w := eta.Widening{StartLow: 0.5, StartHigh: 2, FinishLow: 0.5, FinishHigh: 2}
	e := eta.Estimate{Start: 200, StartLow: 150, StartHigh: 300, Finish: 1100, FinishLow: math.Inf(1), FinishHigh: math.Inf(1), Samples: 20}
	got := w.Apply(e, 100, 1000)
	want := eta.Estimate{Start: 200, StartLow: 125, StartHigh: 500, Finish: 1100, FinishLow: 600, FinishHigh: math.Inf(1), Samples: 20}
	if got != want {
		t.Fatalf("widened %+v\nto     %+v\nwant   %+v", e, got, want)
	}
	// a narrowing factor never leaves the median out
	n := eta.Widening{StartLow: 3, StartHigh: 0.1, FinishLow: 1, FinishHigh: 1}.Apply(e, 100, 1000)
	if n.StartLow != 200 || n.StartHigh != 200 {
		t.Fatalf("narrowed start band %.0f–%.0f, median 200", n.StartLow, n.StartHigh)
	}
	one := e
	one.Samples = 1
	if w.Apply(one, 100, 1000) != one || (eta.Widening{}).Apply(e, 100, 1000) != e {
		t.Fatal("a single forecast or the zero Widening was changed")
	}
}

// TestWideningFor: a policy fitted gets its own factors; another the
// widest of each edge.
func TestWideningFor(t *testing.T) {
	for _, w := range eta.Calibrated {
		if got := eta.WideningFor(w.Policy); got != w {
			t.Fatalf("%s: %+v, want %+v", w.Policy, got, w)
		}
	}
	env := eta.WideningFor("no-such-policy")
	for _, w := range eta.Calibrated {
		if env.StartLow > w.StartLow || env.StartHigh < w.StartHigh || env.FinishLow > w.FinishLow || env.FinishHigh < w.FinishHigh {
			t.Fatalf("envelope %+v narrower than %+v", env, w)
		}
	}
	if env.Policy != "" {
		t.Fatalf("envelope names policy %q", env.Policy)
	}
}
