package experiment

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/sim"
)

// Grow-shrink (one of the Gandiva paper's mechanisms; it describes it and gives no
// figure). The workload, per seed, on 8 servers × 4 V100:
//
//   - at 0, eight elastic jobs (2 GPUs, may run on 2 to 4) and eight rigid
//     2-GPU jobs arrive, alternating, so that each server homes one of each
//     (best fit); the elastic jobs run for a day, the rigid ones 0.5–1.5 h;
//   - as the rigid jobs end the cluster is under-loaded and the elastic
//     jobs may grow onto their servers' idle GPUs (growShrinkLow);
//   - at growShrinkBurst eight rigid 2-GPU jobs arrive within 10 minutes
//     (0.5–1 h each): the load returns, and the GPUs must be given back;
//   - once they have ended the cluster is under-loaded again
//     (growShrinkAgain).
//
// The same jobs run under gandiva and gandiva:grow=false.
const (
	growShrinkServers = 8
	growShrinkBurst   = 3 * 3600.0
	growShrinkHorizon = 6 * 3600.0
)

var (
	growShrinkLow   = [2]float64{1.5 * 3600, growShrinkBurst}
	growShrinkAgain = [2]float64{4.5 * 3600, growShrinkHorizon}
)

// growShrinkJobs draws the workload of a seed.
func growShrinkJobs(seed uint64) []*cluster.JobSpec {
	rng := rand.New(rand.NewPCG(seed, 0x6e0))
	models := []string{"resnet50", "resnet18-b64", "transformer-b64", "lm-b20"}
	var jobs []*cluster.JobSpec
	add := func(name, user string, at, run float64, elastic bool) {
		m := models[rng.IntN(len(models))]
		it := refIterTime(m)
		j := &cluster.JobSpec{Name: name, User: user, GPUs: 2, Submit: math.Round(at), Model: m, IterTime: it,
			Iters: math.Round(run / it), MemGiB: 8}
		if elastic {
			j.MinGPUs, j.MaxGPUs = 2, 4
		}
		jobs = append(jobs, j)
	}
	for i := range growShrinkServers {
		add(fmt.Sprintf("elastic-%d", i), "elastic", 0, 24*3600, true)
		add(fmt.Sprintf("rigid-%d", i), "rigid", 0, 1800+3600*rng.Float64(), false)
	}
	for i := range growShrinkServers {
		add(fmt.Sprintf("burst-%d", i), "burst", growShrinkBurst+600*rng.Float64(), 1800+1800*rng.Float64(), false)
	}
	return jobs
}

// growShrinkRun is what one run shows.
type growShrinkRun struct {
	// held is the GPU-seconds held by any job within each window; width the
	// elastic jobs' extra GPU-seconds (beyond 2 GPUs each) within each.
	held, extra [2]float64
	// elasticWork is the elastic jobs' work over the run; burstQueue the
	// burst jobs' mean wait from submission to first start.
	elasticWork, burstQueue float64
	resizes                 int
}

func runGrowShrink(seed uint64, grow bool) (growShrinkRun, error) {
	b := cluster.NewBuilder("grow-32", nil)
	b.Add(cluster.ServerGroup{Type: "V100", Count: growShrinkServers, GPUs: 4, HostMemGiB: 256})
	c, err := b.Build()
	if err != nil {
		return growShrinkRun{}, err
	}
	p, err := newPolicy("gandiva", map[string]string{"grow": fmt.Sprint(grow)})
	if err != nil {
		return growShrinkRun{}, err
	}
	var out growShrinkRun
	windows := [2][2]float64{growShrinkLow, growShrinkAgain}
	last := 0.0
	var held, extra float64
	overlap := func(a, b float64, w [2]float64) float64 { return math.Max(0, math.Min(b, w[1])-math.Max(a, w[0])) }
	close := func(now float64) {
		for k, w := range windows {
			d := overlap(last, now, w)
			out.held[k] += d * held
			out.extra[k] += d * extra
		}
		last = now
	}
	obs := func(now float64, e *engine.Engine) {
		close(now)
		held, extra = 0, 0
		s := e.Snapshot()
		for _, g := range s.GPUs {
			if len(g.Jobs) > 0 {
				held++
			}
		}
		for _, j := range s.Active() {
			if j.Spec.Elastic() && j.State.Holding() {
				extra += float64(len(j.GPUs) - j.Spec.GPUs)
			}
		}
	}
	r, err := sim.Run(sim.Config{Cluster: c, Jobs: growShrinkJobs(seed), Policy: p, Perf: sim.DefaultPerf(), Seed: seed,
		Horizon: growShrinkHorizon, Observe: obs})
	if err != nil {
		return out, err
	}
	close(growShrinkHorizon)
	var q []float64
	for _, j := range r.Jobs {
		switch j.User {
		case "elastic":
			out.elasticWork += j.Work
		case "burst":
			if j.FirstStart >= 0 {
				q = append(q, j.FirstStart-j.Submit)
			} else {
				q = append(q, growShrinkHorizon-j.Submit)
			}
		}
	}
	out.burstQueue = mean(q)
	out.resizes = r.Stats.Resizes
	return out, nil
}

