package experiment

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/fair"
	"github.com/gandiva-sched/gandiva/internal/sim"
)

// FairUser describes one user of a fair-share workload: its tickets, the
// gang sizes its jobs cycle through, and when it submits jobs.
type FairUser struct {
	Name    string
	Tickets float64
	Sizes   []int
	// Model is the job type of all its jobs ("" for a generic one).
	Model string
	// From and To bound its submissions: Batch jobs at From, then one job
	// every Every seconds (on average, Poisson) until To.
	From, To, Every float64
	Batch           int
	// MinRun and MaxRun bound a job's run time alone (uniform).
	MinRun, MaxRun float64
}

// FairWorkload is a fair-share experiment: users on a cluster, ticket
// changes while running, and how the shares are checked.
type FairWorkload struct {
	Cluster *cluster.Cluster
	Users   []FairUser
	// Changes are run-time ticket changes ("tickets/<user>" settings).
	Changes []TicketChange
	Horizon float64
	// Window is the length of the windows the shares are checked over
	// (default 3600 s); Step how far apart windows start (default 300 s).
	Window, Step float64
	Seed         uint64
	// Params are extra policy parameters.
	Params map[string]string
}

// TicketChange sets a user's tickets at a time.
type TicketChange struct {
	At      float64
	User    string
	Tickets float64
}

// Jobs generates the workload's jobs (seeded, deterministic).
func (w *FairWorkload) Jobs() []*cluster.JobSpec {
	rng := rand.New(rand.NewPCG(w.Seed, 0xfa1))
	var out []*cluster.JobSpec
	for _, u := range w.Users {
		n := 0
		add := func(at float64) {
			size := u.Sizes[n%len(u.Sizes)]
			run := u.MinRun + rng.Float64()*(u.MaxRun-u.MinRun)
			it := 0.5
			out = append(out, &cluster.JobSpec{Name: fmt.Sprintf("%s-%03d", u.Name, n), User: u.Name, GPUs: size,
				Submit: math.Round(at), Model: u.Model, IterTime: it, Iters: math.Round(run / it), MemGiB: 4})
			n++
		}
		for range u.Batch {
			add(u.From)
		}
		if u.Every > 0 {
			for t := u.From + rng.ExpFloat64()*u.Every; t < u.To; t += rng.ExpFloat64() * u.Every {
				add(t)
			}
		}
	}
	slices.SortStableFunc(out, cluster.BySubmit)
	return out
}

// FairShares is the outcome of a fair-share run.
type FairShares struct {
	Users []string
	// Windows holds, per window, each user's throughput share and its
	// entitled share (NaN where the user was not active all window).
	Windows []ShareWindow
	// MaxRelErr is the largest |share − entitled| ÷ entitled over every
	// window and every user active throughout it; MaxAbsErr the largest
	// |share − entitled|; Worst says where.
	MaxRelErr, MaxAbsErr float64
	Worst                string
	Checked              int // (window, user) pairs checked
	Result               *sim.Result
	Moves                int
}

// ShareWindow is one window's shares.
type ShareWindow struct {
	From, To        float64
	Share, Entitled map[string]float64
}

