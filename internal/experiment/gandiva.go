package experiment

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/model"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/registry"
	"github.com/gandiva-sched/gandiva/internal/report"
	"github.com/gandiva-sched/gandiva/internal/sim"
)

// gandivaRepro is `gandiva reproduce gandiva`: the Gandiva paper's four
// experiments (Xiao et al., OSDI'18; docs/PAPERS.md) in the simulator, the grow-shrink
// mechanism it describes, and its throughput where the cluster is saturated.
var gandivaRepro = Reproduction{
	Name: "gandiva",
	Doc:  "Gandiva (OSDI'18): time-slicing, packing, AutoML, 180-GPU cluster, throughput at saturation, grow-shrink",
	Run:  reproduceGandiva,
}

func reproduceGandiva(o Options) (*Report, error) {
	rep := &Report{Name: "gandiva", Quick: o.Quick, Seeds: o.Seeds(), Files: map[string][]byte{}}
	var md strings.Builder
	fmt.Fprintf(&md, gandivaIntro, describeSeeds(o.Seeds()), o.Seed, quickNote(o))
	steps := []struct {
		name string
		run  func(Options, *Report, *strings.Builder) error
	}{
		{"time-slicing", timeSlicing},
		{"packing", packing},
		{"automl", autoML},
		{"cluster", clusterThroughput},
		{"saturation", saturation},
		{"grow-shrink", growShrink},
	}
	for _, st := range steps {
		o.progress("gandiva: %s", st.name)
		if err := st.run(o, rep, &md); err != nil {
			return nil, fmt.Errorf("%s: %w", st.name, err)
		}
	}
	md.WriteString("\n## All checks\n\n" + ChecksTable(rep.Checks))
	md.WriteString("\n### Every miss, with its reason\n\n" + MissesSection(rep.Checks))
	rep.Markdown = md.String()
	return rep, nil
}

func quickNote(o Options) string {
	if o.Quick {
		return "**This is a `--quick` run** (5 seeds, shorter runs): a regression check, not a result.\n"
	}
	return ""
}

