package experiment

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
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

// heavyTailSizes are the gang sizes a heavy-tailed job may have: the
// power-of-two sizes that fit a 64-GPU cluster's 8-GPU servers at most
// twice over (Philly's 12-, 24-, 32-, 64- and 128-GPU jobs, 90 of 82,247,
// are left out).
var heavyTailSizes = []int{1, 2, 4, 8, 16}

// heavyTailGangs is Philly's joint distribution of gang size and GPU-time:
// row k counts the jobs of philly.csv (82,247 jobs; petuum/adaptdl
// simulator/traces/philly.csv, CC BY 4.0) whose GPU-time (num_gpus ×
// duration) lies in [10^k, 10^(k+1)) GPU-seconds, by gang size
// heavyTailSizes, computed with
//
//	python3 -c "import csv,collections; c=collections.Counter((len(str(int(float(r['gpu_time']))))-1, int(r['num_gpus'])) for r in csv.DictReader(open('philly.csv'))); print([(k, [c[k,g] for g in (1,2,4,8,16)]) for k in range(8)])"
//
// (the number of digits of the integer part, less one, is ⌊log10⌋ exactly;
// every GPU-time in philly.csv is at least 1 and below 10^8).
//
// Why decades: large GPU-time in real traces comes mostly from large
// gangs (1 GPU for 96% of Philly's jobs below 10^4 GPU-s, for 8% of
// those in [10^6, 10^7), for none from 3.3 million GPU-s on; the longest
// Philly job runs 53 days), so the gang size must be drawn given the GPU-time, not
// independently of it. Bucketing by decade is the simplest conditional
// table: it needs no tuning parameter besides the bucket width, it is
// small enough to hard-code, and a decade is wide enough that every bucket
// holds at least 19 Philly jobs of the sizes above (the k nearest jobs by
// GPU-time would need the whole trace or a choice of k). It was fixed
// before any run of the experiment with it.
var heavyTailGangs = [8][5]int{
	{117, 16, 0, 1, 0},        // [1, 10) GPU-s
	{17980, 1334, 11, 6, 2},   // [10, 100)
	{18817, 134, 317, 75, 19}, // [100, 1,000)
	{33122, 26, 269, 302, 37}, // [1,000, 10,000)
	{5542, 99, 418, 278, 14},  // [10^4, 10^5)
	{984, 189, 751, 451, 37},  // [10^5, 10^6)
	{65, 20, 102, 518, 85},    // [10^6, 10^7)
	{0, 0, 2, 12, 5},          // [10^7, 10^8)
}

// heavyTailGang maps a GPU-time x (GPU-seconds) and u in [0, 1) to a gang
// size: the decade row of x in heavyTailGangs (the first row below 10
// GPU-s, the last from 10^7 on), then the size whose cumulative share of
// that row first exceeds u.
func heavyTailGang(x, u float64) int {
	k := 0
	for bound := 10.0; k < len(heavyTailGangs)-1 && x >= bound; bound *= 10 {
		k++
	}
	row := heavyTailGangs[k]
	total := 0
	for _, n := range row {
		total += n
	}
	target := u * float64(total)
	acc := 0
	for i, n := range row {
		acc += n
		if n > 0 && float64(acc) > target {
			return heavyTailSizes[i]
		}
	}
	// Only when u × total rounds up to total (u within an ulp of 1).
	for i := len(row) - 1; ; i-- {
		if row[i] > 0 {
			return heavyTailSizes[i]
		}
	}
}

// heavyTailModels are the nine models of Tiresias' model_tensors.csv; four
// (VGG-11/16/19, AlexNet) have skewed tensor sizes.
var heavyTailModels = []string{"vgg19", "vgg16", "vgg11", "alexnet", "resnet152", "resnet101", "resnet50", "inception4", "inception3"}

// HeavyTail generates the trace as Tiresias CSV (job_id, num_gpu,
// submit_time, iterations, model_name, duration, interval; integer
// seconds), a pure function of c. For each job, in order:
//
//  1. its GPU-time X (GPU-seconds) is a sample of yarn-gput10000.csv drawn
//     uniformly with replacement;
//  2. its gang size g is drawn from the gang sizes of the Philly jobs
//     whose GPU-time is in the same decade as X (heavyTailGangs, by
//     heavyTailGang), so that large GPU-times come mostly from large
//     gangs, as in Philly;
//  3. its run time is max(1, round(X ÷ g)) seconds (so GPU-time is kept
//     up to rounding);
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
		g := heavyTailGang(x, rng.Float64())
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
