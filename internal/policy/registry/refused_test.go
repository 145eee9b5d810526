package registry_test

import (
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/registry"
)

// thief wraps a policy: the first time the policy starts job victim, it
// starts job by on the same GPUs first, so that the engine refuses the
// victim's start (its GPUs were taken by an action before it: stale). The
// policy is not told otherwise than by the next snapshot's Rejected.
type thief struct {
	policy.Policy
	victim, by cluster.JobID
	done       bool
}

func (t *thief) Schedule(s *cluster.Snapshot) cluster.Decision {
	d := t.Policy.Schedule(s)
	if t.done {
		return d
	}
	for _, a := range d.Actions {
		if a.Kind != cluster.Start || a.Job != t.victim {
			continue
		}
		t.done = true
		out := []cluster.Action{{Kind: cluster.Start, Job: t.by, GPUs: a.GPUs, Reason: "thief"}}
		for _, b := range d.Actions {
			if b.Job != t.by {
				out = append(out, b)
			}
		}
		d.Actions = out
		break
	}
	return d
}

// TestRefusedStartStartsLater: every policy whose start of a job the
// engine refused starts that job once there is room, though no event
// about the job tells it so: it hears of the refusal in its next
// snapshot (cluster.Snapshot.Rejected) and does not rely on its own record
// that the job started.
func TestRefusedStartStartsLater(t *testing.T) {
	b := cluster.NewBuilder("one", nil)
	b.Add(cluster.ServerGroup{Type: "V100", Count: 1, GPUs: 1, HostMemGiB: 64})
	c, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range registry.Names() {
		t.Run(name, func(t *testing.T) {
			pol, err := registry.New(name, policy.Config{})
			if err != nil {
				t.Fatal(err)
			}
			th := &thief{Policy: pol}
			e := engine.New(c, th, nil, engine.Options{CheckSnapshot: true})
			for i, n := range []string{"a", "b"} {
				id, err := e.Submit(0, &cluster.JobSpec{Name: n, User: "u", GPUs: 1, Iters: 1000, IterTime: 1, MemGiB: 4, Model: "resnet50"})
				if err != nil {
					t.Fatal(err)
				}
				if i == 0 {
					th.victim = id
				} else {
					th.by = id
				}
			}
			res, err := e.Round(0)
			if err != nil {
				t.Fatal(err)
			}
			if !th.done || len(res.Rejected) != 1 || res.Rejected[0].Action.Job != th.victim || res.Rejected[0].Code != cluster.RejectStale {
				t.Fatalf("set-up: the policy's start of a was not refused as stale: applied %v, rejected %v", res.Applied, res.Rejected)
			}
			// b runs and finishes; a must start then (at the latest after
			// the policy's own wake-ups).
			now := 50.0
			if err := e.Apply(cluster.Event{Time: now, Kind: cluster.EvFinish, Job: th.by, Node: cluster.NoServer, Done: 1000}); err != nil {
				t.Fatal(err)
			}
			for range 20 {
				res, err := e.Round(now)
				if err != nil {
					t.Fatal(err)
				}
				if e.Job(th.victim).State.Holding() {
					return
				}
				if res.WakeAt > now {
					now = res.WakeAt
				} else {
					now += 60
				}
			}
			t.Fatalf("a is %s at %v with the GPU free: the refused start was never retried", e.Job(th.victim).State, now)
		})
	}
}

// mover wraps a policy: the first time the policy suspends a job, it
// migrates that job first (to the GPUs given), so that the engine refuses
// the suspension (the job is migrating, not running) and the job goes on
// holding GPUs.
type mover struct {
	policy.Policy
	to   []cluster.GPUID
	done bool
}

func (m *mover) Schedule(s *cluster.Snapshot) cluster.Decision {
	d := m.Policy.Schedule(s)
	if m.done {
		return d
	}
	for _, a := range d.Actions {
		if a.Kind == cluster.Suspend {
			m.done = true
			d.Actions = append([]cluster.Action{{Kind: cluster.Migrate, Job: a.Job, GPUs: m.to, Reason: "mover"}}, d.Actions...)
			break
		}
	}
	return d
}

// TestRefusedSuspendSettles: every policy whose suspension of a job the
// engine refused (the job goes on running) takes the job as running
// again: once the refusal's round is over, it asks for no action the
// engine refuses (a resume of the job it believes suspended, say), and the
// other job still gets its turn. Two workloads on one server: a runs, b
// comes after it and cannot run beside it; in "equal" they are alike (time
// slices), in "short" b is smaller and shorter (preemption by size,
// remaining time or service).
func TestRefusedSuspendSettles(t *testing.T) {
	type job struct {
		gpus  int
		iters float64
	}
	for _, w := range []struct {
		name string
		gpus int
		a, b job
		to   []cluster.GPUID // where the mover sends a (its GPUs are 0 and up)
	}{
		{"equal", 3, job{2, 1e6}, job{2, 1e6}, []cluster.GPUID{1, 2}},
		{"short", 4, job{3, 1e6}, job{2, 1e4}, []cluster.GPUID{1, 2, 3}},
	} {
		b := cluster.NewBuilder(w.name, nil)
		b.Add(cluster.ServerGroup{Type: "V100", Count: 1, GPUs: w.gpus, HostMemGiB: 64})
		c, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range registry.Names() {
			t.Run(w.name+"/"+name, func(t *testing.T) {
				pol, err := registry.New(name, policy.Config{})
				if err != nil {
					t.Fatal(err)
				}
				mv := &mover{Policy: pol, to: w.to}
				e := engine.New(c, mv, nil, engine.Options{CheckSnapshot: true})
				spec := func(n string, j job, at float64) *cluster.JobSpec {
					return &cluster.JobSpec{Name: n, User: n, GPUs: j.gpus, Iters: j.iters, IterTime: 1, MemGiB: 4, Model: "resnet50", Submit: at}
				}
				if _, err := e.Submit(0, spec("a", w.a, 0)); err != nil {
					t.Fatal(err)
				}
				now, refusedAt := 0.0, -1
				var bID cluster.JobID = -1
				for i := range 400 {
					if i == 1 {
						if bID, err = e.Submit(now, spec("b", w.b, now)); err != nil {
							t.Fatal(err)
						}
					}
					res, err := e.Round(now)
					if err != nil {
						t.Fatal(err)
					}
					for _, ap := range res.Applied {
						if ap.Remote || ap.Kind == cluster.Migrate {
							if err := e.Apply(cluster.Event{Time: now, Kind: cluster.EvActionDone, Job: ap.Job, Node: cluster.NoServer}); err != nil {
								t.Fatal(err)
							}
						}
					}
					if len(res.Rejected) > 0 {
						if refusedAt >= 0 || !mv.done {
							t.Fatalf("round %d at %v: refused %v", i, now, res.Rejected)
						}
						refusedAt = i
					}
					if refusedAt >= 0 && i > refusedAt && e.Job(bID).FirstStart >= 0 {
						return
					}
					if res.WakeAt > now {
						now = res.WakeAt
					} else {
						now += 60
					}
				}
				if !mv.done {
					t.Skipf("%s never suspended a job here", name)
				}
				t.Fatalf("b never ran after the refused suspension (refused in round %d)", refusedAt)
			})
		}
	}
}
