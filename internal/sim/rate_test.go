package sim

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/model"
)

// SoloIterTime is the executor's own iteration time of a job alone on its
// GPUs, for random clusters (mixed types, several domains), models and
// placements.
func TestSoloIterTimeIsTheExecutors(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	cat := model.Default()
	names := cat.Names()
	types := []string{"V100", "P100", "K80", "A100"}
	for iter := 0; iter < 300; iter++ {
		b := cluster.NewBuilder("r", nil)
		for d := 0; d < 1+rng.IntN(3); d++ {
			b.Add(cluster.ServerGroup{Type: types[rng.IntN(len(types))], Count: 1 + rng.IntN(3), GPUs: 1 + rng.IntN(8), Domain: d})
		}
		c, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		n := 1 + rng.IntN(c.NumGPUs())
		var gpus []cluster.GPUID
		for _, g := range rng.Perm(c.NumGPUs())[:n] {
			gpus = append(gpus, cluster.GPUID(g))
		}
		spec := &cluster.JobSpec{Name: "j", GPUs: n, Iters: 100, IterTime: 0.1 + rng.Float64(), Model: names[rng.IntN(len(names))]}
		if rng.IntN(4) == 0 {
			spec.GPUs = n + rng.IntN(4) // an elastic job on fewer than it asked for
		}
		for _, perf := range []PerfModel{DefaultPerf(), H100Perf(), CompatPerf()} {
			x := newExecutor(c, &perf, cat, nil, rng, &eventHeap{})
			x.add(0, spec)
			tr := x.truth[0]
			tr.gpus = gpus
			want := x.iterTime(0, tr)
			if got := perf.SoloIterTime(cat, c, spec, gpus); math.Abs(got-want) > 1e-12*want {
				t.Fatalf("%s on %v of %s (%s): SoloIterTime %v, executor %v", spec.Model, gpus, c.Summary(), perf.Name, got, want)
			}
		}
	}
}
