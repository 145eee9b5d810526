package engine_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/registry"
)

// canned is a policy that returns the actions a test gives it and keeps
// what it saw.
type canned struct {
	next    []cluster.Action
	seen    *cluster.Snapshot
	free    int
	servers []cluster.ServerState
	// rejected is a copy of the view's Rejected (valid only in the call)
	rejected []cluster.Rejection
}

func (c *canned) Name() string { return "canned" }
func (c *canned) Schedule(s *cluster.Snapshot) cluster.Decision {
	c.seen, c.free = s, s.FreeGPUs
	c.servers = append(c.servers[:0], s.Servers...)
	c.rejected = append(c.rejected[:0], s.Rejected...)
	a := c.next
	c.next = nil
	return cluster.Decision{Actions: a}
}

// table is engine.Constraints from maps.
type table struct {
	blocked map[cluster.ServerID]int
	nofit   map[[2]int]bool // {job, server}
	podGPUs map[cluster.JobID]int
	fixed   map[cluster.JobID]bool
	current map[cluster.JobID]map[cluster.ServerID]int
	shared  map[cluster.JobID]bool
	pinned  map[cluster.JobID][]cluster.GPUID
}

func (t *table) Blocked(s cluster.ServerID) int { return t.blocked[s] }
func (t *table) Fits(j cluster.JobID, s cluster.ServerID) bool {
	return !t.nofit[[2]int{int(j), int(s)}]
}
func (t *table) PodGPUs(j cluster.JobID) int {
	if g := t.podGPUs[j]; g > 0 {
		return g
	}
	return 1
}
func (t *table) Movable(j cluster.JobID) bool                     { return !t.fixed[j] }
func (t *table) Current(j cluster.JobID) map[cluster.ServerID]int { return t.current[j] }
func (t *table) Shared(j cluster.JobID) bool                      { return t.shared[j] }
func (t *table) Pinned(j cluster.JobID) []cluster.GPUID           { return t.pinned[j] }

var _ engine.Constraints = (*table)(nil)

