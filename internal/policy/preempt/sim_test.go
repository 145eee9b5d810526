package preempt_test

import (
	"bufio"
	"bytes"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/dataset"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/fifo"
	"github.com/gandiva-sched/gandiva/internal/policy/optimus"
	"github.com/gandiva-sched/gandiva/internal/policy/shortest"
	"github.com/gandiva-sched/gandiva/internal/policy/tiresias"
	"github.com/gandiva-sched/gandiva/internal/sim"
)

// prior reads the embedded yarn-gput1000.csv (header, then one GPU-time per line).
func prior(t testing.TB) []float64 {
	data, err := dataset.ReadFile("yarn-gput1000.csv")
	if err != nil {
		t.Fatal(err)
	}
	var out []float64
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Scan()
	for sc.Scan() {
		v, err := strconv.ParseFloat(sc.Text(), 64)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// preemptive builds the policies built on this package, and fjf. (The
// registry is not used so these tests depend only on the packages tested.)
func preemptive(t testing.TB) map[string]policy.Factory {
	p := prior(t)
	return map[string]policy.Factory{
		"tiresias-l": policy.FactoryOf(tiresias.NewL),
		"tiresias-g": policy.FactoryOf(func(cfg policy.Config) (*tiresias.Policy, error) { return tiresias.NewG(cfg, p) }),
		"sjf":        policy.FactoryOf(shortest.NewSJF), "srsf": policy.FactoryOf(shortest.NewSRSF), "srtf": policy.FactoryOf(shortest.NewSRTF),
		"optimus": policy.FactoryOf(optimus.New), "fjf": policy.FactoryOf(fifo.NewFJF),
	}
}

// names lists the policies in a fixed order.
var names = []string{"tiresias-l", "tiresias-g", "sjf", "srsf", "srtf", "optimus", "fjf"}

// randomJobs is a seeded overloaded mix of gang sizes, skewed and
// unskewed models and run times.
func randomJobs(seed uint64, n int) []*cluster.JobSpec {
	rng := rand.New(rand.NewPCG(seed, 2))
	type m struct {
		name string
		skew float64
	}
	models := []m{{"vgg19", 0.717}, {"resnet50", 0.112}, {"lstm", 0}, {"alexnet", 0.611}, {"", 0}}
	sizes := []int{1, 1, 1, 2, 4, 8, 16}
	var out []*cluster.JobSpec
	t := 0.0
	for i := range n {
		t += rng.ExpFloat64() * 120
		md := models[rng.IntN(len(models))]
		out = append(out, &cluster.JobSpec{Name: "j" + string(rune('a'+i%26)) + string(rune('a'+i/26%26)), User: "u",
			GPUs: sizes[rng.IntN(len(sizes))], Submit: math.Round(t), Model: md.name, Skew: md.skew,
			Iters: float64(50 + rng.IntN(20000)), IterTime: 0.05 + rng.Float64()*0.5, MemGiB: float64(1 + rng.IntN(12))})
	}
	return out
}

// TestInvariants runs every policy on random overloaded traces, with and
// without failures, in both modes, checking the engine's invariants and
// that attained service never decreases after every event, and that no
// action is rejected (sim.Config.Check); and that every job ends, except
// with the failure policy's blacklisting on (seed 2): a drained node can
// leave a cluster-sized gang unplaceable for good.
func TestInvariants(t *testing.T) {
	factories := preemptive(t)
	for _, preset := range []string{"tiresias-n4g4", "tiresias-n8g8"} {
		c, err := cluster.Load(preset)
		if err != nil {
			t.Fatal(err)
		}
		for seed := uint64(1); seed <= 3; seed++ {
			jobs := randomJobs(seed, 200)
			for _, compat := range []bool{false, true} {
				perf := sim.DefaultPerf()
				var fail *sim.Failures
				eng := engine.Options{}
				if compat {
					perf = sim.CompatPerf()
				} else if seed != 1 {
					f := sim.PhillyFailures()
					f.InfraPerGPUHour = 0.05
					fail = &f
					if seed == 3 {
						// no blacklisting: with a node drained for good a
						// gang as large as the cluster can never start
						fp := engine.DefaultFailurePolicy()
						fp.NodeFailureLimit = 0
						eng.Failure = &fp
					}
				}
				for _, name := range names {
					cfg := policy.Config{Seed: seed}
					if compat {
						cfg = policy.TiresiasCompat(cfg)
					}
					pol, err := factories[name](cfg)
					if err != nil {
						t.Fatal(err)
					}
					res, err := sim.Run(sim.Config{Cluster: c, Jobs: jobs, Policy: pol, Perf: perf, Failures: fail, Seed: seed, Check: true, Engine: eng})
					if err != nil {
						t.Fatalf("%s %s seed %d compat %v: %v", name, preset, seed, compat, err)
					}
					for _, j := range res.Jobs {
						if !j.State.Terminal() && (fail == nil || eng.Failure != nil) {
							t.Errorf("%s %s seed %d compat %v: job %s is %s at the end", name, preset, seed, compat, j.Name, j.State)
							break
						}
					}
				}
			}
		}
	}
}
