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
// assumption, says so, and an estimate that grows with the prior.
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
	if e := est["running"]; !strings.Contains(e.Note, "length unknown: "+what) || math.Abs(e.Finish-(st.Now+rest)) > 1 {
		t.Fatalf("running: %+v; the prior says %.0f s more (%s)", e, rest, what)
	}
	if e := est["next"]; math.Abs(e.Start-est["running"].Finish) > 1e-6 {
		t.Fatalf("next starts at %.1f, the running job ends at %.1f", e.Start, est["running"].Finish)
	}
	// with the user's history: five finished jobs of 5,000 s
	st.Finished = map[string][]float64{"u": {5000, 5000, 5000, 5000, 5000}}
	est, _ = eta.Predict(st, eta.Config{Policy: fifo})
	if e := est["running"]; !strings.Contains(e.Note, "u's 5 finished jobs") || math.Abs(e.Finish-(st.Now+5000-st.Jobs[0].Ran)) > 1 {
		t.Fatalf("with a history of 5,000 s jobs: %+v (ran %.0f s)", e, st.Jobs[0].Ran)
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

// TestPrior: the remainder the Philly prior assumes of a job that has run
// longer is longer (the distribution is heavy-tailed; up to near its
// longest run time), and never negative; a new job gets its mean.
func TestPrior(t *testing.T) {
	q := eta.PhillyPrior()
	last := 0.0
	for _, ran := range []float64{0, 10, 60, 600, 3600, 36000, 360000, 4e6, 1e7} {
		rest, what := q.Remaining("", ran)
		if rest <= 0 || what == "" {
			t.Fatalf("ran %.0f: remaining %.0f (%s)", ran, rest, what)
		}
		if ran >= 600 && ran <= 360000 && rest < last {
			t.Fatalf("ran %.0f: remaining %.0f, less than %.0f for a shorter run", ran, rest, last)
		}
		last = rest
	}
	// the mean of the quantile table's log-uniform pieces: 13,714 s (trace
	// package comment), against the trace's own 13,136 s
	if rest, _ := q.Remaining("", 0); math.Abs(rest-13714) > 20 {
		t.Fatalf("a new job is assumed to run %.0f s; the mean of the Philly table is 13,714 s", rest)
	}
}
