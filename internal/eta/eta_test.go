package eta_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/eta"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/registry"
	"github.com/gandiva-sched/gandiva/internal/sim"
)

func fifo() (policy.Policy, error) { return registry.New("fifo", policy.Config{}) }

// forkAt simulates jobs under FIFO and forks the state after the round at
// the first time ≥ at; it returns the fork's state and the run's result.
func forkAt(t *testing.T, c *cluster.Cluster, jobs []*cluster.JobSpec, at float64, lengths bool) (*eta.State, *sim.Result) {
	t.Helper()
	p, _ := fifo()
	var st *eta.State
	res, err := sim.Run(sim.Config{Cluster: c, Jobs: jobs, Policy: p, Seed: 1, Observe: func(now float64, e *engine.Engine) {
		if st == nil && now >= at {
			var err error
			if st, err = eta.FromSnapshot(e.Snapshot(), lengths); err != nil {
				t.Fatal(err)
			}
		}
	}})
	if err != nil || st == nil {
		t.Fatalf("run: %v (forked: %v)", err, st != nil)
	}
	return st, res
}

func oneServer(t *testing.T, gpus int) *cluster.Cluster {
	t.Helper()
	c, err := cluster.NewBuilder("t", nil).Add(cluster.ServerGroup{Type: "V100", Count: 1, GPUs: gpus, HostMemGiB: 64}).Build()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestForkIsExactWithoutArrivals: when no job arrives after the fork and
// the lengths are declared, the forecast under FIFO of one-GPU jobs is the
// run's own future: every waiting job's start and every job's end, to the
// second (the fork restarts the running jobs, and takes their start-up
// cost off their remaining work).
func TestForkIsExactWithoutArrivals(t *testing.T) {
	c := oneServer(t, 4)
	rng := rand.New(rand.NewPCG(1, 2))
	var jobs []*cluster.JobSpec
	for i := range 30 {
		jobs = append(jobs, &cluster.JobSpec{Name: fmt.Sprintf("j%02d", i), User: "u", GPUs: 1, Submit: float64(i * 5),
			Iters: float64(100 + rng.IntN(2000)), IterTime: 0.5})
	}
	st, res := forkAt(t, c, jobs, 200, true)
	est, err := eta.Predict(st, eta.Config{Policy: fifo})
	if err != nil {
		t.Fatal(err)
	}
	waiting, worst := 0, 0.0
	for _, r := range res.Jobs {
		e, ok := est[r.Name]
		if r.End <= st.Now {
			if ok {
				t.Errorf("%s ended at %.1f, before the fork at %.1f, and has an estimate", r.Name, r.End, st.Now)
			}
			continue
		}
		if !ok {
			t.Fatalf("no estimate for %s", r.Name)
		}
		if r.FirstStart > st.Now {
			waiting++
			worst = math.Max(worst, math.Abs(e.Start-r.FirstStart))
		}
		worst = math.Max(worst, math.Abs(e.Finish-r.End))
		if !strings.Contains(e.Note, "mini-batches left") || !strings.Contains(e.Note, "no other job arrives") {
			t.Errorf("%s: note %q", r.Name, e.Note)
		}
	}
	if waiting < 10 || worst > 1 {
		t.Fatalf("%d jobs waited at the fork; the worst error is %.3f s, want ≤ 1 s (rounding to whole mini-batches)", waiting, worst)
	}
	t.Logf("fork at %.0f s: %d waiting jobs, worst error %.3f s", st.Now, waiting, worst)
}

// TestUnknownLengths: a job whose length is unknown gets the prior's
// distribution, conditioned on the time it has run, and says so; its
// finish is a median with a band, and the job behind it starts when it
// ends, in every forecast; with the user's history, the history decides.
func TestUnknownLengths(t *testing.T) {
	c := oneServer(t, 1)
	jobs := []*cluster.JobSpec{
		{Name: "running", User: "u", GPUs: 1, Submit: 0, Iters: 10000, IterTime: 1},
		{Name: "next", User: "u", GPUs: 1, Submit: 10, Iters: 100, IterTime: 1},
		{Name: "then", User: "u", GPUs: 1, Submit: 1000, Iters: 100, IterTime: 1}, // (a round at 1,000 s)
	}
	st, _ := forkAt(t, c, jobs, 1000, false)
	est, err := eta.Predict(st, eta.Config{Policy: fifo})
	if err != nil {
		t.Fatal(err)
	}
	rest, what := eta.PhillyPrior().Remaining("u", st.Jobs[0].Ran)
	e := est["running"]
	if !strings.Contains(e.Note, "length unknown, "+what) || !strings.Contains(e.Note, "82,247 jobs") ||
		!strings.Contains(e.Note, fmt.Sprintf("%d forecasts", eta.DefaultSamples)) || e.Samples != eta.DefaultSamples {
		t.Fatalf("running: note %q, %d samples", e.Note, e.Samples)
	}
	// the band is the prior's own p10–p90, conditioned (within the
	// strata's interpolation)
	for _, c := range []struct {
		got float64
		u   float64
	}{{e.FinishLow, 0.1}, {e.Finish, 0.5}, {e.FinishHigh, 0.9}} {
		if want := st.Now + rest(c.u); math.Abs(c.got-want) > 0.15*(want-st.Now) {
			t.Fatalf("running: finish at p%.0f %.0f, the prior says %.0f", 100*c.u, c.got, want)
		}
	}
	if !(e.FinishLow < e.Finish && e.Finish < e.FinishHigh) || e.Start != st.Now || e.StartLow != st.Now || e.StartHigh != st.Now {
		t.Fatalf("running: %+v", e)
	}
	if n := est["next"]; n.Start != e.Finish || n.StartLow != e.FinishLow || n.StartHigh != e.FinishHigh {
		t.Fatalf("next starts at %.1f (%.1f–%.1f), the running job ends at %.1f (%.1f–%.1f)", n.Start, n.StartLow, n.StartHigh,
			e.Finish, e.FinishLow, e.FinishHigh)
	}
	// with the user's history: five finished jobs of 5,000 s
	st.Finished = map[string][]float64{"u": {5000, 5000, 5000, 5000, 5000}}
	est, _ = eta.Predict(st, eta.Config{Policy: fifo})
	if e := est["running"]; !strings.Contains(e.Note, "u's 5 finished jobs") || math.Abs(e.Finish-(st.Now+5000-st.Jobs[0].Ran)) > 1 ||
		e.FinishLow != e.Finish || e.FinishHigh != e.Finish {
		t.Fatalf("with a history of 5,000 s jobs: %+v (ran %.0f s)", e, st.Jobs[0].Ran)
	}
	// a forecast made again on the same state is the same
	again, _ := eta.Predict(st, eta.Config{Policy: fifo})
	for name, e := range est {
		if again[name] != e {
			t.Fatalf("%s: %+v, then %+v", name, e, again[name])
		}
	}
}

// TestStableBetweenRefreshes reproduces a live report: three jobs of 60 s
// of work, lengths not declared, time-sliced on one GPU under Gandiva; a
// forecast after every round. A job's expected end moved by hours within
// 40 s (ends in 3h48m, then 7h40m, then 9h39m) when each job was assumed
// to run the mean of what remains of the Philly run times: a mean that a
// few jobs of hours dominate, and that ending jobs took away. With
// medians over forecasts that draw the lengths (the same draws at every
// refresh), no median end moves by as much as an hour between forecasts
// at most a minute apart, and each median lies in its band.
func TestStableBetweenRefreshes(t *testing.T) {
	c := oneServer(t, 1)
	var jobs []*cluster.JobSpec
	for i := range 3 {
		jobs = append(jobs, &cluster.JobSpec{Name: fmt.Sprintf("j%d", i), User: "u", GPUs: 1, Submit: 0, Iters: 60, IterTime: 1})
	}
	gandiva := func() (policy.Policy, error) { return registry.New("gandiva", policy.Config{}) }
	p, _ := gandiva()
	type forecast struct {
		at  float64
		est map[string]eta.Estimate
	}
	var fs []forecast
	if _, err := sim.Run(sim.Config{Cluster: c, Jobs: jobs, Policy: p, Seed: 1, Observe: func(now float64, e *engine.Engine) {
		st, err := eta.FromSnapshot(e.Snapshot(), false)
		if err != nil {
			t.Fatal(err)
		}
		est, err := eta.Predict(st, eta.Config{Policy: gandiva, Seed: 1, Widen: eta.WideningFor("gandiva")}) // (as the live server)
		if err != nil {
			t.Fatal(err)
		}
		fs = append(fs, forecast{now, est})
	}}); err != nil {
		t.Fatal(err)
	}
	compared := 0
	for i := 1; i < len(fs); i++ {
		a, b := fs[i-1], fs[i]
		if b.at-a.at > 60 {
			continue
		}
		for name, eb := range b.est {
			ea, ok := a.est[name]
			if !ok {
				continue
			}
			compared++
			t.Logf("%s at %3.0f s ends at %6.0f s, at %3.0f s at %6.0f s (band %.0f–%.0f)", name, a.at, ea.Finish, b.at, eb.Finish, eb.FinishLow, eb.FinishHigh)
			if d := math.Abs(eb.Finish - ea.Finish); d >= 3600 {
				t.Errorf("%s: forecast to end at %.0f s at %.0f s, at %.0f s at %.0f s: %.1f h apart", name, ea.Finish, a.at, eb.Finish, b.at, d/3600)
			}
			if !(eb.FinishLow <= eb.Finish && eb.Finish <= eb.FinishHigh) {
				t.Errorf("%s at %.0f s: median %.0f outside its band %.0f–%.0f", name, b.at, eb.Finish, eb.FinishLow, eb.FinishHigh)
			}
		}
	}
	if compared < 3 {
		t.Fatalf("%d forecasts, %d pairs compared", len(fs), compared)
	}
}

// TestHorizon: a job that cannot start within the horizon has no
// estimate of it (+Inf).
func TestHorizon(t *testing.T) {
	c := oneServer(t, 1)
	jobs := []*cluster.JobSpec{
		{Name: "long", User: "u", GPUs: 1, Submit: 0, Iters: 1e6, IterTime: 1},
		{Name: "after", User: "u", GPUs: 1, Submit: 1, Iters: 10, IterTime: 1},
	}
	st, _ := forkAt(t, c, jobs, 1, true)
	est, err := eta.Predict(st, eta.Config{Policy: fifo, Horizon: 3600})
	if err != nil {
		t.Fatal(err)
	}
	if e := est["after"]; !math.IsInf(e.Start, 1) || !math.IsInf(e.Finish, 1) {
		t.Fatalf("after: %+v, want no estimate within an hour", e)
	}
	if e := est["long"]; e.Start != st.Now || !math.IsInf(e.Finish, 1) {
		t.Fatalf("long: %+v", e)
	}
}

// TestPrior: the Philly prior for a new job is the trace's own
// distribution (median 1,144 s, p10 61 s, p90 11,264 s); conditioned on
// the time a job has run, its quantiles never fall below a minimum,
// never decrease in the probability, and move smoothly with the time run
// (over the first day, the median end moves by less than 15 minutes in
// any 40 s), while what remains of a job that has run long is long.
func TestPrior(t *testing.T) {
	q := eta.PhillyPrior()
	r, what := q.Remaining("", 0)
	if math.Abs(r(0.5)-1144) > 1 || math.Abs(r(0.1)-61) > 1 || math.Abs(r(0.9)-11264) > 1 || !strings.Contains(what, "82,247 jobs") {
		t.Fatalf("new job: p10 %.0f, median %.0f, p90 %.0f (%s)", r(0.1), r(0.5), r(0.9), what)
	}
	for ran := 0.0; ran <= 86400; ran += 10 {
		r, what := q.Remaining("", ran)
		prev := 0.0
		for _, u := range []float64{0, 0.1, 0.5, 0.9, 1} {
			v := r(u)
			if v < 1 || v < prev || what == "" {
				t.Fatalf("ran %.0f: %.0f at %.1f after %.0f (%s)", ran, v, u, prev, what)
			}
			prev = v
		}
		// 40 s later, on an unchanged cluster, the median end has moved
		// by minutes at most (578 s at most, after 48 s)
		later, _ := q.Remaining("", ran+40)
		if d := math.Abs((ran + 40 + later(0.5)) - (ran + r(0.5))); d > 900 {
			t.Fatalf("ran %.0f: the median end moved by %.0f s in the next 40 s", ran, d)
		}
	}
	if r, _ := q.Remaining("", 360000); r(0.5) < 100000 {
		t.Fatalf("a job that has run 100 h is assumed to have %.0f s left at the median", r(0.5))
	}
}

// TestUserHistoryCensored: a user's history counts the jobs still running
// as lasting at least as long as they have run (Kaplan–Meier). Ten
// finished jobs of 100 s and ten still running after 5,000 s: from the
// finished ones alone every job would be assumed to end within 100 s;
// counted, half the jobs outlast 5,000 s, so the upper half of the
// distribution lies beyond the longest finished job (in the fall-back's
// tail),
// while the bottom stays the finished jobs' 100 s. Without censoring, the
// estimate is the finished jobs' own quantiles.
func TestUserHistoryCensored(t *testing.T) {
	var short, long []float64
	for range 10 {
		short, long = append(short, 100), append(long, 5000)
	}
	h := eta.UserHistory{Finished: map[string][]float64{"u": short}, Fallback: eta.PhillyPrior()}
	r, what := h.Remaining("u", 0)
	if r(0.1) != 100 || r(0.9) != 100 || !strings.Contains(what, "u's 10 finished jobs") || strings.Contains(what, "running") {
		t.Fatalf("finished only: p10 %.0f, p90 %.0f (%s)", r(0.1), r(0.9), what)
	}
	h.Running = map[string][]float64{"u": long}
	r, what = h.Remaining("u", 0)
	if r(0.1) != 100 || r(0.6) < 5000 || r(0.9) <= r(0.6) || !strings.Contains(what, "10 finished jobs and 10 still running") ||
		!strings.Contains(what, "tail of the fall-back prior") {
		t.Fatalf("with the running jobs: p10 %.0f, p60 %.0f, p90 %.0f (%s)", r(0.1), r(0.6), r(0.9), what)
	}
	// finished jobs of 1,000 to 5,000 s, a job that has run 500 s: the
	// remainders 500–4,500 s, linear between the middles of their steps
	h = eta.UserHistory{Finished: map[string][]float64{"u": {1000, 2000, 3000, 4000, 5000}}}
	r, _ = h.Remaining("u", 500)
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-6 }
	if !near(r(0.5), 2500) || !near(r(0), 500) || !near(r(1), 4500) || !near(r(0.2), 1000) {
		t.Fatalf("remainders 500–4,500 s: %.0f %.0f %.0f %.0f", r(0), r(0.2), r(0.5), r(1))
	}
}

