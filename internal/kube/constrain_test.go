package kube

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

// canned is a policy that returns the actions a test gives it.
type canned struct {
	next []cluster.Action
	seen *cluster.Snapshot
	free int
}

func (c *canned) Name() string { return "canned" }
func (c *canned) Schedule(s *cluster.Snapshot) cluster.Decision {
	c.seen, c.free = s, s.FreeGPUs
	a := c.next
	c.next = nil
	return cluster.Decision{Actions: a}
}

// table is Limits from maps.
type table struct {
	blocked  map[cluster.ServerID]int
	nofit    map[[2]int]bool // {job, server}
	podGPUs  map[cluster.JobID]int
	fixed    map[cluster.JobID]bool
	current  map[cluster.JobID]map[cluster.ServerID]int
	shared   map[cluster.JobID]bool
	pinned   map[cluster.JobID][]cluster.GPUID
	recovery bool
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

func testCluster(t *testing.T, servers, gpus int) *cluster.Cluster {
	t.Helper()
	c, err := cluster.NewBuilder("t", nil).Add(cluster.ServerGroup{Type: "V100", Count: servers, GPUs: gpus}).Build()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func submit(t *testing.T, e *engine.Engine, name string, gpus int) cluster.JobID {
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

func TestConstrainedBlockedGPUsAreHiddenAndAvoided(t *testing.T) {
	c := testCluster(t, 2, 4) // GPUs 0-3 on server 0, 4-7 on server 1
	pol := &canned{}
	lim := &table{blocked: map[cluster.ServerID]int{0: 3}}
	con := NewConstrained(pol, lim)
	e := engine.New(c, con, nil, engine.Options{})
	a := submit(t, e, "a", 2)
	// the policy asks for GPUs 2,3 of server 0, which are blocked: it is re-placed on server 1
	pol.next = []cluster.Action{{Kind: cluster.Start, Job: a, GPUs: gpuIDs(2, 3)}}
	res, err := e.Round(1)
	if err != nil {
		t.Fatal(err)
	}
	if pol.free != 5 {
		t.Fatalf("the policy saw %d free GPUs, want 8 - 3 blocked = 5", pol.free)
	}
	if len(res.Applied) != 1 || !slices.Equal(res.Applied[0].GPUs, gpuIDs(4, 5)) {
		t.Fatalf("applied %v, want a start on GPUs 4,5 (best fit avoiding the blocked GPUs)", res.Applied)
	}
}

func TestConstrainedFitsAndWholePods(t *testing.T) {
	c := testCluster(t, 3, 4)
	pol := &canned{}
	lim := &table{nofit: map[[2]int]bool{{0, 0}: true}, podGPUs: map[cluster.JobID]int{0: 2, 1: 2}}
	e := engine.New(c, NewConstrained(pol, lim), nil, engine.Options{})
	a := submit(t, e, "a", 4) // 2 pods of 2; may not run on server 0
	b := submit(t, e, "b", 6) // 3 pods of 2
	// a asked for server 0: re-placed on server 1; b asked for 3+3 on
	// servers 0 and 2 (halves of pods): re-placed in whole pods
	pol.next = []cluster.Action{
		{Kind: cluster.Start, Job: a, GPUs: gpuIDs(0, 1, 2, 3)},
		{Kind: cluster.Start, Job: b, GPUs: gpuIDs(1, 2, 3, 8, 9, 10)},
	}
	res, err := e.Round(1)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Applied) != 2 {
		t.Fatalf("applied %v, rejected %v", res.Applied, res.Rejected)
	}
	if !slices.Equal(res.Applied[0].GPUs, gpuIDs(4, 5, 6, 7)) {
		t.Fatalf("a on %v, want server 1 (4-7)", res.Applied[0].GPUs)
	}
	per := map[cluster.ServerID]int{}
	for _, g := range res.Applied[1].GPUs {
		per[c.ServerOf(g)]++
	}
	for s, n := range per {
		if n%2 != 0 {
			t.Fatalf("b has %d GPUs on server %d: not whole pods of 2 (%v)", n, s, res.Applied[1].GPUs)
		}
	}
	// nothing left that fits c (2 pods of 2, servers 0 and 2 have 2 free... it fits: 0:0-1? b took 4 on server 0 or 2)
}

func TestConstrainedDropsWhatCannotBeDone(t *testing.T) {
	c := testCluster(t, 2, 2)
	pol := &canned{}
	lim := &table{fixed: map[cluster.JobID]bool{0: true}}
	con := NewConstrained(pol, lim)
	e := engine.New(c, con, nil, engine.Options{})
	a := submit(t, e, "a", 2)
	b := submit(t, e, "b", 2)
	pol.next = []cluster.Action{{Kind: cluster.Start, Job: a, GPUs: gpuIDs(0, 1)}, {Kind: cluster.Start, Job: b, GPUs: gpuIDs(2, 3)}}
	if _, err := e.Round(1); err != nil {
		t.Fatal(err)
	}
	// a is not movable: its suspension is dropped; b's migration to the
	// same server changes nothing Kubernetes can see; a pack is refused
	x := submit(t, e, "x", 1)
	pol.next = []cluster.Action{
		{Kind: cluster.Suspend, Job: a},
		{Kind: cluster.Migrate, Job: b, GPUs: gpuIDs(3, 2)},
		{Kind: cluster.Start, Job: x, GPUs: gpuIDs(0), Share: true},
	}
	res, err := e.Round(2)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Applied) != 0 || len(con.Dropped) != 3 {
		t.Fatalf("applied %v, dropped %v: want all three dropped", res.Applied, con.Dropped)
	}
}

// A preemption in one decision: the victim's GPUs serve the new job.
func TestConstrainedSuspendFreesForStart(t *testing.T) {
	c := testCluster(t, 1, 2)
	pol := &canned{}
	e := engine.New(c, NewConstrained(pol, &table{}), nil, engine.Options{})
	a := submit(t, e, "a", 2)
	pol.next = []cluster.Action{{Kind: cluster.Start, Job: a, GPUs: gpuIDs(0, 1)}}
	e.Round(1)
	b := submit(t, e, "b", 2)
	pol.next = []cluster.Action{{Kind: cluster.Suspend, Job: a}, {Kind: cluster.Start, Job: b, GPUs: gpuIDs(0, 1)}}
	res, _ := e.Round(2)
	if len(res.Applied) != 2 {
		t.Fatalf("applied %v rejected %v", res.Applied, res.Rejected)
	}
}

// The recovery round: a job the policy starts keeps its pods' nodes; a
// job the policy places on them goes elsewhere.
func TestConstrainedRecoveryKeepsCurrentNodes(t *testing.T) {
	c := testCluster(t, 2, 2)
	pol := &canned{}
	lim := &table{current: map[cluster.JobID]map[cluster.ServerID]int{1: {1: 2}}}
	con := NewConstrained(pol, lim)
	e := engine.New(c, con, nil, engine.Options{})
	a := submit(t, e, "a", 2) // no pods anywhere
	b := submit(t, e, "b", 2) // its pods run on server 1
	con.Recover()
	pol.next = []cluster.Action{{Kind: cluster.Start, Job: a, GPUs: gpuIDs(2, 3)}, {Kind: cluster.Start, Job: b, GPUs: gpuIDs(0, 1)}}
	res, _ := e.Round(1)
	if len(res.Applied) != 2 || !slices.Equal(res.Applied[0].GPUs, gpuIDs(0, 1)) || !slices.Equal(res.Applied[1].GPUs, gpuIDs(2, 3)) {
		t.Fatalf("applied %v: want a on 0,1 and b kept on 2,3", res.Applied)
	}
}

// Every registered policy runs under Constrained on random clusters with
// random limits, and the engine accepts every action it lets through:
// what Constrained keeps is always valid, and never breaks a constraint.
func TestConstrainedPoliciesRandom(t *testing.T) {
	for _, name := range registry.Names() {
		t.Run(name, func(t *testing.T) {
			for seed := uint64(1); seed <= 5; seed++ {
				rng := rand.New(rand.NewPCG(seed, 7))
				c := testCluster(t, 4, 4)
				inner, err := registry.New(name, policy.Config{Seed: seed})
				if err != nil {
					t.Fatal(err)
				}
				lim := &table{blocked: map[cluster.ServerID]int{}, nofit: map[[2]int]bool{}, podGPUs: map[cluster.JobID]int{}, fixed: map[cluster.JobID]bool{}}
				con := NewConstrained(inner, lim)
				e := engine.New(c, con, nil, engine.Options{})
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
					// finish a random running job now and then
					for _, j := range e.Snapshot().Active() {
						if j.State == cluster.Running && rng.IntN(6) == 0 {
							e.Apply(cluster.Event{Time: now, Kind: cluster.EvFinish, Job: j.ID})
						}
					}
					res, err := e.Round(now)
					if err != nil {
						t.Fatal(err)
					}
					if len(res.Rejected) > 0 {
						t.Fatalf("seed %d step %d: the engine rejected %v", seed, step, res.Rejected)
					}
					for _, a := range res.Applied {
						if a.Internal {
							continue
						}
						if (a.Kind == cluster.Suspend || a.Kind == cluster.Migrate || a.Kind == cluster.Resize) && lim.fixed[a.Job] {
							t.Fatalf("%v of a job that may not move", a)
						}
						per := map[cluster.ServerID]int{}
						for _, g := range a.GPUs {
							per[c.ServerOf(g)]++
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
					}
				}
			}
		})
	}
}

// Shared jobs: a pack the policy asks for is kept (exclusive jobs' are
// refused); a shared job that is not movable may still be suspended (in
// place); a resumption goes to the GPUs its pods are pinned to when they
// are free, whatever the policy chose; a non-movable shared job is not
// resumed elsewhere while its pods are alive.
func TestConstrainedShared(t *testing.T) {
	c := testCluster(t, 1, 2)
	pol := &canned{}
	lim := &table{shared: map[cluster.JobID]bool{0: true, 1: true}, fixed: map[cluster.JobID]bool{0: true, 1: true}}
	con := NewConstrained(pol, lim)
	e := engine.New(c, con, nil, engine.Options{})
	a := submit(t, e, "a", 1)
	b := submit(t, e, "b", 1)
	ex := submit(t, e, "ex", 1)
	pol.next = []cluster.Action{{Kind: cluster.Start, Job: a, GPUs: gpuIDs(0)}, {Kind: cluster.Start, Job: b, GPUs: gpuIDs(0), Share: true},
		{Kind: cluster.Start, Job: ex, GPUs: gpuIDs(0), Share: true}}
	res, err := e.Round(1)
	if err != nil {
		t.Fatal(err)
	}
	// a on 0; b packed with it on 0; ex (exclusive) re-placed on the free GPU 1
	if len(res.Applied) != 3 || !slices.Equal(res.Applied[1].GPUs, gpuIDs(0)) || !res.Applied[1].Packed ||
		!slices.Equal(res.Applied[2].GPUs, gpuIDs(1)) || res.Applied[2].Packed {
		t.Fatalf("applied %v, dropped %v: want a on 0, b packed on 0, ex alone on 1", res.Applied, con.Dropped)
	}
	// b suspended although not movable (in place); its pod stays on GPU 0
	pol.next = []cluster.Action{{Kind: cluster.Suspend, Job: b}, {Kind: cluster.Suspend, Job: a}}
	if res, _ := e.Round(2); len(res.Applied) != 2 {
		t.Fatalf("applied %v, dropped %v: want both shared jobs suspended", res.Applied, con.Dropped)
	}
	lim.pinned = map[cluster.JobID][]cluster.GPUID{a: gpuIDs(0), b: gpuIDs(0)}
	// the policy resumes both on GPU 1 (packed with ex): a goes to its
	// pinned GPU 0 instead, free now (a resumption in place); b, pinned to
	// GPU 0 as well, follows it there packed, as the policy asked
	pol.next = []cluster.Action{{Kind: cluster.Resume, Job: a, GPUs: gpuIDs(1), Share: true}, {Kind: cluster.Resume, Job: b, GPUs: gpuIDs(1), Share: true}}
	res, err = e.Round(3)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Applied) != 2 || res.Applied[0].Job != a || !slices.Equal(res.Applied[0].GPUs, gpuIDs(0)) ||
		res.Applied[1].Job != b || !slices.Equal(res.Applied[1].GPUs, gpuIDs(0)) || !res.Applied[1].Packed {
		t.Fatalf("applied %v, dropped %v: want a resumed on its pinned GPU 0 and b packed there", res.Applied, con.Dropped)
	}
	// b suspended again and ex gone; b's resumption on the free GPU 1 is
	// dropped: not movable, its pod lives on GPU 0, which a holds
	pol.next = []cluster.Action{{Kind: cluster.Suspend, Job: b}, {Kind: cluster.Kill, Job: ex}}
	e.Round(4)
	pol.next = []cluster.Action{{Kind: cluster.Resume, Job: b, GPUs: gpuIDs(1)}}
	res, _ = e.Round(5)
	if len(res.Applied) != 0 || len(con.Dropped) != 1 || !strings.Contains(con.Dropped[0].Reason, "not preemptible") {
		t.Fatalf("applied %v, dropped %v: want b's resumption elsewhere dropped", res.Applied, con.Dropped)
	}
}

