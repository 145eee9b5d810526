package experiment

import (
	"fmt"
	"math"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/model"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/fair"
	"github.com/gandiva-sched/gandiva/internal/sim"
)

// HeteroUser is one user of the heterogeneous-cluster experiment: every job
// of it has the same type (the paper's assumption), gang sizes cycling
// through Sizes.
type HeteroUser struct {
	Name  string
	Model string
	Jobs  int
	Sizes []int
	// SlowK80, when above 1, makes the user's jobs run that many times
	// slower on K80s than their type does (the user games the auction by
	// inflating its measured speedup): they run a variant of the model
	// whose K80 mini-batch time is multiplied by SlowK80.
	SlowK80 float64
}

// HeteroSetup is one run of the heterogeneous experiment.
type HeteroSetup struct {
	Cluster *cluster.Cluster
	Users   []HeteroUser
	Trade   bool
	// From and To bound the interval whose throughput is measured; the run
	// stops at To. Jobs never finish before To.
	From, To float64
	Seed     uint64
}

// HeteroResult is each user's throughput and the trades in effect at the end.
type HeteroResult struct {
	// Rate is each user's work per second over [From, To] in
	// reference-GPU-seconds per second (the user's mini-batches per second
	// times its reference seconds per mini-batch and gang size): true
	// useful training, whatever the user's jobs report.
	Rate   map[string]float64
	Trades []fair.Trade
	// Entitled is each user's entitlement per GPU type after trades, at the end.
	Entitled map[string]map[string]float64
	Moves    int
	Result   *sim.Result
}

// slowName is the model variant of a gaming user.
func slowName(m string, f float64) string { return fmt.Sprintf("%s-k80x%g", m, f) }

// RunHetero simulates the setup under gandiva-fair.
func RunHetero(h HeteroSetup) (*HeteroResult, error) {
	cat := model.Default()
	var jobs []*cluster.JobSpec
	var extra []*model.Model
	for _, u := range h.Users {
		m := cat.Get(u.Model)
		if m == nil || m.IterTime["V100"] <= 0 || m.IterTime["K80"] <= 0 {
			return nil, fmt.Errorf("hetero: model %q has no K80 and V100 measurements", u.Model)
		}
		name := m.Name
		if u.SlowK80 > 1 {
			v := *m
			v.Name = slowName(m.Name, u.SlowK80)
			v.IterTime = map[string]float64{}
			for k, x := range m.IterTime {
				v.IterTime[k] = x
			}
			v.IterTime["K80"] *= u.SlowK80
			v.Source = fmt.Sprintf("%s with K80 mini-batches %g× slower (a user gaming the trading auction)", m.Name, u.SlowK80)
			extra = append(extra, &v)
			name = v.Name
		}
		it := m.IterTime["V100"]
		for i := range u.Jobs {
			jobs = append(jobs, &cluster.JobSpec{Name: fmt.Sprintf("%s-%03d", u.Name, i), User: u.Name, GPUs: u.Sizes[i%len(u.Sizes)],
				Model: name, IterTime: it, Iters: math.Ceil(10 * h.To / it), MemGiB: m.MemGiB})
		}
	}
	p, err := fair.New(policy.Config{Seed: h.Seed, Params: map[string]string{"trade": fmt.Sprint(h.Trade)}})
	if err != nil {
		return nil, err
	}
	res, err := sim.Run(sim.Config{Cluster: h.Cluster, Jobs: jobs, Policy: p, Perf: sim.DefaultPerf(), Catalog: cat.With(extra...),
		Seed: h.Seed, Horizon: h.To, SampleEvery: 60})
	if err != nil {
		return nil, err
	}
	fp := p
	out := &HeteroResult{Rate: map[string]float64{}, Trades: fp.Trades(), Entitled: fp.Entitlements(), Moves: fp.Moves(), Result: res}
	var a, b *sim.WorkSample
	for i := range res.Samples {
		s := &res.Samples[i]
		if a == nil && s.At >= h.From {
			a = s
		}
		if s.At <= h.To {
			b = s
		}
	}
	if a == nil || b == nil || b.At <= a.At {
		return nil, fmt.Errorf("hetero: no samples in [%v, %v]", h.From, h.To)
	}
	for _, u := range h.Users {
		out.Rate[u.Name] = (b.Work[u.Name] - a.Work[u.Name]) / (b.At - a.At)
	}
	return out, nil
}
