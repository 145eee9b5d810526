package server

import (
	"slices"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
)

// gangRig is an executor on two confirmed nodes of four GPUs each (GPUs
// 0-3 on n1, 4-7 on n2), with the engine's states set by hand and the
// events it emits kept.
type gangRig struct {
	x      *executor
	n1, n2 *node
	state  map[cluster.JobID]cluster.JobState
	events []cluster.Event
	seq    uint64
}

func newGangRig(t *testing.T) *gangRig {
	t.Helper()
	c := &cluster.Cluster{Types: cluster.KnownGPUTypes()}
	g := &gangRig{state: map[cluster.JobID]cluster.JobState{}}
	g.x = newExecutor(c, "/ckpt", func(j cluster.JobID) cluster.JobState { return g.state[j] },
		func(ev cluster.Event) { g.events = append(g.events, ev) })
	for i, name := range []string{"n1", "n2"} {
		sid, err := c.AddServer(name, "V100", 4, "r", 0, 64)
		if err != nil {
			t.Fatal(err)
		}
		n := g.x.addNode(name, sid, "V100")
		n.confirmed, n.addr = true, "http://10.0.0."+string(rune('1'+i))+":7070"
		if i == 0 {
			g.n1 = n
		} else {
			g.n2 = n
		}
	}
	return g
}

// job adds engine job eid, named id, one rank per GPU or not.
func (g *gangRig) job(eid cluster.JobID, id string, perGPU bool) *run {
	r := g.x.addRun(&job{rec: &Record{ID: id, Request: api.JobRequest{RankPerGPU: perGPU}}}, eid, false)
	r.j.run = r
	return r
}

// do applies actions as entry seq (the next one when 0) and publishes.
func (g *gangRig) do(seq uint64, acts ...engine.Applied) {
	g.seq++
	if seq != 0 {
		g.seq = seq
	}
	g.x.begin(g.seq, float64(g.seq))
	g.x.Execute(float64(g.seq), acts)
	g.x.publish()
}

// told lists what the agents see of r's current attempt, by rank.
func told(r *run) []*api.Assignment {
	var out []*api.Assignment
	for _, w := range r.workers {
		out = append(out, w.pub)
	}
	return out
}

// A job with a rank per GPU runs one worker per GPU, each a rank of its
// own with one device, the world its GPUs, rank 0's node the master; a
// job without runs one per node with the node's GPUs.
func TestRankPerGPUWorkers(t *testing.T) {
	g := newGangRig(t)
	a := g.job(0, "a", true)
	b := g.job(1, "b", false)
	g.state[0], g.state[1] = cluster.Running, cluster.Running
	g.do(0, act(cluster.Start, 0, 2, 3, 4), act(cluster.Start, 1, 0, 1, 5))
	ta := told(a)
	if len(ta) != 3 {
		t.Fatalf("a: %d workers, want 3 (one per GPU)", len(ta))
	}
	wantGPUs := [][]int{{2}, {3}, {0}}
	wantNode := []*node{g.n1, g.n1, g.n2}
	for i, p := range ta {
		if p == nil || p.Rank != i || p.World != 3 || !slices.Equal(p.GPUs, wantGPUs[i]) || a.workers[i].n != wantNode[i] ||
			p.MasterAddr != "10.0.0.1" || p.MasterPort != ta[0].MasterPort || p.Want != api.WantRun {
			t.Errorf("a's rank %d: %+v on %s, want rank %d of 3 on GPUs %v of %s, master 10.0.0.1", i, p, a.workers[i].n.name, i, wantGPUs[i], wantNode[i].name)
		}
	}
	if at := a.j.attempts[0]; !slices.Equal(at.nodes, []string{"n1", "n1", "n2"}) {
		t.Errorf("a's attempt lists nodes %v by rank, want n1 n1 n2", at.nodes)
	}
	tb := told(b)
	if len(tb) != 2 || tb[0] == nil || tb[1] == nil || !slices.Equal(tb[0].GPUs, []int{0, 1}) || !slices.Equal(tb[1].GPUs, []int{1}) || tb[1].World != 2 {
		t.Errorf("b (a rank per node): %+v, want GPUs 0,1 on n1 and 1 on n2, world 2", tb)
	}
	if ta[0].MasterPort == tb[0].MasterPort {
		t.Errorf("a and b, both mastered on n1, share port %d", ta[0].MasterPort)
	}
}

