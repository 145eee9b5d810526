package trace

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/model"
)

// SynthConfig describes a synthetic workload modelled on the Philly trace.
type SynthConfig struct {
	// Jobs is the number of jobs; 0 or less gives none.
	Jobs int
	// Seed drives every random draw: the same config gives the same jobs.
	Seed uint64
	// Users is the number of users ("user-01", ...); jobs are spread over
	// them Zipf-like (user k gets a share ∝ 1/k). Default 10.
	Users int
	// Load is the mean offered load in busy GPUs: arrivals are a Poisson
	// process whose rate is then set so that sum(GPUs × duration) / (last
	// submission) = Load exactly. Default 32.
	Load float64
	// GPUs, when set, replaces Philly's gang-size distribution: sizes are
	// drawn uniformly from the list (repeat a size to weight it).
	GPUs []int
	// MaxGPUs, when positive, drops larger gang sizes from the distribution
	// (it should not exceed the cluster's GPUs).
	MaxGPUs int
	// MaxDuration, when positive, caps the run time (seconds on a V100).
	MaxDuration float64
	// Models, when set, replaces the fixed list of common catalog models
	// drawn uniformly for each job.
	Models []string
	// Catalog resolves model names; nil means model.Default().
	Catalog *model.Catalog
}

// phillyGPUs is the gang-size distribution of the Philly trace: number of
// jobs of each size among the 82,247 jobs of philly.csv (petuum/adaptdl
// simulator/traces/philly.csv, CC BY 4.0), computed with
//
//	python3 -c "import csv,collections; print(sorted(collections.Counter(int(r['num_gpus']) for r in csv.DictReader(open('philly.csv'))).items()))"
var phillyGPUs = []struct{ gpus, jobs int }{
	{1, 76627}, {2, 1818}, {4, 1870}, {8, 1643}, {12, 7},
	{16, 199}, {24, 7}, {32, 67}, {64, 6}, {128, 3},
}

// phillyDurations are quantiles of the run time (seconds) of the same
// 82,247 jobs (none has duration 0): {percentile, seconds}, the value of
// rank round(p/100 × (n−1)) in the sorted durations, computed with
//
//	python3 -c "import csv; d=sorted(float(r['duration']) for r in csv.DictReader(open('philly.csv'))); n=len(d); print([(p, d[round(p/100*(n-1))]) for p in (0,0.5,1,2,5,10,15,20,25,30,35,40,45,50,55,60,65,70,75,80,85,90,92.5,95,97.5,99,99.5,99.9,99.99,100)])"
//
// Synthetic draws between neighbouring quantiles log-uniformly, which
// gives a mean of 13,714 s against the trace's 13,136 s.
var phillyDurations = [][2]float64{
	{0, 1}, {0.5, 12}, {1, 17}, {2, 25}, {5, 48}, {10, 61}, {15, 68}, {20, 75},
	{25, 115}, {30, 209}, {35, 371}, {40, 599}, {45, 863}, {50, 1144},
	{55, 1474}, {60, 1821}, {65, 2140}, {70, 2549}, {75, 2932}, {80, 4244},
	{85, 5903}, {90, 11264}, {92.5, 18343}, {95, 43648}, {97.5, 113306},
	{99, 254884}, {99.5, 430658}, {99.9, 1186475}, {99.99, 2730719}, {100, 4628226},
}

// PhillyDurations returns the quantiles of the Philly trace's run times
// (phillyDurations: {percentile, seconds}, percentiles ascending), for
// those who need its distribution (ETAs for jobs of unknown length).
func PhillyDurations() [][2]float64 { return slices.Clone(phillyDurations) }

// phillyDuration maps u in [0, 1) to a run time by the quantile table.
func phillyDuration(u float64) float64 {
	p := 100 * u
	i := sort.Search(len(phillyDurations), func(i int) bool { return phillyDurations[i][0] > p })
	i = min(max(i, 1), len(phillyDurations)-1)
	lo, hi := phillyDurations[i-1], phillyDurations[i]
	f := (p - lo[0]) / (hi[0] - lo[0])
	return lo[1] * math.Pow(hi[1]/lo[1], f)
}

// weighted draws an index with probability ∝ its weight (cum is cumulative).
func weighted(rng *rand.Rand, cum []float64) int {
	return min(sort.SearchFloat64s(cum, rng.Float64()*cum[len(cum)-1]), len(cum)-1)
}

// Synthetic generates c.Jobs jobs modelled on the Philly distributions,
// sorted by submission time, the first at 0. It is a pure function of c.
func Synthetic(c SynthConfig) []*cluster.JobSpec {
	if c.Jobs <= 0 {
		return nil
	}
	if c.Users <= 0 {
		c.Users = 10
	}
	if !(c.Load > 0) || math.IsInf(c.Load, 0) {
		c.Load = 32
	}
	cat := c.Catalog
	if cat == nil {
		cat = model.Default()
	}
	names := c.Models
	if len(names) == 0 {
		names = commonModels
	}
	models := choices(cat, names)

	var sizes []int
	var sizeCum []float64
	addSize := func(g int, w float64) {
		if g > 0 && (c.MaxGPUs <= 0 || g <= c.MaxGPUs) {
			sizes = append(sizes, g)
			sizeCum = append(sizeCum, w+sum(sizeCum))
		}
	}
	if len(c.GPUs) > 0 {
		for _, g := range c.GPUs {
			addSize(g, 1)
		}
	} else {
		for _, e := range phillyGPUs {
			addSize(e.gpus, float64(e.jobs))
		}
	}
	if len(sizes) == 0 {
		sizes, sizeCum = []int{1}, []float64{1}
	}

	userCum := make([]float64, c.Users)
	for k := range userCum {
		userCum[k] = 1/float64(k+1) + sum(userCum[:k])
	}
	width := max(2, len(strconv.Itoa(c.Users)))
	jobWidth := len(strconv.Itoa(c.Jobs - 1))

	rng := rand.New(rand.NewPCG(c.Seed, 0x5eed_7ace))
	out := make([]*cluster.JobSpec, c.Jobs)
	specs := make([]cluster.JobSpec, c.Jobs)
	t, work := 0.0, 0.0
	for i := range out {
		s := &specs[i]
		if i > 0 {
			t += rng.ExpFloat64()
		}
		s.Submit = t
		s.Name = fmt.Sprintf("synth-%0*d", jobWidth, i)
		s.User = fmt.Sprintf("user-%0*d", width, weighted(rng, userCum)+1)
		s.GPUs = sizes[weighted(rng, sizeCum)]
		d := phillyDuration(rng.Float64())
		if c.MaxDuration > 0 {
			d = min(d, c.MaxDuration)
		}
		m := models[rng.IntN(len(models))]
		s.Model, s.MemGiB, s.IterTime = m.name, m.mem, m.iterTime
		if cm := cat.Get(m.name); cm != nil {
			s.Skew = cm.Skew
		}
		s.Iters = d / s.IterTime
		work += float64(s.GPUs) * s.Iters * s.IterTime
		out[i] = s
	}
	if t > 0 { // rescale the unit-rate arrivals to the offered load
		scale := work / c.Load / t
		for _, s := range out {
			s.Submit *= scale
		}
	}
	return out
}

// sum returns the last element of a cumulative slice (0 when empty).
func sum(cum []float64) float64 {
	if len(cum) == 0 {
		return 0
	}
	return cum[len(cum)-1]
}