const gandivaIntro = `# Gandiva: the paper's experiments, reproduced in simulation

The Gandiva paper (Xiao et al., OSDI'18; docs/PAPERS.md) reports four experiments;
this page adds the throughput where the cluster is saturated and the grow-shrink mechanism the
paper describes. Every run uses the simulator's performance model ` + "`gandiva-perf/v1`" + `
(docs/SIMULATOR.md): suspend and resume at a mini-batch boundary cost 0.15 s each, start-up 10 s,
co-location rates from Gavel's measurements. The policy sees only profile samples, never the model.

**How to read the checks.** Every seeded check is a statistic over a set of seeds: the median of
our figure, its 10th–90th percentiles, and the pass rate (the share of seeds whose figure lies in
the band). The band is two-sided (0.5× to 2× of the paper's figure) where the paper gives a
number, one-sided where it gives a direction. A check passes when its median lies in the band and
at least half of the seeds do; otherwise it is a **miss**, and the reason is written beside it.
Comparisons name their baseline and its source.

**Seeds.** This page: evaluation seeds %s (` + "`--seed %d`" + `). The development seeds, on which
the models, workloads, bands and the policy change below were built and looked at, are 1–20
(` + "`--seed 0`" + `); ` + "`--seed N`" + ` runs N×1000+1 … N×1000+20, never used while developing. Nothing
was tuned on evaluation seeds.
%s
Commands: ` + "`gandiva reproduce gandiva --out docs/results`" + ` writes this page;
` + "`gandiva reproduce gandiva --format json`" + ` prints every check; CI runs
` + "`gandiva reproduce gandiva --quick --quiet`" + ` and fails when an outcome regresses from
internal/experiment/outcomes.json.
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

// sameJobs is n jobs of one model, arriving at seeded times uniform in
// [0, spread) (all at 0 when spread is 0).
func sameJobs(n int, name, modelName string, mem, iters float64, seed uint64, spread float64) []*cluster.JobSpec {
	rng := rand.New(rand.NewPCG(seed, 0x7153))
	var jobs []*cluster.JobSpec
	for i := 0; i < n; i++ {
		jobs = append(jobs, &cluster.JobSpec{Name: fmt.Sprintf("%s%d", name, i+1), User: "u", GPUs: 1, Model: modelName,
			Iters: iters, IterTime: refIterTime(modelName), MemGiB: mem, Submit: math.Floor(rng.Float64() * spread)})
	}
	return jobs
}

// timeSlicing: one server of 4 P100, 6 ResNet-50 jobs arriving within the
// first quantum (seeded). Each must get 4/6 of a GPU over its time in the
// system (within 5%), and the total throughput must stay within 3% of the
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
	want := 4.0 / 6
	type out struct {
		worst, ratio float64
		shares       []float64
		names        []string
		ops          int
	}
	res, err := parallelSeeds(o.Seeds(), func(seed uint64) (out, error) {
		jobs := sameJobs(6, "resnet50-", "resnet50", 23, 1e9, seed, 60)
		g, err := runSim(c, jobs, "gandiva", nil, horizon, seed, nil)
		if err != nil {
			return out{}, err
		}
		f, err := runSim(c, jobs, "fifo", nil, horizon, seed, nil)
		if err != nil {
			return out{}, err
		}
		var r out
		for _, j := range g.Jobs {
			share := j.Busy / (horizon - j.Submit)
			r.names = append(r.names, j.Name)
			r.shares = append(r.shares, share)
			r.worst = max(r.worst, math.Abs(share-want)/want)
		}
		r.ratio = totalWork(g) / totalWork(f)
		r.ops = g.Stats.Suspends + g.Stats.Resumes
		return r, nil
	})
	if err != nil {
		return err
	}
	var worst, ratio []float64
	for _, r := range res {
		worst, ratio = append(worst, r.worst), append(ratio, r.ratio)
	}
	seeds := o.Seeds()
	rep.Checks = append(rep.Checks,
		NewCheck("time-slicing shares", "largest deviation of a job's GPU share from 4/6", "equal shares", AtMostBand(0.05), seeds, worst).
			With("", "the paper shows equal shares in a figure; 5% is our tolerance"),
		NewCheck("time-slicing throughput", "total throughput ÷ the same jobs without time-slicing (fifo, 4 of 6 run exclusively)", "the same",
			Between(0.97, 1.03), seeds, ratio).With("fifo: the same jobs, 4 run exclusively, 2 wait (the paper's comparison)", ""))
	first := res[0]
	svg, err := report.BarPlot(fmt.Sprintf("Time-slicing: 6 ResNet-50 jobs on 4 P100 (seed %d)", seeds[0]), "share of a GPU", first.names,
		[]report.Bar{{Name: "gandiva", Values: first.shares}, {Name: "fair share (4/6)", Values: repeat(want, len(first.shares))}})
	if err != nil {
		return err
	}
	rep.Files["gandiva-timeslice.svg"] = svg
	fmt.Fprintf(md, `
## Time-slicing (one server, 4 P100, 6 ResNet-50 jobs)