// Two gangs mastered on one node never share a MASTER_PORT, even when
// their attempt numbers agree modulo the port range (attempts of entries
// 125 apart: 256 × 125 = 32000); a gang mastered elsewhere may reuse it.
func TestMasterPortsDistinctPerNode(t *testing.T) {
	g := newGangRig(t)
	a := g.job(0, "a", true)
	b := g.job(1, "b", true)
	c := g.job(2, "c", true)
	g.state[0], g.state[1], g.state[2] = cluster.Running, cluster.Running, cluster.Running
	g.do(1, act(cluster.Start, 0, 0, 1))
	g.do(126, act(cluster.Start, 1, 2, 3))
	g.do(251, act(cluster.Start, 2, 4, 5))
	pa, pb, pc := a.workers[0].pub, b.workers[0].pub, c.workers[0].pub
	if pa == nil || pb == nil || pc == nil {
		t.Fatal("a gang is not told to run")
	}
	if pa.MasterPort == pb.MasterPort {
		t.Errorf("a and b, mastered on n1, share MASTER_PORT %d", pa.MasterPort)
	}
	if pa.MasterPort != 29500+int(a.attempt%1000) || pc.MasterPort != pa.MasterPort {
		t.Errorf("ports %d (a), %d (c, on n2): want both %d, derived from the attempt", pa.MasterPort, pc.MasterPort, 29500+a.attempt%1000)
	}
	for _, w := range b.workers {
		if w.pub.MasterPort != pb.MasterPort {
			t.Errorf("b's rank %d has port %d, its rank 0 %d", w.rank, w.pub.MasterPort, pb.MasterPort)
		}
	}
	// a worker restored from a snapshot of a build that kept no port keeps
	// the port that build derived from its attempt, and a new gang avoids it
	for _, w := range c.workers {
		w.port = 0
	}
	if got := c.workers[0].masterPort(); got != pc.MasterPort {
		t.Errorf("c's derived port %d, want %d", got, pc.MasterPort)
	}
	d := g.job(3, "d", true)
	g.state[3] = cluster.Running
	g.do(376, act(cluster.Start, 3, 6, 7)) // (n2: mastered by c)
	if p := d.workers[0].pub; p == nil || p.MasterPort == pc.MasterPort {
		t.Errorf("d, mastered on n2 beside c, told %+v: want a port other than c's %d", p, pc.MasterPort)
	}
}

