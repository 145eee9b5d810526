package sim_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/registry"
	"github.com/gandiva-sched/gandiva/internal/sim"
)

// TestRoundsOnlyWhenSomethingHappened: every round the simulator runs is at
// a time at which an event was applied or a job submitted (wake-ups come
// as tick events), never at a time at which every queued item was stale,
// for every policy, in both performance models; and the run ends when
// its last job does. tiresias-g with free preemption (compat) leaves the most
// stale finishes behind.
func TestRoundsOnlyWhenSomethingHappened(t *testing.T) {
	c, err := cluster.Load("tiresias-n2g4")
	if err != nil {
		t.Fatal(err)
	}
	for seed := uint64(11); seed <= 16; seed++ {
		jobs := randomJobs(seed, 120)
		for _, compat := range []bool{true, false} {
			perf := sim.DefaultPerf()
			if compat {
				perf = sim.CompatPerf()
			}
			for _, name := range registry.Names() {
				cfg := policy.Config{Seed: seed}
				if compat {
					cfg = policy.TiresiasCompat(cfg)
				}
				p, err := registry.New(name, cfg)
				if err != nil {
					continue // a policy without a compat mode
				}
				happened := map[float64]bool{}
				var rounds []float64
				res, err := sim.Run(sim.Config{Cluster: c, Jobs: jobs, Policy: p, Perf: perf, Seed: seed,
					Log: func(l string) {
						// "t=<time> ev <kind> ...": an event applied or a job submitted
						f := strings.Fields(l)
						if len(f) > 1 && f[1] == "ev" {
							v, err := strconv.ParseFloat(strings.TrimPrefix(f[0], "t="), 64)
							if err != nil {
								t.Fatalf("log line %q: %v", l, err)
							}
							happened[v] = true
						}
					},
					Observe: func(now float64, _ *engine.Engine) { rounds = append(rounds, now) }})
				if err != nil {
					t.Fatalf("%s (compat %v): %v", name, compat, err)
				}
				if len(rounds) != res.Stats.Rounds {
					t.Fatalf("%s (compat %v): %d rounds observed, the engine counts %d", name, compat, len(rounds), res.Stats.Rounds)
				}
				// every job ended: the run ends with the last of them (makespan),
				// not at a stale item or a wake-up after it
				last := 0.0
				for _, j := range res.Jobs {
					if j.End < 0 {
						t.Fatalf("seed %d, %s (compat %v): job %s did not end", seed, name, compat, j.Name)
					}
					last = max(last, j.End)
				}
				if res.End != last {
					t.Fatalf("seed %d, %s (compat %v): the run ends at %.6f, its last job at %.6f", seed, name, compat, res.End, last)
				}
				for _, r := range rounds {
					// (the log prints times to 6 decimals)
					if !happened[parse6(t, r)] {
						t.Fatalf("seed %d, %s (compat %v): a round at t=%.6f, where no event was applied and no job submitted", seed, name, compat, r)
					}
				}
			}
		}
	}
}

func parse6(t *testing.T, v float64) float64 {
	t.Helper()
	x, err := strconv.ParseFloat(strconv.FormatFloat(v, 'f', 6, 64), 64)
	if err != nil {
		t.Fatal(err)
	}
	return x
}
