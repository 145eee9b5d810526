package experiment

import (
	"fmt"
	"math"
	"strings"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/metrics"
	"github.com/gandiva-sched/gandiva/internal/model"
	"github.com/gandiva-sched/gandiva/internal/sim"
	"github.com/gandiva-sched/gandiva/internal/trace"
)

// realCapacity is what a cluster can do for a job mix, in reference GPUs
// (V100s): the sum over its GPUs of the work-weighted mean speed of the
// jobs' models on that GPU's type, as the simulator's performance model
// has it (the model's measured speed where the catalog has one, else the
// type's generic speed). A load stated against it is a load the cluster can
// actually serve; stated in V100s it is not, on a cluster without V100s.
func realCapacity(c *cluster.Cluster, jobs []*cluster.JobSpec) float64 {
	cat := model.Default()
	speed := map[string]float64{}
	for i := range c.Servers {
		t := c.TypeOf(cluster.ServerID(i))
		if _, ok := speed[t.Name]; ok {
			continue
		}
		sw, w := 0.0, 0.0
		for _, j := range jobs {
			wt := float64(j.GPUs) * j.Iters * j.IterTime
			s := t.Speed
			if m := cat.Get(j.Model); m != nil {
				if x, ok := m.SpeedOn(t.Name, cluster.ReferenceGPU); ok {
					s = x
				}
			}
			sw += wt * s
			w += wt
		}
		speed[t.Name] = sw / w
	}
	tot := 0.0
	for i := range c.Servers {
		tot += float64(c.Servers[i].NumGPUs) * speed[c.TypeOf(cluster.ServerID(i)).Name]
	}
	return tot
}

// sampleEvery is the work-sampling period of the cluster experiments.
const sampleEvery = 300.0

// workAt is the total work done by the last sample at or before t.
func workAt(r *sim.Result, t float64) (at, work float64) {
	for _, s := range r.Samples {
		if s.At > t {
			break
		}
		at, work = s.At, 0
		for _, v := range s.Work {
			work += v
		}
	}
	return at, work
}

// windowThroughput is the work done per second between the samples at or
// before from and to (reference-GPU-seconds per second).
func windowThroughput(r *sim.Result, from, to float64) float64 {
	ta, wa := workAt(r, from)
	tb, wb := workAt(r, to)
	if tb <= ta {
		return math.NaN()
	}
	return (wb - wa) / (tb - ta)
}

// saturatedThroughput is the work done per second over the sampling
// intervals in which the cluster was saturated at both ends: the jobs
// submitted and not yet ended asked for at least as many GPUs as the
// cluster has. It is the rate a policy sustains while it has more work than
// GPUs, whatever it does with the tail of the run.
func saturatedThroughput(r *sim.Result) (tput, seconds float64) {
	demand := func(t float64) int {
		n := 0
		for _, j := range r.Jobs {
			if j.Submit <= t && (j.End < 0 || j.End > t) {
				n += j.GPUs
			}
		}
		return n
	}
	work, secs := 0.0, 0.0
	prevSat := false
	var prev sim.WorkSample
	for i, s := range r.Samples {
		sat := demand(s.At) >= r.GPUs
		if i > 0 && sat && prevSat {
			for u, v := range s.Work {
				work += v - prev.Work[u]
			}
			secs += s.At - prev.At
		}
		prev, prevSat = s, sat
	}
	if secs == 0 {
		return math.NaN(), 0
	}
	return work / secs, secs
}

// clusterRun is one policy's figures on one seed's jobs.
type clusterRun struct {
	tput, t100, jct, util, packs, migr float64
	sat, satSecs, makespan             float64
}

// runCluster runs pol (with params and perf tweaks) to the end, sampling work.
func runCluster(c *cluster.Cluster, jobs []*cluster.JobSpec, pol string, params map[string]string, perf func(*sim.PerfModel), seed uint64, from, to float64) (clusterRun, error) {
	p, err := newPolicy(pol, params)
	if err != nil {
		return clusterRun{}, err
	}
	pm := sim.DefaultPerf()
	if perf != nil {
		perf(&pm)
	}
	r, err := sim.Run(sim.Config{Cluster: c, Jobs: jobs, Policy: p, Perf: pm, Seed: seed, SampleEvery: sampleEvery})
	if err != nil {
		return clusterRun{}, fmt.Errorf("%s: %w", pol, err)
	}
	sm := metrics.Summarize(r.Records())
	out := clusterRun{tput: windowThroughput(r, from, to), t100: avgT100(r), jct: sm.AvgJCT, util: sm.GPUUtil,
		packs: float64(r.Stats.Packs), migr: float64(r.Stats.Migrations), makespan: r.End - r.Start}
	out.sat, out.satSecs = saturatedThroughput(r)
	return out, nil
}