func uniform(t *testing.T, servers, gpus int) *cluster.Cluster {
	t.Helper()
	c, err := cluster.NewBuilder("t", nil).Add(cluster.ServerGroup{Type: "V100", Count: servers, GPUs: gpus}).Build()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func add(t *testing.T, e *engine.Engine, name string, gpus int) cluster.JobID {
	t.Helper()
	id, err := e.Submit(e.Now(), &cluster.JobSpec{Name: name, User: "u", GPUs: gpus})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func gpuIDs(ids ...int) []cluster.GPUID {
	out := make([]cluster.GPUID, len(ids))
	for i, x := range ids {
		out[i] = cluster.GPUID(x)
	}
	return out
}

// round runs a round and fails the test on an error.
func round(t *testing.T, e *engine.Engine, now float64) engine.Result {
	t.Helper()
	res, err := e.Round(now)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// refused fails unless res refused exactly one action, of job j, with
// code and a reason that contains why.
func refused(t *testing.T, res engine.Result, j cluster.JobID, code cluster.RejectCode, why string) {
	t.Helper()
	if len(res.Rejected) != 1 || res.Rejected[0].Action.Job != j || res.Rejected[0].Code != code || !strings.Contains(res.Rejected[0].Reason, why) {
		t.Fatalf("rejected %v (applied %v): want one refusal of job %d, code %s, reason with %q", res.Rejected, res.Applied, j, code, why)
	}
}

// Blocked GPUs are shown taken (the highest-numbered free ones of their
// server) and a placement on them is refused, to be retried later.
func TestConstraintsBlockedGPUsAreHiddenAndRefused(t *testing.T) {
	c := uniform(t, 2, 4) // GPUs 0-3 on server 0, 4-7 on server 1
	pol := &canned{}
	lim := &table{blocked: map[cluster.ServerID]int{0: 3}}
	e := engine.New(c, pol, nil, engine.Options{Constraints: lim})
	a := add(t, e, "a", 2)
	pol.next = []cluster.Action{{Kind: cluster.Start, Job: a, GPUs: gpuIDs(2, 3)}}
	res := round(t, e, 1)
	if pol.free != 5 || pol.servers[0].Free != 0b0001 || pol.servers[1].Free != 0b1111 {
		t.Fatalf("the policy saw %d free GPUs, masks %b %b: want 5, GPUs 1-3 of server 0 taken", pol.free, pol.servers[0].Free, pol.servers[1].Free)
	}
	if pol.seen.Free.Count(0) != 1 || pol.seen.Free.Total() != 5 {
		t.Fatalf("the view's free index counts %d on server 0, %d in all: want 1 and 5", pol.seen.Free.Count(0), pol.seen.Free.Total())
	}
	refused(t, res, a, cluster.RejectRetry, "not available")
	if e.Snapshot().Servers[0].Free != 0b1111 {
		t.Fatal("the engine's own state shows the blocked GPUs taken")
	}
	pol.next = []cluster.Action{{Kind: cluster.Start, Job: a, GPUs: gpuIDs(4, 5)}}
	if res := round(t, e, 2); len(res.Applied) != 1 || len(res.Rejected) != 0 {
		t.Fatalf("applied %v, rejected %v: want a started on GPUs 4,5", res.Applied, res.Rejected)
	}
	if rj := pol.rejected; len(rj) != 1 || rj[0].Action.Job != a || rj[0].Code != cluster.RejectRetry {
		t.Fatalf("the view after the refusal shows %v: want a's refused start, retry", rj)
	}
}

// The view says where each job may run and in what pods; a placement on a
// server the job does not fit, or not in whole pods, is refused for good.
func TestConstraintsFitsAndWholePods(t *testing.T) {
	c := uniform(t, 3, 4)
	pol := &canned{}
	lim := &table{nofit: map[[2]int]bool{{0, 0}: true}, podGPUs: map[cluster.JobID]int{0: 2, 1: 2}}
	e := engine.New(c, pol, nil, engine.Options{Constraints: lim})
	a := add(t, e, "a", 4) // 2 pods of 2; may not run on server 0
	b := add(t, e, "b", 6) // 3 pods of 2
	pol.next = []cluster.Action{{Kind: cluster.Start, Job: a, GPUs: gpuIDs(0, 1, 2, 3)}}
	res := round(t, e, 1)
	refused(t, res, a, cluster.RejectNever, "may not run on server")
	if pol.seen.MayRun(a, 0) || !pol.seen.MayRun(a, 1) || !pol.seen.MayRun(b, 0) || pol.seen.PodUnit(a) != 2 || pol.seen.PodUnit(2) != 1 {
		t.Fatalf("the view says a may run on 0: %v, on 1: %v, b on 0: %v, pods of %d: want false, true, true, 2",
			pol.seen.MayRun(a, 0), pol.seen.MayRun(a, 1), pol.seen.MayRun(b, 0), pol.seen.PodUnit(a))
	}
	pol.next = []cluster.Action{{Kind: cluster.Start, Job: b, GPUs: gpuIDs(1, 2, 3, 8, 9, 10)}}
	refused(t, round(t, e, 2), b, cluster.RejectNever, "not whole pods of 2")
	pol.next = []cluster.Action{{Kind: cluster.Start, Job: a, GPUs: gpuIDs(4, 5, 6, 7)}, {Kind: cluster.Start, Job: b, GPUs: gpuIDs(0, 1, 2, 3, 8, 9)}}
	if res := round(t, e, 3); len(res.Applied) != 2 {
		t.Fatalf("applied %v, rejected %v: want both started in whole pods", res.Applied, res.Rejected)
	}
}

// What the executor cannot do is refused for good: suspending a job that
// may not be preempted, moving one to the same GPU count on the same
// servers, packing a job that is not shared.
func TestConstraintsRefuseWhatCannotBeDone(t *testing.T) {
	c := uniform(t, 2, 2)
	pol := &canned{}
	lim := &table{fixed: map[cluster.JobID]bool{0: true}}
	e := engine.New(c, pol, nil, engine.Options{Constraints: lim})
	a := add(t, e, "a", 2)
	b := add(t, e, "b", 2)
	pol.next = []cluster.Action{{Kind: cluster.Start, Job: a, GPUs: gpuIDs(0, 1)}, {Kind: cluster.Start, Job: b, GPUs: gpuIDs(2, 3)}}
	round(t, e, 1)
	x := add(t, e, "x", 1)
	for _, tc := range []struct {
		a    cluster.Action
		why  string
		code cluster.RejectCode
	}{
		{cluster.Action{Kind: cluster.Suspend, Job: a}, "may not be preempted", cluster.RejectNever},
		{cluster.Action{Kind: cluster.Migrate, Job: a, GPUs: gpuIDs(2, 3), Share: true}, "cannot be moved", cluster.RejectNever},
		{cluster.Action{Kind: cluster.Migrate, Job: b, GPUs: gpuIDs(3, 2)}, "", cluster.RejectNever}, // the GPUs it holds (apply)
		{cluster.Action{Kind: cluster.Start, Job: x, GPUs: gpuIDs(0), Share: true}, "only shared jobs may be packed", cluster.RejectNever},
	} {
		pol.next = []cluster.Action{tc.a}
		refused(t, round(t, e, e.Now()+1), tc.a.Job, tc.code, tc.why)
	}
	// b's move within its server: same count on the same server
	lim2 := &table{}
	e2 := engine.New(uniform(t, 1, 4), pol, nil, engine.Options{Constraints: lim2})
	j := add(t, e2, "j", 2)
	pol.next = []cluster.Action{{Kind: cluster.Start, Job: j, GPUs: gpuIDs(0, 1)}}
	round(t, e2, 1)
	pol.next = []cluster.Action{{Kind: cluster.Migrate, Job: j, GPUs: gpuIDs(2, 3)}}
	refused(t, round(t, e2, 2), j, cluster.RejectNever, "changes nothing")
	// a shared job's GPUs are addressable: the same move is carried out
	lim2.shared = map[cluster.JobID]bool{j: true}
	pol.next = []cluster.Action{{Kind: cluster.Migrate, Job: j, GPUs: gpuIDs(2, 3)}}
	if res := round(t, e2, 3); len(res.Applied) != 1 {
		t.Fatalf("applied %v, rejected %v: want a shared job's move to other GPUs of its server", res.Applied, res.Rejected)
	}
}

// A preemption in one decision: the victim's GPUs serve the new job.
func TestConstraintsSuspendFreesForStart(t *testing.T) {
	pol := &canned{}
	e := engine.New(uniform(t, 1, 2), pol, nil, engine.Options{Constraints: &table{}})
	a := add(t, e, "a", 2)
	pol.next = []cluster.Action{{Kind: cluster.Start, Job: a, GPUs: gpuIDs(0, 1)}}
	round(t, e, 1)
	b := add(t, e, "b", 2)
	pol.next = []cluster.Action{{Kind: cluster.Suspend, Job: a}, {Kind: cluster.Start, Job: b, GPUs: gpuIDs(0, 1)}}
	if res := round(t, e, 2); len(res.Applied) != 2 {
		t.Fatalf("applied %v rejected %v", res.Applied, res.Rejected)
	}
}

// The recovery view: a job that runs now may run only on its current
// servers when they can take it, for that one view; a job whose servers
// cannot take it, or that runs nowhere, may run anywhere it fits.
func TestConstraintsRecoveryKeepsCurrentServers(t *testing.T) {
	c := uniform(t, 3, 2)
	pol := &canned{}
	lim := &table{current: map[cluster.JobID]map[cluster.ServerID]int{1: {1: 2}, 2: {2: 4}}}
	e := engine.New(c, pol, nil, engine.Options{Constraints: lim})
	a := add(t, e, "a", 2) // no processes anywhere
	b := add(t, e, "b", 2) // runs on server 1
	x := add(t, e, "x", 4) // "runs" 4 GPUs on server 2, which has 2: not kept
	e.Recover()
	if v := e.View(); v.MayRun(b, 0) || !v.MayRun(b, 1) {
		t.Fatal("View after Recover is not the recovery view")
	}
	round(t, e, 1) // (View did not end the recovery: the round's view is one)
	for _, tc := range []struct {
		j    cluster.JobID
		sv   cluster.ServerID
		want bool
	}{{a, 0, true}, {a, 1, true}, {b, 0, false}, {b, 1, true}, {b, 2, false}, {x, 0, true}, {x, 2, true}} {
		if got := pol.seen.MayRun(tc.j, tc.sv); got != tc.want {
			t.Errorf("recovery view: job %d may run on server %d: %v, want %v", tc.j, tc.sv, got, tc.want)
		}
	}
	round(t, e, 2)
	if !pol.seen.MayRun(b, 0) {
		t.Error("the view after the recovery view still keeps b on its current server")
	}
}

// Shared jobs: a pack is carried out (an exclusive job's is refused); a
// shared job that may not be preempted may still be suspended (in place);
// a start or resume goes to the GPUs its processes are alive on (Pinned)
// when they are free or the policy packs, whatever GPUs the policy chose;
// one that may not be preempted is not resumed elsewhere; the view lets it
// run only on the servers of its Pinned GPUs.
func TestConstraintsShared(t *testing.T) {
	c := uniform(t, 1, 2)
	pol := &canned{}
	lim := &table{shared: map[cluster.JobID]bool{0: true, 1: true, 3: true}, fixed: map[cluster.JobID]bool{0: true, 1: true}}
	e := engine.New(c, pol, nil, engine.Options{Constraints: lim})
	a := add(t, e, "a", 1)
	b := add(t, e, "b", 1)
	ex := add(t, e, "ex", 1)
	pol.next = []cluster.Action{{Kind: cluster.Start, Job: a, GPUs: gpuIDs(0)}, {Kind: cluster.Start, Job: b, GPUs: gpuIDs(0), Share: true},
		{Kind: cluster.Start, Job: ex, GPUs: gpuIDs(0), Share: true}}
	res := round(t, e, 1)
	if len(res.Applied) != 2 || !res.Applied[1].Packed {
		t.Fatalf("applied %v, rejected %v: want a on GPU 0 and b packed with it", res.Applied, res.Rejected)
	}
	// (stale: a took GPU 0 in the same round; on a GPU held before, never)
	refused(t, res, ex, cluster.RejectStale, "only shared jobs may be packed")
	pol.next = []cluster.Action{{Kind: cluster.Start, Job: ex, GPUs: gpuIDs(1)}, {Kind: cluster.Suspend, Job: b}, {Kind: cluster.Suspend, Job: a}}
	if res := round(t, e, 2); len(res.Applied) != 3 {
		t.Fatalf("applied %v, rejected %v: want ex on GPU 1 and both shared jobs suspended although not movable", res.Applied, res.Rejected)
	}
	lim.pinned = map[cluster.JobID][]cluster.GPUID{a: gpuIDs(0), b: gpuIDs(0)}
	// the policy resumes both on GPU 1 (packed with ex): a goes to its
	// pinned GPU 0 instead, free now; b, pinned to GPU 0 as well, follows
	// it there packed, as the policy asked
	pol.next = []cluster.Action{{Kind: cluster.Resume, Job: a, GPUs: gpuIDs(1), Share: true}, {Kind: cluster.Resume, Job: b, GPUs: gpuIDs(1), Share: true}}
	res = round(t, e, 3)
	if len(res.Applied) != 2 || !slices.Equal(res.Applied[0].GPUs, gpuIDs(0)) || res.Applied[0].Packed ||
		!slices.Equal(res.Applied[1].GPUs, gpuIDs(0)) || !res.Applied[1].Packed {
		t.Fatalf("applied %v, rejected %v: want a resumed on its pinned GPU 0 and b packed there", res.Applied, res.Rejected)
	}
	// b suspended again and ex gone: b's resumption on the free GPU 1 is
	// refused (GPU 0, where its process is alive, is a's; no pack asked)
	pol.next = []cluster.Action{{Kind: cluster.Suspend, Job: b}, {Kind: cluster.Kill, Job: ex}}
	round(t, e, 4)
	pol.next = []cluster.Action{{Kind: cluster.Resume, Job: b, GPUs: gpuIDs(1)}}
	refused(t, round(t, e, 5), b, cluster.RejectNever, "alive on GPUs [0]")
	if pol.seen.MayRun(b, 0) != true {
		t.Fatal("the view forbids b its pinned server")
	}
	// a movable shared job goes to its pinned GPU when it is free
	m := add(t, e, "m", 1)
	pol.next = []cluster.Action{{Kind: cluster.Suspend, Job: a}, {Kind: cluster.Start, Job: m, GPUs: gpuIDs(1)}}
	lim.pinned[m] = gpuIDs(0)
	res = round(t, e, 6)
	if len(res.Applied) != 2 || !slices.Equal(res.Applied[1].GPUs, gpuIDs(0)) {
		t.Fatalf("applied %v, rejected %v: want m started on its pinned GPU 0", res.Applied, res.Rejected)
	}
}

// A shared job whose processes are alive on two servers may run only
// there in the view; a resume onto one server of its gang's size goes to
// its pinned GPUs; a gang alive in part keeps its pinned GPUs and the
// rest of the policy's choice; a pinned GPU that is blocked leaves the
// action as it is.
func TestConstraintsPinnedTarget(t *testing.T) {
	c := uniform(t, 3, 2) // 0,1 | 2,3 | 4,5
	pol := &canned{}
	lim := &table{shared: map[cluster.JobID]bool{0: true, 1: true, 2: true}, blocked: map[cluster.ServerID]int{}}
	e := engine.New(c, pol, nil, engine.Options{Constraints: lim})
	g := add(t, e, "g", 2)
	p := add(t, e, "p", 2)
	lim.pinned = map[cluster.JobID][]cluster.GPUID{g: gpuIDs(1, 3), p: gpuIDs(5)}
	lim.fixed = map[cluster.JobID]bool{g: true}
	pol.next = []cluster.Action{{Kind: cluster.Start, Job: g, GPUs: gpuIDs(0, 1)}, {Kind: cluster.Start, Job: p, GPUs: gpuIDs(2, 4)}}
	res := round(t, e, 1)
	if pol.seen.MayRun(g, 2) || !pol.seen.MayRun(g, 0) || !pol.seen.MayRun(g, 1) || !pol.seen.MayRun(p, 2) {
		t.Fatal("the view does not keep g, alive on servers 0 and 1, there (or keeps p, alive in part)")
	}
	if len(res.Applied) != 2 || !slices.Equal(res.Applied[0].GPUs, gpuIDs(1, 3)) || !slices.Equal(res.Applied[1].GPUs, gpuIDs(2, 5)) {
		t.Fatalf("applied %v, rejected %v: want g on its pinned 1,3 and p on its pinned 5 and the policy's 2", res.Applied, res.Rejected)
	}
	q := add(t, e, "q", 1)
	lim.pinned[q] = gpuIDs(0)
	lim.blocked[0] = 1 // GPU 1 blocked... the highest free of server 0: GPU 0
	pol.next = []cluster.Action{{Kind: cluster.Start, Job: q, GPUs: gpuIDs(4)}}
	if res := round(t, e, 2); len(res.Applied) != 1 || !slices.Equal(res.Applied[0].GPUs, gpuIDs(4)) {
		t.Fatalf("applied %v, rejected %v: want q on GPU 4 as asked (its pinned GPU 0 is blocked)", res.Applied, res.Rejected)
	}
}

// Without constraints the view is the snapshot: nothing restricted,
// nothing refused, as in the simulator and the live server.
func TestNoConstraintsNoRestriction(t *testing.T) {
	pol := &canned{}
	e := engine.New(uniform(t, 1, 4), pol, nil, engine.Options{})
	a := add(t, e, "a", 1)
	b := add(t, e, "b", 3)
	e.Recover()
	pol.next = []cluster.Action{{Kind: cluster.Start, Job: a, GPUs: gpuIDs(3)}, {Kind: cluster.Start, Job: b, GPUs: gpuIDs(0, 1, 3), Share: true}}
	res := round(t, e, 1)
	if pol.seen.Allowed != nil || pol.seen.Unit != nil || len(res.Applied) != 2 {
		t.Fatalf("allowed %v, unit %v, applied %v, rejected %v: want no constraints", pol.seen.Allowed != nil, pol.seen.Unit != nil, res.Applied, res.Rejected)
	}
}

// checked wraps a policy and records every placing action of its that
// names a server its view says the job may not run on, or that is not in
// whole pods.
type checked struct {
	policy.Policy
	bad []string
}

func (a *checked) Schedule(s *cluster.Snapshot) cluster.Decision {
	d := a.Policy.Schedule(s)
	for _, x := range d.Actions {
		if x.Kind != cluster.Start && x.Kind != cluster.Resume && x.Kind != cluster.Migrate && x.Kind != cluster.Resize {
			continue
		}
		for _, sv := range cluster.ServersOf(s.Cluster, x.GPUs) {
			if !s.MayRun(x.Job, sv) {
				a.bad = append(a.bad, fmt.Sprintf("t=%.1f %v: server %d", s.Now, x, sv))
			}
		}
	}
	return d
}

// Every registered policy, on random clusters with random constraints:
// no applied action breaks a constraint (the engine refuses those that
// would), and jobs run.
func TestConstraintsPoliciesRandom(t *testing.T) {
	for _, name := range registry.Names() {
		t.Run(name, func(t *testing.T) {
			ran := 0
			for seed := uint64(1); seed <= 5; seed++ {
				rng := rand.New(rand.NewPCG(seed, 7))
				c := uniform(t, 4, 4)
				inner, err := registry.New(name, policy.Config{Seed: seed})
				if err != nil {
					t.Fatal(err)
				}
				lim := &table{blocked: map[cluster.ServerID]int{}, nofit: map[[2]int]bool{}, podGPUs: map[cluster.JobID]int{}, fixed: map[cluster.JobID]bool{}}
				e := engine.New(c, inner, nil, engine.Options{Constraints: lim})
				now := 0.0
				for step := 0; step < 60; step++ {
					now += 1 + rng.Float64()*20
					if rng.IntN(2) == 0 {
						g := 1 << rng.IntN(3)
						id, err := e.Submit(now, &cluster.JobSpec{Name: fmt.Sprintf("j%d", step), User: fmt.Sprintf("u%d", rng.IntN(3)),
							GPUs: g, Iters: 100, IterTime: 1 + rng.Float64()*10})
						if err != nil {
							t.Fatal(err)
						}
						if g > 1 && rng.IntN(2) == 0 {
							lim.podGPUs[id] = 2
						}
						lim.nofit[[2]int{int(id), rng.IntN(4)}] = rng.IntN(2) == 0
						lim.fixed[id] = rng.IntN(4) == 0
					}
					for s := range 4 {
						lim.blocked[cluster.ServerID(s)] = rng.IntN(3) - 1
					}
					for _, j := range e.Snapshot().Active() {
						if j.State == cluster.Running && rng.IntN(6) == 0 {
							if err := e.Apply(cluster.Event{Time: now, Kind: cluster.EvFinish, Job: j.ID}); err != nil {
								t.Fatal(err)
							}
						}
					}
					// blocked: free in the engine's state, taken in the view
					raw := e.Snapshot()
					blocked := make([]uint64, len(raw.Servers))
					for i := range raw.Servers {
						blocked[i] = raw.Servers[i].Free
					}
					view := e.View()
					for i := range view.Servers {
						blocked[i] &^= view.Servers[i].Free
					}
					res := round(t, e, now)
					for _, a := range res.Applied {
						if a.Internal {
							continue
						}
						if (a.Kind == cluster.Suspend || a.Kind == cluster.Migrate || a.Kind == cluster.Resize) && lim.fixed[a.Job] {
							t.Fatalf("%v of a job that may not move", a)
						}
						per := map[cluster.ServerID]int{}
						for _, g := range a.GPUs {
							sv := c.ServerOf(g)
							per[sv]++
							if blocked[sv]&(1<<uint(g-c.Servers[sv].FirstGPU)) != 0 && !(a.Kind == cluster.Migrate || a.Kind == cluster.Resize) {
								t.Fatalf("%v on blocked GPU %d", a, g)
							}
						}
						for s, n := range per {
							if lim.nofit[[2]int{int(a.Job), int(s)}] {
								t.Fatalf("%v on server %d the job does not fit", a, s)
							}
							if n%lim.PodGPUs(a.Job) != 0 {
								t.Fatalf("%v: %d GPUs on server %d, not whole pods of %d", a, n, s, lim.PodGPUs(a.Job))
							}
						}
						if a.Packed {
							t.Fatalf("%v packed in exclusive mode", a)
						}
						if a.Kind == cluster.Start {
							ran++
						}
					}
				}
			}
			if ran == 0 {
				t.Fatal("no job started")
			}
		})
	}
}

// Every registered policy places jobs where they may run (Allowed): on a
// cluster split into shared and exclusive servers of two GPU generations,
// with jobs of both kinds arriving, no placing action of the policy's
// names a server its view forbids the job, and jobs of both kinds run.
func TestConstraintsPoliciesHonourAllowed(t *testing.T) {
	for _, name := range registry.Names() {
		t.Run(name, func(t *testing.T) {
			for seed := uint64(1); seed <= 3; seed++ {
				rng := rand.New(rand.NewPCG(seed, 11))
				// servers 0-3 V100, 4-7 K80, 4 GPUs each; even servers shared
				c, err := cluster.NewBuilder("t", nil).
					Add(cluster.ServerGroup{Type: "V100", Count: 4, GPUs: 4}).
					Add(cluster.ServerGroup{Type: "K80", Count: 4, GPUs: 4}).Build()
				if err != nil {
					t.Fatal(err)
				}
				inner, err := registry.New(name, policy.Config{Seed: seed})
				if err != nil {
					t.Fatal(err)
				}
				chk := &checked{Policy: inner}
				lim := &table{nofit: map[[2]int]bool{}, shared: map[cluster.JobID]bool{}}
				e := engine.New(c, chk, nil, engine.Options{Constraints: lim})
				ran := map[bool]bool{}
				now := 0.0
				for step := 0; step < 80; step++ {
					now += 1 + rng.Float64()*10
					if step < 50 && rng.IntN(3) != 0 {
						g := []int{1, 1, 2, 4, 8}[rng.IntN(5)]
						id, err := e.Submit(now, &cluster.JobSpec{Name: fmt.Sprintf("j%d", step), User: fmt.Sprintf("u%d", rng.IntN(3)),
							GPUs: g, Iters: 200, IterTime: 1, Model: []string{"resnet50", "vgg16"}[rng.IntN(2)]})
						if err != nil {
							t.Fatal(err)
						}
						sh := rng.IntN(2) == 0
						lim.shared[id] = sh
						for sv := range 8 {
							lim.nofit[[2]int{int(id), sv}] = sh != (sv%2 == 0)
						}
					}
					for _, j := range e.Snapshot().Active() {
						if j.State == cluster.Running && rng.IntN(5) == 0 {
							if err := e.Apply(cluster.Event{Time: now, Kind: cluster.EvFinish, Job: j.ID}); err != nil {
								t.Fatal(err)
							}
						}
					}
					round(t, e, now)
					if len(chk.bad) > 0 {
						t.Fatalf("seed %d: %s placed jobs where its view forbids them: %v", seed, name, chk.bad)
					}
					for _, j := range e.Snapshot().Active() {
						if j.State.Holding() {
							ran[lim.shared[j.ID]] = true
						}
					}
				}
				if !ran[true] || !ran[false] {
					t.Fatalf("seed %d: shared jobs ran %v, exclusive jobs ran %v", seed, ran[true], ran[false])
				}
			}
		})
	}
}

// fjf plans the free GPUs for the jobs that may use them: a shared job
// whose node is all blocked does not keep the exclusive node's GPUs from
// the exclusive job behind it, and starts once its node is free.
func TestConstraintsPlacesWhereJobsMayRun(t *testing.T) {
	c := uniform(t, 2, 2) // GPUs 0,1 on server 0 (shared); 2,3 on server 1
	inner, err := registry.New("fjf", policy.Config{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	lim := &table{blocked: map[cluster.ServerID]int{0: 2}, nofit: map[[2]int]bool{}}
	e := engine.New(c, inner, nil, engine.Options{Constraints: lim})
	s := add(t, e, "s", 2)
	x := add(t, e, "x", 2)
	lim.nofit[[2]int{int(s), 1}] = true
	lim.nofit[[2]int{int(x), 0}] = true
	for now := 1.0; now <= 3; now++ {
		if res := round(t, e, now); len(res.Rejected) > 0 {
			t.Fatalf("round %v: rejected %v: fjf placed a job where it may not run", now, res.Rejected)
		}
	}
	if jx := e.Job(x); !jx.State.Holding() || !slices.Equal(jx.GPUs, gpuIDs(2, 3)) {
		t.Fatalf("x is %s on %v after 3 rounds, want running on GPUs 2,3", jx.State, jx.GPUs)
	}
	clear(lim.blocked)
	round(t, e, 4)
	if js := e.Job(s); !js.State.Holding() || !slices.Equal(js.GPUs, gpuIDs(0, 1)) {
		t.Fatalf("s is %s on %v once server 0 is free, want running on GPUs 0,1", js.State, js.GPUs)
	}
}

// gandiva homes jobs where they may run: two shared jobs take turns on the
// shared GPU while an exclusive job gets the exclusive one.
func TestConstraintsGandivaHomesWhereJobsMayRun(t *testing.T) {
	c := uniform(t, 2, 1) // GPU 0 on server 0 (shared), GPU 1 on server 1
	inner, err := registry.New("gandiva", policy.Config{Seed: 1, Params: map[string]string{"quantum": "1", "pack": "false", "migrate": "false"}})
	if err != nil {
		t.Fatal(err)
	}
	lim := &table{nofit: map[[2]int]bool{}, shared: map[cluster.JobID]bool{}}
	e := engine.New(c, inner, nil, engine.Options{Constraints: lim})
	a, b := add(t, e, "a", 1), add(t, e, "b", 1)
	for _, j := range []cluster.JobID{a, b} {
		lim.nofit[[2]int{int(j), 1}] = true
		lim.shared[j] = true
	}
	ran := map[cluster.JobID]bool{}
	var x cluster.JobID = -1
	for now := 1.0; now <= 40; now++ {
		if now == 3 {
			x = add(t, e, "x", 1)
			lim.nofit[[2]int{int(x), 0}] = true
		}
		round(t, e, now)
		for _, j := range e.Snapshot().Active() {
			if j.State.Holding() {
				ran[j.ID] = true
			}
		}
	}
	if !ran[x] || !ran[a] || !ran[b] {
		t.Fatalf("ran a %v, b %v, x %v in 40 rounds: want all three", ran[a], ran[b], ran[x])
	}
}

// A shared job that may not be preempted, alive on a GPU of one server,
// may run only there in the view, so gandiva time-slices it there rather
// than offering it the other server's free GPU (where it cannot resume).
func TestConstraintsPinnedJobTakesTurnsWhereItIs(t *testing.T) {
	c := uniform(t, 2, 1)
	inner, err := registry.New("gandiva", policy.Config{Seed: 1, Params: map[string]string{"quantum": "1", "pack": "false", "migrate": "false"}})
	if err != nil {
		t.Fatal(err)
	}
	lim := &table{nofit: map[[2]int]bool{}, shared: map[cluster.JobID]bool{}, fixed: map[cluster.JobID]bool{}, pinned: map[cluster.JobID][]cluster.GPUID{}}
	e := engine.New(c, inner, nil, engine.Options{Constraints: lim})
	b := add(t, e, "b", 1)
	lim.shared[b] = true
	lim.nofit[[2]int{int(b), 0}] = true // b runs on server 1
	round(t, e, 1)
	if jb := e.Job(b); !jb.State.Holding() || !slices.Equal(jb.GPUs, gpuIDs(1)) {
		t.Fatalf("b is %s on %v, want running on GPU 1", jb.State, jb.GPUs)
	}
	a := add(t, e, "a", 1)
	lim.shared[a], lim.fixed[a] = true, true
	lim.pinned[a] = gpuIDs(1)
	ran := false
	for now := 2.0; now <= 20 && !ran; now++ {
		res := round(t, e, now)
		for _, r := range res.Rejected {
			if r.Action.Job == a {
				t.Fatalf("round %v: %v refused (%s): the policy offered a GPUs it cannot resume on", now, r.Action, r.Reason)
			}
		}
		ran = e.Job(a).State.Holding()
	}
	if !ran {
		t.Fatal("a never ran in 18 rounds of 1 s quanta")
	}
	if ja := e.Job(a); !slices.Equal(ja.GPUs, gpuIDs(1)) {
		t.Fatalf("a runs on %v, want its pinned GPU 1", ja.GPUs)
	}
}
