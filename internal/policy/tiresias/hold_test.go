package tiresias

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/sim"
)

// TestHoldParam: hold defaults to DefaultHold outside compat mode and to 0
// in it, where only 0 is accepted; it must be finite and ≥ 0.
func TestHoldParam(t *testing.T) {
	prior := []float64{60, 100000}
	for _, c := range []struct {
		compat bool
		hold   string
		want   float64
		ok     bool
	}{
		{false, "", DefaultHold, true}, {true, "", 0, true}, {false, "0", 0, true}, {true, "0", 0, true},
		{false, "45.5", 45.5, true}, {true, "60", 0, false}, {false, "-1", 0, false}, {false, "NaN", 0, false},
		{false, "+Inf", 0, false},
	} {
		params := map[string]string{}
		if c.hold != "" {
			params["hold"] = c.hold
		}
		cfg := policy.Config{Params: params}
		if c.compat {
			cfg = policy.TiresiasCompat(cfg)
		}
		p, err := build(cfg, true, prior)
		if (err == nil) != c.ok {
			t.Errorf("compat %v hold=%q: error %v, want ok=%v", c.compat, c.hold, err, c.ok)
			continue
		}
		if err == nil && p.hold != c.want {
			t.Errorf("compat %v hold=%q: hold %v, want %v", c.compat, c.hold, p.hold, c.want)
		}
	}
	if _, err := build(policy.Config{Params: map[string]string{"hold": "10"}}, false, nil); err == nil {
		t.Error("tiresias-l accepted hold")
	}
}

// holdCheck wraps tiresias-g and checks every decision: a job suspended
// less than hold seconds after it last started or resumed makes room for a
// job of a higher queue started in the same decision, never for one of its
// own queue.
type holdCheck struct {
	*Policy
	t       *testing.T
	early   int // suspends within a hold, all for higher queues
	suspend int
}

func (h *holdCheck) Schedule(s *cluster.Snapshot) cluster.Decision {
	d := h.Policy.Schedule(s)
	best := math.MaxInt // highest queue (lowest number) of a job started now
	for _, a := range d.Actions {
		if a.Kind == cluster.Start || a.Kind == cluster.Resume {
			best = min(best, h.jobs[a.Job].q)
		}
	}
	for _, a := range d.Actions {
		if a.Kind != cluster.Suspend {
			continue
		}
		h.suspend++
		st := &h.jobs[a.Job]
		if s.Now < st.since+h.hold {
			h.early++
			if best >= st.q {
				h.t.Fatalf("t=%v: %s suspended %v s after it started, in queue %d, for no higher-queue job (best %d)",
					s.Now, s.Jobs[a.Job].Spec.Name, s.Now-st.since, st.q, best)
			}
		}
	}
	return d
}

// TestHoldInvariant replays overloaded random traces under tiresias-g with
// the default hold and checks holdCheck's rule at every decision, and that
// the hold cuts the number of preemptions.
func TestHoldInvariant(t *testing.T) {
	prior := []float64{}
	for _, v := range yarn(t) {
		prior = append(prior, float64(v))
	}
	c, err := cluster.Load("tiresias-n4g4")
	if err != nil {
		t.Fatal(err)
	}
	for seed := uint64(1); seed <= 3; seed++ {
		rng := rand.New(rand.NewPCG(seed, 4))
		var jobs []*cluster.JobSpec
		at := 0.0
		for i := range 200 {
			at += rng.ExpFloat64() * 60
			jobs = append(jobs, &cluster.JobSpec{Name: "j" + string(rune('a'+i%26)) + string(rune('a'+i/26)), User: "u",
				GPUs: []int{1, 1, 1, 2, 4, 8}[rng.IntN(6)], Submit: math.Round(at),
				Iters: math.Round(300 * math.Pow(1-rng.Float64(), -1/1.2)), IterTime: 1})
		}
		counts := map[float64]int{}
		for _, hold := range []float64{0, DefaultHold} {
			p, err := build(policy.Config{Params: map[string]string{"hold": strconv.FormatFloat(hold, 'g', -1, 64)}}, true, prior)
			if err != nil {
				t.Fatal(err)
			}
			h := &holdCheck{Policy: p, t: t}
			res, err := sim.Run(sim.Config{Cluster: c, Jobs: jobs, Policy: h, Check: true})
			if err != nil {
				t.Fatal(err)
			}
			counts[hold] = res.Stats.Suspends
			t.Logf("seed %d hold %v: %d suspends (%d within a hold, for higher queues)", seed, hold, h.suspend, h.early)
		}
		if counts[DefaultHold] >= counts[0] {
			t.Errorf("seed %d: %d preemptions with the hold, %d without", seed, counts[DefaultHold], counts[0])
		}
	}
}
