package engine_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/registry"
)

// quotaTable is table with quotas per job.
type quotaTable struct {
	*table
	q map[cluster.JobID][]engine.Quota
}

func (t *quotaTable) Quotas(j cluster.JobID) []engine.Quota { return t.q[j] }

var _ engine.Quotas = (*quotaTable)(nil)

func twoTypes(t *testing.T) *cluster.Cluster {
	t.Helper()
	c, err := cluster.NewBuilder("t", nil).
		Add(cluster.ServerGroup{Type: "V100", Count: 2, GPUs: 4}).
		Add(cluster.ServerGroup{Type: "A100", Count: 1, GPUs: 4}).Build()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func emptyTable() *table {
	return &table{blocked: map[cluster.ServerID]int{}, nofit: map[[2]int]bool{}, podGPUs: map[cluster.JobID]int{}, fixed: map[cluster.JobID]bool{}}
}

// A queue's GPU quota of a type: a start that would take its jobs over it
// is refused (retry) naming the queue and its quota, even within the round
// that started the others; the job is not allowed on that type's servers
// in the next view (other types are not capped), and is again once a job
// of the queue ends.
func TestQuotaCapsStartsPerType(t *testing.T) {
	c := twoTypes(t)
	pol := &canned{}
	lim := &quotaTable{table: emptyTable(), q: map[cluster.JobID][]engine.Quota{}}
	e := engine.New(c, pol, nil, engine.Options{Constraints: lim})
	qa := []engine.Quota{{Name: "queue org", Max: map[string]int{"V100": 6}}, {Name: "queue team-a", Max: map[string]int{"V100": 4}}}
	j1, j2, j3 := add(t, e, "j1", 2), add(t, e, "j2", 2), add(t, e, "j3", 2)
	j4 := add(t, e, "j4", 2) // queue team-b: under org only
	for _, j := range []cluster.JobID{j1, j2, j3} {
		lim.q[j] = qa
	}
	lim.q[j4] = qa[:1]
	pol.next = []cluster.Action{
		{Kind: cluster.Start, Job: j1, GPUs: gpuIDs(0, 1)},
		{Kind: cluster.Start, Job: j2, GPUs: gpuIDs(2, 3)},
		{Kind: cluster.Start, Job: j3, GPUs: gpuIDs(4, 5)},
	}
	res := round(t, e, 1)
	refused(t, res, j3, cluster.RejectRetry, "queue team-a allows 4 V100 GPUs at once; its jobs hold 4 and this one would add 2")
	view := e.View()
	for sv, want := range []bool{false, false, true} {
		if got := view.MayRun(j3, cluster.ServerID(sv)); got != want {
			t.Errorf("j3 on server %d (%s): may run %v, want %v", sv, c.TypeOf(cluster.ServerID(sv)).Name, got, want)
		}
	}
	if !view.MayRun(j4, 1) {
		t.Error("j4 (org's quota: 4 of 6 held) not allowed a V100 server")
	}
	// the org's quota: j4 fits (6), a second 2-GPU job of team-b would not
	pol.next = []cluster.Action{{Kind: cluster.Start, Job: j4, GPUs: gpuIDs(4, 5)}}
	if res := round(t, e, 2); len(res.Applied) != 1 || len(res.Rejected) != 0 {
		t.Fatalf("j4: applied %v, rejected %v", res.Applied, res.Rejected)
	}
	// j3 on the A100 (not capped) runs
	pol.next = []cluster.Action{{Kind: cluster.Start, Job: j3, GPUs: gpuIDs(8, 9)}}
	if res := round(t, e, 3); len(res.Applied) != 1 {
		t.Fatalf("j3 on A100: applied %v, rejected %v", res.Applied, res.Rejected)
	}
	// a migration of j3 to V100 is refused: the org holds 6
	pol.next = []cluster.Action{{Kind: cluster.Migrate, Job: j3, GPUs: gpuIDs(6, 7)}}
	refused(t, round(t, e, 4), j3, cluster.RejectRetry, "migrate: queue org allows 6 V100 GPUs")
	// j1 ends: j3 may move to a V100 server
	if err := e.Apply(cluster.Event{Time: 5, Kind: cluster.EvFinish, Job: j1}); err != nil {
		t.Fatal(err)
	}
	pol.next = []cluster.Action{{Kind: cluster.Migrate, Job: j3, GPUs: gpuIDs(6, 7)}}
	if res := round(t, e, 5); len(res.Applied) != 1 {
		t.Fatalf("j3 to V100 after j1 ended: applied %v, rejected %v", res.Applied, res.Rejected)
	}
}

// A suspension earlier in the round frees its queue's quota for a start
// later in it; a quota lowered under running jobs stops new starts but
// suspends nothing.
func TestQuotaSuspendFreesAndLoweredQuotaKeepsRunning(t *testing.T) {
	c := uniform(t, 1, 4)
	pol := &canned{}
	lim := &quotaTable{table: emptyTable(), q: map[cluster.JobID][]engine.Quota{}}
	e := engine.New(c, pol, nil, engine.Options{Constraints: lim})
	q := []engine.Quota{{Name: "queue a", Max: map[string]int{"V100": 2}}}
	j1, j2 := add(t, e, "j1", 2), add(t, e, "j2", 2)
	lim.q[j1], lim.q[j2] = q, q
	pol.next = []cluster.Action{{Kind: cluster.Start, Job: j1, GPUs: gpuIDs(0, 1)}}
	round(t, e, 1)
	pol.next = []cluster.Action{{Kind: cluster.Suspend, Job: j1}, {Kind: cluster.Start, Job: j2, GPUs: gpuIDs(2, 3)}}
	if res := round(t, e, 2); len(res.Applied) != 2 {
		t.Fatalf("suspend then start: applied %v, rejected %v", res.Applied, res.Rejected)
	}
	q[0].Max["V100"] = 0 // lowered: j2 runs on
	if res := round(t, e, 3); len(res.Applied) != 0 || e.Job(j2).State != cluster.Running {
		t.Fatalf("lowered quota: applied %v, j2 %s", res.Applied, e.Job(j2).State)
	}
	if e.View().MayRun(j1, 0) {
		t.Error("j1 allowed to resume under a quota of 0")
	}
}

// Every registered policy, on random clusters with random quotas: the GPUs
// each quota's jobs hold never exceed its Max of any type (no quota starts
// over its Max), and jobs run.
func TestQuotaPoliciesRandom(t *testing.T) {
	for _, name := range registry.Names() {
		t.Run(name, func(t *testing.T) {
			ran := 0
			for seed := uint64(1); seed <= 4; seed++ {
				rng := rand.New(rand.NewPCG(seed, 11))
				c := twoTypes(t)
				inner, err := registry.New(name, policy.Config{Seed: seed})
				if err != nil {
					t.Fatal(err)
				}
				org := engine.Quota{Name: "org", Max: map[string]int{"V100": 2 + rng.IntN(6)}}
				teams := []engine.Quota{
					{Name: "a", Max: map[string]int{"V100": rng.IntN(5), "A100": 1 + rng.IntN(4)}},
					{Name: "b", Max: map[string]int{"A100": rng.IntN(3)}},
					{Name: "c"},
				}
				lim := &quotaTable{table: emptyTable(), q: map[cluster.JobID][]engine.Quota{}}
				e := engine.New(c, inner, nil, engine.Options{Constraints: lim})
				now := 0.0
				for step := 0; step < 60; step++ {
					now += 1 + rng.Float64()*20
					if rng.IntN(2) == 0 {
						team := rng.IntN(3)
						id, err := e.Submit(now, &cluster.JobSpec{Name: fmt.Sprintf("j%d", step), User: fmt.Sprintf("u%d", team),
							GPUs: 1 << rng.IntN(2), Iters: 100, IterTime: 1 + rng.Float64()*10})
						if err != nil {
							t.Fatal(err)
						}
						lim.q[id] = []engine.Quota{teams[team], org}
					}
					for _, j := range e.Snapshot().Active() {
						if j.State == cluster.Running && rng.IntN(6) == 0 {
							if err := e.Apply(cluster.Event{Time: now, Kind: cluster.EvFinish, Job: j.ID}); err != nil {
								t.Fatal(err)
							}
						}
					}
					res := round(t, e, now)
					for _, a := range res.Applied {
						if a.Kind == cluster.Start {
							ran++
						}
					}
					held := map[string]int{}
					for _, j := range e.Snapshot().Active() {
						for _, g := range j.GPUs {
							typ := c.GPUType(g).Name
							for _, q := range lim.q[j.ID] {
								held[q.Name+"/"+typ]++
							}
						}
					}
					for _, q := range append(teams, org) {
						for typ, m := range q.Max {
							if held[q.Name+"/"+typ] > m {
								t.Fatalf("t=%.1f: quota %s holds %d %s GPUs, max %d (applied %v)", now, q.Name, held[q.Name+"/"+typ], typ, m, res.Applied)
							}
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

// In a recovery round, jobs that run now over their quota (lowered while
// no driver ran) start again where they run; a job that does not run now
// is held to the quota.
func TestQuotaRecoveryKeepsWhatRuns(t *testing.T) {
	c := uniform(t, 2, 4)
	pol := &canned{}
	lim := &quotaTable{table: emptyTable(), q: map[cluster.JobID][]engine.Quota{}}
	lim.current = map[cluster.JobID]map[cluster.ServerID]int{}
	e := engine.New(c, pol, nil, engine.Options{Constraints: lim})
	q := []engine.Quota{{Name: "queue a", Max: map[string]int{"V100": 2}}}
	j1, j2, j3 := add(t, e, "j1", 2), add(t, e, "j2", 2), add(t, e, "j3", 2)
	lim.q[j1], lim.q[j2], lim.q[j3] = q, q, q
	lim.current[j1] = map[cluster.ServerID]int{0: 2}
	lim.current[j2] = map[cluster.ServerID]int{1: 2}
	e.Recover()
	if v := e.View(); !v.MayRun(j2, 1) || v.MayRun(j2, 0) {
		t.Fatalf("recovery view: j2 may run on 1 %v, on 0 %v", v.MayRun(j2, 1), v.MayRun(j2, 0))
	}
	e.Recover()
	pol.next = []cluster.Action{
		{Kind: cluster.Start, Job: j1, GPUs: gpuIDs(0, 1)},
		{Kind: cluster.Start, Job: j2, GPUs: gpuIDs(4, 5)},
		{Kind: cluster.Start, Job: j3, GPUs: gpuIDs(2, 3)},
	}
	res := round(t, e, 1)
	refused(t, res, j3, cluster.RejectRetry, "queue a allows 2 V100 GPUs at once; its jobs hold 4")
	if len(res.Applied) != 2 {
		t.Fatalf("applied %v", res.Applied)
	}
}
