package experiment

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/model"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/fair"
	"github.com/gandiva-sched/gandiva/internal/report"
)

// fairRepro is `gandiva reproduce fair`: Gandiva_fair's figures
// (Chaudhary et al., EuroSys'20; docs/PAPERS.md) in the simulator.
var fairRepro = Reproduction{
	Name: "fair",
	Doc:  "Gandiva_fair (EuroSys'20): stride tables, fair share over time, heterogeneity and trading",
	Run:  reproduceFair,
}

// FairHomogeneous is the homogeneous fair-share workload: 64 V100s in
// eight 8-GPU servers; four users with tickets 4, 2, 1, 1 whose 1-, 2- and
// 4-GPU jobs (1–3 h each alone) arrive in a batch and then one every 10–20
// minutes; users arrive at 0, 0, 1 h and 2 h and stop submitting at 5, 8,
// 6 and 8 h; bob's tickets go from 2 to 3 at 4 h (a run-time setting).
// quick shortens the run to 5 h.
func FairHomogeneous(quick bool, seed uint64) FairWorkload {
	b := cluster.NewBuilder("homogeneous-64", nil)
	b.Add(cluster.ServerGroup{Type: "V100", Count: 8, GPUs: 8, HostMemGiB: 256})
	c, err := b.Build()
	if err != nil {
		panic(err) // a constant cluster: cannot fail
	}
	const h = 3600.0
	w := FairWorkload{Cluster: c, Horizon: 9 * h, Seed: seed,
		Users: []FairUser{
			{Name: "ann", Tickets: 4, Sizes: []int{1, 2, 1, 4}, From: 0, To: 5 * h, Every: 600, Batch: 30, MinRun: h, MaxRun: 3 * h},
			{Name: "bob", Tickets: 2, Sizes: []int{2}, From: 0, To: 8 * h, Every: 900, Batch: 16, MinRun: h, MaxRun: 3 * h},
			{Name: "cy", Tickets: 1, Sizes: []int{4, 1}, From: 1 * h, To: 6 * h, Every: 1200, Batch: 10, MinRun: h, MaxRun: 3 * h},
			{Name: "dee", Tickets: 1, Sizes: []int{1, 1, 2}, From: 2 * h, To: 8 * h, Every: 900, Batch: 12, MinRun: h, MaxRun: 3 * h},
		},
		Changes: []TicketChange{{At: 4 * h, User: "bob", Tickets: 3}},
	}
	if quick {
		w.Horizon = 5 * h
	}
	return w
}

// FairSeedTypes are the seven job types of Gandiva_fair's table (mini-batch
// times on K80 and speedups on P40, P100 and V100), in order of their
// K80→V100 speedup: VAE 1.25, SuperResolution 1.87, GRU 4.81, LSTM 4.81,
// ResNet-50 5.14, ResNeXt-50 6.33, DCGAN 6.42. The trading experiment's
// four users take every combination of four of them (35).
var FairSeedTypes = []string{"vae", "superresolution", "gru", "lstm", "resnet50", "resnext50", "dcgan"}

// FairCombinations lists the combinations of four of the paper's job types, each
// in FairSeedTypes order (user1 has the lowest K80→V100 speedup, user4 the
// highest), in lexicographic order of their indices.
func FairCombinations() [][4]string {
	var out [][4]string
	n := len(FairSeedTypes)
	for a := 0; a < n; a++ {
		for b := a + 1; b < n; b++ {
			for c := b + 1; c < n; c++ {
				for d := c + 1; d < n; d++ {
					out = append(out, [4]string{FairSeedTypes[a], FairSeedTypes[b], FairSeedTypes[c], FairSeedTypes[d]})
				}
			}
		}
	}
	return out
}

// FairHeteroUsers are the heterogeneous experiment's users for a
// combination of job types and a seed: equal tickets, 40 jobs each (the
// paper: "many 1, 2, or 4 GPU jobs"), every job of a user of its type, gang
// sizes drawn by the seed from 1, 1, 2, 4 (80 GPUs of demand per user on
// average, on a 164-GPU cluster).
func FairHeteroUsers(types [4]string, seed uint64) []HeteroUser {
	rng := rand.New(rand.NewPCG(seed, 0x4e7))
	var us []HeteroUser
	for i, m := range types {
		sizes := make([]int, 40)
		for k := range sizes {
			sizes[k] = []int{1, 1, 2, 4}[rng.IntN(4)]
		}
		us = append(us, HeteroUser{Name: fmt.Sprintf("user%d", i+1), Model: m, Jobs: 40, Sizes: sizes})
	}
	return us
}

func reproduceFair(o Options) (*Report, error) {
	rep := &Report{Name: "fair", Quick: o.Quick, Seeds: o.Seeds(), Files: map[string][]byte{}}
	var md strings.Builder
	fmt.Fprintf(&md, fairIntro, describeSeeds(o.Seeds()), o.Seed, quickNote(o))
	steps := []struct {
		name string
		run  func(Options, *Report, *strings.Builder) error
	}{
		{"stride tables", fairTables},
		{"homogeneous fair share", fairHomogeneous},
		{"heterogeneity and trading", fairHetero},
		{"gaming the auction", fairGaming},
	}
	for _, st := range steps {
		o.progress("fair: %s", st.name)
		if err := st.run(o, rep, &md); err != nil {
			return nil, fmt.Errorf("%s: %w", st.name, err)
		}
	}
	md.WriteString("\n## All checks\n\n" + ChecksTable(rep.Checks))
	md.WriteString("\n### Every miss, with its reason\n\n" + MissesSection(rep.Checks))
	rep.Markdown = md.String()
	return rep, nil
}

