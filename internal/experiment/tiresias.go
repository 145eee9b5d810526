package experiment

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/dataset"
	"github.com/gandiva-sched/gandiva/internal/metrics"
	"github.com/gandiva-sched/gandiva/internal/policy/tiresias"
	"github.com/gandiva-sched/gandiva/internal/report"
	"github.com/gandiva-sched/gandiva/internal/sim"
	"github.com/gandiva-sched/gandiva/internal/trace"
)

// tiresiasRepro is `gandiva reproduce tiresias`: the Tiresias simulator's
// published table on its own trace, and Tiresias' headline claim on a
// heavy-tailed workload.
var tiresiasRepro = Reproduction{
	Name: "tiresias",
	Doc:  "Tiresias (NSDI'19): the simulator's JCT table with --compat tiresias; 2D-LAS vs YARN-CS and SRSF on a heavy-tailed trace",
	Run:  reproduceTiresias,
}

// tiresiasTable is the average JCT (s) the Tiresias
// simulator reports for its 60-job trace, by cluster and Gandiva policy.
var tiresiasTable = []struct {
	cluster string
	jct     map[string]float64
}{
	{"n2g4", map[string]float64{"fifo": 1556.5, "fjf": 715.3, "sjf": 725.7, "srsf": 563.4, "tiresias-l": 715.3, "tiresias-g": 821.2}},
	{"n4g4", map[string]float64{"fifo": 200.8, "fjf": 190.7, "sjf": 198.2, "srsf": 195.9, "tiresias-l": 190.7, "tiresias-g": 219.1}},
}

// tiresiasTableOrder is the column order of the table; tiresiasSimName the
// simulator's schedule names.
var (
	tiresiasTableOrder = []string{"fifo", "fjf", "sjf", "srsf", "tiresias-l", "tiresias-g"}
	tiresiasSimName    = map[string]string{"fifo": "fifo", "fjf": "fjf", "sjf": "sjf", "srsf": "shortest-gpu",
		"srtf": "shortest", "tiresias-l": "dlas-gpu", "tiresias-g": "dlas-gpu-gittins", "optimus": "—"}
	heavyTailPolicies = []string{"fifo", "fjf", "sjf", "tiresias-l", "tiresias-g", "optimus", "srtf", "srsf"}
)

// Targets of the heavy-tailed comparison. One 1,000-job sample decides
// little (the development seeds 1–20 give factors from 2.2× to 8.5×), so
// the checks are medians over the samples of the run's seed set (the
// estimator and targets were written down on the development seeds, before
// seeds 6–20 were first run):
//   - the median of Tiresias-L's factor over FIFO's average JCT is between 1×
//     and 5.5× (the paper: "up to 5.5×" better than YARN-CS);
//   - the median of Tiresias-L's average JCT ÷ SRSF's is at most 1.1 (the
//     oracle bound; "comes near SRSF").
const (
	tiresiasMinFactor = 1.0
	tiresiasMaxFactor = 5.5
	tiresiasNearSRSF  = 1.1
)

