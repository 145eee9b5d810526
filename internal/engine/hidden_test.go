package engine_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/registry"
)

// Every registered policy places around the GPUs its view hides: with
// Blocked GPUs on some servers (other schedulers' pods, pods leaving) and
// a whole server left free, a job that fits that server starts within a
// few rounds, rather than being placed on hidden GPUs, refused to be
// retried later, and placed there again at every round.
func TestConstraintsPoliciesPlaceAroundHiddenGPUs(t *testing.T) {
	for _, name := range registry.Names() {
		t.Run(name, func(t *testing.T) {
			for seed := uint64(1); seed <= 20; seed++ {
				rng := rand.New(rand.NewPCG(seed, 11))
				c := uniform(t, 4, 4)
				inner, err := registry.New(name, policy.Config{Seed: seed})
				if err != nil {
					t.Fatal(err)
				}
				lim := &table{blocked: map[cluster.ServerID]int{}}
				e := engine.New(c, inner, nil, engine.Options{Constraints: lim})
				// the free server, the last: every other one has some of
				// its GPUs hidden, all of them on at least one
				open := cluster.ServerID(3)
				all := cluster.ServerID(rng.IntN(3))
				for s := range cluster.ServerID(3) {
					lim.blocked[s] = 1 + rng.IntN(4)
				}
				lim.blocked[all] = 4
				g := 1 << rng.IntN(3)
				id := add(t, e, fmt.Sprintf("j%d", seed), g)
				now := 0.0
				for r := 0; r < 5 && e.Job(id).State == cluster.Queued; r++ {
					now += 1 + rng.Float64()
					res := round(t, e, now)
					if len(res.Rejected) > 0 {
						t.Fatalf("seed %d: blocked %v: refused %v: the policy placed on GPUs its view hides", seed, lim.blocked, res.Rejected)
					}
				}
				j := e.Job(id)
				if j.State != cluster.Running {
					t.Fatalf("seed %d: blocked %v: a %d-GPU job is %s after 5 rounds with server %d free; refused: %v",
						seed, lim.blocked, g, j.State, open, e.View().Rejected)
				}
				for _, gpu := range j.GPUs {
					if sv := c.ServerOf(gpu); sv != open && lim.blocked[sv] == 4 {
						t.Fatalf("seed %d: job runs on GPU %d of server %d, all hidden", seed, gpu, sv)
					}
				}
			}
		})
	}
}

// The same with jobs running: GPUs held by the policy's own jobs stay
// plannable (a policy may move or suspend their jobs), the hidden ones do
// not, and a job that fits the free GPUs the view shows starts.
func TestConstraintsPoliciesPlaceAroundHiddenGPUsWithJobs(t *testing.T) {
	for _, name := range registry.Names() {
		t.Run(name, func(t *testing.T) {
			for seed := uint64(1); seed <= 10; seed++ {
				rng := rand.New(rand.NewPCG(seed, 13))
				c := uniform(t, 4, 4)
				inner, err := registry.New(name, policy.Config{Seed: seed})
				if err != nil {
					t.Fatal(err)
				}
				lim := &table{blocked: map[cluster.ServerID]int{}}
				e := engine.New(c, inner, nil, engine.Options{Constraints: lim})
				// one 2-GPU job on each of servers 0 and 1 first
				for i := range 2 {
					add(t, e, fmt.Sprintf("r%d", i), 2)
				}
				round(t, e, 1)
				for _, j := range e.Snapshot().Active() {
					if j.State != cluster.Running {
						t.Fatalf("seed %d: %s is %s with no GPU hidden", seed, j.Spec.Name, j.State)
					}
				}
				// hide every free GPU of the servers some job runs on, and
				// all of another one; one server stays free
				held := map[cluster.ServerID]bool{}
				for _, j := range e.Snapshot().Active() {
					for _, g := range j.GPUs {
						held[c.ServerOf(g)] = true
					}
				}
				open := cluster.ServerID(-1)
				for s := range cluster.ServerID(4) {
					switch {
					case held[s]:
						lim.blocked[s] = 4
					case open < 0 && rng.IntN(2) == 0 || open < 0 && s == 3:
						open = s
					default:
						lim.blocked[s] = 4
					}
				}
				g := 1 << rng.IntN(3)
				id := add(t, e, "new", g)
				now := 1.0
				for r := 0; r < 5 && e.Job(id).State == cluster.Queued; r++ {
					now += 1 + rng.Float64()
					if res := round(t, e, now); len(res.Rejected) > 0 {
						t.Fatalf("seed %d: blocked %v: refused %v: the policy placed on GPUs its view hides", seed, lim.blocked, res.Rejected)
					}
				}
				if j := e.Job(id); j.State != cluster.Running {
					t.Fatalf("seed %d: blocked %v: a %d-GPU job is %s after 5 rounds with server %d free; refused: %v",
						seed, lim.blocked, g, j.State, open, e.View().Rejected)
				}
			}
		})
	}
}