const fairIntro = `# Gandiva_fair: the paper's figures, reproduced in simulation

Gandiva_fair (Chaudhary et al., EuroSys'20; docs/PAPERS.md) gives every active user a
share of the cluster's GPU throughput in proportion to its tickets, with gang-aware split-stride
scheduling, handles GPU generations by profiling each job type, and lets users trade fast GPUs for
slow ones in a second-price auction. The policy is ` + "`gandiva-fair`" + ` (internal/policy/fair, whose
package comment is the full contract). Every run uses the simulator's performance model
` + "`gandiva-perf/v1`" + ` (docs/SIMULATOR.md): suspend and resume at a mini-batch boundary 0.15 s each,
start-up 10 s, migration = checkpoint + start-up. The policy sees only profile samples and
attained service, never the model.

**Checks and seeds.** Every seeded check is a statistic over the evaluation seeds %s
(` + "`--seed %d`" + `; ` + "`--seed N`" + ` runs N×1000+1 … N×1000+20): the median, its 10th–90th percentiles
and the pass rate (the share of seeds inside the band). A check passes when the median lies in the
band and at least half the seeds do; otherwise it is a **miss**, with its reason. The policy's
parameters, the workloads and the bands were fixed on the development seeds 1–20 (some
sensitivity studies below name seeds up to 30); nothing was tuned on evaluation seeds.
%s
Commands: ` + "`gandiva reproduce fair --out docs/results`" + ` writes this page; ` + "`--format json`" + ` prints
every check; CI runs ` + "`gandiva reproduce fair --quick --quiet`" + ` and fails when an outcome regresses
from internal/experiment/outcomes.json.
`

// fairTables runs the paper's two stride tables through the engine (one
// quantum per round, the user-level feedback off: the paper's scheduler).
func fairTables(o Options, rep *Report, md *strings.Builder) error {
	md.WriteString("\n## 1. The paper's stride tables\n\n")
	md.WriteString("Both tables of the paper, run through the engine: one engine round per 60 s quantum on one server,\n" +
		"jobs submitted in the order that breaks the table's ties (ties go to the job submitted first),\n" +
		"`gain=0 holes=pass` (the user-level feedback off, holes filled in pass order: the paper's scheduler\n" +
		"exactly). The same tables are golden tests: `internal/policy/fair/testdata/*.txt` through the engine\n" +
		"and `stride_test.go` on the core.\n\n")
	md.WriteString("| table | paper | ours |\n|---|---|---|\n")
	for _, tc := range []struct {
		name, want string
		gpus       int
		params     map[string]string
		jobs       []cluster.JobSpec
	}{
		{"stride: A 4 tickets, B 1, one GPU", "B A A A A B A A A", 1, map[string]string{"tickets": "A:4/B:1", "gain": "0", "holes": "pass"},
			[]cluster.JobSpec{{Name: "B", User: "B", GPUs: 1}, {Name: "A", User: "A", GPUs: 1}}},
		{"gang-aware stride: A, B 1 GPU; C, D 2; E 4; 4 GPUs", "E; ABC; ABD; ABC; ABD; E; ABC; ABD; ABC", 4, map[string]string{"gain": "0", "holes": "pass"},
			[]cluster.JobSpec{{Name: "E", User: "e", GPUs: 4}, {Name: "A", User: "a", GPUs: 1}, {Name: "B", User: "b", GPUs: 1},
				{Name: "C", User: "c", GPUs: 2}, {Name: "D", User: "d", GPUs: 2}}},
	} {
		got, err := engineSchedule(tc.gpus, tc.params, tc.jobs, 9)
		if err != nil {
			return err
		}
		sep := " "
		if tc.gpus > 1 {
			sep = "; "
		}
		ours := strings.Join(got, sep)
		pass := ours == tc.want
		v := 0.0
		if pass {
			v = 1
		}
		rep.Checks = append(rep.Checks, NewCheck("fair/"+strings.SplitN(tc.name, ":", 2)[0]+" table", "schedule equals the paper's (1 = yes)",
			tc.want, Between(1, 1), nil, []float64{v}).With("", "deterministic: --seed does not apply; ours: "+ours))
		fmt.Fprintf(md, "| %s | %s | %s |\n", tc.name, tc.want, ours)
	}
	return nil
}

// engineSchedule runs jobs on one server of gpus V100s under gandiva-fair,
// one round per quantum, and returns who held GPUs in each quantum.
func engineSchedule(gpus int, params map[string]string, specs []cluster.JobSpec, quanta int) ([]string, error) {
	b := cluster.NewBuilder("one", nil)
	b.Add(cluster.ServerGroup{Type: "V100", Count: 1, GPUs: gpus, HostMemGiB: 256})
	c, err := b.Build()
	if err != nil {
		return nil, err
	}
	p, err := fair.New(policy.Config{Params: params})
	if err != nil {
		return nil, err
	}
	e := engine.New(c, p, nil, engine.Options{})
	for i := range specs {
		s := specs[i]
		s.Iters, s.IterTime = 1e6, 1
		if _, err := e.Submit(0, &s); err != nil {
			return nil, err
		}
	}
	var out []string
	for q := 0; q < quanta; q++ {
		res, err := e.Round(float64(60 * q))
		if err != nil {
			return nil, err
		}
		if len(res.Rejected) > 0 {
			return nil, fmt.Errorf("quantum %d: action rejected: %s", q, res.Rejected[0].Reason)
		}
		var names []string
		for _, j := range e.Jobs() {
			if j.State.Holding() {
				names = append(names, j.Spec.Name)
			}
		}
		slices.Sort(names)
		out = append(out, strings.Join(names, ""))
	}
	return out, nil
}