func reproduceTiresias(o Options) (*Report, error) {
	rep := &Report{Name: "tiresias", Quick: o.Quick, Seeds: o.Seeds(), Files: map[string][]byte{}}
	var md strings.Builder
	md.WriteString("# Tiresias: 2D-LAS and 2D-Gittins against YARN-CS and the oracle\n\n")
	fmt.Fprintf(&md, "**Seeds.** The heavy-tailed checks are statistics over the evaluation seeds %s (`--seed %d`; `--seed N` runs\n"+
		"N×1000+1 … N×1000+20). The generator, the load, the estimator and the bands were fixed on the development seeds\n"+
		"1–20 (`--seed 0`); nothing was tuned on evaluation seeds. A check passes when the median over the seeds lies in its\n"+
		"band and at least half the seeds do. The Tiresias simulator's table is deterministic (no seed).\n%s\n"+
		"Commands: `gandiva reproduce tiresias --out docs/results` writes this page; `--format json` prints every check;\n"+
		"CI runs `gandiva reproduce tiresias --quick --quiet` and fails when an outcome regresses from\n"+
		"internal/experiment/outcomes.json.\n\n", describeSeeds(o.Seeds()), o.Seed, quickNote(o))
	fmt.Fprintf(&md, "Reproduces `gandiva reproduce tiresias` (Gu et al., NSDI'19; docs/PAPERS.md). Policies: `fifo` (YARN-CS),\n"+
		"`fjf` (FIFO that skips jobs that do not fit), `sjf` (fewest GPUs first), `tiresias-l` (2D-LAS: three\n"+
		"queues at 3,250 and 7,200 GPU-seconds of attained service), `tiresias-g` (2D-Gittins from yarn-gput1000.csv;\n"+
		"outside `--compat tiresias` with a hold of %d s: a job started or resumed less than that ago is not\n"+
		"preempted by a job of its own queue), `optimus` (shortest *estimated* remaining time, from measured\n"+
		"progress), and the oracles `srtf` and `srsf` (shortest remaining time, and remaining GPU-time, knowing\n"+
		"every job's run time).\n\n", tiresias.DefaultHold)
	if err := tiresiasCompat(o, rep, &md); err != nil {
		return nil, err
	}
	if err := tiresiasHeavyTail(o, rep, &md); err != nil {
		return nil, err
	}
	md.WriteString("## Checks\n\n" + ChecksTable(rep.Checks) + "\n")
	md.WriteString("### Every miss, with its reason\n\n" + MissesSection(rep.Checks) + "\n")
	rep.Markdown = md.String()
	return rep, nil
}

// tiresiasCompat runs the Tiresias simulator's 60-job trace with its
// settings and compares the average JCT with the published table.
func tiresiasCompat(o Options, rep *Report, md *strings.Builder) error {
	data, err := dataset.ReadFile("60_job.csv")
	if err != nil {
		return err
	}
	jobs, _, err := trace.Read(bytes.NewReader(data), "60_job.csv", trace.Tiresias, trace.Options{})
	if err != nil {
		return err
	}
	md.WriteString("## The Tiresias simulator's table, with `--compat tiresias`\n\n")
	md.WriteString("The simulator's own 60-job trace (`60_job.csv`) on its clusters n2g4 (8 GPUs) and n4g4 (16 GPUs),\n" +
		"GPUs counted only, preemption free, integer seconds:\n\n```\n" +
		"gandiva sim --trace internal/dataset/files/60_job.csv --cluster tiresias-n2g4 \\\n" +
		"    --policy fifo,fjf,sjf,srsf,srtf,tiresias-l,tiresias-g --compat tiresias\n```\n\n")
	md.WriteString("| cluster | policy (simulator's name) | simulator avg JCT s | Gandiva avg JCT s | difference |\n|---|---|---|---|---|\n")
	for _, row := range tiresiasTable {
		c, err := cluster.Load("tiresias-" + row.cluster)
		if err != nil {
			return err
		}
		pols := append(append([]string{}, tiresiasTableOrder...), "srtf")
		if o.Progress != nil {
			o.Progress(fmt.Sprintf("tiresias: 60-job trace on %s under %d policies (compat)", row.cluster, len(pols)))
		}
		res, err := Compare(Setup{Cluster: c, Jobs: jobs, Policies: pols, Compat: true, Seed: 1})
		if err != nil {
			return err
		}
		for i, p := range pols {
			got := metrics.Summarize(res[i].Records()).AvgJCT
			want, ok := row.jct[p]
			if !ok {
				fmt.Fprintf(md, "| %s | %s (%s) | not published | %.1f | |\n", row.cluster, p, tiresiasSimName[p], got)
				continue
			}
			fmt.Fprintf(md, "| %s | %s (%s) | %.1f | %.1f | %+.2f%% |\n", row.cluster, p, tiresiasSimName[p], want, got, 100*(got-want)/want)
			rep.Checks = append(rep.Checks, NewCheck(fmt.Sprintf("compat %s %s", row.cluster, p), "avg JCT (s), within 0.5%", want,
				Between(want*0.995, want*1.005), nil, []float64{got}).With("the Tiresias simulator's own output on 60_job.csv (internal/experiment/testdata/tiresias), rounded to 0.1 s",
				"deterministic: --seed does not apply"))
		}
	}
	md.WriteString("\nThe simulator publishes averages rounded to 0.1 s; beyond the averages, every job's start and end\n" +
		"equal the simulator's (internal/experiment/tiresias_test.go compares them job by job with its outputs,\n" +
		"on this trace and on a 120-job stress trace that exercises demotion, wake-ups, preemption and the\n" +
		"starvation knob; srtf's reference there is the simulator's `shortest`).\n\n")
	return nil
}