// gandiva time-slices on the GPUs its view shows: on a server whose two
// free GPUs are hidden, a job waiting beside a running one gets its turns
// on the running job's GPUs, rather than being placed on the hidden ones
// at every quantum and refused.
func TestConstraintsGandivaTimeSlicesAroundHiddenGPUs(t *testing.T) {
	c := uniform(t, 1, 4)
	inner, err := registry.New("gandiva", policy.Config{Seed: 1, Params: map[string]string{"quantum": "1", "pack": "false", "migrate": "false"}})
	if err != nil {
		t.Fatal(err)
	}
	lim := &table{blocked: map[cluster.ServerID]int{}}
	e := engine.New(c, inner, nil, engine.Options{Constraints: lim})
	a := add(t, e, "a", 2)
	round(t, e, 1)
	if j := e.Job(a); j.State != cluster.Running {
		t.Fatalf("a is %s, want running", j.State)
	}
	b := add(t, e, "b", 2)
	lim.blocked[0] = 2
	ran, refusals := false, 0
	for now := 2.0; now <= 30 && !ran; now++ {
		res := round(t, e, now)
		refusals += len(res.Rejected)
		ran = e.Job(b).State == cluster.Running
	}
	if !ran || refusals > 0 {
		t.Fatalf("b ran %v in 28 quanta, %d actions refused (last: %v): want a turn on a's GPUs and no refusal", ran, refusals, e.View().Rejected)
	}
	if j := e.Job(b); !slices.Equal(j.GPUs, gpuIDs(0, 1)) {
		t.Fatalf("b runs on %v, want a's GPUs 0,1", j.GPUs)
	}
}

// gandiva homes a job where its view lets it take turns: with two of
// server 0's GPUs hidden and a 2-GPU job on server 1, a 4-GPU job is
// homed on server 1 and takes turns there, rather than on server 0 (whose
// 4 GPUs it would be refused at every quantum).
func TestConstraintsGandivaHomesAroundHiddenGPUs(t *testing.T) {
	c := uniform(t, 2, 4)
	inner, err := registry.New("gandiva", policy.Config{Seed: 1, Params: map[string]string{"quantum": "1", "pack": "false", "migrate": "false"}})
	if err != nil {
		t.Fatal(err)
	}
	lim := &table{blocked: map[cluster.ServerID]int{0: 4}}
	e := engine.New(c, inner, nil, engine.Options{Constraints: lim})
	a := add(t, e, "a", 2)
	round(t, e, 1)
	if j := e.Job(a); j.State != cluster.Running || c.ServerOf(j.GPUs[0]) != 1 {
		t.Fatalf("a is %s on %v, want running on server 1", j.State, j.GPUs)
	}
	lim.blocked[0] = 2
	b := add(t, e, "b", 4)
	ran, refusals := false, 0
	for now := 2.0; now <= 30 && !ran; now++ {
		res := round(t, e, now)
		refusals += len(res.Rejected)
		ran = e.Job(b).State == cluster.Running
	}
	if !ran || refusals > 0 {
		t.Fatalf("b ran %v in 28 quanta, %d actions refused: want turns on server 1 and no refusal", ran, refusals)
	}
	if j := e.Job(b); !slices.Equal(j.GPUs, gpuIDs(4, 5, 6, 7)) {
		t.Fatalf("b runs on %v, want server 1's GPUs 4-7", j.GPUs)
	}
}

