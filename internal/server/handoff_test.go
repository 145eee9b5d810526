package server

import (
	"testing"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
)

// fenceRig is an executor on one confirmed node n1 of 8 GPUs, with the
// engine's states set by hand.
type fenceRig struct {
	x     *executor
	n     *node
	state map[cluster.JobID]cluster.JobState
	seq   uint64
}

func newFenceRig(t *testing.T) *fenceRig {
	t.Helper()
	c := &cluster.Cluster{Types: cluster.KnownGPUTypes()}
	sid, err := c.AddServer("n1", "V100", 8, "r", 0, 64)
	if err != nil {
		t.Fatal(err)
	}
	f := &fenceRig{state: map[cluster.JobID]cluster.JobState{}}
	f.x = newExecutor(c, "/ckpt", func(j cluster.JobID) cluster.JobState { return f.state[j] }, func(cluster.Event) {})
	f.n = f.x.addNode("n1", sid, "V100")
	f.n.confirmed = true
	return f
}

// do applies actions as one entry and publishes.
func (f *fenceRig) do(acts ...engine.Applied) {
	f.seq++
	f.x.begin(f.seq, float64(f.seq))
	f.x.Execute(float64(f.seq), acts)
	f.x.publish()
}

func act(kind cluster.ActionKind, j cluster.JobID, gpus ...cluster.GPUID) engine.Applied {
	return engine.Applied{Action: cluster.Action{Kind: kind, Job: j, GPUs: gpus}}
}

// told is what n1's agent sees of job id's current attempt (nil: nothing).
func (f *fenceRig) told(id string) *api.Assignment {
	for _, w := range f.n.workers {
		if w.r.j.rec.ID == id && !w.leaving {
			return w.pub
		}
	}
	return nil
}

// A job resumed in place on other GPUs of its node before its agent
// acknowledged its suspension still holds the GPUs it was told to
// suspend on: a job started on them in the same entry is not told to run
// until that order is superseded (the fence counts the GPUs a worker was
// told as well as those it is wanted on).
func TestFenceCountsToldGPUs(t *testing.T) {
	f := newFenceRig(t)
	// eid 0: w, started later on GPU 0; eid 1: a, running on GPU 0
	w := f.x.addRun(&job{rec: &Record{ID: "w"}}, 0, false)
	w.j.run = w
	a := f.x.addRun(&job{rec: &Record{ID: "a"}}, 1, false)
	a.j.run = a
	f.state[1] = cluster.Running
	f.do(act(cluster.Start, 1, 0))
	if p := f.told("a"); p == nil || p.Want != api.WantRun {
		t.Fatalf("a is not told to run: %+v", p)
	}
	f.x.report(f.n, api.Report{Job: "a", Attempt: a.attempt, Kind: api.RepStarted})
	f.state[1] = cluster.Suspended
	f.do(act(cluster.Suspend, 1))
	if p := f.told("a"); p == nil || p.Want != api.WantSuspend {
		t.Fatalf("a is not told to suspend: %+v", p)
	}
	// its agent has not said it is suspended; the engine resumes it in
	// place on GPU 1 and starts w on GPU 0
	f.state[0], f.state[1] = cluster.Running, cluster.Running
	f.do(act(cluster.Start, 0, 0), act(cluster.Resume, 1, 1))
	if p := f.told("w"); p != nil {
		t.Errorf("w told %s on GPUs %v while a was told to suspend there and has not acknowledged", p.Want, p.GPUs)
	}
	if p := f.told("a"); p == nil || p.Want != api.WantRun || len(p.GPUs) != 1 || p.GPUs[0] != 1 {
		t.Errorf("a is not told to run on GPU 1: %+v", p)
	}
	// a's order on GPU 0 is superseded: w goes at the next publication
	f.x.publish()
	if p := f.told("w"); p == nil || p.Want != api.WantRun {
		t.Errorf("w is not told to run once a's order moved off GPU 0: %+v", p)
	}
}

