package kube

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/kube/shared"
)

// Start-ups. On Kubernetes a placement is not a running job: the Job is
// unsuspended, its controller makes the pods, Gandiva binds them, the
// node pulls their images and starts their containers. With
// Options.StartUpGrace (--start-up-grace; off by default) the engine runs
// with start-ups known (engine Options.StartUps) and not charged
// (engine Options.StartUpGrace): every placement is a start-up, which the
// executor ends by reporting the job ready (EvReady) once all of its
// gang's pods run on the placement's nodes, again after every new
// placement (a resumption, a move, a resize makes new pods). Until then
// the job is charged no service: Tiresias does not demote a gang for the
// time the control plane took to start it, which, under a replay's fast
// clock, is thousands of the trace's seconds. A gang whose pods do not all
// run within Options.StartUpGrace of wall time is charged from then on
// (the engine ends its start-up at the deadline).

// engineOptions are the engine's options for a scheduler of options o
// with clock clk.
func engineOptions(o Options, clk clock, fail *engine.FailurePolicy, cons engine.Constraints) engine.Options {
	eo := engine.Options{Failure: fail, Log: o.Log, Constraints: cons}
	if g := o.StartUpGrace; g > 0 {
		eo.StartUps = true
		eo.StartUpGrace = o.StartUpGrace.Seconds() * clk.rate()
	}
	return eo
}

// startedUp reports a workload's start-up over (EvReady) when the engine
// has it starting up and need of its pods (all of its gang, less those
// that succeeded) run on the nodes of its placement: live are its pods not
// ended nor being deleted. ok, when set, must also hold for each of them
// (shared mode: its assignment is to run).
func (s *Scheduler) startedUp(ws *wstate, live []*corev1.Pod, need int, now float64, ok func(*corev1.Pod) bool) {
	j := s.eng.Job(ws.id)
	if j == nil || !j.StartingUp || need <= 0 {
		return
	}
	in := s.x.get(ws.id)
	if !in.run {
		return
	}
	n := 0
	for _, p := range live {
		if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning || in.place[p.Spec.NodeName] == 0 {
			continue
		}
		if ok != nil && !ok(p) {
			continue
		}
		n++
	}
	if n < need {
		return
	}
	if err := s.apply(cluster.Event{Time: now, Kind: cluster.EvReady, Job: ws.id, Node: cluster.NoServer}); err != nil {
		s.log.Warn("reporting a workload's pods running", "workload", ws.w.key, "err", err)
		return
	}
	s.pending++
}

// sharedRuns reports whether a shared pod's assignment is to run.
func (s *Scheduler) sharedRuns(p *corev1.Pod) bool {
	a, ok := s.assignOf(p)
	return ok && a.State == shared.Running
}