func fairHomogeneous(o Options, rep *Report, md *strings.Builder) error {
	seeds := o.Seeds()
	res, err := parallelSeeds(seeds, func(seed uint64) (*FairShares, error) { return RunFairShares(FairHomogeneous(o.Quick, seed)) })
	if err != nil {
		return err
	}
	w := FairHomogeneous(o.Quick, seeds[0])
	md.WriteString("\n## 2. Fair share on a homogeneous cluster\n\n")
	fmt.Fprintf(md, "Cluster: %s. Users (tickets; gang sizes; submissions):\n\n", w.Cluster.Summary())
	md.WriteString("| user | tickets | gang sizes | first batch | then one job every | submits until |\n|---|---|---|---|---|---|\n")
	for _, u := range w.Users {
		fmt.Fprintf(md, "| %s | %g | %v | %d jobs at %.0f h | %.0f min (Poisson) | %.0f h |\n", u.Name, u.Tickets, u.Sizes, u.Batch, u.From/3600, u.Every/60, u.To/3600)
	}
	for _, c := range w.Changes {
		fmt.Fprintf(md, "\nAt %.0f h %s's tickets change to %g (an `EvSetting` \"tickets/%s\", as the live server sends).\n", c.At/3600, c.User, c.Tickets, c.User)
	}
	fmt.Fprintf(md, "Each job runs 1–3 h alone (uniform); the run lasts %.0f h (`--quick`: 5 h, full: 9 h). The seed draws the\n"+
		"arrival times and run lengths.\n\n", w.Horizon/3600)
	md.WriteString(`**Definitions.** A user is *active* at a time when it has a job submitted and not yet ended (waiting
or running). Its *entitled share* at that time is its water-filled ticket share: the GPUs are divided
among active users in proportion to tickets, no user getting more than the GPUs its active jobs ask
for, the excess going to the others in proportion to tickets (with enough demand this is
tickets ÷ Σ tickets of active users). A window is 1 hour, windows start every 5 minutes; a user is
checked in a window when it is active throughout it; its *throughput share* is its training work
in the window (reference-GPU-seconds, from the simulator's ground truth) ÷ all users' work, and is
compared with its entitled share averaged over the window. The window length is a field of
` + "`experiment.FairWorkload`" + ` (Window, Step).

`)
	var worst, inside []float64
	md.WriteString("| seed | worst window: relative deviation | where | pairs within 5% | moves |\n|---|---|---|---|---|\n")
	for i, r := range res {
		worst = append(worst, r.MaxRelErr)
		inside = append(inside, float64(within(r, 0.05))/float64(r.Checked))
		fmt.Fprintf(md, "| %d | %.1f%% | %s | %d of %d | %d |\n", seeds[i], 100*r.MaxRelErr, r.Worst, within(r, 0.05), r.Checked, r.Moves)
	}
	const paper = "shares follow tickets (figure, no number)"
	wc := NewCheck("fair/homogeneous worst window", "max over 1-h windows and active users of abs(throughput share − ticket share) ÷ ticket share",
		paper, AtMostBand(0.05), seeds, worst).With("each user's water-filled ticket share (the paper's definition of fair)", "")
	if !wc.Passed() {
		wc.Reason = fairWorstReason
	}
	ic := NewCheck("fair/homogeneous windows within 5%", "share of (window, user) pairs whose throughput share is within 5% of the ticket share",
		paper, AtLeastBand(0.95), seeds, inside).With("each user's water-filled ticket share", "")
	if !ic.Passed() {
		ic.Reason = "More than one window in twenty strays by more than 5%: see the worst-window reason."
	}
	rep.Checks = append(rep.Checks, wc, ic)
	fmt.Fprintf(md, `
The worst window over a run is an extreme value of about 330 (window, user) pairs, and one unlucky
window decides it; over the %d seeds its median is %.1f%% (p10–p90 %.1f–%.1f%%), within 5%% on %.0f%% of
the seeds. The review measured 5.4, 10.0, 4.0 and 5.5%% on seeds 2–5 (development seeds), which we
reproduce. So the check on the worst window is kept, and a second check was added, on the
development seeds, before any evaluation seed was run: the share of all (window, user) pairs within
5%% of the ticket share must be at least 95%%; it measures how well shares follow tickets rather than
the single worst window. Median %.1f%% (p10–p90 %.1f–%.1f%%).

`, len(seeds), 100*median(worst), 100*quantile(worst, 0.1), 100*quantile(worst, 0.9), 100*wc.PassRate,
		100*median(inside), 100*quantile(inside, 0.1), 100*quantile(inside, 0.9))
	// plot: shares and entitlements per window, first seed
	first := res[0]
	var series []report.Series
	for _, u := range first.Users {
		sr := report.Series{Name: u}
		e := report.Series{Name: u + " entitled"}
		for _, win := range first.Windows {
			x := (win.From + win.To) / 2 / 3600
			if !math.IsNaN(win.Share[u]) {
				sr.X, sr.Y = append(sr.X, x), append(sr.Y, win.Share[u])
				e.X, e.Y = append(e.X, x), append(e.Y, win.Entitled[u])
			}
		}
		series = append(series, sr, e)
	}
	svg, err := report.LinePlot(fmt.Sprintf("Throughput share per 1-hour window (gandiva-fair, seed %d)", seeds[0]), "window centre (h)", "share of the cluster's work", series)
	if err != nil {
		return err
	}
	rep.Files["fair-shares.svg"] = svg
	md.WriteString("![throughput shares over time](fair-shares.svg)\n\n")
	fmt.Fprintf(md, "Each user's throughput share (solid) and entitled share (its pair) per window, seed %d. Shares move when users\n"+
		"arrive (cy at 1 h, dee at 2 h), when bob's tickets change at 4 h, and when users' jobs run out.\n\n", seeds[0])
	if o.Quick {
		md.WriteString("(The table of what each part contributes is in the full run.)\n")
		return nil
	}
	return fairAblations(o, res, md)
}