func lastSubmit(jobs []*cluster.JobSpec) float64 {
	t := 0.0
	for _, j := range jobs {
		t = max(t, j.Submit)
	}
	return t
}

// cluster180Jobs draws the 180-GPU experiment's jobs for a seed at an
// offered load of load × the cluster's real capacity for the job mix, and
// returns that capacity.
func cluster180Jobs(c *cluster.Cluster, n int, seed uint64, load float64) ([]*cluster.JobSpec, float64) {
	cfg := trace.SynthConfig{Jobs: n, Seed: seed, Users: 20, Load: 1, MaxGPUs: 16, MaxDuration: 8 * 3600}
	capa := realCapacity(c, trace.Synthetic(cfg)) // the mix does not depend on the load
	cfg.Load = load * capa
	return trace.Synthetic(cfg), capa
}

// cluster180Load is the offered load of the 180-GPU checks, as a multiple
// of the cluster's real capacity for the job mix: arrivals match what the
// cluster can do, so it saturates (the throughput gain exists only there)
// without a queue that grows for the whole run. Fixed on the development
// seeds before the evaluation seeds were run; other loads are context.
const cluster180Load = 1.0

// clusterThroughput: 180 GPUs (P100 and P40), jobs modelled on the Philly
// trace at the cluster's real capacity; cluster throughput and the average
// time to the first 100 mini-batches, Gandiva against strict FIFO
// (YARN-CS) and against a work-conserving FIFO (fjf), over seeds.
func clusterThroughput(o Options, rep *Report, md *strings.Builder) error {
	c, err := cluster.Load("gandiva-180")
	if err != nil {
		return err
	}
	n := 2000
	pols := []string{"fifo", "fjf", "gandiva"}
	seeds := o.Seeds()
	at := func(load float64) ([]cluster180Seed, error) { return cluster180Runs(c, n, seeds, load, "gandiva") }
	o.progress("gandiva: cluster, %d jobs × %d seeds at %.1f× capacity", n, len(seeds), cluster180Load)
	res, err := at(cluster180Load)
	if err != nil {
		return err
	}
	type seedRes = cluster180Seed
	stat := func(rs []seedRes, f func(seedRes) float64) []float64 {
		var x []float64
		for _, r := range rs {
			x = append(x, f(r))
		}
		return x
	}
	gainVs, t100Vs := cluster180Gain, cluster180T100
	gFifo, gFjf := stat(res, gainVs(0)), stat(res, gainVs(1))
	tFifo, tFjf := stat(res, t100Vs(0)), stat(res, t100Vs(1))
	checks := cluster180Checks(seeds, res)
	rep.Checks = append(rep.Checks, checks...)
	fmt.Fprintf(md, `
## Cluster: 180 GPUs, jobs modelled on a production trace

The paper: on a 180-GPU cluster with synthetic jobs modelled on a production (Philly) trace,
cluster throughput +26%% and average time to the first 100 mini-batches 4.5× lower. The paper's
baseline is "today's schedulers" (its talk: Yarn, Kubernetes), which give each job GPUs of its
own until it ends. We compare with both readings of that: **strict FIFO** (`+"`fifo`"+`, YARN-CS:
consolidated placement, a gang at the head of the queue blocks the jobs behind it) and
**work-conserving FIFO** (`+"`fjf`"+`: any waiting gang that fits starts, as Kubernetes' scheduler
does), the stronger of the two and the one the checks hold Gandiva to as much as the other.

Setup: the `+"`gandiva-180`"+` preset (45 four-GPU servers: 96 P100, 84 P40); %d jobs per seed from
`+"`trace.Synthetic`"+` (gang sizes and run times drawn from the Philly distributions, up to 16 GPUs and
8 h, models from the catalog, 20 users) arriving as a Poisson process. **The load is stated
against the cluster's real capacity:** the sum over its GPUs of the job mix's work-weighted speed
there, %.1f V100-equivalents on median (not 180: a P100 or P40 does 0.6–0.7 of a V100's work on
these models). The checks run at %.1f× that capacity (over %.1f hours of arrivals on median).
The previous version of this page offered "twice what the cluster can do" counted in V100s, which
is %.2f× (p10–p90 %.2f–%.2f) the real capacity; the review quoted "about 2.9×", which we do not
reproduce (counting P100 and P40 at their generic speeds, 0.650 and 0.617, gives 3.15×; weighting
by the job mix's measured speeds gives the figure above). Throughput is the work done
(V100-seconds per second) from the end of a warm-up (the first third of the arrivals) to the last
arrival; time to the first 100 mini-batches and JCT are averaged over all jobs of a run to the end.

Medians over %d seeds (%s):

| policy | throughput | GPU utilisation | avg time to 100 mini-batches (s) | avg JCT (s) | packs | migrations |
|---|---|---|---|---|---|---|
`, n, median(stat(res, func(r seedRes) float64 { return r.capa })), cluster180Load, median(stat(res, func(r seedRes) float64 { return r.hours })),
		median(stat(res, func(r seedRes) float64 { return r.v100Load })), quantile(stat(res, func(r seedRes) float64 { return r.v100Load }), 0.1),
		quantile(stat(res, func(r seedRes) float64 { return r.v100Load }), 0.9), len(seeds), describeSeeds(seeds))
	for k, pol := range pols {
		f := func(g func(clusterRun) float64) float64 {
			return median(stat(res, func(r seedRes) float64 { return g(r.runs[k]) }))
		}
		fmt.Fprintf(md, "| %s | %.1f | %.3f | %.0f | %.0f | %.0f | %.0f |\n", pol, f(func(x clusterRun) float64 { return x.tput }),
			f(func(x clusterRun) float64 { return x.util }), f(func(x clusterRun) float64 { return x.t100 }), f(func(x clusterRun) float64 { return x.jct }),
			f(func(x clusterRun) float64 { return x.packs }), f(func(x clusterRun) float64 { return x.migr }))
	}
	fmt.Fprintf(md, `
Throughput gain over strict FIFO %+.1f%% (median; p10–p90 %+.1f%% to %+.1f%%), over work-conserving FIFO
%+.1f%% (%+.1f%% to %+.1f%%); paper +26%%. Time to the first 100 mini-batches %.1f× lower than strict
FIFO's and %.1f× lower than work-conserving FIFO's (paper 4.5×).

`, 100*median(gFifo), 100*quantile(gFifo, 0.1), 100*quantile(gFifo, 0.9), 100*median(gFjf), 100*quantile(gFjf, 0.1), 100*quantile(gFjf, 0.9),
		median(tFifo), median(tFjf))
	if !o.Quick {
		md.WriteString("**How both figures depend on the load** (the paper does not give its load; same seeds, medians):\n\n")
		md.WriteString("| offered load (× real capacity) | gain over fifo | gain over fjf | time to 100: fifo ÷ gandiva | fjf ÷ gandiva |\n|---|---|---|---|---|\n")
		for _, load := range []float64{0.8, 0.9, cluster180Load, 1.2, 1.5, 2.0} {
			rs := res
			if load != cluster180Load {
				o.progress("gandiva: cluster, load %.1f×", load)
				if rs, err = at(load); err != nil {
					return err
				}
			}
			fmt.Fprintf(md, "| %.1f× | %+.1f%% | %+.1f%% | %.1f× | %.1f× |\n", load, 100*median(stat(rs, gainVs(0))), 100*median(stat(rs, gainVs(1))),
				median(stat(rs, t100Vs(0))), median(stat(rs, t100Vs(1))))
		}
		md.WriteString("\n")
	}
	md.WriteString(clusterWhy)
	return nil
}

