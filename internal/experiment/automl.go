package experiment

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/sim"
)

// automlCurve is the learning-curve model of the AutoML experiment, written
// down and seeded:
//
//   - 100 configurations of a ResNet-like model on CIFAR-10 (390 mini-batches
//     of 128 per epoch, 100 epochs; 6 minutes per epoch alone on a P40).
//   - Configuration k of the population has final accuracy automlFinal(k +
//     0.5), a piecewise-linear quantile function (automlQuantiles): 15
//     configurations exceed 70%, one exceptional configuration exceeds 80%
//     and reaches 91%. Its learning speed τ_k is uniform in [10, 15] epochs.
//   - After e epochs it reports accuracy A_k × (1 − exp(−e/τ_k)) + ε, ε
//     normal with σ = 0.005, drawn from (seed, k, e), so reports repeat.
//   - The search proposes the configurations in a random order (seeded):
//     HyperOpt with no prior information proposes them blind.
type automlCurve struct {
	final, tau []float64
	seed       uint64
	perEpoch   float64
}

const (
	automlConfigs = 100
	automlEpochs  = 100
	automlPerEp   = 390
)

func newAutomlCurve(seed uint64, pop [][2]float64) (*automlCurve, []*cluster.JobSpec) {
	rng := rand.New(rand.NewPCG(seed, 0xa07))
	c := &automlCurve{seed: seed, perEpoch: automlPerEp}
	order := rng.Perm(automlConfigs)
	// 6 minutes per epoch on a P40 alone: seconds per mini-batch there,
	// converted to the reference GPU by the P40's nominal speed.
	p40, _ := cluster.LookupGPUType("P40")
	iter := 360.0 / automlPerEp * p40.Speed
	var jobs []*cluster.JobSpec
	for i := 0; i < automlConfigs; i++ {
		k := order[i]
		c.final = append(c.final, automlFinal(pop, float64(k)+0.5))
		c.tau = append(c.tau, 10+5*rng.Float64())
		jobs = append(jobs, &cluster.JobSpec{Name: fmt.Sprintf("cfg%03d", i), User: "automl", Group: "search",
			GPUs: 1, Model: "resnet18-b128", Iters: automlEpochs * automlPerEp, IterTime: iter, MemGiB: 5})
	}
	return c, jobs
}

// automlQuantiles is the population of final accuracies: {percentile,
// accuracy}, linear in between. Accuracy above 70% is common (15 of 100
// configurations); one exceptional configuration exceeds 80% and reaches
// 91%: the paper's baseline needed 41 and 88 hours to find configurations
// above 80% and 90%, so they were rare in its search.
var automlQuantiles = [][2]float64{{0, 0.30}, {50, 0.62}, {85, 0.70}, {98, 0.78}, {99, 0.79}, {99.2, 0.91}, {100, 0.92}}

// automlQuantilesAlt is a sensitivity variant with two configurations above
// 80% (0.82 and 0.91): the search finds one of them sooner.
var automlQuantilesAlt = [][2]float64{{0, 0.30}, {50, 0.62}, {85, 0.70}, {97, 0.78}, {98, 0.82}, {99, 0.91}, {100, 0.92}}

// automlQuantilesSmooth is a sensitivity variant without the gap between
// 0.79 and 0.91: linear from the 85th percentile (0.70) to the best (0.92),
// so about 7 configurations exceed 80% and one exceeds 90%.
var automlQuantilesSmooth = [][2]float64{{0, 0.30}, {50, 0.62}, {85, 0.70}, {100, 0.92}}

func automlFinal(q [][2]float64, pct float64) float64 {
	for i := 1; i < len(q); i++ {
		if pct <= q[i][0] {
			f := (pct - q[i-1][0]) / (q[i][0] - q[i-1][0])
			return q[i-1][1] + f*(q[i][1]-q[i-1][1])
		}
	}
	return q[len(q)-1][1]
}

