package kube

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
)

// A workload's gang is fixed in the engine at submission (cluster.JobSpec
// never changes), but a user may change it on the object: a Job's
// parallelism (which Kubernetes allows at any time; a suspended Job's pods
// follow it), a JobSet's replicas or parallelism, a PyTorchJob's replicas,
// a RayJob's worker replicas, the JobSet of a TrainJob when the Trainer
// carries a new numNodes to it. Kept at the old width, such a workload never
// started: the start patch wrote the old width back (refused by the
// admission policy for a Job that is not elastic) or its controller made
// pods of the new width that the old placement did not fit. So a
// workload of fixed width whose gang changed is withdrawn from the engine
// and submitted again as its object is now (reshape), keeping what the
// engine knew of it (carried).
//
// An elastic Job (gandiva.io/min-gpus or max-gpus) is not reshaped: its
// width is the engine's to choose, and the scheduler's resize writes it.

// carried is what a workload withdrawn by a reshape keeps in its next
// submission: its submission time (JobSpec.Submit, which orders equal
// claims, Tiresias' included), the service it attained (GPU-seconds) and
// executed (engine CarryService: Tiresias does not see it as new, so a
// width edited back and forth does not bring a demoted job back to the
// top queue), its progress and its last checkpoint. Its place in an
// ID-ordered queue (fifo) is not carried: it goes to the back.
type carried struct {
	submit             float64
	attained, executed float64
	done               float64
	saved              bool
	savedAt            float64
}

// maxReshapes bounds the reshapes of one workload: each is a new engine
// job (the engine keeps every job it was given), so an object whose width
// is edited in a loop would otherwise grow the scheduler without bound.
// Past it the workload is refused until it is deleted and made again.
const maxReshapes = 16

// reshaped reports whether a submitted workload's gang, as its object
// shows it now (w), is no longer the one the engine has (prev, submitted
// when ws.w's pods asked for oldPodGPUs each): other GPUs in all, or per
// pod. An elastic job is never reshaped, nor a workload made elastic, nor
// plain pods (no object: their gang is fixed when Gandiva first sees
// them, whatever pods come and go).
func reshaped(prev *cluster.Job, oldPodGPUs int, w *workload) bool {
	if w.kind == nil || prev == nil || prev.State.Terminal() {
		return false
	}
	if elastic := w.bad == "" && w.spec.Elastic(); elastic != prev.Spec.Elastic() {
		// made elastic, or fixed: while it waits its next start must
		// follow the object (an elastic job's width is the engine's, a
		// fixed one's the object's); a running one keeps its old terms
		// until it is suspended or ends
		return prev.State.Waiting()
	}
	if prev.Spec.Elastic() {
		return false
	}
	return w.gang*w.podGPUs != prev.Spec.GPUs || w.podGPUs != oldPodGPUs
}

// reshapeDue returns the engine's job of ws when the workload, as its
// object shows it now (w), is to be reshaped (reshaped, mayReshape); nil
// otherwise, or when ws is over.
func (s *Scheduler) reshapeDue(ws *wstate, w *workload) *cluster.Job {
	prev := s.eng.Job(ws.id)
	if ws.ended || !reshaped(prev, ws.w.podGPUs, w) || !mayReshape(prev, w) {
		return nil
	}
	return prev
}

// mayReshape reports whether a workload whose gang changed may be
// withdrawn and submitted again now: while it waits (queued, or suspended
// by Gandiva after it ran: nothing of it holds GPUs); while it runs only
// if Gandiva can suspend it (a kind with spec.suspend), since its new job
// may not start at once. A shared job's pods are suspended in place,
// holding their processes: one is reshaped only while it is queued (its
// pods hold nothing). A running LeaderWorkerSet, and a shared job that
// ran, keep the engine's gang until they end.
func mayReshape(prev *cluster.Job, w *workload) bool {
	if w.shared {
		return prev.State == cluster.Queued
	}
	if prev.State.Waiting() {
		return true
	}
	if w.kind == nil || w.bad != "" && w.gang > 0 {
		// (a running workload whose object Gandiva cannot schedule any
		// more keeps the engine's job, and its control of the pods, at
		// the old width: withdrawn, nothing would suspend it; one made 0
		// pods wide is withdrawn, its controller ending its pods)
		return false
	}
	_, no := w.kind.(unsuspendable)
	return !no
}