// cluster180Seed is one seed's runs of fifo, fjf and the candidate.
type cluster180Seed struct {
	runs           []clusterRun
	capa, v100Load float64
	hours          float64
}

// cluster180Runs runs fifo, fjf and candidate on every seed's jobs at an
// offered load of load × the real capacity.
func cluster180Runs(c *cluster.Cluster, n int, seeds []uint64, load float64, candidate string) ([]cluster180Seed, error) {
	return parallelSeeds(seeds, func(seed uint64) (cluster180Seed, error) {
		jobs, capa := cluster180Jobs(c, n, seed, load)
		last := lastSubmit(jobs)
		r := cluster180Seed{capa: capa, v100Load: 2 * float64(c.NumGPUs()) / capa, hours: last / 3600}
		for _, pol := range []string{"fifo", "fjf", candidate} {
			x, err := runCluster(c, jobs, pol, nil, nil, seed, last/3, last)
			if err != nil {
				return r, err
			}
			r.runs = append(r.runs, x)
		}
		return r, nil
	})
}

// cluster180Gain is the candidate's throughput gain over baseline k (0
// fifo, 1 fjf); cluster180T100 the baseline's time to the first 100
// mini-batches over the candidate's.
func cluster180Gain(k int) func(cluster180Seed) float64 {
	return func(r cluster180Seed) float64 { return r.runs[2].tput/r.runs[k].tput - 1 }
}