// accuracy is the hidden curve: configuration i's accuracy after done mini-batches.
func (c *automlCurve) accuracy(spec *cluster.JobSpec, done float64) float64 {
	var i int
	fmt.Sscanf(spec.Name, "cfg%d", &i)
	e := math.Floor(done/c.perEpoch + 1e-6)
	noise := rand.New(rand.NewPCG(c.seed^uint64(i)<<20, uint64(e))).NormFloat64() * 0.005
	return c.final[i]*(1-math.Exp(-e/c.tau[i])) + noise
}

// automlRun returns the minutes until some configuration first reports an
// accuracy above each threshold (NaN if never within the horizon).
func automlRun(pol string, params map[string]string, seed uint64, pop [][2]float64, thresholds []float64) ([]float64, error) {
	var p policy.Policy
	var err error
	if pol == automlBaseline {
		p, err = newPolicy("fifo", nil)
		p = newEarlyStop(p, 1.0/27, 3)
	} else {
		p, err = newPolicy(pol, params)
	}
	if err != nil {
		return nil, err
	}
	return automlRunPolicy(p, seed, pop, thresholds)
}

// automlBaseline names the paper's baseline in automlRun: fifo (exclusive
// GPUs) with the gandiva policy's early-feedback drop rule (earlyStop).
const automlBaseline = "hyperopt"

func automlRunPolicy(p policy.Policy, seed uint64, pop [][2]float64, thresholds []float64) ([]float64, error) {
	c, err := cluster.Load("p40x16")
	if err != nil {
		return nil, err
	}
	curve, jobs := newAutomlCurve(seed, pop)
	first := make([]float64, len(thresholds))
	for i := range first {
		first[i] = math.NaN()
	}
	_, err = sim.Run(sim.Config{Cluster: c, Jobs: jobs, Policy: p, Perf: sim.DefaultPerf(), Seed: seed,
		Curve:       curve.accuracy,
		ReportEvery: func(*cluster.JobSpec) float64 { return automlPerEp },
		Horizon:     200 * 3600,
		Observe: func(now float64, e *engine.Engine) {
			for _, j := range e.Jobs() {
				if j.MetricAt != now || j.Metric == 0 {
					continue
				}
				for k, th := range thresholds {
					if math.IsNaN(first[k]) && j.Metric >= th {
						first[k] = now / 60
					}
				}
			}
		}})
	return first, err
}

// automlSeed is one seed's minutes to each threshold under each policy
// (baseline, gandiva, fifo run to completion).
type automlSeed struct{ hyperopt, gandiva, fifo []float64 }

// automlSeeds runs the three searches for every seed of o.
func automlSeeds(o Options, pop [][2]float64, thresholds []float64) ([]automlSeed, error) {
	return parallelSeeds(o.Seeds(), func(seed uint64) (automlSeed, error) {
		var r automlSeed
		for _, x := range []struct {
			pol string
			dst *[]float64
		}{{automlBaseline, &r.hyperopt}, {"gandiva", &r.gandiva}, {"fifo", &r.fifo}} {
			t, err := automlRun(x.pol, nil, seed, pop, thresholds)
			if err != nil {
				return r, err
			}
			for k := range t {
				if math.IsNaN(t[k]) {
					return r, fmt.Errorf("%s seed %d: no configuration reached %.0f%% within the horizon", x.pol, seed, 100*thresholds[k])
				}
			}
			*x.dst = t
		}
		return r, nil
	})
}

