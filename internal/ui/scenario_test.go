package ui_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/registry"
	"github.com/gandiva-sched/gandiva/internal/sim"
	"github.com/gandiva-sched/gandiva/internal/timeline"
	"github.com/gandiva-sched/gandiva/internal/trace"
	"github.com/gandiva-sched/gandiva/internal/ui"
)

// tokens is the test's authenticator: token → principal.
type tokens map[string]api.Principal

func (t tokens) Authenticate(tok string) (api.Principal, error) {
	p, ok := t[tok]
	if !ok {
		return api.Principal{}, errors.New("unknown token")
	}
	return p, nil
}

var testTokens = tokens{
	"admin-token": {User: "admin", Admin: true},
	"alice-token": {User: "alice"},
	"bob-token":   {User: "bob"},
	"agent-token": {User: "agent:n1", Agent: true},
}

// scenario is a real simulation recorded by a timeline.Recorder: jobs of
// alice, bob and carol (named after their user, "alice-7") on a small
// heterogeneous cluster under the given policy, which time-slices, packs
// and migrates.
type scenario struct {
	c    *cluster.Cluster
	jobs []*cluster.JobSpec
	rec  *timeline.Recorder
	res  *sim.Result
}

func runScenario(t testing.TB, pol string, servers, jobs int, until float64) *scenario {
	t.Helper()
	return runScenarioN(t, pol, servers, jobs, until)
}

// runScenarioN is runScenario at any size: servers four-GPU V100 servers
// and half as many P100 ones.
func runScenarioN(t testing.TB, pol string, servers, jobs int, until float64) *scenario {
	t.Helper()
	return runScenarioP(t, pol, nil, servers, jobs, until, 1.6, true)
}

// runScenarioP is runScenario with the policy's parameters, the load (busy
// GPUs ÷ GPUs) and pre-runs chosen.
func runScenarioP(t testing.TB, pol string, params map[string]string, servers, jobs int, until, load float64, preRun bool) *scenario {
	t.Helper()
	c, err := cluster.NewBuilder("lab", nil).
		Add(cluster.ServerGroup{Type: "V100", Count: servers, GPUs: 4, Domain: 0, HostMemGiB: 64, NamePrefix: "gpu-v"}).
		Add(cluster.ServerGroup{Type: "P100", Count: max(1, servers/2), GPUs: 4, Domain: 1, HostMemGiB: 64, NamePrefix: "gpu-p"}).Build()
	if err != nil {
		t.Fatal(err)
	}
	specs := trace.Synthetic(trace.SynthConfig{Jobs: jobs, Seed: 3, Load: float64(c.NumGPUs()) * load, MaxGPUs: 8, MaxDuration: 5400, Users: 3})
	users := []string{"alice", "bob", "carol"}
	rng := rand.New(rand.NewPCG(5, 5))
	for i, s := range specs {
		s.User = users[rng.IntN(3)]
		s.Name = fmt.Sprintf("%s-%d", s.User, i+1)
	}
	p, err := registry.New(pol, policy.Config{Seed: 1, Params: params})
	if err != nil {
		t.Fatal(err)
	}
	rec := timeline.NewRecorder(timeline.Options{Noted: true})
	var oerr error
	res, err := sim.Run(sim.Config{Cluster: c, Jobs: specs, Policy: noting{p, rec}, Seed: 1, Horizon: until, Engine: engine.Options{PreRun: preRun},
		Observe: func(_ float64, e *engine.Engine) {
			if oerr == nil {
				oerr = rec.Observe(e.Snapshot())
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if oerr != nil {
		t.Fatal(oerr)
	}
	return &scenario{c: c, jobs: specs, rec: rec, res: res}
}

func (s *scenario) memory(policy string) *ui.Memory {
	return &ui.Memory{Cluster: "lab", Policy: policy, Tickets: map[string]float64{"alice": 2, "bob": 1, "carol": 1},
		Runs:    []ui.MemoryRun{{Run: ui.Run{ID: "live", Label: "what happened", Kind: "live", Policy: policy}, Rec: s.rec}},
		Drained: map[string]string{"gpu-p0": "blacklisted: 5 job failures within 3600 s"}}
}

// busiest returns the name of a job of user with the most GPU segments.
func busiest(d *timeline.Data, user string) (string, int) {
	n := map[string]int{}
	names := map[int32]string{}
	for _, j := range d.Jobs {
		if j.User == user && !j.Probe {
			names[int32(j.ID)] = j.Name
		}
	}
	best, bestN := "", 0
	for _, row := range d.GPUs {
		for _, s := range row {
			if name, ok := names[int32(s.Job)]; ok {
				n[name]++
				if n[name] > bestN || n[name] == bestN && name < best {
					best, bestN = name, n[name]
				}
			}
		}
	}
	return best, bestN
}

// noting wraps a policy to note, for a Noted recorder, the jobs of the
// events each round sees and of the actions it returns (the simulator has
// no hook for that yet).
type noting struct {
	policy.Policy
	r *timeline.Recorder
}

func (n noting) Schedule(s *cluster.Snapshot) cluster.Decision {
	for _, ev := range s.Events {
		n.r.NoteEvent(ev)
	}
	d := n.Policy.Schedule(s)
	for _, a := range d.Actions {
		n.r.Note(a.Job)
	}
	return d
}