// The fence's rules as the live executor renders them: a worker waits for
// a process being killed on its GPUs, for an unacknowledged suspension
// there, for a stray there, and for a live earlier attempt of its job; it
// runs beside an acknowledged suspension and a packed worker.
func TestFenceLiveRules(t *testing.T) {
	f := newFenceRig(t)
	a := f.x.addRun(&job{rec: &Record{ID: "a"}}, 0, false)
	a.j.run = a
	b := f.x.addRun(&job{rec: &Record{ID: "b"}}, 1, false)
	b.j.run = b
	c := f.x.addRun(&job{rec: &Record{ID: "c"}}, 2, false)
	c.j.run = c
	f.state[0], f.state[1] = cluster.Running, cluster.Running
	f.do(act(cluster.Start, 0, 0), act(cluster.Start, 1, 0)) // packed
	if f.told("a") == nil || f.told("b") == nil {
		t.Fatal("packed jobs a and b are not both told to run")
	}
	f.x.report(f.n, api.Report{Job: "a", Attempt: a.attempt, Kind: api.RepStarted})
	f.x.report(f.n, api.Report{Job: "b", Attempt: b.attempt, Kind: api.RepStarted})
	// a suspended, b killed; c starts on GPU 0: it waits for both
	f.state[0], f.state[1], f.state[2] = cluster.Suspended, cluster.Cancelled, cluster.Running
	f.do(act(cluster.Suspend, 0), act(cluster.Kill, 1), act(cluster.Start, 2, 0))
	if p := f.told("c"); p != nil {
		t.Fatalf("c told to run while a suspends and b is killed on its GPU: %+v", p)
	}
	f.x.report(f.n, api.Report{Job: "b", Attempt: b.attempt, Kind: api.RepExited, Outcome: "killed"})
	f.x.publish()
	if p := f.told("c"); p != nil {
		t.Fatalf("c told to run while a's suspension is not acknowledged: %+v", p)
	}
	f.x.report(f.n, api.Report{Job: "a", Attempt: a.attempt, Kind: api.RepSuspended})
	f.n.strays[wkey{"old", 1, 0}] = []int{0}
	f.x.publish()
	if p := f.told("c"); p != nil {
		t.Fatalf("c told to run beside a stray on its GPU: %+v", p)
	}
	delete(f.n.strays, wkey{"old", 1, 0})
	f.n.strays[wkey{"c", 1, 0}] = []int{5}
	f.x.publish()
	if p := f.told("c"); p != nil {
		t.Fatalf("c told to run while a stray of its own job is alive: %+v", p)
	}
	delete(f.n.strays, wkey{"c", 1, 0})
	f.x.publish()
	if p := f.told("c"); p == nil || p.Want != api.WantRun {
		t.Fatalf("c is not told to run once a is suspended and b and the strays gone: %+v", p)
	}
}

// A suspension the agent acknowledged stays acknowledged when the engine
// resumes the job and suspends it again before the resume was published
// (here the node had not registered since a restart, so nothing may start
// on it): the agent, told nothing new, never says "suspended" again, and a
// job waiting for those GPUs waited for ever (live TestKill9: every job
// stuck "suspending" or "resuming" after the server's fourth kill -9).
func TestSuspensionAcknowledgedSurvivesUnpublishedResume(t *testing.T) {
	f := newFenceRig(t)
	a := f.x.addRun(&job{rec: &Record{ID: "a"}}, 0, false)
	a.j.run = a
	c := f.x.addRun(&job{rec: &Record{ID: "c"}}, 1, false)
	c.j.run = c
	f.state[0] = cluster.Running
	f.do(act(cluster.Start, 0, 0))
	f.x.report(f.n, api.Report{Job: "a", Attempt: a.attempt, Kind: api.RepStarted})
	f.state[0] = cluster.Suspended
	f.do(act(cluster.Suspend, 0))
	f.x.report(f.n, api.Report{Job: "a", Attempt: a.attempt, Kind: api.RepSuspended})
	// the node is not confirmed (a restart): a's resume is held back
	f.n.confirmed = false
	f.state[0] = cluster.Running
	f.do(act(cluster.Resume, 0, 1)) // (in place, on another GPU)
	if p := f.told("a"); p == nil || p.Want != api.WantSuspend {
		t.Fatalf("a's resume was published on a node not confirmed: %+v", p)
	}
	// suspended again before anything reached the agent; c starts on GPU 0
	f.state[0], f.state[1] = cluster.Suspended, cluster.Running
	f.do(act(cluster.Suspend, 0), act(cluster.Start, 1, 0))
	f.n.confirmed = true
	f.x.publish()
	if p := f.told("c"); p == nil || p.Want != api.WantRun {
		t.Fatalf("c is not told to run beside a suspension its agent acknowledged and was never told to undo: %+v", p)
	}
	for _, w := range f.n.workers {
		if w.r == a && (w.phase != "suspended" || len(w.gpus) != 1 || w.gpus[0] != 0) {
			t.Errorf("a is %q on GPUs %v, want suspended on GPU 0, where its process is", w.phase, w.gpus)
		}
	}
	if p := f.told("a"); p == nil || p.Want != api.WantSuspend || len(p.GPUs) != 1 || p.GPUs[0] != 0 {
		t.Errorf("a is told %+v, want still its suspension on GPU 0", p)
	}
}
