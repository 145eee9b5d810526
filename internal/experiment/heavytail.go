package experiment

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/dataset"
	"github.com/gandiva-sched/gandiva/internal/model"
	"github.com/gandiva-sched/gandiva/internal/trace"
)

// HeavyTailConfig describes the heavy-tailed workload of `gandiva reproduce
// tiresias`: job GPU-times drawn from the production samples Tiresias
// ships (yarn-gput10000.csv), split into a gang size and a run time.
type HeavyTailConfig struct {
	// Jobs is the number of jobs.
	Jobs int
	// Seed drives every draw; the committed testdata trace is seed 1.
	Seed uint64
	// GPUs is the cluster size the load refers to.
	GPUs int
	// Load is the offered load within the arrival window: the GPU-time the
	// jobs would use between the first and the last submission if each ran
	// from its arrival, ÷ (GPUs × that window). (Total GPU-time ÷ window
	// would count the months a few giant jobs run after the last arrival
	// and leave the cluster nearly idle during it.)
	Load float64
}

// DefaultHeavyTail is the configuration of the committed trace
// (testdata/tiresias/heavytail.csv): 1,000 jobs on 64 GPUs at 80% load.
func DefaultHeavyTail() HeavyTailConfig {
	return HeavyTailConfig{Jobs: 1000, Seed: 1, GPUs: 64, Load: 0.8}
}

// heavyTailGangs is Philly's gang-size distribution (jobs of each size
// among the 82,247 of philly.csv, as in trace.Synthetic) restricted to the
// power-of-two sizes that fit a 64-GPU cluster's 8-GPU servers at most
// twice over.
var heavyTailGangs = []struct{ gpus, jobs int }{{1, 76627}, {2, 1818}, {4, 1870}, {8, 1643}, {16, 199}}

// heavyTailModels are the nine models of Tiresias' model_tensors.csv; four
// (VGG-11/16/19, AlexNet) have skewed tensor sizes.
var heavyTailModels = []string{"vgg19", "vgg16", "vgg11", "alexnet", "resnet152", "resnet101", "resnet50", "inception4", "inception3"}

// HeavyTail generates the trace as Tiresias CSV (job_id, num_gpu,
// submit_time, iterations, model_name, duration, interval; integer
// seconds), a pure function of c. For each job, in order:
//
//  1. its GPU-time X (GPU-seconds) is a sample of yarn-gput10000.csv drawn
//     uniformly with replacement;
//  2. its gang size g is drawn from heavyTailGangs, independently of X;
//  3. its run time is max(1, round(X ÷ g)) seconds (so GPU-time is kept
//     up to rounding: heavy-tailed in both gang size and duration);
//  4. its model is drawn uniformly from heavyTailModels, and its
//     mini-batch count is run time ÷ the model's V100 mini-batch time
//     (0.1 s where the catalog has none), at least 1;
//  5. its arrival follows a Poisson process: exponential gaps of mean 1,
//     then all times are scaled by the factor s (found by bisection) that
//     makes the load within the window Load: Σ g × min(run time, T − arrival)
//     ÷ (GPUs × T) = Load, T being the last arrival; times are then rounded
//     down to whole seconds.
//
// The draws come from one PCG generator seeded with (Seed, 2019) in this
// order: per job X, then g, then the model, then the gap.
func HeavyTail(c HeavyTailConfig) ([]byte, error) {
	if c.Jobs <= 0 || c.GPUs <= 0 || !(c.Load > 0) {
		return nil, fmt.Errorf("heavy-tailed trace: jobs, GPUs and load must be positive (got %d, %d, %v)", c.Jobs, c.GPUs, c.Load)
	}
	data, err := dataset.ReadFile("yarn-gput10000.csv")
	if err != nil {
		return nil, err
	}
	var samples []float64
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		f := strings.TrimSpace(sc.Text())
		if line == 1 || f == "" {
			continue // header "duration"
		}
		v, err := strconv.ParseFloat(f, 64)
		if err != nil || !(v > 0) {
			return nil, fmt.Errorf("yarn-gput10000.csv line %d: bad GPU-time %q", line, f)
		}
		samples = append(samples, v)
	}
	cum := make([]float64, len(heavyTailGangs))
	total := 0.0
	for i, g := range heavyTailGangs {
		total += float64(g.jobs)
		cum[i] = total
	}
	cat := model.Default()
	rng := rand.New(rand.NewPCG(c.Seed, 2019))
	type row struct {
		gpus  int
		dur   float64
		iters float64
		model string
		at    float64
	}
	rows := make([]row, c.Jobs)
	t := 0.0
	for i := range rows {
		x := samples[rng.IntN(len(samples))]
		g := heavyTailGangs[sort.SearchFloat64s(cum, rng.Float64()*total)].gpus
		name := heavyTailModels[rng.IntN(len(heavyTailModels))]
		if i > 0 {
			t += rng.ExpFloat64()
		}
		d := math.Max(1, math.Round(x/float64(g)))
		per := 0.1
		if m := cat.Get(name); m != nil && m.IterTime[cluster.ReferenceGPU] > 0 {
			per = m.IterTime[cluster.ReferenceGPU]
		}
		rows[i] = row{gpus: g, dur: d, iters: math.Max(1, math.Round(d/per)), model: name, at: t}
	}
	// load(s) falls as s grows (arrivals spread out); bisect in log space.
	load := func(s float64) float64 {
		win := s * t
		sum := 0.0
		for _, r := range rows {
			sum += float64(r.gpus) * math.Min(r.dur, win-s*r.at)
		}
		return sum / (float64(c.GPUs) * win)
	}
	scale := 1.0
	if t > 0 {
		lo, hi := 1e-6, 1e12
		for range 200 {
			mid := math.Sqrt(lo * hi)
			if load(mid) > c.Load {
				lo = mid
			} else {
				hi = mid
			}
		}
		scale = hi
	}
	var b bytes.Buffer
	b.WriteString("job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n")
	for i, r := range rows {
		fmt.Fprintf(&b, "%d,%d,%d,%d,%s,%d,0\n", i, r.gpus, int64(r.at*scale), int64(r.iters), r.model, int64(r.dur))
	}
	return b.Bytes(), nil
}

// heavyTailJobs reads the generated trace back with the Tiresias reader
// (as `gandiva sim --trace` reads the committed file) and keeps the first n
// jobs (0: all).
func heavyTailJobs(c HeavyTailConfig, n int) ([]*cluster.JobSpec, error) {
	data, err := HeavyTail(c)
	if err != nil {
		return nil, err
	}
	jobs, _, err := trace.Read(bytes.NewReader(data), "heavytail.csv", trace.Tiresias, trace.Options{Limit: n})
	if err != nil {
		return nil, fmt.Errorf("reading the heavy-tailed trace: %w", err)
	}
	return jobs, nil
}