func cluster180T100(k int) func(cluster180Seed) float64 {
	return func(r cluster180Seed) float64 { return r.runs[k].t100 / r.runs[2].t100 }
}

const (
	yarnBaseline = "fifo: strict FIFO with consolidated placement and head-of-line blocking (YARN-CS; Gandiva OSDI'18's \"today's schedulers\", Yarn)"
	k8sBaseline  = "fjf: FIFO that starts any waiting gang that fits, consolidated (work-conserving; what Kubernetes' scheduler does for whole gangs; Gandiva OSDI'18 names Kubernetes)"
)

// cluster180Checks are the 180-GPU checks: the paper's two figures against
// strict FIFO and against work-conserving FIFO, two-sided bands 0.5×–2×.
func cluster180Checks(seeds []uint64, res []cluster180Seed) []Check {
	stat := func(f func(cluster180Seed) float64) []float64 {
		var x []float64
		for _, r := range res {
			x = append(x, f(r))
		}
		return x
	}
	checks := []Check{
		NewCheck("cluster throughput vs fifo", "cluster throughput gain over strict FIFO (YARN-CS)", 0.26, AroundPaper(0.26), seeds, stat(cluster180Gain(0))).With(yarnBaseline, ""),
		NewCheck("cluster throughput vs fjf", "cluster throughput gain over work-conserving FIFO (fjf)", 0.26, AroundPaper(0.26), seeds, stat(cluster180Gain(1))).With(k8sBaseline, ""),
		NewCheck("cluster time-to-100 vs fifo", "average time to the first 100 mini-batches, fifo ÷ gandiva", 4.5, AroundPaper(4.5), seeds, stat(cluster180T100(0))).With(yarnBaseline, ""),
		NewCheck("cluster time-to-100 vs fjf", "average time to the first 100 mini-batches, fjf ÷ gandiva", 4.5, AroundPaper(4.5), seeds, stat(cluster180T100(1))).With(k8sBaseline, ""),
	}
	for i := range checks {
		if !checks[i].Passed() {
			checks[i].Reason = clusterMissReasons[checks[i].Name]
		}
	}
	return checks
}

// clusterMissReasons are written beside a 180-GPU check that misses.
var clusterMissReasons = map[string]string{
	"cluster throughput vs fifo": "Strict FIFO's loss to head-of-line blocking depends on how often a large gang reaches the head of the queue; see the load table.",
	"cluster throughput vs fjf": "Most of Gandiva's gain over strict FIFO is head-of-line blocking, which work-conserving FIFO does not have either. " +
		"What is left is packing (Gavel's measured pair rates, +20% for a good pair) on the few GPUs where jobs wait, and migration; " +
		"at the real capacity the queue is short, so little is packed. The paper's +26% matches the gain over strict FIFO, its baseline.",
	"cluster time-to-100 vs fifo": "The ratio is set by how long the baseline's queue is, which the paper does not give. Strict " +
		"FIFO queues whenever a gang at the head waits for a consolidated place, while Gandiva starts every job within a " +
		"quantum or two, so the ratio is far above 4.5× at every load of the load table, down to 0.8× the capacity.",
	"cluster time-to-100 vs fjf": "As for strict FIFO, the ratio follows the baseline's queue, which the paper does not give. " +
		"The load table shows it within the paper's range only at 0.8–0.9× the capacity, where Gandiva's throughput gain over " +
		"the same baseline is 1–2%: no single load gives both of the paper's figures against work-conserving FIFO.",
}

