package experiment

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/model"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/fair"
	"github.com/gandiva-sched/gandiva/internal/report"
)

// fairRepro is `gandiva reproduce fair`: Gandiva_fair's figures (seed 003,
// REFERENCES.md) in the simulator.
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

// FairHeteroUsers are the heterogeneous experiment's users: equal tickets,
// 40 jobs each (gang sizes 1, 1, 2, 4, repeating: 80 GPUs of demand each on
// a 164-GPU cluster), one job type each, chosen so that their K80→V100
// speedups span the range like the paper's four users: VAE 1.25 and
// SuperResolution 1.87 (seed 003's table), Transformer (batch 32) 3.03
// (Gavel), DCGAN 6.42 (seed 003's table).
func FairHeteroUsers() []HeteroUser {
	sizes := []int{1, 1, 2, 4}
	return []HeteroUser{
		{Name: "user1", Model: "vae", Jobs: 40, Sizes: sizes},
		{Name: "user2", Model: "superresolution", Jobs: 40, Sizes: sizes},
		{Name: "user3", Model: "transformer-b32", Jobs: 40, Sizes: sizes},
		{Name: "user4", Model: "dcgan", Jobs: 40, Sizes: sizes},
	}
}

func reproduceFair(o Options) (*Report, error) {
	rep := &Report{Name: "fair", Files: map[string][]byte{}}
	var md strings.Builder
	md.WriteString(fairIntro)
	steps := []struct {
		name string
		run  func(Options, *Report, *strings.Builder) error
	}{
		{"stride tables", fairTables},
		{"homogeneous fair share", fairHomogeneous},
		{"heterogeneity and trading", fairHetero},
	}
	for _, st := range steps {
		if o.Progress != nil {
			o.Progress("fair: " + st.name)
		}
		if err := st.run(o, rep, &md); err != nil {
			return nil, fmt.Errorf("%s: %w", st.name, err)
		}
	}
	md.WriteString("\n## All checks\n\n" + ChecksTable(rep.Checks))
	rep.Markdown = md.String()
	return rep, nil
}

const fairIntro = `# Gandiva_fair: the paper's figures, reproduced in simulation

Gandiva_fair (Chaudhary et al., EuroSys'20; seed 003 and REFERENCES.md) gives every active user a
share of the cluster's GPU throughput in proportion to its tickets, with gang-aware split-stride
scheduling, handles GPU generations by profiling each job type, and lets users trade fast GPUs for
slow ones in a second-price auction. The policy is ` + "`gandiva-fair`" + ` (internal/policy/fair, whose
package comment is the full contract). This page is written by
` + "`gandiva reproduce fair --out docs/results`" + `; CI runs ` + "`--quick`" + ` (shorter runs, the same checks).
Every run uses the simulator's performance model ` + "`gandiva-perf/v1`" + ` (docs/SIMULATOR.md): suspend
and resume at a mini-batch boundary 0.15 s each, start-up 10 s, migration = checkpoint + start-up.
The policy sees only profile samples and attained service, never the model.
`