// A start Constrained drops comes back to the inner policy as an
// EvActionFailed in the next view when the job can run then: a policy that
// learns which jobs wait from the events (gandiva, fjf) took the job off
// its waiting list when it chose it, and would never look at it again
// (TestSharedKill9 saw a gang wait forever after a failover). Here the
// policy starts j on server 0, but j is a non-preemptible shared job whose
// pods live on GPUs 2,3, which a holds; a finishes before the next round.
func TestConstrainedDroppedStartComesBack(t *testing.T) {
	c := testCluster(t, 2, 2) // GPUs 0,1 on server 0; 2,3 on server 1
	in := &canned{}
	lim := &table{shared: map[cluster.JobID]bool{}, fixed: map[cluster.JobID]bool{}}
	con := NewConstrained(in, lim)
	e := engine.New(c, con, nil, engine.Options{})
	a := submit(t, e, "a", 2)
	in.next = []cluster.Action{{Kind: cluster.Start, Job: a, GPUs: gpuIDs(2, 3)}}
	if res, err := e.Round(1); err != nil || len(res.Applied) != 1 {
		t.Fatalf("applied %v, err %v: want a started on GPUs 2,3", res.Applied, err)
	}
	j := submit(t, e, "j", 2)
	lim.shared[j], lim.fixed[j] = true, true
	lim.pinned = map[cluster.JobID][]cluster.GPUID{j: gpuIDs(2, 3)}
	in.next = []cluster.Action{{Kind: cluster.Start, Job: j, GPUs: gpuIDs(0, 1)}}
	res, err := e.Round(2)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Applied) != 0 || len(con.Dropped) != 1 || con.Dropped[0].Action.Job != j {
		t.Fatalf("applied %v, dropped %v: want j's start on server 0 dropped (pinned to 2,3, held by a)", res.Applied, con.Dropped)
	}
	if err := e.Apply(cluster.Event{Time: 2.2, Kind: cluster.EvFinish, Job: a}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Round(3); err != nil {
		t.Fatal(err)
	}
	told := slices.ContainsFunc(in.seen.Events, func(ev cluster.Event) bool { return ev.Job == j && ev.Kind == cluster.EvActionFailed })
	if !told {
		t.Fatalf("the view after the drop has events %v, want an EvActionFailed for j (its GPUs are free: not parked)", in.seen.Events)
	}
	if _, _, parked := con.Parked(j); parked {
		t.Fatal("j parked although its GPUs are free")
	}
}