// fairWorstReason is written beside the worst-window check when it misses.
const fairWorstReason = "Each server runs its own stride scheduler, and a server's jobs get their allocations only as well " +
	"as their gangs pack: late in a run the users with 4-GPU gangs (ann, cy) cannot use the 1- and 2-GPU holes beside them, " +
	"which go to dee, and the policy never idles GPUs to hold a user back. One window in a run that strays by more than 5% " +
	"is enough to miss; one 64-GPU server (no split) misses less often (see the table of variants)."

// fairAblations is the table of what each part of the policy contributes,
// as medians over the seeds.
func fairAblations(o Options, def []*FairShares, md *strings.Builder) error {
	seeds := o.Seeds()
	one := cluster.NewBuilder("one-64", nil)
	one.Add(cluster.ServerGroup{Type: "V100", Count: 1, GPUs: 64, HostMemGiB: 2048})
	oneServer, err := one.Build()
	if err != nil {
		return err
	}
	seedWalk := map[string]string{"gain": "0", "holes": "pass"}
	md.WriteString("What each part contributes (same workloads and seeds; medians over the seeds):\n\n")
	md.WriteString("| variant | worst window: median | seeds within 5% | pairs within 5%: median | GPU utilisation |\n|---|---|---|---|---|\n")
	var bias, oldBias []float64
	for _, v := range []struct {
		name   string
		params map[string]string
		c      *cluster.Cluster
	}{
		{"gandiva-fair (default: holes=user, gain=4, memory=900, pack=false)", nil, nil},
		{"the previous default: holes filled in pass order (holes=pass), gain=4", map[string]string{"holes": "pass"}, nil},
		{"holes filled at the user level, without the user-level feedback (gain=0)", map[string]string{"gain": "0"}, nil},
		{"the paper's split-stride alone (gain=0, holes=pass)", seedWalk, nil},
		{"with packing of gangs at quantum boundaries (pack=true)", map[string]string{"pack": "true"}, nil},
		{"one 64-GPU server (no split), gain=0, holes=pass: the paper's stride alone", seedWalk, oneServer},
		{"one 64-GPU server (no split), default", nil, oneServer},
	} {
		rs := def
		if v.params != nil || v.c != nil {
			o.progress("fair: variant %s", v.name)
			rs, err = parallelSeeds(seeds, func(seed uint64) (*FairShares, error) {
				w := FairHomogeneous(false, seed)
				w.Params = v.params
				if v.c != nil {
					w.Cluster = v.c
				}
				return RunFairShares(w)
			})
			if err != nil {
				return err
			}
		}
		var worst, in, util []float64
		ok := 0
		for _, r := range rs {
			worst, in, util = append(worst, r.MaxRelErr), append(in, float64(within(r, 0.05))/float64(r.Checked)), append(util, utilisation(r))
			if r.MaxRelErr <= 0.05 {
				ok++
			}
		}
		fmt.Fprintf(md, "| %s | %.1f%% | %d of %d | %.1f%% | %.3f |\n", v.name, 100*median(worst), ok, len(rs), 100*median(in), median(util))
		if v.c == nil && v.params == nil {
			for _, r := range rs {
				bias = append(bias, meanBias(r)["dee"])
			}
		}
		if v.c == nil && v.params != nil && v.params["holes"] == "pass" && v.params["gain"] == "" {
			for _, r := range rs {
				oldBias = append(oldBias, meanBias(r)["dee"])
			}
		}
	}
	fmt.Fprintf(md, `
**Holes, and who gets them.** Each server runs its own stride scheduler, and a server's jobs get their
allocations only as well as their gangs pack. When the next gang in pass order cannot fit what is left
of an 8-GPU server, the paper's walk hands the hole to the next smaller jobs in pass order, whoever they
belong to; users with small gangs collect most holes, and a user's stride tickets do not stop it from
filling a hole. With holes filled in pass order (the previous default) dee, with 1- and 2-GPU jobs, runs
%+.1f%% above its share on average over its windows (median over the seeds). Now, from the first gang
that does not fit, the server's remaining GPUs go one job at a time to the fitting job of the user that
stands lowest: GPU-seconds received ÷ allocated over the feedback's 15-minute memory, relative to all
users', plus what holes have granted it since. dee's average is now %+.1f%%. The user-level feedback
compares, per user and GPU type, the GPU-seconds each user was allocated with those it received
(attained service, which a live system observes too), forgets both with a 15-minute time constant, and
scales the user's stride tickets by 1 + 4 × its relative shortfall, within [½, 2].

**What is left.** The rule chooses only among users whose gangs fit. Late in a run ann's and cy's
remaining jobs are mostly 4-GPU gangs and bob's 2-GPU jobs all run, so the 1- and 2-GPU holes beside
the 4-GPU gangs can only go to dee: no ticket scaling prevents that, and the policy never idles GPUs to
hold a user back. That is where most remaining deviations are, and why one 64-GPU server (no split:
holes only at its end) does better. Packing the gangs better (`+"`pack=true`"+`) raises utilisation but
biases which gang sizes run, so it is off by default.

**Tried and not kept** (development runs, seeds 1–10 and 1–30, before this page used evaluation
seeds). *Making room* for the gang of a user below its share by setting back jobs already chosen of
users above it: worse over seeds 1–30 (100 pairs outside 5%% against 89). *Integral feedback*: it
oscillates. *Charging hole grants against the filler's stride tickets*: over-corrects. *Keeping a moved
job's whole lead*: no gain over seeds 1–30. *Leaving a hole idle when only users above their share fit
it*: utilisation falls from 0.96 to 0.93; the policy stays work-conserving.
`, 100*median(oldBias), 100*median(bias))
	return nil
}