// fairTables runs the seed's two stride tables through the engine (one
// quantum per round, the user-level feedback off: the seed's scheduler).
func fairTables(o Options, rep *Report, md *strings.Builder) error {
	md.WriteString("\n## 1. The seed's stride tables\n\n")
	md.WriteString("Both tables of seed 003, run through the engine: one engine round per 60 s quantum on one server,\n" +
		"jobs submitted in the order that breaks the table's ties (ties go to the job submitted first),\n" +
		"`gain=0 holes=pass` (the user-level feedback off, holes filled in pass order: the seed's scheduler\n" +
		"exactly). The same tables are golden tests: `internal/policy/fair/testdata/*.txt` through the engine\n" +
		"and `stride_test.go` on the core.\n\n")
	md.WriteString("| table | seed | ours |\n|---|---|---|\n")
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
		rep.Checks = append(rep.Checks, Check{Name: "fair/" + strings.SplitN(tc.name, ":", 2)[0] + " table", Metric: "schedule equals the seed's (1 = yes)",
			Paper: tc.want, Target: "= 1", Ours: v, Pass: pass, Note: "ours: " + ours})
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
	w := FairHomogeneous(o.Quick, o.Seed)
	res, err := RunFairShares(w)
	if err != nil {
		return err
	}
	md.WriteString("\n## 2. Fair share on a homogeneous cluster\n\n")
	fmt.Fprintf(md, "Cluster: %s. Users (tickets; gang sizes; submissions):\n\n", w.Cluster.Summary())
	md.WriteString("| user | tickets | gang sizes | first batch | then one job every | submits until |\n|---|---|---|---|---|---|\n")
	for _, u := range w.Users {
		fmt.Fprintf(md, "| %s | %g | %v | %d jobs at %.0f h | %.0f min (Poisson) | %.0f h |\n", u.Name, u.Tickets, u.Sizes, u.Batch, u.From/3600, u.Every/60, u.To/3600)
	}
	for _, c := range w.Changes {
		fmt.Fprintf(md, "\nAt %.0f h %s's tickets change to %g (an `EvSetting` \"tickets/%s\", as the live server sends).\n", c.At/3600, c.User, c.Tickets, c.User)
	}
	fmt.Fprintf(md, "Each job runs 1–3 h alone (uniform); the run lasts %.0f h (`--quick`: 5 h, full: 9 h).\n\n", w.Horizon/3600)
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
	fmt.Fprintf(md, "Result: over %d (window, user) pairs the largest relative deviation |share − entitled| ÷ entitled is **%.1f%%** "+
		"(%s); the largest absolute deviation is %.2f percentage points. %d of %d pairs are within 5%%. "+
		"The policy moved %d started jobs between servers.\n\n",
		res.Checked, 100*res.MaxRelErr, res.Worst, 100*res.MaxAbsErr, within(res, 0.05), res.Checked, res.Moves)
	rep.Checks = append(rep.Checks, AtMost("fair/homogeneous shares", "max over 1-h windows and active users of abs(throughput share − ticket share) ÷ ticket share",
		"shares follow tickets (figure, no number)", 0.05, res.MaxRelErr, res.Worst))
	// plot: shares and entitlements per window
	var series []report.Series
	for _, u := range res.Users {
		s := report.Series{Name: u}
		e := report.Series{Name: u + " entitled"}
		for _, win := range res.Windows {
			x := (win.From + win.To) / 2 / 3600
			if !math.IsNaN(win.Share[u]) {
				s.X, s.Y = append(s.X, x), append(s.Y, win.Share[u])
				e.X, e.Y = append(e.X, x), append(e.Y, win.Entitled[u])
			}
		}
		series = append(series, s, e)
	}
	svg, err := report.LinePlot("Throughput share per 1-hour window (gandiva-fair)", "window centre (h)", "share of the cluster's work", series)
	if err != nil {
		return err
	}
	rep.Files["fair-shares.svg"] = svg
	md.WriteString("![throughput shares over time](fair-shares.svg)\n\n")
	md.WriteString("Each user's throughput share (solid) and entitled share (its pair) per window. Shares move when users\n" +
		"arrive (cy at 1 h, dee at 2 h), when bob's tickets change at 4 h, and when users' jobs run out.\n\n")
	// ablations
	md.WriteString("What each part contributes (same workload; the largest relative deviation, the GPU utilisation):\n\n")
	md.WriteString("| variant | max deviation | within 5% | GPU utilisation |\n|---|---|---|---|\n")
	one := cluster.NewBuilder("one-64", nil)
	one.Add(cluster.ServerGroup{Type: "V100", Count: 1, GPUs: 64, HostMemGiB: 2048})
	oneServer, err := one.Build()
	if err != nil {
		return err
	}
	seedWalk := map[string]string{"gain": "0", "holes": "pass"}
	oldDefault := map[string]string{"holes": "pass"}
	var old *FairShares
	for _, v := range []struct {
		name   string
		params map[string]string
		c      *cluster.Cluster
		res    *FairShares
	}{
		{"gandiva-fair (default: holes=user, gain=4, memory=900, pack=false)", nil, nil, res},
		{"the previous default: holes filled in pass order (holes=pass), gain=4", oldDefault, nil, nil},
		{"holes filled at the user level, without the user-level feedback (gain=0)", map[string]string{"gain": "0"}, nil, nil},
		{"the seed's split-stride alone (gain=0, holes=pass)", seedWalk, nil, nil},
		{"with packing of gangs at quantum boundaries (pack=true)", map[string]string{"pack": "true"}, nil, nil},
		{"one 64-GPU server (no split), gain=0, holes=pass: the seed's stride alone", seedWalk, oneServer, nil},
		{"one 64-GPU server (no split), default", nil, oneServer, nil},
	} {
		r := v.res
		if r == nil {
			wv := w
			wv.Params = v.params
			if v.c != nil {
				wv.Cluster = v.c
			}
			if r, err = RunFairShares(wv); err != nil {
				return err
			}
		}
		if v.c == nil && maps.Equal(v.params, oldDefault) {
			old = r
		}
		fmt.Fprintf(md, "| %s | %.1f%% | %d of %d | %.3f |\n", v.name, 100*r.MaxRelErr, within(r, 0.05), r.Checked, utilisation(r))
	}
	bias, oldBias := meanBias(res), meanBias(old)
	fmt.Fprintf(md, `
**Holes, and who gets them.** Each server runs its own stride scheduler, and a server's jobs get their
allocations only as well as their gangs pack. When the next gang in pass order cannot fit what is left
of an 8-GPU server, the seed's walk hands the hole to the next smaller jobs in pass order, whoever they
belong to; users with small gangs collect most holes, and a user's stride tickets do not stop it from
filling a hole. With holes filled in pass order (the previous default) dee, with 1- and 2-GPU jobs, runs
%+.1f%% above its share on average over its windows and is the user above its share in the worst one.
Now, from the first gang that does not fit, the server's remaining GPUs go one job at a time to the
fitting job of the user that stands lowest: GPU-seconds received ÷ allocated over the feedback's
15-minute memory, relative to all users', plus what holes have granted it since (booked at once, so the
next hole, on this server or the next, sees the grant). The hole-filler is charged its pass as any chosen
job is. dee's average is now %+.1f%%. The user-level feedback stays: it compares, per user and GPU type,
the GPU-seconds each user was allocated with those it received (attained service, which a live system
observes too), forgets both with a 15-minute time constant, and scales the user's stride tickets by
1 + 4 × its relative shortfall, within [½, 2]; the hole rule leaves it less to correct.

**What is left.** The rule chooses only among users whose gangs fit. Late in a run ann's and cy's
remaining jobs are mostly 4-GPU gangs (a user's jobs share its allocation equally, so its 1-GPU jobs
progress four times as fast as its 4-GPU ones and finish first) and bob's 2-GPU jobs all run, so the
1- and 2-GPU holes beside the 4-GPU gangs can only go to dee: no ticket scaling prevents that, and the
policy never idles GPUs to hold a user back. That is where most remaining deviations are (dee above, cy
below, from the fourth hour on), and why one 64-GPU server (no split: holes only at its end) does better
over many seeds (full run: the table below). Packing the gangs better (`+"`pack=true`"+`: when the walk
would leave GPUs idle, take the fullest set that still includes the job furthest behind) raises
utilisation but biases which gang sizes run, and the feedback cannot undo that, so it is off by default.
A newcomer joins its server's scheduler half a stride past the virtual time (the average position of a
client with its stride): joining at the virtual time itself favours users whose jobs come and go often
(TestJoinPassUnbiased in internal/policy/fair measures it on the stride alone).
`, 100*oldBias["dee"], 100*bias["dee"])
	if !o.Quick {
		if err := fairSeeds(w, oneServer, md); err != nil {
			return err
		}
	}
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

// fairSeeds runs the homogeneous workload with other seeds (other arrival
// times and run lengths): how much of the result is the seed's luck.
func fairSeeds(w FairWorkload, oneServer *cluster.Cluster, md *strings.Builder) error {
	const seeds = 10
	md.WriteString(fmt.Sprintf("\nThe same workload drawn with seeds 1–%d (other arrival times and run lengths; the check above is seed %d):\n\n", seeds, w.Seed))
	md.WriteString("| variant | worst window, per seed | seeds within 5% | pairs outside 5% |\n|---|---|---|---|\n")
	for _, v := range []struct {
		name   string
		params map[string]string
		c      *cluster.Cluster
	}{
		{"default (holes=user)", nil, nil},
		{"previous default (holes=pass)", map[string]string{"holes": "pass"}, nil},
		{"one 64-GPU server, default", nil, oneServer},
	} {
		var worst []string
		ok, out, checked := 0, 0, 0
		for seed := uint64(1); seed <= seeds; seed++ {
			wv := FairHomogeneous(false, seed)
			wv.Params = v.params
			if v.c != nil {
				wv.Cluster = v.c
			}
			r, err := RunFairShares(wv)
			if err != nil {
				return err
			}
			worst = append(worst, fmt.Sprintf("%.1f", 100*r.MaxRelErr))
			if r.MaxRelErr <= 0.05 {
				ok++
			}
			out += r.Checked - within(r, 0.05)
			checked += r.Checked
		}
		fmt.Fprintf(md, "| %s | %s %% | %d of %d | %d of %d |\n", v.name, strings.Join(worst, ", "), ok, seeds, out, checked)
	}
	md.WriteString(`
The check holds for seed 1 with a margin of less than a point. Over other seeds the hole rule removes
about a fifth of the pairs outside 5% (a third over seeds 1–30: 89 against 141), and the unsplit cluster
shows that some seeds miss 5% even without holes (there the worst windows are mostly cy's, whose few
4-GPU jobs come and go).

**Tried and not kept** (development runs of the full workload, seeds 1–10: worst window over the ten
seeds, pairs outside 5% of about 3,450; the default's figures are 10.0% and 40). *Making room* for the
gang of a user below its share by setting back jobs already chosen of users above it: 9.5%, 21, but
worse over seeds 1–30 (100 pairs outside against 89) and on the quick runs: it overrides the stride
whenever standings differ a little. *Integral feedback* (the boost scaled from the boost in force
rather than from 1, so no steady-state error): 13.5%, 44; it oscillates. *Charging hole grants
against the filler's stride tickets*: over-corrects (dee 3–6% below its share on average), since a
hole-filler already pays its pass. *Keeping a moved job's whole lead* (now capped at one stride): 10.2%,
21, but no gain over seeds 1–30. *Leaving a hole idle when only users above their share fit it*: 5.4%,
1, but utilisation falls from 0.96 to 0.93: the policy stays work-conserving.
`)
	return nil
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

func fairHetero(o Options, rep *Report, md *strings.Builder) error {
	c, err := cluster.Load("fair-hetero")
	if err != nil {
		return err
	}
	from, to := 3600.0, 4*3600.0
	if o.Quick {
		to = 2.5 * 3600
	}
	users := FairHeteroUsers()
	setup := func(us []HeteroUser, trade bool) HeteroSetup {
		return HeteroSetup{Cluster: c, Users: us, Trade: trade, From: from, To: to, Seed: o.Seed}
	}
	base, err := RunHetero(setup(users, false))
	if err != nil {
		return err
	}
	traded, err := RunHetero(setup(users, true))
	if err != nil {
		return err
	}
	cat := model.Default()
	md.WriteString("\n## 3. Heterogeneous cluster and automated trading\n\n")
	fmt.Fprintf(md, "Cluster: `fair-hetero`, %s. Four users with one ticket each, 40 jobs each (gang sizes 1, 1, 2, 4\n"+
		"repeating: 80 GPUs of demand per user), every job of a user of one type. Throughput is measured from\n"+
		"%.0f h to %.0f h (the first hour covers profiling and the moves that follow the trades; `--quick`: to 2.5 h).\n\n", c.Summary(), from/3600, to/3600)
	md.WriteString("| user | job type | K80→P100 | K80→V100 | rate without trading | with trading | change |\n|---|---|---|---|---|---|---|\n")
	gain := map[string]float64{}
	var labels []string
	var b0, b1 []float64
	for _, u := range users {
		m := cat.Get(u.Model)
		gain[u.Name] = traded.Rate[u.Name]/base.Rate[u.Name] - 1
		fmt.Fprintf(md, "| %s | %s | %.2f | %.2f | %.2f | %.2f | %+.1f%% |\n", u.Name, u.Model, m.IterTime["K80"]/m.IterTime["P100"], m.IterTime["K80"]/m.IterTime["V100"],
			base.Rate[u.Name], traded.Rate[u.Name], 100*gain[u.Name])
		labels = append(labels, u.Name)
		b0 = append(b0, base.Rate[u.Name])
		b1 = append(b1, traded.Rate[u.Name])
	}
	md.WriteString("\nRates are training work per second in reference-GPU-seconds (the user's mini-batches per second × its\n" +
		"V100 seconds per mini-batch × gang size): for one user, proportional to mini-batches per second.\n\n")
	md.WriteString("Trades decided by the auctions (bids are the speedups the policy measured from profile samples):\n\n")
	md.WriteString("| fast type | buyer (bid) | seller (bid) | price (slow GPUs per fast GPU) | fast GPUs traded |\n|---|---|---|---|---|\n")
	for _, t := range traded.Trades {
		fmt.Fprintf(md, "| %s for %s | %s (%.2f) | %s (%.2f) | %.2f | %.2f |\n", t.Fast, t.Slow, t.Buyer, t.BuyerBid, t.Seller, t.SellerBid, t.Price, t.Amount)
	}
	md.WriteString("\nEntitlements after trading (GPUs of each type; without trading every user holds 3 V100, 6 P100, 32 K80):\n\n")
	md.WriteString("| user | V100 | P100 | K80 |\n|---|---|---|---|\n")
	for _, u := range users {
		e := traded.Entitled[u.Name]
		fmt.Fprintf(md, "| %s | %.2f | %.2f | %.2f |\n", u.Name, e["V100"], e["P100"], e["K80"])
	}
	svg, err := report.BarPlot("Throughput per user on 12 V100 + 24 P100 + 128 K80", "work per second (reference-GPU-s/s)", labels,
		[]report.Bar{{Name: "without trading", Values: b0}, {Name: "with trading", Values: b1}})
	if err != nil {
		return err
	}
	rep.Files["fair-trading.svg"] = svg
	md.WriteString("\n![throughput with and without trading](fair-trading.svg)\n\n")
	md.WriteString(fmt.Sprintf("What to expect from the rule, computed from the trades above and the measured speedups (each user's\n"+
		"holdings valued in K80-equivalents of its own job type, assuming every share is used): user1 %+.1f%%, user4 %+.1f%%,\n"+
		"users 2 and 3 unchanged. The simulated gains are lower by the start-up and checkpoint costs of the jobs\n"+
		"the trades move and by time-slicing overheads.\n", 100*predicted(base, traded, users, cat, "user1"), 100*predicted(base, traded, users, cat, "user4")))
	for _, u := range []string{"user1", "user4"} {
		rep.Checks = append(rep.Checks, AtLeast("fair/trading "+u, "throughput with trading ÷ without − 1", "≈ +0.30", 0.20, gain[u],
			fmt.Sprintf("rates %.2f → %.2f", base.Rate[u], traded.Rate[u])))
	}
	for _, u := range []string{"user2", "user3"} {
		rep.Checks = append(rep.Checks, Within("fair/trading "+u, "throughput with trading ÷ without − 1", "≈ 0 (about the same)", 0, 0, gain[u],
			fmt.Sprintf("rates %.2f → %.2f", base.Rate[u], traded.Rate[u])))
		rep.Checks[len(rep.Checks)-1].Target = "within ±0.05"
		rep.Checks[len(rep.Checks)-1].Pass = math.Abs(gain[u]) <= 0.05
	}
	// gaming: each user in turn slows its K80 jobs
	const slow = 2.5
	md.WriteString(fmt.Sprintf("\n### A user who games the auction does not gain\n\nEach user in turn makes its jobs run %.1f× slower on K80s\n"+
		"(say, by sleeping in its training loop there), which inflates the speedup the policy measures and bids for it.\n"+
		"With a second price nobody sets the price it trades at, so the best a user can do is bid its true speedup:\n\n", slow))
	md.WriteString("| user slowing its K80 jobs | its throughput, honest | gaming | change | trades (buyer ← seller @ price) |\n|---|---|---|---|---|\n")
	for i := range users {
		us := FairHeteroUsers()
		us[i].SlowK80 = slow
		g, err := RunHetero(setup(us, true))
		if err != nil {
			return err
		}
		n := us[i].Name
		ch := g.Rate[n]/traded.Rate[n] - 1
		var ts []string
		for _, t := range g.Trades {
			ts = append(ts, fmt.Sprintf("%s: %s ← %s @ %.2f", t.Fast, t.Buyer, t.Seller, t.Price))
		}
		fmt.Fprintf(md, "| %s | %.2f | %.2f | %+.1f%% | %s |\n", n, traded.Rate[n], g.Rate[n], 100*ch, strings.Join(ts, "; "))
		rep.Checks = append(rep.Checks, AtMost(fmt.Sprintf("fair/gaming %s slows K80 %.1fx", n, slow), "its throughput gaming ÷ honest − 1",
			"no gain (second price is incentive-compatible)", 0, ch, ""))
	}
	md.WriteString(`
Every gamer loses. user3 (and user2 for the P100s), slowed, outbids user4, wins the fast GPUs and pays
user4's bid for them, more than they are worth to it, while its remaining K80 jobs run slower. user1
is no longer the lowest bidder and loses the trade it had. user4 keeps its trades at the same prices
(nobody sets their own price) and only wastes K80 time.

**Choice of job types.** The users' job types were picked so that their speedups spread over the range
like the paper's users (lowest, two in between, highest); the paper does not say which types it used.
With the second-highest bid as the price, the buyer's gain depends on how far the third user's bid is
below its own. The sensitivity to that choice, from the same rule (full runs only):
`)
	if !o.Quick {
		md.WriteString("\n| user3's job type | its K80→V100 | price of a V100 | user1 | user4 |\n|---|---|---|---|---|\n")
		for _, m := range []string{"transformer-b32", "lm-b20", "gru", "resnet50"} {
			us := FairHeteroUsers()
			us[2].Model = m
			b, err := RunHetero(setup(us, false))
			if err != nil {
				return err
			}
			t, err := RunHetero(setup(us, true))
			if err != nil {
				return err
			}
			price := math.NaN()
			if len(t.Trades) > 0 {
				price = t.Trades[0].Price
			}
			mm := cat.Get(m)
			fmt.Fprintf(md, "| %s | %.2f | %.2f | %+.1f%% | %+.1f%% |\n", m, mm.IterTime["K80"]/mm.IterTime["V100"], price,
				100*(t.Rate["user1"]/b.Rate["user1"]-1), 100*(t.Rate["user4"]/b.Rate["user4"]-1))
		}
		md.WriteString("\nThe seller gains more at the higher prices; the buyer gains less as user3's bids approach its own in both\n" +
			"auctions (ResNet-50's 5.14 and 3.34 against DCGAN's 6.42 and 4.31), and then falls below the 20% target.\n")
	} else {
		md.WriteString("\n(Run without `--quick` for the table.)\n")
	}
	return nil
}

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
