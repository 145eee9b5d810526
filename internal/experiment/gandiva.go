package experiment

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/model"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/registry"
	"github.com/gandiva-sched/gandiva/internal/report"
	"github.com/gandiva-sched/gandiva/internal/sim"
	"github.com/gandiva-sched/gandiva/internal/trace"
)

// gandivaRepro is `gandiva reproduce gandiva`: the Gandiva paper's four
// experiments (seed 000, REFERENCES.md) in the simulator.
var gandivaRepro = Reproduction{
	Name: "gandiva",
	Doc:  "Gandiva (OSDI'18): time-slicing, packing, AutoML, 180-GPU cluster",
	Run:  reproduceGandiva,
}

func reproduceGandiva(o Options) (*Report, error) {
	rep := &Report{Name: "gandiva", Files: map[string][]byte{}}
	var md strings.Builder
	md.WriteString(gandivaIntro)
	steps := []struct {
		name string
		run  func(Options, *Report, *strings.Builder) error
	}{
		{"time-slicing", timeSlicing},
		{"packing", packing},
		{"automl", autoML},
		{"cluster", clusterThroughput},
	}
	for _, st := range steps {
		if o.Progress != nil {
			o.Progress("gandiva: " + st.name)
		}
		if err := st.run(o, rep, &md); err != nil {
			return nil, fmt.Errorf("%s: %w", st.name, err)
		}
	}
	md.WriteString("\n## All checks\n\n" + ChecksTable(rep.Checks))
	rep.Markdown = md.String()
	return rep, nil
}

const gandivaIntro = `# Gandiva: the paper's experiments, reproduced in simulation

The Gandiva paper (Xiao et al., OSDI'18; seed 000 and REFERENCES.md) reports four experiments.
This page is written by ` + "`gandiva reproduce gandiva --out docs/results`" + ` (the full runs;
CI runs ` + "`--quick`" + `, the same checks on shorter runs). Every run uses the simulator's performance
model ` + "`gandiva-perf/v1`" + ` (docs/SIMULATOR.md): suspend and resume at a mini-batch boundary cost
0.15 s each, start-up 10 s, co-location rates from Gavel's measurements. The policy sees only
profile samples, never the model.
`

func newPolicy(name string, params map[string]string) (policy.Policy, error) {
	return registry.New(name, policy.Config{Params: params})
}

// runSim runs one simulation with the default performance model.
func runSim(c *cluster.Cluster, jobs []*cluster.JobSpec, pol string, params map[string]string, horizon float64, seed uint64, log func(string)) (*sim.Result, error) {
	p, err := newPolicy(pol, params)
	if err != nil {
		return nil, err
	}
	return sim.Run(sim.Config{Cluster: c, Jobs: jobs, Policy: p, Perf: sim.DefaultPerf(), Horizon: horizon, Seed: seed, Log: log})
}

func totalWork(r *sim.Result) float64 {
	w := 0.0
	for _, j := range r.Jobs {
		w += j.Work
	}
	return w
}

// refIterTime is a model's seconds per mini-batch on the reference GPU.
func refIterTime(name string) float64 {
	if m := model.Default().Get(name); m != nil {
		if t := m.IterTime[cluster.ReferenceGPU]; t > 0 {
			return t
		}
	}
	return 0.1
}

func sameJobs(n int, name, modelName string, mem, iters float64) []*cluster.JobSpec {
	var jobs []*cluster.JobSpec
	for i := 0; i < n; i++ {
		jobs = append(jobs, &cluster.JobSpec{Name: fmt.Sprintf("%s%d", name, i+1), User: "u", GPUs: 1, Model: modelName,
			Iters: iters, IterTime: refIterTime(modelName), MemGiB: mem})
	}
	return jobs
}