// autoML: minutes until a configuration passes 70/80/90% accuracy; the
// paper's baseline (HyperOpt-style early feedback on exclusive GPUs: fifo
// with the same rungs and drop rule) against Gandiva (time-slicing and
// prioritisation on top of the same early feedback); statistics over seeds.
func autoML(o Options, rep *Report, md *strings.Builder) error {
	thresholds := []float64{0.7, 0.8, 0.9}
	res, err := automlSeeds(o, automlQuantiles, thresholds)
	if err != nil {
		return err
	}
	seeds := o.Seeds()
	paperBase := []float64{134.1, 2489.1, 5296.7}
	paperG := []float64{134.1, 543.1, 935.4}
	ratios := func(rs []automlSeed, k int, base func(automlSeed) []float64) []float64 {
		var x []float64
		for _, r := range rs {
			x = append(x, base(r)[k]/r.gandiva[k])
		}
		return x
	}
	hyper := func(r automlSeed) []float64 { return r.hyperopt }
	fifo := func(r automlSeed) []float64 { return r.fifo }
	md.WriteString(`
## AutoML: hyper-parameter search with early feedback (16 P40)

The paper: 100 configurations of a ResNet-like model on CIFAR, 16 P40 GPUs, HyperOpt-style
early feedback; minutes until some configuration exceeds 70/80/90% accuracy. Baseline (exclusive
GPUs) 134.1 / 2489.1 / 5296.7, Gandiva 134.1 / 543.1 / 935.4. The slide prints the speed-ups as 1×,
5.25×, 5.66×; its own minutes give 1×, 4.58×, 5.66×, which we use.

**The baseline is the paper's: HyperOpt-style early feedback on exclusive GPUs** (its talk:
"HyperOpt: predict more promising mode based on early feedback"; "Time-slicing + Prioritization
=> Gandiva explores more configs in parallel"). It is ` + "`fifo`" + ` (each configuration on a GPU of
its own, in the order proposed, no time-slicing, no preemption) with the very drop rule of the
` + "`gandiva`" + ` policy's early feedback and the same rungs (` + "`experiment.earlyStop`" + `): at 1/27,
1/9 and 1/3 of a configuration's mini-batches its accuracy is recorded with the others' at that
rung, and once a rung holds 6 reports the configurations below its median are stopped. So the
figure is what Gandiva's time-slicing (all configurations progress at once) and prioritisation
(the top third of each rung run first, alone) add. The previous version of this page compared
with FIFO running every configuration to the end, which the paper does not do; that comparison
is kept below for context.

Our learning-curve model (written down in ` + "`internal/experiment/automl.go`, `automlCurve`" + `, and
seeded): 100 configurations, 100 epochs of 390 mini-batches (6 minutes per epoch alone on a P40);
the population's final accuracies follow a piecewise-linear quantile function (percentile →
accuracy: 0 → 0.30, 50 → 0.62, 85 → 0.70, 98 → 0.78, 99 → 0.79, 99.2 → 0.91, 100 → 0.92; the k-th
configuration at percentile k + 0.5), so 15 configurations can exceed 70% and a single exceptional
one exceeds 80% and reaches 91%. After e epochs a configuration reports A × (1 − exp(−e/τ)) + ε
with τ uniform in [10, 15] epochs and ε ~ N(0, 0.005). The search proposes the configurations in
a random order. The seed draws the order, τ and ε; the population itself is fixed (an assumption
the paper does not let us check: it does not say how rare good configurations were), and the
sensitivity to it is below.

`)
	fmt.Fprintf(md, "Over %d seeds (%s), minutes until a configuration first reports accuracy above the threshold (medians):\n\n", len(seeds), describeSeeds(seeds))
	md.WriteString("| accuracy | HyperOpt-style baseline | Gandiva | speed-up: median (p10–p90) | paper baseline | paper Gandiva | paper speed-up | FIFO to completion (old baseline) | speed-up over it |\n|---|---|---|---|---|---|---|---|---|\n")
	col := func(rs []automlSeed, k int, f func(automlSeed) []float64) float64 {
		var x []float64
		for _, r := range rs {
			x = append(x, f(r)[k])
		}
		return median(x)
	}
	g := func(r automlSeed) []float64 { return r.gandiva }
	for k, th := range thresholds {
		hr, fr := ratios(res, k, hyper), ratios(res, k, fifo)
		paper := paperBase[k] / paperG[k]
		fmt.Fprintf(md, "| %.0f%% | %.0f | %.0f | %.2f× (%.2f–%.2f) | %.1f | %.1f | %.2f× | %.0f | %.2f× |\n", th*100, col(res, k, hyper), col(res, k, g),
			median(hr), quantile(hr, 0.1), quantile(hr, 0.9), paperBase[k], paperG[k], paper, col(res, k, fifo), median(fr))
		c := NewCheck(fmt.Sprintf("automl %.0f%%", th*100), "speed-up of minutes to accuracy (HyperOpt-style baseline ÷ Gandiva)", round(paper),
			AroundPaper(paper), seeds, hr).With("fifo with the gandiva policy's early-feedback drop rule and rungs: HyperOpt-style early feedback on exclusive GPUs (Gandiva OSDI'18)", "")
		if !c.Passed() {
			c.Reason = automlMissReason
		}
		rep.Checks = append(rep.Checks, c)
	}
	md.WriteString("\n" + automlWhere)
	// sensitivity to the population
	md.WriteString("\n**Sensitivity to the population** (same seeds; median speed-up over the HyperOpt-style baseline, and over FIFO to completion):\n\n")
	md.WriteString("| population | 70% | 80% | 90% | over FIFO to completion: 70% / 80% / 90% |\n|---|---|---|---|---|\n")
	for _, p := range []struct {
		name string
		q    [][2]float64
		rs   []automlSeed
	}{
		{"the check's (one configuration above 80%, at 0.91)", automlQuantiles, res},
		{"two above 80% (0.82, 0.91): quantiles 97 → 0.78, 98 → 0.82, 99 → 0.91", automlQuantilesAlt, nil},
		{"smooth, no gap: linear from 85 → 0.70 to 100 → 0.92 (7 above 80%, 1 above 90%)", automlQuantilesSmooth, nil},
	} {
		rs := p.rs
		if rs == nil {
			if rs, err = automlSeeds(o, p.q, thresholds); err != nil {
				return err
			}
		}
		fmt.Fprintf(md, "| %s | %.2f× | %.2f× | %.2f× | %.2f× / %.2f× / %.2f× |\n", p.name, median(ratios(rs, 0, hyper)), median(ratios(rs, 1, hyper)),
			median(ratios(rs, 2, hyper)), median(ratios(rs, 0, fifo)), median(ratios(rs, 1, fifo)), median(ratios(rs, 2, fifo)))
	}
	md.WriteString("\nPer seed (minutes; HyperOpt-style baseline 70/80/90%, then Gandiva 70/80/90%):\n\n| seed | b70 | b80 | b90 | g70 | g80 | g90 |\n|---|---|---|---|---|---|---|\n")
	for i, r := range res {
		fmt.Fprintf(md, "| %d | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f |\n", seeds[i], r.hyperopt[0], r.hyperopt[1], r.hyperopt[2], r.gandiva[0], r.gandiva[1], r.gandiva[2])
	}
	return nil
}

