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
	// Misreport, when positive and not 1, makes the user's jobs report
	// K80 mini-batch times Misreport times their true ones (a user whose
	// in-job client lies to the scheduler, at no cost to its training):
	// every bid it makes is scaled by Misreport. Above 1 it inflates its
	// speedups, below 1 it deflates them.
	Misreport float64
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
	// Price is the auction's price rule (gandiva-fair's price parameter:
	// second, first or midpoint); "" is the default, second.
	Price string
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
	params := map[string]string{"trade": fmt.Sprint(h.Trade)}
	if h.Price != "" {
		params["price"] = h.Price
	}
	fp, err := fair.New(policy.Config{Seed: h.Seed, Params: params})
	if err != nil {
		return nil, err
	}
	var p policy.Policy = fp
	lies := map[string]float64{}
	for _, u := range h.Users {
		if u.Misreport > 0 && u.Misreport != 1 {
			lies[u.Name] = u.Misreport
		}
	}
	if len(lies) > 0 {
		k80 := -1
		for i, t := range h.Cluster.Types {
			if t.Name == "K80" {
				k80 = i
			}
		}
		p = &misreport{inner: p, gpuType: k80, factor: lies}
	}
	res, err := sim.Run(sim.Config{Cluster: h.Cluster, Jobs: jobs, Policy: p, Perf: sim.DefaultPerf(), Catalog: cat.With(extra...),
		Seed: h.Seed, Horizon: h.To, SampleEvery: 60})
	if err != nil {
		return nil, err
	}
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

// misreport wraps a policy so that it sees some users' jobs report their
// mini-batch times on one GPU type scaled by a factor, while they train at
// their true speed: what a user whose in-job client lies to the scheduler
// achieves at no cost. Everything else in the snapshot is the engine's.
type misreport struct {
	inner   policy.Policy
	gpuType int
	factor  map[string]float64
	snap    cluster.Snapshot
	jobs    []*cluster.Job
	active  []*cluster.Job
	copies  []cluster.Job
}

var _ policy.Policy = (*misreport)(nil)

func (m *misreport) Name() string { return m.inner.Name() }

func (m *misreport) Schedule(s *cluster.Snapshot) cluster.Decision {
	m.jobs = append(m.jobs[:0], s.Jobs...)
	m.copies = m.copies[:0]
	for _, j := range s.Jobs {
		if _, ok := m.factor[j.Spec.User]; ok && m.gpuType >= 0 {
			m.copies = append(m.copies, *j)
		}
	}
	k := 0
	for i, j := range s.Jobs {
		f, ok := m.factor[j.Spec.User]
		if !ok || m.gpuType < 0 {
			continue
		}
		c := &m.copies[k]
		k++
		c.Profile.Samples = make([]cluster.Sample, len(j.Profile.Samples))
		for n, sm := range j.Profile.Samples {
			if sm.Type == m.gpuType {
				sm.IterTime *= f
			}
			c.Profile.Samples[n] = sm
		}
		c.Profile.Solo = append([]float64(nil), j.Profile.Solo...)
		if m.gpuType < len(c.Profile.Solo) {
			c.Profile.Solo[m.gpuType] *= f
		}
		m.jobs[i] = c
	}
	m.active = m.active[:0]
	for _, j := range s.Active() {
		m.active = append(m.active, m.jobs[j.ID])
	}
	m.snap.Fill(s.Now, s.Cluster, m.jobs, s.GPUs, s.Servers, s.Events, m.active, s.Free)
	return m.inner.Schedule(&m.snap)
}