func growShrink(o Options, rep *Report, md *strings.Builder) error {
	seeds := o.Seeds()
	type pair struct{ grow, fixed growShrinkRun }
	res, err := parallelSeeds(seeds, func(seed uint64) (pair, error) {
		g, err := runGrowShrink(seed, true)
		if err != nil {
			return pair{}, err
		}
		f, err := runGrowShrink(seed, false)
		return pair{g, f}, err
	})
	if err != nil {
		return err
	}
	gpus := float64(growShrinkServers * 4)
	var taken, again, back, gain []float64
	for _, r := range res {
		// the share of the GPU-time left idle without growth that growth put to use
		for k, dst := range []*[]float64{&taken, &again} {
			w := [2][2]float64{growShrinkLow, growShrinkAgain}[k]
			idle := gpus*(w[1]-w[0]) - r.fixed.held[k]
			*dst = append(*dst, (r.grow.held[k]-r.fixed.held[k])/idle)
		}
		back = append(back, r.grow.burstQueue-r.fixed.burstQueue)
		gain = append(gain, r.grow.elasticWork/r.fixed.elasticWork)
	}
	const base = "gandiva:grow=false on the same jobs"
	const paper = "mechanism described, no figure"
	rep.Checks = append(rep.Checks,
		NewCheck("grow-shrink taken", "share of the idle GPU-time (under-loaded, 1.5–3 h) that growth puts to use", paper, AtLeastBand(0.5), seeds, taken).With(base, "our target"),
		NewCheck("grow-shrink given back", "burst jobs' mean wait, with growth − without (s)", paper, AtMostBand(60), seeds, back).With(base, "our target: at most one quantum"),
		NewCheck("grow-shrink taken again", "share of the idle GPU-time after the burst (4.5–6 h) that growth puts to use", paper, AtLeastBand(0.5), seeds, again).With(base, "our target"),
		NewCheck("grow-shrink elastic gain", "elastic jobs' work over 6 h, with growth ÷ without", paper, AtLeastBand(1.2), seeds, gain).With(base, "our target"),
	)
	var resizes []float64
	for _, r := range res {
		resizes = append(resizes, float64(r.grow.resizes))
	}
	fmt.Fprintf(md, `
## Grow-shrink: elastic jobs on an under-loaded cluster

The paper describes grow-shrink (jobs whose data-parallel width can change take idle
GPUs and give them back; no figure). The policy: an elastic job widens onto idle GPUs of its
server when nobody waits, keeps them only if its measured rate rose by at least half the width
increase, and shrinks back to its home width as soon as a job waiting for a turn is homed on its
server, in the same round. The simulator charges a resize as a restart (10 s of start-up) and
scales speed by (width ÷ requested)^0.9.

Workload per seed, on 8 servers × 4 V100: at 0, eight elastic jobs (2 GPUs, 2 to 4 allowed, a
day long) and eight rigid 2-GPU jobs (0.5–1.5 h) arrive alternating, so each server homes one of
each; as the rigid jobs end the cluster is under-loaded (1.5–3 h); at 3 h eight rigid 2-GPU jobs
arrive within 10 minutes (0.5–1 h each), and once they have ended the cluster is under-loaded
again (4.5–6 h). The same jobs run with and without growth (`+"`gandiva:grow=false`"+`).

Over %d seeds (%s), medians (p10–p90): growth puts %.0f%% (%.0f–%.0f%%) of the GPU-time that would
sit idle between 1.5 and 3 h to use, and %.0f%% (%.0f–%.0f%%) after the burst; the burst's jobs wait
%+.1f s (%+.1f to %+.1f s) longer than without growth, because the grown jobs shrink in the round the
burst arrives; the elastic jobs do %.2f× (%.2f–%.2f) the work. A run resizes about %.0f times.

By construction every GPU that falls idle is on a server that homes an elastic job, so growth can
take all of it: what the checks test is that the policy does, within a round, keeps the growth
because the measured rate rose by more than half the width increase (2 → 4 GPUs gives
2^0.9 = 1.87× in the model), gives it back in the round the load returns, and takes it again
once the load is gone. Elastic jobs whose servers hold no idle GPU cannot grow: the policy grows a
job only on its own servers, and its best-fit homes put elastic jobs where they fit, not where
there is room to grow.
`, len(seeds), describeSeeds(seeds), 100*median(taken), 100*quantile(taken, 0.1), 100*quantile(taken, 0.9),
		100*median(again), 100*quantile(again, 0.1), 100*quantile(again, 0.9), median(back), quantile(back, 0.1), quantile(back, 0.9),
		median(gain), quantile(gain, 0.1), quantile(gain, 0.9), median(resizes))
	return nil
}