// meanBias is each user's mean over its checked windows of (share −
// entitled) ÷ entitled.
func meanBias(r *FairShares) map[string]float64 {
	sum, n := map[string]float64{}, map[string]float64{}
	for _, w := range r.Windows {
		for u, s := range w.Share {
			if e := w.Entitled[u]; !math.IsNaN(s) && e > 0 {
				sum[u] += (s - e) / e
				n[u]++
			}
		}
	}
	for u := range sum {
		sum[u] /= n[u]
	}
	return sum
}

func within(r *FairShares, tol float64) int {
	n := 0
	for _, w := range r.Windows {
		for u, s := range w.Share {
			if e := w.Entitled[u]; !math.IsNaN(s) && e > 0 && math.Abs(s-e) <= tol*e {
				n++
			}
		}
	}
	return n
}

func utilisation(r *FairShares) float64 {
	busy := 0.0
	for _, j := range r.Result.Jobs {
		busy += j.Busy
	}
	span := r.Result.End - r.Result.Start
	if span <= 0 {
		return 0
	}
	return busy / (float64(r.Result.GPUs) * span)
}

// heteroWindow is the interval whose throughput the trading experiment
// measures: from 1 h (profiling and the moves after the trades are over) to
// 4 h, or 2.5 h with --quick.
func heteroWindow(quick bool) (from, to float64) {
	if quick {
		return 3600, 2.5 * 3600
	}
	return 3600, 4 * 3600
}

// heteroCombos is the combinations a seed runs: all 35, or with quick a
// seeded 7 of them.
func heteroCombos(quick bool, seed uint64) [][4]string {
	all := FairCombinations()
	if !quick {
		return all
	}
	rng := rand.New(rand.NewPCG(seed, 0xc0b))
	var out [][4]string
	for _, k := range rng.Perm(len(all))[:7] {
		out = append(out, all[k])
	}
	return out
}