const clusterWhy = `Why: Gandiva never leaves a GPU idle while a job waits (it over-subscribes and time-slices, and
migrates jobs to idle GPUs), so it starts every job within a quantum or two, and it packs pairs
of jobs whose measured rates show they run faster together. Strict FIFO loses GPUs to
head-of-line blocking (a gang at the head waits for a consolidated place while GPUs idle), which
is most of the gap to it; work-conserving FIFO does not, and what is left is packing and
migration. GPU utilisation counts each job on a shared GPU, so packing takes it above the
throughput's share.
`

// saturationJobs is the saturation experiment's jobs for a seed: n jobs
// drawn from the Philly distributions (trace.Synthetic: gang sizes up to
// 16 GPUs, run times from Philly's quantiles, capped at maxDuration unless
// it is 0), their arrivals compressed (compressArrivals) so that the
// offered load within the arrival window is saturationLoad × the cluster's
// real capacity.
func saturationJobs(c *cluster.Cluster, n int, seed uint64, maxDuration float64) []*cluster.JobSpec {
	jobs := trace.Synthetic(trace.SynthConfig{Jobs: n, Seed: seed, Users: 20, Load: 1, MaxGPUs: 16, MaxDuration: maxDuration})
	compressArrivals(jobs, realCapacity(c, jobs), saturationLoad)
	return jobs
}

// compressArrivals scales the jobs' submission times by the factor s that
// makes the load within the arrival window equal load: Σ gpus × min(run
// time, T − arrival) ÷ (capacity × T) = load, T being the last arrival and
// run times on the reference GPU. (Total work ÷ window would count the
// weeks a few giant jobs run after the last arrival and leave the cluster
// unsaturated during it; the heavy-tailed trace of the Tiresias
// reproduction is drawn the same way.)
func compressArrivals(jobs []*cluster.JobSpec, capacity, load float64) {
	last := lastSubmit(jobs)
	if last <= 0 {
		return
	}
	at := func(s float64) float64 {
		win := s * last
		sum := 0.0
		for _, j := range jobs {
			sum += float64(j.GPUs) * math.Min(j.Iters*j.IterTime, win-s*j.Submit)
		}
		return sum / (capacity * win)
	}
	lo, hi := 1e-9, 1e9
	for range 200 {
		mid := math.Sqrt(lo * hi)
		if at(mid) > load {
			lo = mid
		} else {
			hi = mid
		}
	}
	for _, j := range jobs {
		j.Submit *= hi
	}
}

// saturationLoad is the offered load of the saturation experiment within
// the arrival window: the arrivals come four times as fast as the cluster
// can serve them, so it stays saturated long after the last arrival.
const saturationLoad = 4.0

// saturationVariants are the breakdown of where Gandiva's work goes: the
// policy with one mechanism off, or the model with one cost removed.
type saturationVariant struct {
	name   string
	params map[string]string
	perf   func(*sim.PerfModel)
}

var saturationVariants = []saturationVariant{
	{"gandiva", nil, nil},
	{"gandiva:unpack=false (the policy before this change: a kept packing never ends)", map[string]string{"unpack": "false"}, nil},
	{"gandiva:pack=false (no packing)", map[string]string{"pack": "false"}, nil},
	{"gandiva:migrate=false (no migration, no unpacking)", map[string]string{"migrate": "false"}, nil},
	{"gandiva:quantum=600 (ten times fewer turns)", map[string]string{"quantum": "600"}, nil},
	{"model: free suspend and resume", nil, func(p *sim.PerfModel) { p.SuspendCost, p.ResumeCost = 0, 0 }},
	{"model: free start-up and checkpoints", nil, func(p *sim.PerfModel) { p.Startup, p.CheckpointGBps = 0, 1e12 }},
	{"model: no locality penalty", nil, func(p *sim.PerfModel) { p.CommBase, p.CommSkew, p.CommDomain = 0, 0, 0 }},
}

// saturationSeed is one seed's runs: fifo and fjf, then the variants.
type saturationSeed struct {
	base []clusterRun // fifo, fjf
	vars []clusterRun
}

// saturationRuns runs fifo, fjf and the variants on every seed's jobs.
func saturationRuns(c *cluster.Cluster, n int, maxDuration float64, seeds []uint64, variants []saturationVariant) ([]saturationSeed, error) {
	return parallelSeeds(seeds, func(seed uint64) (saturationSeed, error) {
		jobs := saturationJobs(c, n, seed, maxDuration)
		last := lastSubmit(jobs)
		var r saturationSeed
		for _, pol := range []string{"fifo", "fjf"} {
			x, err := runCluster(c, jobs, pol, nil, nil, seed, 0, last)
			if err != nil {
				return r, err
			}
			r.base = append(r.base, x)
		}
		for _, v := range variants {
			x, err := runCluster(c, jobs, "gandiva", v.params, v.perf, seed, 0, last)
			if err != nil {
				return r, err
			}
			r.vars = append(r.vars, x)
		}
		return r, nil
	})
}