// TestStopKeepsForks: a caller's bound that ends the fourth fork keeps the
// three before it (a narrower sample, said in the note), rather than
// leaving the jobs without an estimate.
func TestStopKeepsForks(t *testing.T) {
	c := oneServer(t, 1)
	jobs := []*cluster.JobSpec{
		{Name: "running", User: "u", GPUs: 1, Submit: 0, Iters: 1e6, IterTime: 1},
		{Name: "next", User: "u", GPUs: 1, Submit: 10, Iters: 100, IterTime: 1},
		{Name: "then", User: "u", GPUs: 1, Submit: 100, Iters: 100, IterTime: 1}, // (a round at 100 s)
	}
	st, _ := forkAt(t, c, jobs, 100, false)
	forks := 0
	counting := func() (policy.Policy, error) { forks++; return fifo() }
	est, err := eta.Predict(st, eta.Config{Policy: counting, Stop: func() bool { return forks >= 4 }})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"running", "next", "then"} {
		e := est[name]
		if e.Samples != 3 || !strings.Contains(e.Note, "of 3 forecasts") || math.IsInf(e.Finish, 1) {
			t.Fatalf("%s: %+v", name, e)
		}
	}
}

// TestCoverage: the truth in the band, below its p10, above its p90; an
// open band (p90 beyond the horizon) holds any truth above its p10; a job
// that never started or ended is left out.
func TestCoverage(t *testing.T) {
	inf := math.Inf(1)
	a := &eta.Accuracy{Samples: []eta.Sample{
		{Low: 10, High: 20, Actual: 15, FinishLow: 30, FinishHigh: inf, End: 1e9},
		{Low: 10, High: 20, Actual: 5, FinishLow: 30, FinishHigh: 40, End: 41},
		{Low: 10, High: 20, Actual: 25, FinishLow: 30, FinishHigh: 40, End: 29},
		{Low: 10, High: 20, Actual: -1, FinishLow: 30, FinishHigh: 40, End: -1},
		{Low: inf, High: inf, Actual: 10, FinishLow: 30, FinishHigh: 40, End: 30},
	}}
	if in, below, above := a.Coverage(nil, false); in != 1 || below != 2 || above != 1 {
		t.Fatalf("starts: %d in, %d below, %d above", in, below, above)
	}
	if in, below, above := a.Coverage(nil, true); in != 2 || below != 1 || above != 1 {
		t.Fatalf("ends: %d in, %d below, %d above", in, below, above)
	}
}