// A gang with a rank per GPU resumes in place when given back its GPUs;
// given other GPUs, even on the same node, it is a new attempt restored
// from its checkpoint (every rank checkpointed first), not a rank
// restarted beside peers resumed from memory.
func TestRankPerGPUResume(t *testing.T) {
	g := newGangRig(t)
	a := g.job(0, "a", true)
	g.state[0] = cluster.Running
	g.do(0, act(cluster.Start, 0, 0, 1))
	first := a.attempt
	for _, w := range a.workers {
		g.x.report(w.n, api.Report{Job: "a", Attempt: first, Rank: w.rank, Kind: api.RepStarted})
	}
	g.state[0] = cluster.Suspended
	g.do(0, act(cluster.Suspend, 0))
	for _, p := range told(a) {
		if p.Want != api.WantSuspend {
			t.Fatalf("rank %d told %s, want suspend", p.Rank, p.Want)
		}
		g.x.report(g.n1, api.Report{Job: "a", Attempt: first, Rank: p.Rank, Kind: api.RepSuspended})
	}
	g.state[0] = cluster.Running
	g.do(0, act(cluster.Resume, 0, 0, 1))
	if a.attempt != first || len(a.leaving) != 0 {
		t.Fatalf("resumed on its own GPUs: attempt %d (was %d), %d leaving: want in place", a.attempt, first, len(a.leaving))
	}
	for _, p := range told(a) {
		if p.Want != api.WantRun || !slices.Equal(p.GPUs, []int{p.Rank}) {
			t.Errorf("rank %d: %s on %v, want run on its GPU", p.Rank, p.Want, p.GPUs)
		}
	}
	g.state[0] = cluster.Suspended
	g.do(0, act(cluster.Suspend, 0))
	for _, w := range a.workers {
		g.x.report(g.n1, api.Report{Job: "a", Attempt: first, Rank: w.rank, Kind: api.RepSuspended})
	}
	g.state[0] = cluster.Running
	g.do(0, act(cluster.Resume, 0, 1, 2))
	if a.attempt == first || len(a.leaving) != 2 {
		t.Fatalf("resumed on other GPUs: attempt %d (was %d), %d leaving: want a new attempt, both ranks leaving", a.attempt, first, len(a.leaving))
	}
	for _, w := range a.leaving {
		if w.pub == nil || w.pub.Want != api.WantCheckpoint {
			t.Errorf("old rank %d told %+v, want checkpoint", w.rank, w.pub)
		}
	}
	for _, w := range a.workers {
		if w.pub != nil {
			t.Errorf("new rank %d told %s while the old attempt is alive", w.rank, w.pub.Want)
		}
	}
	for _, w := range slices.Clone(a.leaving) {
		g.x.report(g.n1, api.Report{Job: "a", Attempt: first, Rank: w.rank, Kind: api.RepCheckpointed, Outcome: "checkpointed"})
	}
	g.x.publish()
	for i, p := range told(a) {
		if p == nil || p.Want != api.WantRun || !p.Restore || !slices.Equal(p.GPUs, []int{i + 1}) {
			t.Errorf("new rank %d: %+v, want run from the checkpoint on GPU %d", i, p, i+1)
		}
	}
}

// A rank that fails fails its gang's attempt: the engine hears it (and
// requeues the job); the other ranks are then killed, and the next
// attempt starts, from the checkpoint, only once all of them are gone.
// A rank lost with its agent does the same through the node's loss.
func TestGangStopsTogether(t *testing.T) {
	for _, lost := range []bool{false, true} {
		g := newGangRig(t)
		a := g.job(0, "a", true)
		g.state[0] = cluster.Running
		g.do(0, act(cluster.Start, 0, 3, 4)) // rank 0 on n1, rank 1 on n2
		first := a.attempt
		for _, w := range a.workers {
			g.x.report(w.n, api.Report{Job: "a", Attempt: first, Rank: w.rank, Kind: api.RepStarted})
		}
		if lost {
			g.x.disconnect(g.n2, "no contact")
		} else {
			g.x.report(g.n2, api.Report{Job: "a", Attempt: first, Rank: 1, Kind: api.RepExited, Outcome: "failed", Code: 1, Message: "rank 1 crashed"})
			if len(g.events) != 1 || g.events[0].Kind != cluster.EvFail || g.events[0].Job != 0 {
				t.Fatalf("a failed rank 1: events %+v, want one EvFail of the job", g.events)
			}
		}
		// the engine requeued it (a retry, or the node's loss)
		g.state[0] = cluster.Queued
		g.x.reconcile(true)
		g.x.publish()
		if len(a.workers) != 0 || len(a.leaving) != 1 || a.leaving[0].rank != 0 || a.leaving[0].pub.Want != api.WantKill {
			t.Fatalf("lost=%v: rank 0 not told to go: workers %d, leaving %+v", lost, len(a.workers), a.leaving)
		}
		g.state[0] = cluster.Running
		g.do(0, act(cluster.Start, 0, 0, 1))
		if p := told(a); p[0] != nil || p[1] != nil {
			t.Fatalf("lost=%v: the next attempt told to run while rank 0 of the last is alive: %+v", lost, p)
		}
		g.x.report(g.n1, api.Report{Job: "a", Attempt: first, Rank: 0, Kind: api.RepExited, Outcome: "killed"})
		g.x.publish()
		for i, p := range told(a) {
			if p == nil || p.Want != api.WantRun || !p.Restore || p.World != 2 || p.Rank != i {
				t.Errorf("lost=%v: next attempt's rank %d: %+v, want run, restored, of 2", lost, i, p)
			}
		}
	}
}