// timeSlicing: one server of 4 P100, 6 ResNet-50 jobs. Each must get 4/6 of
// a GPU (within 5%), and the total throughput must stay within 3% of the
// same jobs run without time-slicing (4 at a time, exclusively).
func timeSlicing(o Options, rep *Report, md *strings.Builder) error {
	c, err := cluster.Load("p100x4")
	if err != nil {
		return err
	}
	horizon := 7200.0
	if o.Quick {
		horizon = 1800
	}
	jobs := sameJobs(6, "resnet50-", "resnet50", 23, 1e9)
	g, err := runSim(c, jobs, "gandiva", nil, horizon, o.Seed, nil)
	if err != nil {
		return err
	}
	f, err := runSim(c, jobs, "fifo", nil, horizon, o.Seed, nil)
	if err != nil {
		return err
	}
	want := 4.0 / 6
	worst := 0.0
	var names []string
	var shares []float64
	for _, j := range g.Jobs {
		share := j.Busy / horizon
		names = append(names, j.Name)
		shares = append(shares, share)
		worst = max(worst, math.Abs(share-want)/want)
	}
	ratio := totalWork(g) / totalWork(f)
	rep.Checks = append(rep.Checks,
		AtMost("time-slicing", "largest deviation of a job's GPU share from 4/6", "equal shares", 0.05, worst,
			fmt.Sprintf("shares %s over %.0f s", fmtList(shares), horizon)),
		Within("time-slicing", "total throughput ÷ the same jobs without time-slicing", "the same", 1, 0.03, ratio, ""))
	svg, err := report.BarPlot("Time-slicing: 6 ResNet-50 jobs on 4 P100", "share of a GPU", names,
		[]report.Bar{{Name: "gandiva", Values: shares}, {Name: "fair share (4/6)", Values: repeat(want, len(shares))}})
	if err != nil {
		return err
	}
	rep.Files["gandiva-timeslice.svg"] = svg
	fmt.Fprintf(md, `
## Time-slicing (one server, 4 P100, 6 ResNet-50 jobs)

The paper: every job gets an equal share of time, and the total throughput stays the same.
Six ResNet-50 jobs (23 GB peak, so they cannot be packed on 16 GB P100s) arrive at once; the
quantum is 60 s. Over %.0f s each job held a GPU for this share of the time (fair share 4/6 = 0.667):

![shares](gandiva-timeslice.svg)

| job | share | work (V100-s) |
|---|---|---|
`, horizon)
	for i, j := range g.Jobs {
		fmt.Fprintf(md, "| %s | %.4f | %.0f |\n", j.Name, shares[i], j.Work)
	}
	fmt.Fprintf(md, `
Total work: %.0f V100-seconds with time-slicing, %.0f for the same jobs without it (FIFO runs 4
of them exclusively): a ratio of %.4f. The difference is the cost of %d suspends and resumes at
mini-batch boundaries (0.15 s each).
`, totalWork(g), totalWork(f), ratio, g.Stats.Suspends+g.Stats.Resumes)
	return nil
}