// The policy's view says where each job may run (Snapshot.Allowed), so
// fjf plans the free GPUs for the jobs that may use them: a shared job
// whose shared node is not reserved yet (every GPU blocked) does not take
// the exclusive node's GPUs from the exclusive job behind it (it did,
// every round, before the view said so), and starts once its node is free.
func TestConstrainedPlacesWhereJobsMayRun(t *testing.T) {
	c := testCluster(t, 2, 2) // GPUs 0,1 on server 0 (shared); 2,3 on server 1
	inner, err := registry.New("fjf", policy.Config{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	// s runs on server 0 only, which is not reserved yet (all blocked);
	// x on server 1 only
	lim := &table{blocked: map[cluster.ServerID]int{0: 2}, nofit: map[[2]int]bool{}}
	con := NewConstrained(inner, lim)
	e := engine.New(c, con, nil, engine.Options{})
	s := submit(t, e, "s", 2)
	x := submit(t, e, "x", 2)
	lim.nofit[[2]int{int(s), 1}] = true
	lim.nofit[[2]int{int(x), 0}] = true
	for now := 1.0; now <= 3; now++ {
		if _, err := e.Round(now); err != nil {
			t.Fatal(err)
		}
		if len(con.Dropped) > 0 {
			t.Fatalf("round %v: dropped %v: fjf placed a job where it may not run", now, con.Dropped)
		}
		if e.Job(s).State.Holding() {
			t.Fatalf("round %v: s started on %v, where it may not run", now, e.Job(s).GPUs)
		}
	}
	if jx := e.Job(x); !jx.State.Holding() || !slices.Equal(jx.GPUs, gpuIDs(2, 3)) {
		t.Fatalf("x is %s on %v after 3 rounds, want running on GPUs 2,3: s, which cannot run anywhere, kept the policy's GPUs", jx.State, jx.GPUs)
	}
	// the shared node is reserved: s starts there
	clear(lim.blocked)
	if _, err := e.Round(4); err != nil {
		t.Fatal(err)
	}
	if js := e.Job(s); !js.State.Holding() || !slices.Equal(js.GPUs, gpuIDs(0, 1)) {
		t.Fatalf("s is %s on %v once server 0 is free, want running on GPUs 0,1", js.State, js.GPUs)
	}
}

// droppedStart is one server of two GPUs, both blocked, and a policy that
// started job j there in round 1 (Constrained dropped the start).
func droppedStart(t *testing.T) (*engine.Engine, *Constrained, *canned, *table, cluster.JobID) {
	t.Helper()
	lim := &table{blocked: map[cluster.ServerID]int{0: 2}}
	in := &canned{}
	con := NewConstrained(in, lim)
	e := engine.New(testCluster(t, 1, 2), con, nil, engine.Options{})
	j := submit(t, e, "j", 2)
	in.next = []cluster.Action{{Kind: cluster.Start, Job: j, GPUs: gpuIDs(0, 1)}}
	if _, err := e.Round(1); err != nil {
		t.Fatal(err)
	}
	return e, con, in, lim, j
}

// A job whose start Constrained drops because it cannot run on any free
// GPU it may use (a policy that does not honour Allowed, or a non-
// preemptible job whose pods are pinned to busy GPUs) is parked: the
// policy sees it backing off, so it plans the free GPUs for others, and
// is shown the job again, with an EvActionFailed, as soon as it can run.
func TestConstrainedParksJobsThatCannotRun(t *testing.T) {
	e, con, in, lim, j := droppedStart(t)
	res, err := e.Round(2)
	if err != nil {
		t.Fatal(err)
	}
	if nb := in.seen.Job(j).NotBefore; nb != 2+ParkFor {
		t.Fatalf("the policy sees j backing off until %v, want %v (parked from the round after the drop)", nb, 2+ParkFor)
	}
	if res.WakeAt <= 2 || res.WakeAt > 2+ParkFor {
		t.Fatalf("round's WakeAt %v, want a round by the end of j's parking (%v)", res.WakeAt, 2+ParkFor)
	}
	if until, why, ok := con.Parked(j); !ok || until != 2+ParkFor || !strings.Contains(why, "no placement") {
		t.Fatalf("Parked(j) = %v, %q, %v: want parked until %v for want of a placement", until, why, ok, 2+ParkFor)
	}
	for _, ev := range in.seen.Events {
		if ev.Job == j && ev.Kind == cluster.EvActionFailed {
			t.Fatal("the policy was told of the dropped start while j is parked")
		}
	}
	// its GPUs are free: shown again at once, and told
	clear(lim.blocked)
	if _, err := e.Round(3); err != nil {
		t.Fatal(err)
	}
	told := slices.ContainsFunc(in.seen.Events, func(ev cluster.Event) bool { return ev.Job == j && ev.Kind == cluster.EvActionFailed })
	if nb := in.seen.Job(j).NotBefore; nb != 0 || !told {
		t.Fatalf("with its GPUs free the policy sees j backing off until %v, told of it: %v; want shown again and told", nb, told)
	}
	if _, _, ok := con.Parked(j); ok {
		t.Fatal("j still parked")
	}
}

// A parked job is shown again after ParkFor seconds even when it still
// cannot run on free GPUs, so that a policy that preempts may make room.
func TestConstrainedParkingEnds(t *testing.T) {
	e, con, in, _, j := droppedStart(t)
	if len(con.Dropped) != 1 {
		t.Fatalf("dropped %v, want j's start (every GPU blocked)", con.Dropped)
	}
	if _, err := e.Round(2); err != nil {
		t.Fatal(err)
	}
	if nb := in.seen.Job(j).NotBefore; nb != 2+ParkFor {
		t.Fatalf("the policy sees j backing off until %v, want %v (parked from the round after the drop)", nb, 2+ParkFor)
	}
	if e.Job(j).NotBefore != 0 {
		t.Fatalf("the engine's job changed: NotBefore %v", e.Job(j).NotBefore)
	}
	if _, err := e.Round(2 + ParkFor); err != nil {
		t.Fatal(err)
	}
	told := false
	for _, ev := range in.seen.Events {
		told = told || (ev.Job == j && ev.Kind == cluster.EvActionFailed)
	}
	if nb := in.seen.Job(j).NotBefore; nb != 0 || !told {
		t.Fatalf("after %v s the policy sees j backing off until %v, told of it: %v; want shown again and told", ParkFor, nb, told)
	}
}

// gandiva homes jobs where they may run: two shared jobs take turns on the
// shared GPU while an exclusive job gets the exclusive one (without
// Allowed, gandiva homed one shared job on the exclusive server, and its
// every turn was dropped).
func TestConstrainedGandivaHomesWhereJobsMayRun(t *testing.T) {
	c := testCluster(t, 2, 1) // GPU 0 on server 0 (shared), GPU 1 on server 1
	inner, err := registry.New("gandiva", policy.Config{Seed: 1, Params: map[string]string{"quantum": "1", "pack": "false", "migrate": "false"}})
	if err != nil {
		t.Fatal(err)
	}
	lim := &table{nofit: map[[2]int]bool{}, shared: map[cluster.JobID]bool{}}
	con := NewConstrained(inner, lim)
	e := engine.New(c, con, nil, engine.Options{})
	a, b := submit(t, e, "a", 1), submit(t, e, "b", 1)
	for _, j := range []cluster.JobID{a, b} {
		lim.nofit[[2]int{int(j), 1}] = true
		lim.shared[j] = true
	}
	ran := map[cluster.JobID]bool{}
	var x cluster.JobID = -1
	for now := 1.0; now <= 40; now++ {
		if now == 3 {
			x = submit(t, e, "x", 1)
			lim.nofit[[2]int{int(x), 0}] = true
		}
		if _, err := e.Round(now); err != nil {
			t.Fatal(err)
		}
		for _, j := range e.Snapshot().Active() {
			if j.State.Holding() {
				ran[j.ID] = true
			}
		}
	}
	if !ran[x] || !ran[a] || !ran[b] {
		t.Fatalf("ran a %v, b %v, x %v in 40 rounds: want all three (a and b take turns on GPU 0, x on GPU 1)", ran[a], ran[b], ran[x])
	}
}

// allowedCheck wraps a policy and records every placing action of its
// whose GPUs are on a server its view says the job may not run on.
type allowedCheck struct {
	policy.Policy
	bad []string
}

func (a *allowedCheck) Schedule(s *cluster.Snapshot) cluster.Decision {
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

// Every registered policy places jobs where they may run (Allowed): on a
// cluster split into shared and exclusive servers of two GPU generations,
// with jobs of both kinds arriving (gangs up to two servers' worth), no
// start, resume, migration or resize of the policy's names a server its
// view forbids the job, and jobs of both kinds run.
func TestConstrainedPoliciesHonourAllowed(t *testing.T) {
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
				chk := &allowedCheck{Policy: inner}
				lim := &table{nofit: map[[2]int]bool{}, shared: map[cluster.JobID]bool{}}
				con := NewConstrained(chk, lim)
				e := engine.New(c, con, nil, engine.Options{})
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
							e.Apply(cluster.Event{Time: now, Kind: cluster.EvFinish, Job: j.ID})
						}
					}
					if _, err := e.Round(now); err != nil {
						t.Fatal(err)
					}
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

// A non-preemptible shared job whose pods are alive on GPUs of one server
// (after a failover, say) may run only there in the policy's view, so
// gandiva time-slices it with the job on that server rather than offering
// it the other server's free GPU every turn (where it cannot resume: each
// such resumption was dropped, and it never ran).
func TestConstrainedPinnedJobTakesTurnsWhereItIs(t *testing.T) {
	c := testCluster(t, 2, 1) // GPU 0 on server 0, GPU 1 on server 1
	inner, err := registry.New("gandiva", policy.Config{Seed: 1, Params: map[string]string{"quantum": "1", "pack": "false", "migrate": "false"}})
	if err != nil {
		t.Fatal(err)
	}
	lim := &table{nofit: map[[2]int]bool{}, shared: map[cluster.JobID]bool{}, fixed: map[cluster.JobID]bool{}, pinned: map[cluster.JobID][]cluster.GPUID{}}
	con := NewConstrained(inner, lim)
	e := engine.New(c, con, nil, engine.Options{})
	b := submit(t, e, "b", 1)
	lim.shared[b] = true
	lim.nofit[[2]int{int(b), 0}] = true // b runs on server 1
	if _, err := e.Round(1); err != nil {
		t.Fatal(err)
	}
	if jb := e.Job(b); !jb.State.Holding() || !slices.Equal(jb.GPUs, gpuIDs(1)) {
		t.Fatalf("b is %s on %v, want running on GPU 1", jb.State, jb.GPUs)
	}
	a := submit(t, e, "a", 1)
	lim.shared[a], lim.fixed[a] = true, true
	lim.pinned[a] = gpuIDs(1) // its pod is alive on GPU 1
	ran := false
	for now := 2.0; now <= 20 && !ran; now++ {
		if _, err := e.Round(now); err != nil {
			t.Fatal(err)
		}
		for _, d := range con.Dropped {
			if d.Action.Job == a {
				t.Fatalf("round %v: %v dropped (%s): the policy offered a GPUs it cannot resume on", now, d.Action, d.Reason)
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