func fairHetero(o Options, rep *Report, md *strings.Builder) error {
	c, err := cluster.Load("fair-hetero")
	if err != nil {
		return err
	}
	from, to := heteroWindow(o.Quick)
	seeds := o.Seeds()
	type task struct {
		seed  uint64
		types [4]string
	}
	var tasks []task
	for _, seed := range seeds {
		for _, ty := range heteroCombos(o.Quick, seed) {
			tasks = append(tasks, task{seed, ty})
		}
	}
	type result struct {
		gain   [4]float64
		trades []fair.Trade
	}
	o.progress("fair: trading, %d runs", 2*len(tasks))
	res, err := parallelMap(len(tasks), func(i int) (result, error) {
		t := tasks[i]
		us := FairHeteroUsers(t.types, t.seed)
		setup := func(trade bool) HeteroSetup {
			return HeteroSetup{Cluster: c, Users: us, Trade: trade, From: from, To: to, Seed: t.seed}
		}
		base, err := RunHetero(setup(false))
		if err != nil {
			return result{}, err
		}
		traded, err := RunHetero(setup(true))
		if err != nil {
			return result{}, err
		}
		var r result
		for k, u := range us {
			r.gain[k] = traded.Rate[u.Name]/base.Rate[u.Name] - 1
		}
		r.trades = traded.Trades
		return r, nil
	})
	if err != nil {
		return err
	}
	// per seed: the median over its combinations; per combination: over seeds
	perSeed := map[uint64][][4]float64{}
	perCombo := map[[4]string][][4]float64{}
	var all [4][]float64
	tradesOf := map[[4]string][]fair.Trade{}
	for i, t := range tasks {
		perSeed[t.seed] = append(perSeed[t.seed], res[i].gain)
		perCombo[t.types] = append(perCombo[t.types], res[i].gain)
		if _, ok := tradesOf[t.types]; !ok {
			tradesOf[t.types] = res[i].trades
		}
		for k := range 4 {
			all[k] = append(all[k], res[i].gain[k])
		}
	}
	role := func(k int) []float64 {
		var x []float64
		for _, seed := range seeds {
			var g []float64
			for _, v := range perSeed[seed] {
				g = append(g, v[k])
			}
			x = append(x, median(g))
		}
		return x
	}
	cat := model.Default()
	sp := func(m, t string) float64 { mm := cat.Get(m); return mm.IterTime["K80"] / mm.IterTime[t] }
	md.WriteString("\n## 3. Heterogeneous cluster and automated trading\n\n")
	fmt.Fprintf(md, `The paper: on 12 V100, 24 P100 and 128 K80, four users "with many 1, 2, or 4 GPU jobs with different
speedups"; with trading, users 1 and 4 gain about 30%%, users 2 and 3 stay about the same. The
paper does not say which job types its users ran. **The workloads come from the paper's own table:
every combination of four of its seven job types** (VAE, SuperResolution, GRU, LSTM, ResNet-50,
ResNeXt-50, DCGAN: 35 combinations), user1 taking the lowest K80→V100 speedup and user4 the highest.
(The previous version of this page used Transformer for user 3, which is not in the paper's table.)
Cluster: `+"`fair-hetero`"+`, %s. Four users with one ticket each, 40 jobs each, every job of a user of
its type, gang sizes drawn by the seed from 1, 1, 2, 4. Throughput is measured from %.0f h to %.1f h
(the first hour covers profiling and the moves that follow the trades). Bids are the speedups the
policy measured from profile samples; the price is the second-highest bid.

`, c.Summary(), from/3600, to/3600)
	nCombo := len(FairCombinations())
	if o.Quick {
		nCombo = 7
	}
	fmt.Fprintf(md, "Each seed runs %d combinations (`--quick`: a seeded 7 of the 35), with and without trading; a check's figure for a\n"+
		"seed is the median over its combinations of that user's gain. Over all %d (combination, seed) runs, the share\n"+
		"in the band: user1 %.0f%%, user2 %.0f%%, user3 %.0f%%, user4 %.0f%%.\n\n", nCombo, len(tasks),
		100*inBand(all[0], AroundPaper(0.30)), 100*inBand(all[1], Between(-0.05, 0.05)), 100*inBand(all[2], Between(-0.05, 0.05)), 100*inBand(all[3], AroundPaper(0.30)))
	names := [4]string{"user1 (lowest speedup)", "user2", "user3", "user4 (highest speedup)"}
	const base = "the same users without trading (trade=false)"
	for k := range 4 {
		band, paper := Between(-0.05, 0.05), "≈ 0 (about the same)"
		if k == 0 || k == 3 {
			band, paper = AroundPaper(0.30), "≈ +0.30"
		}
		ch := NewCheck(fmt.Sprintf("fair/trading user%d", k+1), names[k]+": throughput with trading ÷ without − 1, median over the combinations of the paper's job types",
			paper, band, seeds, role(k)).With(base, "")
		if !ch.Passed() {
			ch.Reason = tradingReasons[k]
		}
		rep.Checks = append(rep.Checks, ch)
	}
	md.WriteString("Per combination (medians over the seeds; trades of the first seed that ran it):\n\n")
	md.WriteString("| user1 | user2 | user3 | user4 | K80→V100 speedups | user1 | user2 | user3 | user4 | trades (buyer ← seller @ price) |\n|---|---|---|---|---|---|---|---|---|---|\n")
	var labels []string
	var g1, g4 []float64
	for _, ty := range FairCombinations() {
		gs, ok := perCombo[ty]
		if !ok {
			continue
		}
		var med [4]float64
		for k := range 4 {
			var x []float64
			for _, g := range gs {
				x = append(x, g[k])
			}
			med[k] = median(x)
		}
		var ts []string
		for _, t := range tradesOf[ty] {
			ts = append(ts, fmt.Sprintf("%s: %s ← %s @ %.2f", t.Fast, t.Buyer, t.Seller, t.Price))
		}
		fmt.Fprintf(md, "| %s | %s | %s | %s | %.2f / %.2f / %.2f / %.2f | %+.1f%% | %+.1f%% | %+.1f%% | %+.1f%% | %s |\n", ty[0], ty[1], ty[2], ty[3],
			sp(ty[0], "V100"), sp(ty[1], "V100"), sp(ty[2], "V100"), sp(ty[3], "V100"), 100*med[0], 100*med[1], 100*med[2], 100*med[3], strings.Join(ts, "; "))
		labels = append(labels, strings.Join([]string{short(ty[0]), short(ty[1]), short(ty[2]), short(ty[3])}, "/"))
		g1, g4 = append(g1, 100*med[0]), append(g4, 100*med[3])
	}
	svg, err := report.BarPlot("Gain from trading per combination of the paper's job types", "throughput change (%)", labels,
		[]report.Bar{{Name: "user1 (lowest speedup)", Values: g1}, {Name: "user4 (highest speedup)", Values: g4}})
	if err != nil {
		return err
	}
	rep.Files["fair-trading.svg"] = svg
	md.WriteString("\n![gain from trading per combination](fair-trading.svg)\n\n")
	md.WriteString(tradingWhy)
	return nil
}

func short(m string) string {
	return map[string]string{"vae": "VAE", "superresolution": "SR", "gru": "GRU", "lstm": "LSTM", "resnet50": "R50", "resnext50": "RX50", "dcgan": "DCGAN"}[m]
}

// inBand is the share of x inside b.
func inBand(x []float64, b Band) float64 {
	n := 0
	for _, v := range x {
		if b.Contains(v) {
			n++
		}
	}
	return float64(n) / float64(len(x))
}

var tradingReasons = [4]string{
	"The seller's gain is the price (the second-highest bid) over its own speedup, on the fast GPUs it sells: where the " +
		"lowest speedup is close to the others' (SuperResolution 1.87 against GRU's 4.81, say) or the price setter bids low, " +
		"the seller gains less than the paper's users did.",
	"user2 moves when the auction changes its neighbours' shares (more or fewer moves on its servers).",
	"user3 sets the price and does not trade; its rate moves with the moves the trades cause.",
	"The buyer pays the second-highest bid, so it gains only as far as that bid is below its own on both fast types. " +
		"In the paper's table the high speedups are close together (GRU and LSTM 4.81, ResNet-50 5.14, ResNeXt-50 6.33, DCGAN " +
		"6.42), so in most combinations user3's bid is near user4's and the buyer's gain is small; the paper's users, whose " +
		"types it does not give, must have had a wider spread.",
}