func repeat(v float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func fmtList(x []float64) string {
	parts := make([]string, len(x))
	for i, v := range x {
		parts[i] = fmt.Sprintf("%.3f", v)
	}
	return strings.Join(parts, ", ")
}

// packing: 1 P100 and 2 super-resolution jobs: they start time-sliced,
// are packed once both were profiled alone, and the packing is kept because
// the total throughput rose. A pair that interferes (two LM jobs, which
// Gavel measured at 0.46 of their solo speed each) is packed, measured and
// reverted.
func packing(o Options, rep *Report, md *strings.Builder) error {
	c, err := cluster.Load("p100x1")
	if err != nil {
		return err
	}
	horizon := 3600.0
	if o.Quick {
		horizon = 1200
	}
	type pair struct {
		label, model string
		mem          float64
	}
	md.WriteString(`
## Packing with introspection (1 P100)

The paper: two image super-resolution jobs start time-sliced; profiling shows they are light,
Gandiva packs them, measures, and keeps the packing because the total throughput rose. We add a
pair that interferes, which must be packed, measured and reverted. Throughput is compared with
the same jobs time-sliced without packing (` + "`gandiva:pack=false`" + `).

| pair | packed at | outcome | throughput ÷ time-slicing alone | paper |
|---|---|---|---|---|
`)
	for _, pr := range []pair{{"2 × super-resolution", "superresolution", 2.5}, {"2 × LM (batch 5)", "lm-b5", 1.5}} {
		jobs := sameJobs(2, pr.model+"-", pr.model, pr.mem, 1e9)
		var log []string
		g, err := runSim(c, jobs, "gandiva", nil, horizon, o.Seed, func(l string) { log = append(log, l) })
		if err != nil {
			return err
		}
		ts, err := runSim(c, jobs, "gandiva", map[string]string{"pack": "false"}, horizon, o.Seed, nil)
		if err != nil {
			return err
		}
		packedAt, reverted := -1.0, false
		for _, l := range log {
			if strings.Contains(l, " packed") && packedAt < 0 {
				fmt.Sscanf(l, "t=%f", &packedAt)
			}
			if strings.Contains(l, "unpack") {
				reverted = true
			}
		}
		ratio := totalWork(g) / totalWork(ts)
		outcome := "kept"
		if reverted {
			outcome = "reverted"
		}
		if packedAt < 0 {
			outcome = "never packed"
		}
		fmt.Fprintf(md, "| %s | %.0f s | %s | %.3f | %s |\n", pr.label, packedAt, outcome, ratio,
			map[bool]string{true: "packed and kept, higher throughput", false: "(not in the paper)"}[pr.model == "superresolution"])
		if pr.model == "superresolution" {
			ok := 0.0
			if packedAt > 0 && !reverted {
				ok = 1
			}
			rep.Checks = append(rep.Checks,
				AtLeast("packing", "super-resolution pair packed after profiling and kept (1 = yes)", "packed and kept", 1, ok, ""),
				AtLeast("packing", "super-resolution throughput ÷ time-slicing", "higher", 1.05, ratio, ""))
		} else {
			ok := 0.0
			if packedAt > 0 && reverted {
				ok = 1
			}
			rep.Checks = append(rep.Checks,
				AtLeast("packing", "interfering LM pair packed, measured and reverted (1 = yes)", "-", 1, ok, ""),
				AtLeast("packing", "interfering pair throughput ÷ time-slicing (the trial's cost)", "-", 0.97, ratio, ""))
		}
	}
	md.WriteString(`
Rates for the decision come from profile samples only: each job's seconds per mini-batch alone
(measured during its first turns) and while packed; the policy keeps a packing when the summed
normalised progress (packed rate ÷ solo rate, over both jobs) is at least 1.05.
`)
	return nil
}

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
	c, err := cluster.Load("p40x16")
	if err != nil {
		return nil, err
	}
	curve, jobs := newAutomlCurve(seed, pop)
	p, err := newPolicy(pol, params)
	if err != nil {
		return nil, err
	}
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

// automlAverages runs both policies on seeds and returns their average
// minutes to each threshold; rows, when set, receives a table row per seed.
func automlAverages(o Options, seeds int, pop [][2]float64, thresholds []float64, rows *[]string) (map[string][]float64, error) {
	sums := map[string][]float64{"fifo": make([]float64, len(thresholds)), "gandiva": make([]float64, len(thresholds))}
	for s := 0; s < seeds; s++ {
		seed := o.Seed + uint64(s)
		row := fmt.Sprintf("| %d |", seed)
		for _, pol := range []string{"fifo", "gandiva"} {
			t, err := automlRun(pol, nil, seed, pop, thresholds)
			if err != nil {
				return nil, err
			}
			for k := range t {
				if math.IsNaN(t[k]) {
					return nil, fmt.Errorf("%s seed %d: no configuration reached %.0f%% within the horizon", pol, seed, 100*thresholds[k])
				}
				sums[pol][k] += t[k] / float64(seeds)
				row += fmt.Sprintf(" %.0f |", t[k])
			}
		}
		if rows != nil {
			*rows = append(*rows, row)
		}
	}
	return sums, nil
}

// autoML: minutes until a configuration passes 70/80/90% accuracy, exclusive
// GPUs (FIFO, every configuration trained to the end) against Gandiva
// (time-slicing with early feedback), averaged over several seeds.
func autoML(o Options, rep *Report, md *strings.Builder) error {
	thresholds := []float64{0.7, 0.8, 0.9}
	seeds := 20
	if o.Quick {
		seeds = 10
	}
	alt, err := automlAverages(o, seeds, automlQuantilesAlt, thresholds, nil)
	if err != nil {
		return err
	}
	var rows []string
	sums, err := automlAverages(o, seeds, automlQuantiles, thresholds, &rows)
	if err != nil {
		return err
	}
	paperBase := []float64{134.1, 2489.1, 5296.7}
	paperG := []float64{134.1, 543.1, 935.4}
	md.WriteString(`
## AutoML: hyper-parameter search with early feedback (16 P40)

The paper: 100 configurations of a ResNet-like model on CIFAR, 16 P40 GPUs, HyperOpt-style
early feedback; minutes until some configuration exceeds 70/80/90% accuracy. Baseline (exclusive
GPUs) 134.1 / 2489.1 / 5296.7, Gandiva 134.1 / 543.1 / 935.4: 1×, 5.25×, 5.66×.

Our learning-curve model (written down in ` + "`internal/experiment/gandiva.go`, `automlCurve`" + `, and
seeded): 100 configurations, 100 epochs of 390 mini-batches (6 minutes per epoch alone on a P40);
the population's final accuracies follow a piecewise-linear quantile function (percentile → accuracy:
0 → 0.30, 50 → 0.62, 85 → 0.70, 98 → 0.78, 99 → 0.79, 99.2 → 0.91, 100 → 0.92), so 15 configurations
can exceed 70% and a single exceptional one exceeds 80% and reaches 91% (the paper's baseline needed
41 and 88 hours to find configurations above 80% and 90%, so they were rare in its search); after
e epochs a configuration reports A × (1 − exp(−e/τ)) + ε with τ uniform in [10, 15] epochs and ε ~ N(0, 0.005). The search proposes
configurations in a random (seeded) order. The baseline is FIFO on exclusive GPUs: configurations
run to the end in the order proposed. Gandiva time-slices all configurations at once and applies
early feedback (rungs at 1/27, 1/9 and 1/3 of a configuration's mini-batches: once three have
reported at a rung, the top third are raised in priority, by percentile, and run alone; once six
have, those below the median are dropped).
`)
	fmt.Fprintf(md, "\nAverages over %d seeds (minutes until a configuration first reports accuracy above the threshold):\n\n", seeds)
	md.WriteString("| accuracy | baseline | Gandiva | speed-up | paper baseline | paper Gandiva | paper speed-up |\n|---|---|---|---|---|---|---|\n")
	for k, th := range thresholds {
		b, g := sums["fifo"][k], sums["gandiva"][k]
		fmt.Fprintf(md, "| %.0f%% | %.0f | %.0f | %.2f× | %.1f | %.1f | %.2f× |\n", th*100, b, g, b/g, paperBase[k], paperG[k], paperBase[k]/paperG[k])
		name := fmt.Sprintf("automl %.0f%%", th*100)
		switch th {
		case 0.7:
			rep.Checks = append(rep.Checks, Check{Name: name, Metric: "speed-up of minutes to accuracy (baseline ÷ Gandiva)",
				Paper: 1.0, Target: "reported", Ours: round(b / g), Pass: true,
				Note: "the paper shows no speed-up at 70%; the issue sets no target"})
		default:
			rep.Checks = append(rep.Checks, AtLeast(name, "speed-up of minutes to accuracy (baseline ÷ Gandiva)", round(paperBase[k]/paperG[k]), 4, b/g, ""))
		}
	}
	fmt.Fprintf(md, `
Sensitivity: how rare the good configurations are decides the speed-up, and the paper does not say.
With a population in which two configurations exceed 80%% (0.82 and 0.91; quantiles 97 → 0.78,
98 → 0.82, 99 → 0.91), the baseline finds one of them sooner:

| accuracy | baseline | Gandiva | speed-up |
|---|---|---|---|
`)
	for k, th := range thresholds {
		fmt.Fprintf(md, "| %.0f%% | %.0f | %.0f | %.2f× |\n", th*100, alt["fifo"][k], alt["gandiva"][k], alt["fifo"][k]/alt["gandiva"][k])
	}
	md.WriteString("\nPer seed (minutes; baseline 70/80/90%, then Gandiva 70/80/90%):\n\n| seed | b70 | b80 | b90 | g70 | g80 | g90 |\n|---|---|---|---|---|---|---|\n")
	md.WriteString(strings.Join(rows, "\n") + "\n")
	md.WriteString(`
Where the speed-up comes from: the baseline finds the rare good configuration only when its turn
in the proposal order comes, after whole waves of 16 ten-hour trainings; Gandiva starts all 100
at once, learns within a few epochs which ones are promising, drops the rest and gives the
survivors the GPUs. At 70% the baseline is already fast (some configuration in its first wave gets
there), while Gandiva first spreads its GPUs over all 100 configurations; the paper measured no
gain there either.
`)
	return nil
}

// clusterThroughput: 180 GPUs (P100 and P40), jobs modelled on the Philly
// trace arriving faster than the cluster can serve them; cluster throughput
// once the cluster is saturated and average time to the first 100
// mini-batches, FIFO against Gandiva, averaged over seeds.
func clusterThroughput(o Options, rep *Report, md *strings.Builder) error {
	c, err := cluster.Load("gandiva-180")
	if err != nil {
		return err
	}
	n, seeds := 2000, 3
	if o.Quick {
		n, seeds = 1200, 1
	}
	type res struct{ tput, util, t100, jct, packs, migr float64 }
	out := map[string]*res{"fifo": {}, "gandiva": {}}
	hours := 0.0
	for k := 0; k < seeds; k++ {
		seed := o.Seed + uint64(k)
		jobs := trace.Synthetic(trace.SynthConfig{Jobs: n, Seed: seed, Users: 20, Load: 2 * float64(c.NumGPUs()),
			MaxGPUs: 16, MaxDuration: 8 * 3600})
		arrivals := 0.0
		for _, j := range jobs {
			arrivals = max(arrivals, j.Submit)
		}
		hours += arrivals / 3600 / float64(seeds)
		warm := arrivals / 3
		for pol, r := range out {
			// throughput between the end of the warm-up and the last arrival
			a, err := runSim(c, jobs, pol, nil, warm, seed, nil)
			if err != nil {
				return err
			}
			b, err := runSim(c, jobs, pol, nil, arrivals, seed, nil)
			if err != nil {
				return err
			}
			busy := 0.0
			for _, j := range b.Jobs {
				busy += j.Busy
			}
			for _, j := range a.Jobs {
				busy -= j.Busy
			}
			full, err := runSim(c, jobs, pol, nil, 0, seed, nil)
			if err != nil {
				return err
			}
			w := float64(seeds)
			r.tput += (totalWork(b) - totalWork(a)) / (arrivals - warm) / w
			r.util += busy / ((arrivals - warm) * float64(c.NumGPUs())) / w
			r.t100 += avgT100(full) / w
			r.jct += summaryJCT(full) / w
			r.packs += float64(full.Stats.Packs) / w
			r.migr += float64(full.Stats.Migrations) / w
		}
	}
	// Sensitivity: the time to the first 100 mini-batches under a lighter
	// load, where FIFO's queue stays short.
	loads := []float64{1, 1.25, 1.5}
	light := map[float64]map[string]float64{}
	for _, load := range loads {
		light[load] = map[string]float64{}
		jobs := trace.Synthetic(trace.SynthConfig{Jobs: n / 2, Seed: o.Seed, Users: 20, Load: load * float64(c.NumGPUs()),
			MaxGPUs: 16, MaxDuration: 8 * 3600})
		for _, pol := range []string{"fifo", "gandiva"} {
			full, err := runSim(c, jobs, pol, nil, 0, o.Seed, nil)
			if err != nil {
				return err
			}
			light[load][pol] = avgT100(full)
		}
	}
	f, g := out["fifo"], out["gandiva"]
	gain := g.tput/f.tput - 1
	ratio := f.t100 / g.t100
	rep.Checks = append(rep.Checks,
		AtLeast("cluster 180 GPUs", "cluster throughput gain over FIFO/YARN-CS", 0.26, 0.15, gain, ""),
		AtLeast("cluster 180 GPUs", "average time to the first 100 mini-batches, FIFO ÷ Gandiva", 4.5, 3, ratio, ""))
	fmt.Fprintf(md, `
## Cluster: 180 GPUs, jobs modelled on a production trace

The paper: on a 180-GPU cluster with synthetic jobs modelled on a production (Philly) trace,
cluster throughput +26%% and average time to the first 100 mini-batches 4.5× lower than a
FIFO/YARN-CS scheduler. Here: the `+"`gandiva-180`"+` preset (45 four-GPU servers: 96 P100, 84 P40);
%d jobs from `+"`trace.Synthetic`"+` (gang sizes and run times drawn from the Philly distributions,
up to 16 GPUs and 8 h, models from the catalog, 20 users) arriving as a Poisson process that
brings twice the work the cluster can do (over %.1f hours on average), so the cluster saturates
and a queue builds. Throughput is the work done (V100-seconds per second) from the end of a
warm-up (the first third of the arrivals) to the last arrival; time to the first 100 mini-batches
and JCT are averaged over all jobs of a run to the end. Averages over %d seed(s).

| policy | throughput | GPU utilisation | avg time to 100 mini-batches (s) | avg JCT (s) | packs | migrations |
|---|---|---|---|---|---|---|
| fifo | %.1f | %.3f | %.0f | %.0f | %.0f | %.0f |
| gandiva | %.1f | %.3f | %.0f | %.0f | %.0f | %.0f |

Throughput gain %+.1f%% (paper +26%%); time to the first 100 mini-batches %.1f× lower (paper 4.5×).
Our time-to-first-100 ratio is far above the paper's because at twice the cluster's capacity
FIFO's queue grows for hours while Gandiva starts every job within a few quanta. The ratio depends
on how long FIFO's queue gets (the paper does not give its load); with half as many jobs:

| offered load | FIFO (s) | Gandiva (s) | ratio |
|---|---|---|---|
%s
GPU utilisation counts each job on a shared GPU, so packing takes it above 1. FIFO loses GPUs to
head-of-line blocking (a gang at the head waits for a consolidated place while GPUs idle);
Gandiva keeps every GPU busy by over-subscribing, and packs the pairs of jobs that its
measurements show to run faster together.
`, n, hours, seeds, f.tput, f.util, f.t100, f.jct, f.packs, f.migr, g.tput, g.util, g.t100, g.jct, g.packs, g.migr, 100*gain, ratio,
		lightRows(loads, light))
	return nil
}

func lightRows(loads []float64, light map[float64]map[string]float64) string {
	var b strings.Builder
	for _, l := range loads {
		fmt.Fprintf(&b, "| %.2f× | %.0f | %.0f | %.1f× |\n", l, light[l]["fifo"], light[l]["gandiva"], light[l]["fifo"]/light[l]["gandiva"])
	}
	return b.String()
}

func mean(x []float64) float64 {
	if len(x) == 0 {
		return math.NaN()
	}
	s := 0.0
	for _, v := range x {
		s += v
	}
	return s / float64(len(x))
}

// avgT100 is the average time from submission to the first 100
// mini-batches over the jobs of r that got there.
func avgT100(r *sim.Result) float64 {
	var x []float64
	for _, j := range r.Jobs {
		if j.T100 >= 0 {
			x = append(x, j.T100-j.Submit)
		}
	}
	return mean(x)
}

func summaryJCT(r *sim.Result) float64 {
	var x []float64
	for _, j := range r.Jobs {
		if j.State == cluster.Finished {
			x = append(x, j.End-j.Submit)
		}
	}
	return mean(x)
}