// automlMissReason is written beside an AutoML check that misses.
const automlMissReason = "Against the paper's own baseline (the same early feedback on exclusive GPUs) time-slicing adds " +
	"almost nothing in our model: it does not add GPU capacity, and the baseline's early-stopping already gives the " +
	"survivors of each rung their GPUs. The mechanism the paper has and the model lacks is HyperOpt's adaptive proposal " +
	"(TPE): new configurations are proposed from the results so far, so a scheduler that returns early results for more " +
	"configurations at once steers the search to good regions sooner. Our search proposes a fixed population blind, in a " +
	"random order; the 5.6×/4.2× of the previous version came from a baseline that ran every configuration to the end."

const automlWhere = `Where the time goes: with the paper's baseline, every configuration gets a GPU of its own in
turn and is stopped at the first rung where it falls below the median, so a wave of 16 is judged
in about 22 minutes (1/27 of 100 epochs) and the survivors keep their GPUs. Gandiva starts all 100
at once on 16 GPUs, so each progresses at about a sixth of its speed until the first rung. The
rare good configuration is as likely to come late in the proposal order as early: the baseline
reaches it, on average, once half the configurations before it have been judged at full speed,
while Gandiva judges all of them at once at a sixth of the speed, which takes about as long. At
70% the baseline is faster: some configuration of its first wave gets there at full speed.
Against FIFO running every configuration to the end (the old baseline) Gandiva is 4–6× faster at
80% and 90%, the range of the paper's figures: in our model that gain comes from early feedback
itself, which the paper's baseline also has, not from time-slicing.
`