const tradingWhy = `Why the gains depend on the combination: with the second-highest bid as the price, the buyer
(user4) gains only as far as the price setter's (user3's) bids are below its own, on both fast
types, and the seller (user1) gains as far as the price is above its own speedup. The paper's table
has its high speedups close together (4.81, 4.81, 5.14, 6.33, 6.42), so in most combinations the
buyer's surplus is small; a combination whose user3 is far below user4 (VAE / SuperResolution /
GRU / DCGAN, say) gives both traders the paper's ~30%.
`

// gamingFactors are the misreports tried: a user's jobs report K80
// mini-batch times this many times their true ones (bids scaled alike).
var gamingFactors = []float64{0.5, 0.8, 1.25, 2}

// gamingTolerance is the gain that counts as none: 2% of the value of the
// user's entitlements. (The value is exact: an auction outcome that does not
// change leaves it unchanged to the last digit.)
const gamingTolerance = 0.02

// gamingWindow is the run of the gaming experiment: the trades are decided
// within the first hour (once every user's jobs were profiled), and the
// throughput reported beside the check is measured from 1 h to 2 h.
const gamingTo = 2 * 3600.0

// entitlementValue is what a user's entitlements are worth to it: the GPUs
// of each type it is entitled to, each valued at its jobs' true speed there
// relative to a K80 (K80-equivalents of its own job type).
func entitlementValue(ent map[string]float64, m string) float64 {
	mm := model.Default().Get(m)
	v := 0.0
	for _, t := range slices.Sorted(maps.Keys(ent)) { // a fixed order: the same sum to the last bit
		v += ent[t] * mm.IterTime["K80"] / mm.IterTime[t]
	}
	return v
}

// gamingSeed is one seed's best gains from misreporting, per side.
type gamingSeed struct {
	types         [4]string
	buyer, seller float64 // the best value gain of users 3–4, and of users 1–2
	best          string  // who, how, and the throughput change it brought
}

// gamingOutcome runs the gaming experiment on one combination and seed under
// a price rule: honest, then each user in turn misreporting by each factor;
// a user's gain is the value of its entitlements after the trades, at its
// true speeds, over the honest run's.
func gamingOutcome(c *cluster.Cluster, types [4]string, seed uint64, price string) (gamingSeed, error) {
	out := gamingSeed{types: types, buyer: math.Inf(-1), seller: math.Inf(-1)}
	setup := func(us []HeteroUser) HeteroSetup {
		return HeteroSetup{Cluster: c, Users: us, Trade: true, From: 3600, To: gamingTo, Seed: seed, Price: price}
	}
	honest, err := RunHetero(setup(FairHeteroUsers(types, seed)))
	if err != nil {
		return out, err
	}
	top := math.Inf(-1)
	for i := range 4 {
		for _, f := range gamingFactors {
			us := FairHeteroUsers(types, seed)
			us[i].Misreport = f
			g, err := RunHetero(setup(us))
			if err != nil {
				return out, err
			}
			n, m := us[i].Name, us[i].Model
			gain := entitlementValue(g.Entitled[n], m)/entitlementValue(honest.Entitled[n], m) - 1
			side := &out.seller
			if i >= 2 {
				side = &out.buyer
			}
			*side = max(*side, gain)
			if gain > top {
				top = gain
				out.best = fmt.Sprintf("%s (%s) reporting ×%g: value %+.1f%%, throughput %+.1f%%", n, m, f, 100*gain, 100*(g.Rate[n]/honest.Rate[n]-1))
			}
		}
	}
	return out, nil
}

// gamingRun is one seed of the gaming experiment: a combination of
// the paper's job types drawn by the seed.
func gamingRun(c *cluster.Cluster, seed uint64, price string) (gamingSeed, error) {
	combos := FairCombinations()
	rng := rand.New(rand.NewPCG(seed, 0x9a3e))
	return gamingOutcome(c, combos[rng.IntN(len(combos))], seed, price)
}