// No registered policy places a job on GPUs its view hides: over random
// arrivals, ends and hidden GPUs (changing between rounds), with quanta
// of a second, the engine never refuses an action for a hidden GPU.
func TestConstraintsPoliciesNeverPlaceOnHiddenGPUs(t *testing.T) {
	for _, name := range registry.Names() {
		t.Run(name, func(t *testing.T) {
			started := 0
			for seed := uint64(1); seed <= 5; seed++ {
				rng := rand.New(rand.NewPCG(seed, 17))
				c := uniform(t, 4, 4)
				inner, err := registry.New(name, policy.Config{Seed: seed})
				if err != nil {
					t.Fatal(err)
				}
				lim := &table{blocked: map[cluster.ServerID]int{}}
				e := engine.New(c, inner, nil, engine.Options{Constraints: lim})
				now := 0.0
				for step := 0; step < 80; step++ {
					now += 1 + rng.Float64()*90
					if rng.IntN(2) == 0 {
						if _, err := e.Submit(now, &cluster.JobSpec{Name: fmt.Sprintf("j%d", step), User: fmt.Sprintf("u%d", rng.IntN(3)),
							GPUs: 1 << rng.IntN(3), Iters: 100, IterTime: 1 + rng.Float64()*10}); err != nil {
							t.Fatal(err)
						}
					}
					for s := range 4 {
						lim.blocked[cluster.ServerID(s)] = max(rng.IntN(6)-2, 0)
					}
					for _, j := range e.Snapshot().Active() {
						if j.State == cluster.Running && rng.IntN(6) == 0 {
							if err := e.Apply(cluster.Event{Time: now, Kind: cluster.EvFinish, Job: j.ID}); err != nil {
								t.Fatal(err)
							}
						}
					}
					// hidden: free in the engine's state, taken in the view
					raw := e.Snapshot()
					hidden := make([]uint64, len(raw.Servers))
					for i := range raw.Servers {
						hidden[i] = raw.Servers[i].Free
					}
					for i, sv := range e.View().Servers {
						hidden[i] &^= sv.Free
					}
					res := round(t, e, now)
					for _, rj := range res.Rejected {
						for _, g := range rj.Action.GPUs {
							if sv := c.ServerOf(g); hidden[sv]&(1<<uint(g-c.Servers[sv].FirstGPU)) != 0 {
								t.Fatalf("seed %d step %d: blocked %v: refused %v: GPU %d is hidden", seed, step, lim.blocked, rj, g)
							}
						}
					}
					for _, a := range res.Applied {
						if a.Kind == cluster.Start {
							started++
						}
					}
				}
			}
			if started == 0 {
				t.Fatal("no job started")
			}
		})
	}
}

// tiresias-l preempts around hidden GPUs: on four 1-GPU servers, two of
// them hidden (other schedulers' pods), a 2-GPU job demoted by its
// attained service holds the other two, and a new 2-GPU job in the top
// queue preempts it, rather than waiting for ever because the planner
// counted the hidden GPUs as capacity (the new job fitting "beside" the
// running one, which then was no victim).
func TestConstraintsTiresiasPreemptsAroundHiddenGPUs(t *testing.T) {
	for _, name := range []string{"tiresias-l", "tiresias-g"} {
		t.Run(name, func(t *testing.T) {
			c := uniform(t, 4, 1)
			inner, err := registry.New(name, policy.Config{Seed: 1, Params: map[string]string{"limits": "10"}})
			if err != nil {
				t.Fatal(err)
			}
			lim := &table{blocked: map[cluster.ServerID]int{0: 1, 1: 1}}
			e := engine.New(c, inner, nil, engine.Options{Constraints: lim})
			a := add(t, e, "a", 2)
			round(t, e, 1)
			if j := e.Job(a); j.State != cluster.Running || !slices.Equal(j.GPUs, gpuIDs(2, 3)) {
				t.Fatalf("a is %s on %v, want running on GPUs 2,3", j.State, j.GPUs)
			}
			// a's attained service (2 GPUs for 100s) is far past the top
			// queue's threshold of 10 GPU-seconds
			round(t, e, 101)
			b := add(t, e, "b", 2)
			refusals := 0
			for now := 102.0; now <= 110 && e.Job(b).State != cluster.Running; now++ {
				refusals += len(round(t, e, now).Rejected)
			}
			if j := e.Job(b); j.State != cluster.Running || !slices.Equal(j.GPUs, gpuIDs(2, 3)) {
				t.Fatalf("b is %s on %v after 8 rounds (%d refusals), want running on a's GPUs 2,3", j.State, j.GPUs, refusals)
			}
			if j := e.Job(a); j.State != cluster.Suspended {
				t.Fatalf("a is %s, want suspended by b", j.State)
			}
			if refusals > 0 {
				t.Fatalf("%d actions refused, want none", refusals)
			}
		})
	}
}