// tiresiasHeavyTail compares the policies on the heavy-tailed trace in
// Gandiva's performance model (the checks), and in the Tiresias simulator's
// count model for context.
func tiresiasHeavyTail(o Options, rep *Report, md *strings.Builder) error {
	cfg := DefaultHeavyTail()
	cfg.Seed = o.Seeds()[0]
	jobs, err := heavyTailJobs(cfg, 0)
	if err != nil {
		return err
	}
	c, err := cluster.Load("tiresias-n8g8")
	if err != nil {
		return err
	}
	run := func(compat bool) (map[string]metrics.Summary, []*sim.Result, error) {
		if o.Progress != nil {
			o.Progress(fmt.Sprintf("tiresias: heavy-tailed trace, %d jobs on 64 GPUs under %d policies (compat %v)", len(jobs), len(heavyTailPolicies), compat))
		}
		res, err := Compare(Setup{Cluster: c, Jobs: jobs, Policies: heavyTailPolicies, Seed: cfg.Seed, Compat: compat})
		if err != nil {
			return nil, nil, err
		}
		sums := make(map[string]metrics.Summary, len(res))
		for i, p := range heavyTailPolicies {
			sums[p] = metrics.Summarize(res[i].Records())
		}
		return sums, res, nil
	}
	sums, res, err := run(false)
	if err != nil {
		return err
	}
	counted, _, err := run(true)
	if err != nil {
		return err
	}
	fmt.Fprintf(md, "## A heavy-tailed workload\n\n")
	fmt.Fprintf(md, "%d jobs whose GPU-time is drawn from Tiresias' production samples (yarn-gput10000.csv: median\n"+
		"2,227 GPU-s, the top 1%% of jobs holding 57%% of all GPU-time), split into a gang size and a run time,\n"+
		"the gang size drawn from the sizes (1 to 16 GPUs) of the Philly jobs whose GPU-time lies in the same\n"+
		"decade; models from Tiresias' nine (four with skewed tensors);\n"+
		"Poisson arrivals at %.0f%% offered load within the arrival window, on 64 GPUs (8 servers × 8 V100,\n"+
		"`tiresias-n8g8`). `experiment.HeavyTail` documents how a sample is drawn; the table is the first sample of\n"+
		"the seed set (seed %d); the checks below use every seed of the set. (Seed 1, a development seed, is\n"+
		"committed as `internal/experiment/testdata/tiresias/heavytail.csv`.) Gandiva's performance model `%s`: placement is\n"+
		"real (YARN-CS consolidates every gang: one server, or the fewest servers of one domain), start-up,\n"+
		"suspend/resume and checkpoint costs are charged, spread gangs run slower by their model's skew.\n\n```\n"+
		"gandiva trace heavytail --seed %d -o heavytail.csv\n"+
		"gandiva sim --trace heavytail.csv --seed %d --cluster tiresias-n8g8 --policy %s\n```\n\n",
		len(jobs), cfg.Load*100, cfg.Seed, res[0].Perf, cfg.Seed, cfg.Seed, strings.Join(heavyTailPolicies, ","))
	md.WriteString("| policy | avg JCT s | fifo ÷ policy | policy ÷ srsf | p50 JCT s | p95 JCT s | avg queue s | preemptions | jobs spread | avg JCT s, count model | fifo ÷ policy, count model |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	fifo, srsf := sums["fifo"].AvgJCT, sums["srsf"].AvgJCT
	var labels []string
	var vals, cvals []float64
	for _, p := range heavyTailPolicies {
		s, cs := sums[p], counted[p]
		fmt.Fprintf(md, "| %s | %.0f | %.2f× | %.2f | %.0f | %.0f | %.0f | %d | %d | %.0f | %.2f× |\n", p, s.AvgJCT, fifo/s.AvgJCT, s.AvgJCT/srsf,
			s.P50JCT, s.P95JCT, s.AvgQueue, s.Preemptions, s.SpreadJobs, cs.AvgJCT, counted["fifo"].AvgJCT/cs.AvgJCT)
		labels = append(labels, p)
		vals = append(vals, s.AvgJCT/3600)
		cvals = append(cvals, cs.AvgJCT/3600)
	}
	svg, err := report.BarPlot("Heavy-tailed trace, 64 GPUs: average JCT", "average JCT (hours)", labels,
		[]report.Bar{{Name: "gandiva-perf/v1", Values: vals}, {Name: "count model (--compat tiresias)", Values: cvals}})
	if err != nil {
		return err
	}
	rep.Files["tiresias-heavytail.svg"] = svg
	cdf, err := tiresiasCDF(res, heavyTailPolicies, []string{"fifo", "tiresias-l", "tiresias-g", "srsf"})
	if err != nil {
		return err
	}
	rep.Files["tiresias-heavytail-cdf.svg"] = cdf
	md.WriteString("\n![average JCT](tiresias-heavytail.svg)\n\n![JCT distribution](tiresias-heavytail-cdf.svg)\n\n")
	l := sums["tiresias-l"].AvgJCT
	factor := fifo / l
	fmt.Fprintf(md, "On this sample Tiresias-L's average JCT is %.2f× better than FIFO/YARN-CS's and %.2f× SRSF's (the oracle);\n"+
		"Tiresias-G's is %.2f× better than FIFO's, and Optimus, which only estimates remaining time from measured\n"+
		"progress, is %.2f× SRSF's.\n\n", factor, l/srsf, fifo/sums["tiresias-g"].AvgJCT, sums["optimus"].AvgJCT/srsf)
	md.WriteString("**The generator changed; before, the factor was 8.31×.** The previous version of\n" +
		"`experiment.HeavyTail` drew each job's gang size from Philly's overall distribution, independently of\n" +
		"its GPU-time, so a 16.8-million-GPU-second sample became a 1-GPU job running 194 days (job 132 of\n" +
		"that trace), longer than any of Philly's 82,247 jobs (53 days at most); in Philly, large GPU-time\n" +
		"comes mostly from large gangs (1 GPU for 96% of its jobs below 10^4 GPU-s, for 8% of those between\n" +
		"10^6 and 10^7, for none above 3.3 million GPU-s). That trace gave FIFO 769,943 s and Tiresias-L 92,641 s on\n" +
		"average: 8.31× (51% over the paper's 5.5×), Tiresias-L 1.03× SRSF; seeds 2 to 5 gave 5.55× to 9.47×.\n" +
		"The gang size is now drawn from the sizes of the Philly jobs whose GPU-time is in the same decade as\n" +
		"the sample (`heavyTailGangs`, derived from philly.csv by the command in its comment): the simplest\n" +
		"table conditional on GPU-time, with no parameter but the bucket width, and every bucket holds at\n" +
		"least 19 Philly jobs. The method was fixed before any run with it and not changed after; the load\n" +
		"definition, the 80% load, the 1,000 jobs, the models and the arrivals are as before.\n\n")
	if err := tiresiasHold(o, cfg.Seed, c, jobs, sums["tiresias-g"], md); err != nil {
		return err
	}
	cf := counted["fifo"].AvgJCT / counted["tiresias-l"].AvgJCT
	big := jobs[0]
	for _, j := range jobs {
		if j.Work() > big.Work() {
			big = j
		}
	}
	if factor > tiresiasMaxFactor {
		const week = 7 * 86400
		long := 0
		for _, j := range jobs {
			if j.Duration() > week {
				long++
			}
		}
		fjf := sums["fjf"].AvgJCT
		fmt.Fprintf(md, "**On this one sample the factor is above the paper's range: %.2f× against \"up to 5.5×\", %.0f%% over.** Why: FIFO/YARN-CS\n"+
			"here is strict head-of-line blocking with consolidated placement. %d jobs of this trace run for more\n"+
			"than a week (the tail of yarn-gput10000: the largest, job %s, needs %.1f million GPU-seconds on %d\n"+
			"GPU(s), %.0f days); while they hold servers, a multi-GPU gang at the head of the queue waits for\n"+
			"consolidated servers, and every job behind it waits too (%.0f s of queueing on average). FJF, which\n"+
			"keeps FIFO's order but lets a job that fits pass one that does not, is already %.2f× better than\n"+
			"FIFO, and Tiresias-L only %.2f× better than FJF: most of the gap is YARN-CS's head-of-line blocking\n"+
			"behind its placement constraint, not the order Tiresias-L picks. In the count model (GPUs counted\n"+
			"only, as in the Tiresias simulator) the same trace gives FIFO %.0f s (%.0f s of queueing on average)\n"+
			"and Tiresias-L %.0f s: a factor of only %.2f×, because without consolidation a gang waits only for\n"+
			"enough free GPUs anywhere. The factor also swings with the sample, by more than this miss (next\n"+
			"section), which is why the check is a median over samples. The 80%% load was chosen before\n"+
			"the first run (on development seed 1). The definition of load was changed once, after that run: as total\n"+
			"GPU-time ÷ (GPUs × arrival window) it counted the months the giant jobs run after the last arrival,\n"+
			"and the cluster never queued under any policy (every factor 1.00); it is now the GPU-time inside\n"+
			"the window.\n\n",
			factor, 100*(factor/tiresiasMaxFactor-1), long, big.Name, big.Work()/1e6, big.GPUs, big.Duration()/86400,
			sums["fifo"].AvgQueue, fifo/fjf, fjf/l, counted["fifo"].AvgJCT, counted["fifo"].AvgQueue,
			counted["tiresias-l"].AvgJCT, cf)
	}
	if err := tiresiasSeeds(o, cfg, c, rep, md); err != nil {
		return err
	}
	if o.Quick {
		md.WriteString("(The load sweep is skipped with --quick.)\n\n")
		return nil
	}
	return tiresiasSweep(o, cfg, c, md)
}

// tiresiasSeeds runs FIFO, Tiresias-L and SRSF on the heavy-tailed samples
// of the run's seed set (the base configuration otherwise) and checks the
// medians of the two ratios; and the distance to SRSF at 100% load.
func tiresiasSeeds(o Options, base HeavyTailConfig, c *cluster.Cluster, rep *Report, md *strings.Builder) error {
	pols := []string{"fifo", "tiresias-l", "srsf"}
	seeds := o.Seeds()
	o.progress("tiresias: %d heavy-tailed samples under %s", len(seeds), strings.Join(pols, ", "))
	type row struct{ f, l, r float64 }
	at := func(load float64) ([]row, error) {
		return parallelSeeds(seeds, func(seed uint64) (row, error) {
			cfg := base
			cfg.Seed, cfg.Load = seed, load
			jobs, err := heavyTailJobs(cfg, 0)
			if err != nil {
				return row{}, err
			}
			res, err := Compare(Setup{Cluster: c, Jobs: jobs, Policies: pols, Seed: seed, Parallel: 1})
			if err != nil {
				return row{}, fmt.Errorf("heavy-tailed sample, seed %d: %w", seed, err)
			}
			return row{metrics.Summarize(res[0].Records()).AvgJCT, metrics.Summarize(res[1].Records()).AvgJCT, metrics.Summarize(res[2].Records()).AvgJCT}, nil
		})
	}
	rows, err := at(base.Load)
	if err != nil {
		return err
	}
	fmt.Fprintf(md, "## The checks: statistics over %d samples\n\n", len(seeds))
	fmt.Fprintf(md, "The factor is a property of the workload as much as of the scheduler: the generator's samples\n"+
		"differ in how many giant jobs they draw and when those arrive, and FIFO's average JCT follows them. So\n"+
		"the checks take the median over the samples of the seed set (%s; %.0f%% load, %d jobs, 64 GPUs, `%s`):\n"+
		"Tiresias-L's factor over FIFO/YARN-CS must lie in 1–%s× (the paper: \"up to 5.5×\" better than YARN-CS)\n"+
		"and Tiresias-L ÷ SRSF must be at most %s (the oracle; \"near\" is our target). This estimator and its\n"+
		"targets replaced checks on seed 1 alone after seeds 1–5 had been seen, and were written down before\n"+
		"seeds 6–20 were first run; the generator, the load and the cluster did not change. Since then the\n"+
		"checks run on evaluation seeds (N×1000+1 … N×1000+20 for `--seed N`), never looked at while developing.\n"+
		"`gandiva trace heavytail --seed N -o FILE` writes sample N for `gandiva sim` (add `--seed N` there too);\n"+
		"the development samples' SHA-256 sums are in `internal/experiment/testdata/tiresias/heavytail-seeds.sha256`,\n"+
		"which the tests check.\n\n",
		describeSeeds(seeds), base.Load*100, base.Jobs, "tiresias-n8g8", fmtNum(tiresiasMaxFactor), fmtNum(tiresiasNearSRSF))
	md.WriteString("| seed | fifo avg JCT s | tiresias-l | srsf | fifo ÷ tiresias-l | tiresias-l ÷ srsf |\n|---|---|---|---|---|---|\n")
	var factors, nears []float64
	var sumF, sumL float64
	for i, r := range rows {
		factors, nears = append(factors, r.f/r.l), append(nears, r.l/r.r)
		sumF, sumL = sumF+r.f, sumL+r.l
		fmt.Fprintf(md, "| %d | %.0f | %.0f | %.0f | %.2f× | %.3f |\n", seeds[i], r.f, r.l, r.r, r.f/r.l, r.l/r.r)
	}
	mf, mn := median(factors), median(nears)
	fmt.Fprintf(md, "| **median** | | | | **%.2f×** | **%.3f** |\n\n", mf, mn)
	geo := 0.0
	for _, f := range factors {
		geo += math.Log(f) / float64(len(factors))
	}
	fmt.Fprintf(md, "Median factor %.2f× (samples range from %.2f× to %.2f×); Tiresias-L's median distance to the oracle SRSF\n"+
		"%.3f (worst sample %.3f). Other estimators over the same samples agree: the ratio of FIFO's to Tiresias-L's\n"+
		"JCT averaged over all %d samples is %.2f×, the geometric mean of the factors %.2f×.\n\n",
		mf, slices.Min(factors), slices.Max(factors), mn, slices.Max(nears), len(seeds), sumF/sumL, math.Exp(geo))
	const yarn = "fifo: YARN-CS, strict FIFO with consolidated placement (the paper's baseline)"
	const oracle = "srsf: shortest remaining GPU-time first with oracle run times (the paper's reference)"
	fc := NewCheck("heavy-tail tiresias-l vs fifo", "avg JCT fifo ÷ tiresias-l", "up to 5.5× better than YARN-CS",
		Between(tiresiasMinFactor, tiresiasMaxFactor), seeds, factors).With(yarn, "")
	if !fc.Passed() {
		fc.Reason = "The factor follows FIFO's head-of-line blocking behind the heavy tail's week-long gangs, which varies from sample to sample (see the table)."
	}
	nc := NewCheck("heavy-tail tiresias-l vs srsf", "avg JCT tiresias-l ÷ srsf", "close to SRSF (the oracle)", AtMostBand(tiresiasNearSRSF), seeds, nears).With(oracle, "")
	if !nc.Passed() {
		nc.Reason = "Tiresias-L knows only attained service; see the load table for where it drifts from the oracle."
	}
	rep.Checks = append(rep.Checks, fc, nc)
	// The same distance at 100% load (the review: 1.15 on the development seeds).
	o.progress("tiresias: %d heavy-tailed samples at 100%% load", len(seeds))
	full, err := at(1.0)
	if err != nil {
		return err
	}
	var fullNear []float64
	for _, r := range full {
		fullNear = append(fullNear, r.l/r.r)
	}
	hc := NewCheck("heavy-tail tiresias-l vs srsf at 100% load", "avg JCT tiresias-l ÷ srsf, load 100%", "close to SRSF (the oracle)",
		AtMostBand(tiresiasNearSRSF), seeds, fullNear).With(oracle, "")
	if !hc.Passed() {
		hc.Reason = tiresiasFullLoadReason
	}
	rep.Checks = append(rep.Checks, hc)
	fmt.Fprintf(md, "At 100%% load (the same generator and seeds, arrivals compressed to the cluster's capacity) Tiresias-L ÷ SRSF\n"+
		"has median %.3f (p10–p90 %.3f–%.3f; %.0f%% of the samples within %s). The review measured 1.15 on the\n"+
		"development seeds; that check is now part of the set (last row of the table of checks).\n\n",
		median(fullNear), quantile(fullNear, 0.1), quantile(fullNear, 0.9), 100*hc.PassRate, fmtNum(tiresiasNearSRSF))
	return nil
}

// tiresiasFullLoadReason is written beside the 100%-load check when it misses.
const tiresiasFullLoadReason = "At full load most of the gap is the information Tiresias-L does not have: in the count model " +
	"(GPUs counted only, preemption free, as the Tiresias simulator) its distance to SRSF on the development seeds is 1.09 " +
	"at 100% load against 1.13 in our model. With a long queue, 2D-LAS ranks every newcomer first until it has used " +
	"3,250 GPU-seconds, whatever its size, while SRSF, knowing run times, runs the short jobs first; the rest is the cost " +
	"of Tiresias-L's preemptions (1.4 times as many as SRSF's) and of placing gangs. The paper's claim of coming near SRSF " +
	"holds where the queue drains (the load table); we keep 1.1 as the target and report the miss."

// median is the middle value of x (the mean of the two middle values for
// an even count); x must not be empty. It does not modify x.
func median(x []float64) float64 {
	y := slices.Clone(x)
	slices.Sort(y)
	n := len(y)
	if n%2 == 1 {
		return y[n/2]
	}
	return (y[n/2-1] + y[n/2]) / 2
}

// tiresiasHold runs tiresias-g without its hold (hold=0, the Tiresias
// simulator's rule) on the heavy-tailed trace, for comparison.
func tiresiasHold(o Options, seed uint64, c *cluster.Cluster, jobs []*cluster.JobSpec, held metrics.Summary, md *strings.Builder) error {
	if o.Progress != nil {
		o.Progress("tiresias: heavy-tailed trace, tiresias-g with hold=0")
	}
	res, err := Compare(Setup{Cluster: c, Jobs: jobs, Policies: []string{"tiresias-g"},
		Params: []map[string]string{{"hold": "0"}}, Seed: seed})
	if err != nil {
		return err
	}
	free := metrics.Summarize(res[0].Records())
	fmt.Fprintf(md, "Tiresias-G's hold (%d s; see the policies above) against preemption by jobs of the same queue:\n"+
		"without it (`tiresias-g:hold=0`, the Tiresias simulator's rule, which the count-model column keeps)\n"+
		"its average JCT here is %.0f s, p95 %.0f s, with %d preemptions; with it, %.0f s, p95 %.0f s, %d\n"+
		"preemptions. (Where the last queue is crowded the hold matters far more: docs/PERFORMANCE.md,\n"+
		"Tiresias and the shortest-first policies, on the Philly trace.)\n\n",
		tiresias.DefaultHold, free.AvgJCT, free.P95JCT, free.Preemptions, held.AvgJCT, held.P95JCT, held.Preemptions)
	return nil
}

// tiresiasSweep shows how the Tiresias-L vs FIFO factor depends on the
// offered load, as medians over the run's seeds: not checks, context for them.
func tiresiasSweep(o Options, base HeavyTailConfig, c *cluster.Cluster, md *strings.Builder) error {
	pols := []string{"fifo", "tiresias-l", "srsf"}
	seeds := o.Seeds()
	md.WriteString("### How the factor depends on load\n\n")
	fmt.Fprintf(md, "Same generator and seeds (%s), other offered loads; medians over the seeds. The checks use 80%% load,\n"+
		"fixed before any run.\n\n", describeSeeds(seeds))
	md.WriteString("| load | fifo ÷ tiresias-l: median (p10–p90) | tiresias-l ÷ srsf: median (p10–p90) |\n|---|---|---|\n")
	for _, load := range []float64{0.5, 0.6, 0.7, 0.8, 0.9, 1.0} {
		o.progress("tiresias: sweep, load %.0f%%", load*100)
		type ratio struct{ f, n float64 }
		rs, err := parallelSeeds(seeds, func(seed uint64) (ratio, error) {
			cfg := base
			cfg.Load, cfg.Seed = load, seed
			jobs, err := heavyTailJobs(cfg, 0)
			if err != nil {
				return ratio{}, err
			}
			res, err := Compare(Setup{Cluster: c, Jobs: jobs, Policies: pols, Seed: seed, Parallel: 1})
			if err != nil {
				return ratio{}, err
			}
			f, l, r := metrics.Summarize(res[0].Records()).AvgJCT, metrics.Summarize(res[1].Records()).AvgJCT, metrics.Summarize(res[2].Records()).AvgJCT
			return ratio{f / l, l / r}, nil
		})
		if err != nil {
			return err
		}
		var fs, ns []float64
		for _, r := range rs {
			fs, ns = append(fs, r.f), append(ns, r.n)
		}
		fmt.Fprintf(md, "| %.0f%% | %.2f× (%.2f–%.2f) | %.3f (%.3f–%.3f) |\n", load*100, median(fs), quantile(fs, 0.1), quantile(fs, 0.9),
			median(ns), quantile(ns, 0.1), quantile(ns, 0.9))
	}
	md.WriteString("\n")
	return nil
}

// tiresiasCDF plots the empirical distribution of JCT for some policies.
func tiresiasCDF(res []*sim.Result, names, show []string) ([]byte, error) {
	var series []report.Series
	for i, p := range names {
		keep := false
		for _, q := range show {
			keep = keep || q == p
		}
		if !keep {
			continue
		}
		var jct []float64
		for _, j := range res[i].Jobs {
			if j.State == cluster.Finished {
				jct = append(jct, math.Log10(math.Max(1, j.End-j.Submit)))
			}
		}
		slices.Sort(jct)
		s := report.Series{Name: p}
		for k, v := range jct {
			s.X = append(s.X, v)
			s.Y = append(s.Y, float64(k+1)/float64(len(jct)))
		}
		series = append(series, s)
	}
	return report.LinePlot("Heavy-tailed trace: JCT distribution", "log10 JCT (s)", "fraction of jobs", series)
}