// saturationRatios are, per seed, Gandiva's (variant 0's) throughput while
// saturated ÷ the better FIFO's, the better FIFO's makespan ÷ Gandiva's, and
// the better FIFO's average time to 100 mini-batches ÷ Gandiva's.
func saturationRatios(res []saturationSeed) (tput, span, early []float64) {
	for _, r := range res {
		g := r.vars[0]
		tput = append(tput, g.sat/max(r.base[0].sat, r.base[1].sat))
		span = append(span, min(r.base[0].makespan, r.base[1].makespan)/g.makespan)
		early = append(early, min(r.base[0].t100, r.base[1].t100)/g.t100)
	}
	return tput, span, early
}

// saturation: Gandiva's throughput where the cluster is saturated, against
// the better of strict and work-conserving FIFO, with a breakdown of where
// its work goes; and the same work with Philly's heavy tail uncapped.
func saturation(o Options, rep *Report, md *strings.Builder) error {
	c, err := cluster.Load("philly-sample")
	if err != nil {
		return err
	}
	n, nTail := 1000, 600
	if o.Quick {
		nTail = 300
	}
	seeds := o.Seeds()
	variants := saturationVariants
	if o.Quick {
		variants = variants[:1]
	}
	o.progress("gandiva: saturation, %d jobs × %d seeds, %d variants", n, len(seeds), len(variants))
	res, err := saturationRuns(c, n, saturationCap, seeds, variants)
	if err != nil {
		return err
	}
	o.progress("gandiva: saturation, heavy tail, %d jobs × %d seeds", nTail, len(seeds))
	tail, err := saturationRuns(c, nTail, 0, seeds, saturationVariants[:2])
	if err != nil {
		return err
	}
	tput, span, early := saturationRatios(res)
	_, tailSpan, _ := saturationRatios(tail)
	const wc = "the better of fifo (strict FIFO) and fjf (work-conserving FIFO) on each seed"
	checks := []Check{
		NewCheck("saturation throughput", "throughput while saturated, gandiva ÷ the better FIFO", "+26% (cluster throughput)", AtLeastBand(1), seeds, tput).With(wc,
			"the target: at least match the best work-conserving baseline"),
		NewCheck("saturation same work", "time to finish the same work, the better FIFO ÷ gandiva (makespan; run times up to 8 h)", "-", AtLeastBand(1), seeds, span).With(wc, ""),
		NewCheck("saturation same work, heavy tail", "time to finish the same work, the better FIFO ÷ gandiva (makespan; Philly's run times uncapped)", "-",
			AtLeastBand(1), seeds, tailSpan).With(wc, ""),
		NewCheck("saturation early feedback", "average time to the first 100 mini-batches, the better FIFO ÷ gandiva", "4.5× (at the paper's load)", AtLeastBand(2), seeds, early).With(wc,
			"early feedback must survive at saturation: at least 2× sooner (our target)"),
	}
	for i := range checks {
		if !checks[i].Passed() {
			checks[i].Reason = saturationMissReasons[checks[i].Name]
		}
	}
	rep.Checks = append(rep.Checks, checks...)
	fmt.Fprintf(md, `
## Throughput where the cluster is saturated (64 GPUs)

The review: "on Philly-derived traces with arrivals compressed so that 64 GPUs stay saturated,
`+"`gandiva`"+` finishes the same work 2–6%% later than `+"`fifo`"+` and `+"`fjf`"+` (higher GPU utilisation,
less work done), while the paper reports +26%% cluster throughput".

**What we reproduce of it** (development runs, before the changes below): the embedded Philly
sample (virtual cluster 6c71a0, 850 jobs, 470 h of 64-GPU work, the longest job 420 h on one GPU)
compressed so that all jobs arrive within 47 minutes: Gandiva finished the work in 682 h, FJF in
582 h (Gandiva 17%% later) and strict FIFO in 739 h (Gandiva 8%% *earlier*); compressed 3× instead,
Gandiva 2.257 million s against FJF's 2.154 (5%% later) and FIFO's 2.535. So "later than fjf"
holds, by 5–17%%; "later than fifo" we do not reproduce. The same runs show where the time goes:
Gandiva did the first 90%% of the work in 360 h, FJF in 478 h; what is left is the tail, and the
tail is the few 1-GPU jobs of 400+ h: Gandiva had time-sliced and packed them with everything
else during the saturated phase, so they entered the drained tail with more left to do than under
FIFO, which ran them alone from their arrival. One of them (405 h alone) kept its packing partner
for its whole life, at about 0.8 of its speed on a shared GPU, while most of the cluster sat idle
in the tail. The makespan of such a trace measures the tail of its longest job, not the cluster's
throughput; the summary's "throughput" column is work ÷ makespan, which is what the review read.

**What the model had wrong or lacked**, fixed without a tuned parameter:
- *A kept packing never ended* (internal/policy/gandiva, `+"`separate`"+`, parameter `+"`unpack=true`"+`).
  Packing pays only against time-slicing: the paper packs jobs "instead of time-slicing" them. So
  when GPUs sit idle and no job waits for a turn, a kept pair separates: the partner that joined
  it moves to idle GPUs of its type (a migration, bounded like every move) and both run alone at
  full speed; the pair stays known as good and packs again, without a trial, once jobs wait.
- *A job suspended before its first profile sample never reported its rate again* while it took
  turns on the same GPU (internal/sim: the simulator took the placement for sampled when it
  scheduled the sample, not when the sample came). Gandiva could not pack such jobs: in the
  packing experiment, two seeds in five never packed the super-resolution pair. Fixed in the
  simulator (a test, TestResumeSamplesWhenTheSampleNeverCame, pins it); live, the in-job client
  reports every mini-batch, so the policy was right and the model wrong. Likewise a job whose
  GPU got a neighbour reported nothing when its rate did not change (two super-resolution jobs on
  a V100 keep full speed in Gavel's data), so the packing trial was never judged; it now reports
  the neighbour (TestNewNeighbourIsReported).

With both changes the compressed Philly sample finishes in 611 h (FJF 582 h, FIFO 739 h: 5%%
after FJF, 17%% before FIFO; the unpack change alone makes no difference there); compressed 3×, in
576 h, before FJF's 598 h and FIFO's 704 h (627 h without the unpack change). Where the run's
length is set by a few jobs of weeks, the makespan stays their story; the experiment below
therefore measures the rate while saturated, and the time to finish with run times capped and
uncapped.

**The experiment.** (Unlike the 180-GPU experiment at its capacity, where the queue is short and
Gandiva gains 2%% over work-conserving FIFO, the cluster here has four times more work arriving
than it can do, so jobs wait, pack and fragment the servers for hours.) The `+"`philly-sample`"+` cluster (8 servers × 8 V100, 2 InfiniBand domains); %d
jobs per seed drawn from the Philly distributions (`+"`trace.Synthetic`"+`: gang sizes up to 16 GPUs,
run times from Philly's quantiles capped at %.0f h, as in the 180-GPU experiment, so that no single
job outlasts the saturated phase), arrivals compressed so that the offered load within the
arrival window is %.0f× the cluster's capacity. Two figures: the **throughput while saturated**
(work per second over the sampling intervals in which the jobs in the system ask for at least 64
GPUs: the rate a policy sustains while it has more work than GPUs) and the **time to finish the
same work** (makespan). The same is run with run times **uncapped** (%d jobs: Philly's heavy tail,
week-long jobs included), where the makespan is the tail of the longest jobs.

Medians over %d seeds (%s), run times capped at %.0f h:

| policy | throughput while saturated (vs gandiva) | time to finish all the work, h (vs gandiva) | GPU utilisation | avg time to 100 mini-batches (s) | migrations |
|---|---|---|---|---|---|
`, n, saturationCap/3600, saturationLoad, nTail, len(seeds), describeSeeds(seeds), saturationCap/3600)
	table := func(res []saturationSeed, vs []saturationVariant) {
		row := func(name string, get func(saturationSeed) clusterRun) {
			var a, b, cc, d, e, da, db []float64
			for _, r := range res {
				x := get(r)
				a, b, cc, d, e = append(a, x.sat), append(b, x.makespan/3600), append(cc, x.util), append(d, x.t100), append(e, x.migr)
				da, db = append(da, x.sat/r.vars[0].sat-1), append(db, x.makespan/r.vars[0].makespan-1)
			}
			fmt.Fprintf(md, "| %s | %.1f (%+.1f%%) | %.1f (%+.1f%%) | %.3f | %.0f | %.0f |\n", name, median(a), 100*median(da), median(b), 100*median(db),
				median(cc), median(d), median(e))
		}
		row("fifo", func(r saturationSeed) clusterRun { return r.base[0] })
		row("fjf", func(r saturationSeed) clusterRun { return r.base[1] })
		for k, v := range vs {
			row(v.name, func(r saturationSeed) clusterRun { return r.vars[k] })
		}
	}
	table(res, variants)
	fmt.Fprintf(md, `
Gandiva's throughput while saturated is %.2f× the better FIFO's (median; p10–p90 %.2f–%.2f); it finishes the
same work %.3f× as fast (the better FIFO's makespan ÷ Gandiva's; p10–p90 %.3f–%.3f); its jobs reach their first
100 mini-batches %.0f× sooner.
`, median(tput), quantile(tput, 0.1), quantile(tput, 0.9), median(span), quantile(span, 0.1), quantile(span, 0.9), median(early))
	if len(variants) > 1 {
		md.WriteString(saturationBreakdown)
	} else {
		md.WriteString("\n(The breakdown by mechanism and cost is in the full run.)\n")
	}
	fmt.Fprintf(md, "\nWith Philly's run times uncapped (%d jobs per seed, the same seeds), medians:\n\n"+
		"| policy | throughput while saturated (vs gandiva) | time to finish all the work, h (vs gandiva) | GPU utilisation | avg time to 100 mini-batches (s) | migrations |\n|---|---|---|---|---|---|\n", nTail)
	table(tail, saturationVariants[:2])
	fmt.Fprintf(md, "\nThe better FIFO's makespan ÷ Gandiva's: median %.3f (p10–p90 %.3f–%.3f). Utilisation over the makespan is low: for most of\n"+
		"it only the longest jobs are left.\n", median(tailSpan), quantile(tailSpan, 0.1), quantile(tailSpan, 0.9))
	return nil
}