// fairGaming: does any user gain by misreporting its speedup?
func fairGaming(o Options, rep *Report, md *strings.Builder) error {
	c, err := cluster.Load("fair-hetero")
	if err != nil {
		return err
	}
	seeds := o.Seeds()
	rules := []string{"second"}
	if !o.Quick {
		rules = append(rules, "first", "midpoint")
	}
	md.WriteString(`
### Can a user gain by gaming the auction?

The paper: "user gaming, for example, user artificially slows down their K80 jobs to win V100s …
use speedup as bids in a Vickrey auction, p as second-price is incentive-compatible". A bid is the
speedup the policy measures from the user's profile samples, which its in-job client reports, so a
user can misreport at no cost to its training: each user in turn makes its jobs report K80
mini-batch times ×0.5, ×0.8, ×1.25 or ×2 their true ones (every bid it makes scales alike; above 1
it claims a higher speedup, below 1 a lower one). Its gain is the value of its entitlements after
the trades, each GPU valued at its jobs' *true* speed there, over the honest run's: what the
auction gives it, without the noise of the schedule around it (its throughput change is shown
beside). The previous version of this page slowed the jobs for real and compared throughput,
which costs the gamer more than any price rule gives back, so its check passed under any rule
(the review showed it passing under a midpoint price).

Per seed, a combination of the paper's job types drawn by the seed; the figure is the best gain any user
reaches by any misreport, on each side of the auction: the **buyer side** (users 3 and 4, with the
highest speedups: the buyer and the price setter) and the **seller side** (users 1 and 2). A gain
below 2% counts as none. Incentive-compatibility is a claim about every workload, and the value is
exact (an auction outcome that does not change leaves it unchanged to the last digit), so these two
checks pass only if *no* seed shows a gain, not most of them. To show that the check can fail, the same runs are repeated (full run
only) with two price rules that are not incentive-compatible, ` + "`gandiva-fair:price=first`" + ` (the
buyer pays its own bid) and ` + "`price=midpoint`" + ` (halfway between the traders' bids);
internal/experiment/fair_test.go checks that the check rejects both.

`)
	md.WriteString("| price rule | buyer side: best gain, median (p10–p90) | seeds with no gain | seller side: best gain, median (p10–p90) | seeds with no gain |\n|---|---|---|---|---|\n")
	const second = "the policy's second-price auction with honest bids (the paper's mechanism)"
	var perSeed []gamingSeed
	for _, rule := range rules {
		o.progress("fair: gaming, price=%s", rule)
		res, err := parallelSeeds(seeds, func(seed uint64) (gamingSeed, error) { return gamingRun(c, seed, rule) })
		if err != nil {
			return err
		}
		var buy, sell []float64
		for _, r := range res {
			buy, sell = append(buy, r.buyer), append(sell, r.seller)
		}
		bc, sc := gamingChecks(seeds, buy, sell)
		fmt.Fprintf(md, "| %s | %+.1f%% (%+.1f to %+.1f) | %.0f%% | %+.1f%% (%+.1f to %+.1f) | %.0f%% |\n", rule, 100*median(buy), 100*quantile(buy, 0.1),
			100*quantile(buy, 0.9), 100*bc.PassRate, 100*median(sell), 100*quantile(sell, 0.1), 100*quantile(sell, 0.9), 100*sc.PassRate)
		if rule != "second" {
			continue
		}
		perSeed = res
		bc, sc = bc.With(second, ""), sc.With(second, "")
		if !bc.Passed() {
			bc.Reason = "A buyer-side user gained by misreporting under the second price."
		}
		if !sc.Passed() {
			sc.Reason = gamingSellerReason
		}
		rep.Checks = append(rep.Checks, bc, sc)
	}
	md.WriteString("\nPer seed under the second price (the best misreport of any user):\n\n| seed | types | buyer side | seller side | best misreport |\n|---|---|---|---|---|\n")
	for i, r := range perSeed {
		fmt.Fprintf(md, "| %d | %s | %+.1f%% | %+.1f%% | %s |\n", seeds[i], strings.Join(r.types[:], ", "), 100*r.buyer, 100*r.seller, r.best)
	}
	top, at := math.Inf(-1), -1
	for i, r := range perSeed {
		if r.buyer > top {
			top, at = r.buyer, i
		}
	}
	if at >= 0 && top > 0 {
		fmt.Fprintf(md, "\nThe largest buyer-side gain under the second price is %+.1f%% (seed %d). Users are ranked by their\n"+
			"K80→V100 speedups, but a user among the top two there can be among the lowest bidders for P100s, and a\n"+
			"deflated bid can make it the P100 seller: the seller-side exploit below, on one type.\n", 100*top, seeds[at])
	}
	md.WriteString("\n" + gamingWhy)
	return nil
}

// gamingChecks builds the two gaming checks from each seed's best gains.
// Incentive-compatibility is a claim about every workload, and the value
// measured is exact (no schedule noise), so a check passes only when no
// seed shows a gain.
func gamingChecks(seeds []uint64, buyer, seller []float64) (Check, Check) {
	const paper = "no gain (second price is incentive-compatible)"
	return NewCheck("fair/gaming buyer side", "best gain of users 3–4 (buyer, price setter) from misreporting their speedup (value of entitlements)", paper,
			AtMostBand(gamingTolerance), seeds, buyer).RequireAll(),
		NewCheck("fair/gaming seller side", "best gain of users 1–2 from misreporting their speedup (value of entitlements)", paper,
			AtMostBand(gamingTolerance), seeds, seller).RequireAll()
}

const gamingSellerReason = "The second price protects the buyer side only. The price is the second-highest bid and the " +
	"seller is the lowest bidder, so any user whose speedup is below the price gains by being the one who sells at it: " +
	"user2 reports a speedup below user1's, becomes the seller, and trades fast GPUs worth its true speedup for the price " +
	"in slow ones. Vickrey's argument covers the side that buys; a double auction that is incentive-compatible on both " +
	"sides pays the seller a price set by another seller's bid (McAfee's trade reduction, for one), which the paper does " +
	"not describe; we reproduce the paper's rule and report the miss."

const gamingWhy = `What the table shows: under the second price no buyer-side user gains (the buyer cannot lower the
price it pays, and the price setter who outbids the buyer pays more than the GPUs are worth to it),
which is the paper's claim; under the first price the buyer gains by shading its bid towards the
price setter's, and under the midpoint price the price setter gains by overbidding into the buyer's
place (and the seller by overbidding, which raises the price it receives). On the seller side every
rule can be gamed by a user that underbids the lowest bidder and sells at a price above its true
speedup. The throughput change of a misreport usually follows its value; where it does not (a
shading buyer whose K80 jobs then wait for moves, say), the entitlement is what the auction gave.
`

// predicted is a user's throughput change implied by its entitlements
// with and without trading, each GPU type valued at the user's measured
// speed there (K80 = 1).
func predicted(base, r *HeteroResult, users []HeteroUser, cat *model.Catalog, name string) float64 {
	for _, u := range users {
		if u.Name != name {
			continue
		}
		m := cat.Get(u.Model)
		val := func(e map[string]float64) float64 {
			v := 0.0
			for t, g := range e {
				v += g * m.IterTime["K80"] / m.IterTime[t]
			}
			return v
		}
		return val(r.Entitled[name])/val(base.Entitled[name]) - 1
	}
	return math.NaN()
}