// RunFairShares simulates the workload under gandiva-fair and checks every
// window. A user is active at a time when it has a job submitted and not
// yet ended (waiting or running); it is checked over a window when it is
// active at every sample in the window. Its entitled share at a time is
// its water-filled ticket share: capacity divided in proportion to the
// active users' tickets, no user getting more than the GPUs its active jobs
// ask for, the excess going to the others in proportion to tickets. Its
// entitled share over a window is the mean over the samples in the window;
// its throughput share is its work in the window ÷ everyone's work.
func RunFairShares(w FairWorkload) (*FairShares, error) {
	if w.Window == 0 {
		w.Window = 3600
	}
	if w.Step == 0 {
		w.Step = 300
	}
	const every = 60.0
	params := map[string]string{}
	for k, v := range w.Params {
		params[k] = v
	}
	tk := ""
	for i, u := range w.Users {
		if i > 0 {
			tk += "/"
		}
		tk += fmt.Sprintf("%s:%g", u.Name, u.Tickets)
	}
	params["tickets"] = tk
	p, err := fair.New(policy.Config{Seed: w.Seed, Params: params})
	if err != nil {
		return nil, err
	}
	var settings []cluster.Event
	for _, c := range w.Changes {
		settings = append(settings, cluster.Event{Kind: cluster.EvSetting, Time: c.At, Key: "tickets/" + c.User, Value: fmt.Sprint(c.Tickets)})
	}
	jobs := w.Jobs()
	res, err := sim.Run(sim.Config{Cluster: w.Cluster, Jobs: jobs, Policy: p, Perf: sim.DefaultPerf(), Seed: w.Seed,
		Horizon: w.Horizon, SampleEvery: every, Settings: settings})
	if err != nil {
		return nil, err
	}
	out := &FairShares{Result: res, Moves: p.Moves()}
	for _, u := range w.Users {
		out.Users = append(out.Users, u.Name)
	}
	// entitled shares at every sample
	gpus := float64(w.Cluster.NumGPUs())
	ent := make([]map[string]float64, len(res.Samples))
	active := make([]map[string]bool, len(res.Samples))
	for i, s := range res.Samples {
		demand := map[string]float64{}
		for _, j := range res.Jobs {
			if j.Submit <= s.At && (j.End < 0 || j.End > s.At) {
				demand[j.User] += float64(j.GPUs)
			}
		}
		tickets := map[string]float64{}
		for _, u := range w.Users {
			tickets[u.Name] = u.Tickets
		}
		for _, c := range w.Changes {
			if c.At <= s.At {
				tickets[c.User] = c.Tickets
			}
		}
		ent[i] = entitled(out.Users, tickets, demand, gpus)
		active[i] = map[string]bool{}
		for u, d := range demand {
			active[i][u] = d > 0
		}
	}
	out.MaxRelErr, out.MaxAbsErr = 0, 0
	steps := int(math.Round(w.Step / every))
	span := int(math.Round(w.Window / every))
	for a := 0; a+span < len(res.Samples); a += steps {
		b := a + span
		win := ShareWindow{From: res.Samples[a].At, To: res.Samples[b].At, Share: map[string]float64{}, Entitled: map[string]float64{}}
		total := 0.0
		for _, u := range out.Users {
			total += res.Samples[b].Work[u] - res.Samples[a].Work[u]
		}
		for _, u := range out.Users {
			win.Share[u] = math.NaN()
			win.Entitled[u] = math.NaN()
			whole := true
			e := 0.0
			// the interval (a, b]: samples a+1..b close its minutes
			for k := a + 1; k <= b; k++ {
				if !active[k][u] || !active[k-1][u] {
					whole = false
				}
				e += (ent[k][u] + ent[k-1][u]) / 2
			}
			if !whole || total <= 0 {
				continue
			}
			e /= float64(b - a)
			sh := (res.Samples[b].Work[u] - res.Samples[a].Work[u]) / total
			win.Share[u], win.Entitled[u] = sh, e
			out.Checked++
			if e > 0 {
				if r := math.Abs(sh-e) / e; r > out.MaxRelErr {
					out.MaxRelErr = r
					out.Worst = fmt.Sprintf("user %s in [%.0f s, %.0f s]: share %.4f, entitled %.4f", u, win.From, win.To, sh, e)
				}
			}
			out.MaxAbsErr = math.Max(out.MaxAbsErr, math.Abs(sh-e))
		}
		out.Windows = append(out.Windows, win)
	}
	return out, nil
}

// entitled is each user's water-filled ticket share of capacity given its
// demand (GPUs), as a fraction of what all users together are entitled to.
func entitled(users []string, tickets, demand map[string]float64, capacity float64) map[string]float64 {
	alloc := map[string]float64{}
	left := capacity
	open := []string{}
	for _, u := range users {
		if demand[u] > 0 {
			open = append(open, u)
		}
	}
	for len(open) > 0 && left > 1e-12 {
		tsum := 0.0
		for _, u := range open {
			tsum += tickets[u]
		}
		if tsum <= 0 {
			break
		}
		level := left / tsum
		var next []string
		capped := false
		for _, u := range open {
			if demand[u]-alloc[u] <= level*tickets[u] {
				capped = true
			}
		}
		if !capped {
			for _, u := range open {
				alloc[u] += level * tickets[u]
			}
			break
		}
		for _, u := range open {
			if need := demand[u] - alloc[u]; need <= level*tickets[u] {
				alloc[u] += need
				left -= need
			} else {
				next = append(next, u)
			}
		}
		open = next
	}
	sum := 0.0
	for _, a := range alloc {
		sum += a
	}
	out := map[string]float64{}
	for _, u := range users {
		if sum > 0 {
			out[u] = alloc[u] / sum
		}
	}
	return out
}