// saturationCap caps the run times of the saturation experiment's jobs
// (the 180-GPU experiment's cap).
const saturationCap = 8 * 3600.0

var saturationMissReasons = map[string]string{
	"saturation throughput": "Gandiva's rate while saturated fell below the better FIFO's on most seeds.",
	"saturation same work":  "Gandiva finished the same work later than the better FIFO on most seeds.",
	"saturation same work, heavy tail": "The makespan is the tail of the longest jobs, not the rate while saturated: during the saturated phase Gandiva " +
		"time-slices and packs every job, including the few week-long ones, so they enter the drained tail with more left to do " +
		"than under FIFO, which ran them exclusively from their arrival. Finishing them sooner means running the longest first " +
		"(which no policy here can know) or giving up the equal time shares that give early feedback.",
	"saturation early feedback": "Gandiva's early feedback at saturation fell below twice as early as the better FIFO.",
}

const saturationBreakdown = `
**Where the work goes** (the rows below ` + "`gandiva`" + `; in brackets, the median change against
` + "`gandiva`" + ` on the same jobs): each removes one mechanism from the policy, or one cost from the
model. The costs the model charges are small: making suspend and resume free (0.3 s per turn
change, hundreds of thousands of them), start-up and checkpoints free, or spread gangs as fast as
consolidated ones moves either figure by about 1%. The mechanisms are what count. *Packing*
(Gavel's measured pair rates) lifts the rate above what 64 GPUs do alone; without it Gandiva's
rate falls to about 63, its GPUs kept busy, which is still above FJF's: in the saturated intervals
FJF's waiting jobs are often gangs that find no consolidated place (a 16-GPU gang needs two free
servers), and it leaves those GPUs idle, while Gandiva starts the gang at once on its home,
time-sliced. *Migration* (waiting jobs onto idle GPUs, gangs consolidated, packings ended) is
worth a few percent of the rate and a fifth of the time to finish. Ten times fewer turns (quantum
600 s) changes the rate a little and makes early feedback ten times slower. Ending kept packings on
idle GPUs (the change above; ` + "`unpack=false`" + ` is the policy before it) leaves the rate as it was and
shortens the time to finish, in the tail where GPUs fall idle.
`
