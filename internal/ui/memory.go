package ui

import (
	"context"
	"sync"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/timeline"
)

// Memory is a DataSource over timeline recorders held in memory, for
// tests and tools: a user sees their own jobs by name, the others
// anonymised on the GPU rows, counted in the queue and summed in the
// shares. Its fields are read under its lock: change them (and feed its
// recorders) inside Update.
type Memory struct {
	mu sync.Mutex
	// Cluster and Policy name what is shown; Epoch is the Unix time of
	// engine time 0 (0: simulated time).
	Cluster, Policy string
	Epoch           float64
	// Runs are the timelines: the first is what happened.
	Runs []MemoryRun
	// Tickets, when set, give the shares an entitlement (Gandiva_fair).
	Tickets map[string]float64
	// Waiting, when set, is the whole queue in the policy's order (with ETAs,
	// say); nil: the first run's waiting jobs in submission order.
	Waiting []QueuedJob
	// Down and Drained give the nodes that are down or drained, with the
	// reason; the others are up.
	Down, Drained map[string]string
	// version counts Updates.
	version uint64
}

// MemoryRun is one timeline of a Memory.
type MemoryRun struct {
	Run
	Rec *timeline.Recorder
}

var _ DataSource = (*Memory)(nil)

// Update runs f under the lock, for changes to m's fields and recorders.
func (m *Memory) Update(f func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f()
	m.version++
}

func visibleTo(v api.Principal) func(string) bool {
	if v.Admin {
		return nil
	}
	return func(user string) bool { return user == v.User }
}

func (m *Memory) run(id string) (*MemoryRun, error) {
	if len(m.Runs) == 0 {
		return nil, api.NotFound("no timeline recorded yet")
	}
	if id == "" {
		return &m.Runs[0], nil
	}
	for i := range m.Runs {
		if m.Runs[i].ID == id {
			return &m.Runs[i], nil
		}
	}
	return nil, api.NotFound("no run %q", id)
}

// Summary implements DataSource.
func (m *Memory) Summary(_ context.Context, v api.Principal) (*Summary, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := &Summary{Cluster: m.Cluster, Policy: m.Policy, Epoch: m.Epoch, Version: m.version,
		Nodes: map[string]int{}, Jobs: map[string]int{}, Runs: []Run{}}
	for _, r := range m.Runs {
		s.Runs = append(s.Runs, r.Run)
		s.Version += r.Rec.Version()
	}
	if len(m.Runs) > 0 {
		rec := m.Runs[0].Rec
		busy, gpus := rec.Busy()
		s.Now, s.GPUs, s.FreeGPUs = rec.Now(), gpus, gpus-busy
		s.Jobs = rec.States(visibleTo(v))
		for _, sv := range rec.Data(timeline.Query{From: rec.Now(), To: rec.Now(), NoLanes: true}).Servers {
			s.Nodes[m.status(sv.Name)]++
		}
	}
	return s, nil
}

func (m *Memory) status(node string) string {
	if _, ok := m.Down[node]; ok {
		return "down"
	}
	if _, ok := m.Drained[node]; ok {
		return "drained"
	}
	return "up"
}

// Timeline implements DataSource.
func (m *Memory) Timeline(_ context.Context, v api.Principal, run string, w Window) (*timeline.Data, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, err := m.run(run)
	if err != nil {
		return nil, err
	}
	return r.Rec.Data(timeline.Query{From: w.From, To: w.To, Visible: visibleTo(v)}), nil
}

// Shares implements DataSource.
func (m *Memory) Shares(_ context.Context, v api.Principal, run string, w Window) (*timeline.Shares, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, err := m.run(run)
	if err != nil {
		return nil, err
	}
	return r.Rec.Shares(timeline.ShareQuery{From: w.From, To: w.To, Window: w.Step, Tickets: m.Tickets, Visible: visibleTo(v)}), nil
}

// Queue implements DataSource.
func (m *Memory) Queue(_ context.Context, v api.Principal) (*Queue, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	q := &Queue{Policy: m.Policy, Order: "policy", Jobs: []QueuedJob{}}
	all := m.Waiting
	if all == nil {
		q.Order = "submission"
		if len(m.Runs) > 0 {
			rec := m.Runs[0].Rec
			for i, w := range rec.Waiting() {
				all = append(all, QueuedJob{Position: i + 1, ID: w.Name, Name: w.Name, User: w.User, State: w.State,
					GPUs: w.GPUs, Submitted: w.Submitted, Waited: rec.Now() - w.Since, Reason: w.Reason})
			}
		}
	}
	for _, j := range all {
		if v.Admin || j.User == v.User {
			if len(m.Runs) > 0 && !v.Admin {
				j.Reason = m.Runs[0].Rec.Redact(j.Reason, visibleTo(v))
			}
			q.Jobs = append(q.Jobs, j)
		} else {
			q.Hidden++
		}
	}
	return q, nil
}

// Nodes implements DataSource: the first run's servers, the jobs on them
// now, and Down and Drained.
func (m *Memory) Nodes(_ context.Context, v api.Principal) ([]api.Node, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.Runs) == 0 {
		return nil, nil
	}
	rec := m.Runs[0].Rec
	d := rec.Data(timeline.Query{From: rec.Now(), To: rec.Now(), NoLanes: true})
	var out []api.Node
	for i, sv := range d.Servers {
		n := api.Node{Name: sv.Name, GPUType: sv.Type, GPUs: sv.GPUs, Up: true}
		busy := 0
		for g := sv.FirstGPU; g < sv.FirstGPU+sv.GPUs; g++ {
			for _, s := range d.GPUs[g] {
				if s.Open && d.Kinds[s.Kind].Holds {
					busy++
					break
				}
			}
		}
		n.FreeGPUs = sv.GPUs - busy
		if why, ok := m.Down[sv.Name]; ok {
			n.Up, n.Reason, n.FreeGPUs = false, why, 0
		} else if why, ok := m.Drained[sv.Name]; ok {
			n.Drained, n.Reason, n.FreeGPUs = true, why, 0
		}
		for _, j := range rec.OnServer(cluster.ServerID(i)) {
			if v.Admin || j.User == v.User {
				n.Jobs = append(n.Jobs, j.Name)
			} else {
				n.OtherJobs++
			}
		}
		out = append(out, n)
	}
	return out, nil
}