// reshape withdraws a workload whose gang changed (reshaped, mayReshape)
// from the engine and submits it again at its new shape, carrying its
// submission time, progress and checkpoint (carried); a new shape Gandiva
// cannot schedule (parallelism 0) leaves it withdrawn, with a Warning,
// until the object is fixed (syncWorkload submits it then). The old job
// is cancelled in the engine (its GPUs, if it ran, are free there: the
// binder still counts its pods on their nodes until they end, so nothing
// is double-booked); its executor's kill of it is never carried out (its
// ID no longer names the workload). A running workload's new job starts
// if the policy places its whole new gang at once, its pods that fit the
// new placement kept (reconcileObject); else the object is suspended (its
// pods checkpoint and stop) and waits at its new width. (Its old pods'
// GPUs are blocked to the engine until they end, Blocked, so the new gang
// is placed beside them or, usually, after them.) An Event on the object
// says what happened.
func (s *Scheduler) reshape(ws *wstate, w *workload, j Object, pods []*corev1.Pod, prev *cluster.Job, now float64) {
	running := !prev.State.Waiting()
	oldPodGPUs := max(ws.w.podGPUs, 1)
	from := prev.Spec.GPUs / oldPodGPUs
	c := &carried{submit: prev.Spec.Submit, attained: prev.Attained(now), executed: prev.Executed(now),
		done: prev.Done, saved: prev.Saved, savedAt: prev.SavedAt}
	ws.reshapes++
	old := ws.id
	if err := s.apply(cluster.Event{Time: now, Kind: cluster.EvCancel, Job: old,
		Reason: fmt.Sprintf("its gang changed on its object (%d pods of %d GPUs, was %d of %d): submitted again", w.gang, w.podGPUs, from, oldPodGPUs)}); err != nil && !errors.Is(err, engine.ErrStale) {
		s.log.Error("withdrawing a reshaped workload", "workload", ws.w.key, "err", err)
		return
	}
	s.pending++
	s.byID[old] = nil
	ws.id = cluster.NoJob
	ws.w = w
	ws.withdrawn = c
	ws.waitClass, ws.waitMsg = "", ""
	what := fmt.Sprintf("its gang changed from %d to %d pods", from, w.gang)
	if w.podGPUs != oldPodGPUs && w.podGPUs > 0 {
		what = fmt.Sprintf("its gang changed to %d pods of %d GPUs", w.gang, w.podGPUs)
	}
	if w.bad != "" {
		ws.announced = false
		s.warnBad(ws, j, pods)
		s.log.Info("reshaped workload withdrawn", "workload", w.key, "pods", w.gang, "why", w.bad)
		return
	}
	if !s.submitWorkload(ws, w, now) {
		return
	}
	s.log.Info("reshaped workload submitted again", "workload", w.key, "pods", w.gang, "was", from, "running", running)
	if running {
		s.event(ws, corev1.EventTypeNormal, "Reshaped", "%s while it ran: queued again at the new width with its first submission time; its pods are stopped (asked to checkpoint, as in a preemption) unless the new placement keeps them where they run, and it starts at the new width when policy %s places the whole new gang", what, s.pol.Name())
	} else {
		s.event(ws, corev1.EventTypeNormal, "Reshaped", "%s before it started: queued again at the new width with its first submission time and its checkpoint", what)
	}
}

// submitWorkload submits a workload to the engine (its first submission,
// or again after a reshape withdrew it: then with what it carries) and
// records its engine job; false when the engine refused it (logged).
func (s *Scheduler) submitWorkload(ws *wstate, w *workload, now float64) bool {
	spec := w.spec
	if _, dup := s.eng.Lookup(spec.Name); dup {
		// (a name the engine knows: a deleted object's, or this one's
		// before a reshape)
		base := spec.Name + "#" + string(w.uid)
		spec.Name = base
		for n := 2; ; n++ {
			if _, dup := s.eng.Lookup(spec.Name); !dup {
				break
			}
			spec.Name = fmt.Sprintf("%s.%d", base, n)
		}
	}
	spec.Submit = now
	c := ws.withdrawn
	if c != nil {
		spec.Submit = min(c.submit, now)
	}
	id, err := s.eng.Submit(now, &spec)
	if err != nil {
		s.log.Error("submitting", "workload", w.key, "err", err)
		return false
	}
	ws.id = id
	ws.withdrawn = nil
	for int(id) >= len(s.byID) {
		s.byID = append(s.byID, nil)
	}
	s.byID[id] = ws
	s.pending++
	if c == nil {
		s.stats.Submitted++
		return true
	}
	if err := s.eng.CarryService(id, c.attained, c.executed); err != nil {
		s.log.Warn("carrying a reshaped workload's service", "workload", w.key, "err", err)
	}
	if c.done > 0 || c.saved {
		ev := cluster.Event{Time: now, Kind: cluster.EvProfile, Job: id, Done: c.done, Saved: c.saved, SavedAt: c.savedAt}
		if err := s.eng.Apply(ev); err != nil {
			s.log.Warn("carrying a reshaped workload's progress", "workload", w.key, "err", err)
		}
	}
	return true
}