The paper: every job gets an equal share of time, and the total throughput stays the same.
Six ResNet-50 jobs (23 GB peak, so they cannot be packed on 16 GB P100s) arrive at seeded times
within the first minute; the quantum is 60 s. Each job's share is the GPU time it held ÷ its time
in the system over %.0f s (fair share 4/6 = 0.667); throughput is compared with FIFO running 4 of
the jobs exclusively. Over %d seeds the largest deviation of a share from 4/6 has median %.4f
(p10–p90 %.4f–%.4f), and the throughput ratio median %.4f (p10–p90 %.4f–%.4f); the difference is
the cost of the suspends and resumes at mini-batch boundaries (0.15 s each; %d in the first seed's run).

![shares](gandiva-timeslice.svg)
`, horizon, len(seeds), median(worst), quantile(worst, 0.1), quantile(worst, 0.9), median(ratio), quantile(ratio, 0.1), quantile(ratio, 0.9), first.ops)
	return nil
}

func repeat(v float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// packing: 1 P100 and 2 super-resolution jobs arriving within the first
// minute: they start time-sliced, are packed once both were profiled
// alone, and the packing is kept because the total throughput rose. A pair
// that interferes (two LM jobs, which Gavel measured at 0.46 of their solo
// speed each) is packed, measured and reverted.
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
	type out struct{ ok, ratio, packedAt float64 }
	md.WriteString(`
## Packing with introspection (1 P100)

The paper: two image super-resolution jobs start time-sliced; profiling shows they are light,
Gandiva packs them, measures, and keeps the packing because the total throughput rose. We add a
pair that interferes, which must be packed, measured and reverted. Jobs arrive at seeded times
within the first minute. Throughput is compared with the same jobs time-sliced without packing
(` + "`gandiva:pack=false`" + `). Rates for the decision come from profile samples only: each job's
seconds per mini-batch alone (measured during its first turns) and while packed; the policy keeps
a packing when the summed normalised progress (packed rate ÷ solo rate, over both jobs) is at
least 1.05.

| pair | outcome as expected (share of seeds) | median packed at | throughput ÷ time-slicing: median (p10–p90) | paper |
|---|---|---|---|---|
`)
	seeds := o.Seeds()
	for _, pr := range []pair{{"2 × super-resolution", "superresolution", 2.5}, {"2 × LM (batch 5)", "lm-b5", 1.5}} {
		keep := pr.model == "superresolution"
		res, err := parallelSeeds(seeds, func(seed uint64) (out, error) {
			jobs := sameJobs(2, pr.model+"-", pr.model, pr.mem, 1e9, seed, 60)
			var log []string
			g, err := runSim(c, jobs, "gandiva", nil, horizon, seed, func(l string) { log = append(log, l) })
			if err != nil {
				return out{}, err
			}
			ts, err := runSim(c, jobs, "gandiva", map[string]string{"pack": "false"}, horizon, seed, nil)
			if err != nil {
				return out{}, err
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
			r := out{ratio: totalWork(g) / totalWork(ts), packedAt: packedAt}
			if packedAt > 0 && reverted != keep {
				r.ok = 1
			}
			return r, nil
		})
		if err != nil {
			return err
		}
		var ok, ratio, at []float64
		for _, r := range res {
			ok, ratio, at = append(ok, r.ok), append(ratio, r.ratio), append(at, r.packedAt)
		}
		outcome := "kept"
		if !keep {
			outcome = "reverted"
		}
		paper := "(not in the paper)"
		if keep {
			paper = "packed and kept, higher throughput"
		}
		fmt.Fprintf(md, "| %s | %s: %.0f%% | %.0f s | %.3f (%.3f–%.3f) | %s |\n", pr.label, outcome, 100*mean(ok), median(at), median(ratio),
			quantile(ratio, 0.1), quantile(ratio, 0.9), paper)
		if keep {
			rep.Checks = append(rep.Checks,
				NewCheck("packing kept", "super-resolution pair packed after profiling and kept (1 = yes)", "packed and kept", Between(1, 1), seeds, ok),
				NewCheck("packing gain", "super-resolution throughput ÷ time-slicing", "higher", AtLeastBand(1.05), seeds, ratio).
					With("gandiva:pack=false: the same jobs time-sliced (the paper's comparison)", "the paper gives no number; ≥ 1.05 is the policy's own keep margin"))
		} else {
			rep.Checks = append(rep.Checks,
				NewCheck("packing revert", "interfering LM pair packed, measured and reverted (1 = yes)", "-", Between(1, 1), seeds, ok),
				NewCheck("packing trial cost", "interfering pair throughput ÷ time-slicing (the trial's cost)", "-", AtLeastBand(0.97), seeds, ratio).
					With("gandiva:pack=false", "not in the paper: the price of a trial that fails"))
		}
	}
	return nil
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
