package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/kube/shared"
	"github.com/gandiva-sched/gandiva/internal/plural"
)

type metav1ListOptions = metav1.ListOptions

func labelsEverything() labels.Selector { return labels.Everything() }

func metav1ControllerOf(p *corev1.Pod) *metav1.OwnerReference { return metav1.GetControllerOf(p) }

// intent is what the engine wants of one workload, as its executor was
// told: to run on GPUs (placement: GPUs per node), or not; killed: over
// by the engine's decision (cancelled or failed), its pods stopped for
// good; moving: migrating, done (EvActionDone) once its pods all run on
// the placement.
type intent struct {
	run, killed, moving bool
	gpus                []cluster.GPUID
	place               placement
	// kind is the action that set a running intent (Start, Resume,
	// Migrate, Resize): the one a refusal names (bindRefused)
	kind cluster.ActionKind
}

// kexec is Kubernetes' engine.Executor: the third executor beside the
// simulator's and the live server's.
//
// Contract: Execute records, per engine job, what the engine's applied
// actions want (an intent) and notes the jobs whose intent changed, which
// the loop takes (touched) and reconciles; it reads nothing but its
// actions and the node names of their GPUs, and makes no call. Events the
// loop applies itself outside a round (a finish, a failure, a cancel, a
// node lost, a migration done) change jobs without an action: the loop
// then tells the executor each such job's new state (settle). Reconcile
// acts on intents only, never on the engine's job state.
type kexec struct {
	c       *cluster.Cluster
	node    func(cluster.ServerID) string // a server's node name
	want    []intent                      // by engine JobID
	touched []cluster.JobID
}

var _ engine.Executor = (*kexec)(nil)

// Execute implements engine.Executor.
func (x *kexec) Execute(_ float64, actions []engine.Applied) {
	for i := range actions {
		a := &actions[i]
		in := x.at(a.Job)
		switch a.Kind {
		case cluster.Start, cluster.Resume, cluster.Migrate, cluster.Resize:
			*in = intent{run: true, gpus: a.GPUs, place: x.placement(a.GPUs), kind: a.Kind,
				moving: a.Kind == cluster.Migrate || (a.Kind == cluster.Resume && a.Remote)}
		case cluster.Suspend, cluster.Warm:
			*in = intent{}
		case cluster.Kill:
			*in = intent{killed: true}
		default:
			continue
		}
		x.touched = append(x.touched, a.Job)
	}
}

// settle tells the executor the state the engine put job id in by an
// event outside a round.
func (x *kexec) settle(id cluster.JobID, st cluster.JobState) {
	in := x.at(id)
	switch {
	case st.Terminal():
		*in = intent{killed: st == cluster.Cancelled || st == cluster.Failed}
	case !st.Holding():
		*in = intent{}
	case st != cluster.Migrating:
		in.moving = false
	}
}

// on lists the jobs whose intent holds GPUs of server sv, in order.
func (x *kexec) on(sv cluster.ServerID) []cluster.JobID {
	var out []cluster.JobID
	for id := range x.want {
		for _, g := range x.want[id].gpus {
			if x.c.ServerOf(g) == sv {
				out = append(out, cluster.JobID(id))
				break
			}
		}
	}
	return out
}

// take returns the jobs whose intent changed since the last take.
func (x *kexec) take() []cluster.JobID {
	out := x.touched
	x.touched = nil
	return out
}

func (x *kexec) at(id cluster.JobID) *intent {
	for int(id) >= len(x.want) {
		x.want = append(x.want, intent{})
	}
	return &x.want[id]
}

func (x *kexec) get(id cluster.JobID) intent {
	if id < 0 || int(id) >= len(x.want) {
		return intent{}
	}
	return x.want[id]
}

func (x *kexec) placement(gpus []cluster.GPUID) placement {
	p := placement{}
	for _, g := range gpus {
		p[x.node(x.c.ServerOf(g))]++
	}
	return p
}

// intentCheck, when set (by tests), is called by the loop after every
// step, to hold the intents against the engine's state.
var intentCheck func(*Scheduler)

// desired is where the engine wants a workload (its intent).
func (s *Scheduler) desired(ws *wstate) (run bool, p placement, width int, killed bool) {
	in := s.x.get(ws.id)
	if !in.run {
		return false, nil, 0, in.killed
	}
	return true, in.place, len(in.gpus) / max(ws.w.podGPUs, 1), false
}

// apply applies an event the loop makes itself and settles the intents of
// the jobs it changed (see kexec).
func (s *Scheduler) apply(ev cluster.Event) error {
	var ids []cluster.JobID
	if ev.Kind == cluster.EvNodeDown {
		ids = s.x.on(ev.Node)
	} else if ev.Job != cluster.NoJob {
		ids = []cluster.JobID{ev.Job}
	}
	err := s.eng.Apply(ev)
	for _, id := range ids {
		if j := s.eng.Job(id); j != nil {
			s.x.settle(id, j.State)
		}
	}
	return err
}

// reconcile makes the API match the engine's wish for one workload, one
// step at a time (each step an op; the next one when the informers show
// its effect). Level-triggered: it looks only at the engine and the
// caches, so it resumes where a crashed predecessor stopped.
func (s *Scheduler) reconcile(ws *wstate, now float64) {
	if ws.id == cluster.NoJob {
		return
	}
	w, j, pods := s.observe(ws.w.key)
	if w == nil {
		return
	}
	if s.reshapeDue(ws, w) != nil {
		// its gang changed on the object since syncWorkload looked (the
		// informer's event has it synced again, and reshaped): nothing is
		// done at the old shape (a start would write the old width back)
		return
	}
	run, want, width, killed := s.desired(ws)
	if !run {
		if ws.waitMsg != "" && !ws.ended {
			s.podsWaiting(ws, ws.waitMsg) // pods created since it was told
		}
	}
	if ws.ended && !killed {
		return
	}
	switch {
	case w.shared:
		if w.kind == nil {
			j, width = nil, w.gang
		}
		s.reconcileShared(ws, j, pods, run, want, width, killed, now)
	case w.kind != nil:
		s.reconcileObject(ws, j, pods, run, want, width, killed, now)
	default:
		s.reconcilePods(ws, pods, run, want, now)
	}
}

// holds reports whether a pod holds GPUs: bound (by the API or by a binding
// of ours not seen yet) and not ended.
func (s *Scheduler) nodeOf(p *corev1.Pod) string {
	if p.Spec.NodeName != "" {
		return p.Spec.NodeName
	}
	if b, ok := s.binds.Get(p.UID); ok {
		return b.node
	}
	return ""
}

// reconcileObject is reconcile for a workload of a kind (a Job, a JobSet):
// it is suspended, resumed and resized through its object (patchJob), and
// its pods, once its controller makes them, are bound to the placement.
func (s *Scheduler) reconcileObject(ws *wstate, j Object, pods []*corev1.Pod, run bool, want placement, width int, killed bool, now float64) {
	if s.busy("job:" + ws.w.key) {
		return
	}
	k := ws.w.kind
	state := j.GetAnnotations()[AnnState]
	suspended := k.Suspended(j)
	cur, _ := parsePlacement(j.GetAnnotations()[AnnPlacement])
	var live, holding []*corev1.Pod // live: not deleting, not ended; holding: bound, not ended
	dying := 0
	for _, p := range pods {
		if terminal(p) {
			continue
		}
		if s.nodeOf(p) != "" {
			holding = append(holding, p)
		}
		if p.DeletionTimestamp != nil {
			dying++
			continue
		}
		live = append(live, p)
	}
	if over, _, _ := k.Finished(j); over {
		return
	}
	G := max(ws.w.podGPUs, 1)
	switch {
	case killed:
		if state != StateKilled {
			s.patchJob(ws, j, holding, true, StateKilled, nil, 0, "Killed", "stopped for good by policy "+s.pol.Name())
		}
	case !run:
		// waiting: nothing of it may hold GPUs
		if state == StateRunning || state == StateMoving || (!suspended && len(holding) > 0) {
			s.patchJob(ws, j, holding, true, StateSuspended, nil, 0, "Suspended",
				"suspended by policy "+s.pol.Name()+"; its pods are asked to checkpoint (SIGTERM) and stop")
		}
	case state == StateRunning && cur.equal(want) && !suspended && k.Width(j) == width:
		s.bindJob(ws, j, live, holding, want, width, now)
	case len(holding) == 0 && dying == 0:
		// nothing runs: (re)start it on the target
		s.patchJob(ws, j, nil, false, StateRunning, want, width, "Started", "to run on "+want.String())
	case state == StateMoving && cur.equal(want) && suspended:
		// its old pods are still leaving
	case k.Width(j) == width && dying == 0 && !suspended && fitsWithin(s, holding, want, G):
		// what runs stays where it is; only unbound pods go elsewhere
		s.patchJob(ws, j, nil, false, StateRunning, want, width, "", "")
	default:
		s.patchJob(ws, j, holding, true, StateMoving, want, width, "Moving",
			"moving to "+want.String()+": its pods checkpoint and stop, then start there")
	}
}

func parallelism(j *batchv1.Job) int {
	if j.Spec.Parallelism == nil {
		return 1
	}
	return int(*j.Spec.Parallelism)
}

// fitsWithin reports whether the holding pods fit the placement per node.
func fitsWithin(s *Scheduler, holding []*corev1.Pod, want placement, g int) bool {
	per := map[string]int{}
	for _, p := range holding {
		per[s.nodeOf(p)] += g
	}
	for n, k := range per {
		if k > want[n] {
			return false
		}
	}
	return true
}

// patchJob records a decision on a workload's object (a Job, a JobSet) in
// one patch: spec.suspend, the state and placement annotations, and the
// width (the kind's SpecPatch); before a suspension it marks the pods that
// hold GPUs with a DisruptionTarget condition, so that their ending counts
// no failure (a Job's pod failure policy ignores it).
func (s *Scheduler) patchJob(ws *wstate, j Object, disrupt []*corev1.Pod, suspend bool, state string, p placement, width int, reason, note string) {
	ann := map[string]any{AnnState: state}
	if p != nil {
		ann[AnnPlacement] = p.String()
	} else {
		ann[AnnPlacement] = nil
	}
	k := ws.w.kind
	spec := k.SpecPatch(j, suspend, width)
	body, _ := json.Marshal(map[string]any{
		"metadata": map[string]any{"annotations": ann, "resourceVersion": j.GetResourceVersion()},
		"spec":     spec,
	})
	ns, name := j.GetNamespace(), j.GetName()
	uid := j.GetUID()
	job := j
	key := "job:" + ws.w.key
	tok := s.patched.Assume(ws.w.key, nil)
	var podNames []string
	for _, pd := range disrupt {
		podNames = append(podNames, pd.Name)
	}
	s.submit(op{key: key, wl: ws.w.key, do: func(ctx context.Context) opResult {
		for _, pn := range podNames {
			if err := s.markDisrupted(ctx, ns, pn, note); err != nil && !apierrors.IsNotFound(err) {
				return opResult{err: fmt.Errorf("marking pod %s/%s disrupted: %w", ns, pn, err)}
			}
		}
		out, err := k.Patch(ctx, &s.cl, ns, name, body)
		if err != nil {
			return opResult{err: fmt.Errorf("patching %s %s/%s: %w", k.GVK().Kind, ns, name, err), conflict: apierrors.IsConflict(err)}
		}
		if out.GetUID() != uid {
			return opResult{}
		}
		if reason != "" {
			s.rec.Event(job, corev1.EventTypeNormal, reason, note)
		}
		return opResult{job: out}
	}, tok: tokens{job: tok}})
	s.stats.JobPatches++
}

// markDisrupted adds the DisruptionTarget condition to a pod's status.
func (s *Scheduler) markDisrupted(ctx context.Context, ns, pod, note string) error {
	body, _ := json.Marshal(map[string]any{"status": map[string]any{"conditions": []map[string]any{{
		"type": string(corev1.DisruptionTarget), "status": "True", "reason": reasonGandivaSuspend,
		"message": "Gandiva: " + note, "lastTransitionTime": metav1.Now().UTC().Format(time.RFC3339),
	}}}})
	_, err := s.cs.CoreV1().Pods(ns).Patch(ctx, pod, types.StrategicMergePatchType, body, metav1.PatchOptions{}, "status")
	return err
}

// bindJob binds the pods of a running Job to the free slots of its
// placement: a gang not yet bound only when all its pods exist and every
// node has room for them at once (all or nothing), replacement pods one by
// one. It reports a finished move to the engine.
func (s *Scheduler) bindJob(ws *wstate, j Object, live, holding []*corev1.Pod, want placement, width int, now float64) {
	G := max(ws.w.podGPUs, 1)
	need := width - ws.w.kind.Succeeded(j)
	if need <= 0 {
		return
	}
	s.bindPods(ws, live, holding, want, need, G, now)
}

func (s *Scheduler) bindPods(ws *wstate, live, holding []*corev1.Pod, want placement, need, G int, now float64) {
	slots := map[string]int{}
	for n, k := range want {
		slots[n] = k / G
	}
	bound := 0
	for _, p := range holding {
		if p.DeletionTimestamp == nil {
			slots[s.nodeOf(p)]--
			bound++
		}
	}
	if bound >= need {
		s.moved(ws, live, now)
		s.startedUp(ws, live, need, now, nil)
		return
	}
	unbound := s.unbound(live)
	if bound == 0 && len(unbound) < need {
		return // the gang is not all there yet
	}
	nodes := keysOf(slots)
	type assign struct {
		p    *corev1.Pod
		node string
	}
	var plan []assign
	room := map[string]int{}
	for _, p := range unbound {
		if len(plan)+bound >= need {
			break
		}
		for _, n := range nodes {
			if slots[n] > 0 {
				slots[n]--
				plan = append(plan, assign{p, n})
				room[n] += G
				break
			}
		}
	}
	ok := map[string]bool{}
	for n, k := range room {
		ns := s.nodes[n]
		ok[n] = ns != nil && ns.alive && ns.alloc-ns.foreign-ns.ours >= k
		if !ok[n] {
			// look at it again when room is freed there
			if s.waitRoom[n] == nil {
				s.waitRoom[n] = map[string]bool{}
			}
			s.waitRoom[n][ws.w.key] = true
		}
	}
	if bound == 0 {
		for n := range room {
			if !ok[n] {
				return // all or nothing: wait until every node has room
			}
		}
	}
	for _, a := range plan {
		if !ok[a.node] {
			continue
		}
		s.bind(ws, a.p, a.node, G)
	}
}

// bind binds one pod through the binding subresource. A pod already bound
// makes the API server answer Conflict: a binding is never made twice.
func (s *Scheduler) bind(ws *wstate, p *corev1.Pod, node string, g int) {
	key := "pod:" + string(p.UID)
	tok := s.binds.Assume(p.UID, bindRec{node: node, gpus: g})
	if ns := s.nodes[node]; ns != nil {
		ns.ours += g
	}
	pod := p
	s.submit(op{key: key, wl: ws.w.key, do: func(ctx context.Context) opResult {
		called := time.Now()
		err := s.cs.CoreV1().Pods(pod.Namespace).Bind(ctx, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
			Target:     corev1.ObjectReference{Kind: "Node", Name: node},
		}, metav1.CreateOptions{})
		if err != nil {
			return opResult{err: fmt.Errorf("binding pod %s/%s to %s: %w", pod.Namespace, pod.Name, node, err), conflict: apierrors.IsConflict(err), bound: pod}
		}
		s.rec.Eventf(pod, corev1.EventTypeNormal, "Scheduled", "Successfully assigned %s/%s to %s (Gandiva, policy %s)", pod.Namespace, pod.Name, node, s.pol.Name())
		return opResult{bound: pod, boundTo: node, called: called, at: time.Now()}
	}, tok: tokens{bind: tok}, fail: opResult{bound: pod}})
	s.stats.Binds++
}

// refusedForGood reports whether the API server refused a call in a way
// that asking again, unchanged, cannot help: forbidden (an admission
// policy, missing rights), invalid, malformed. A conflict (caches behind),
// a timeout, an unavailable server, a call replaced or not made are not.
func refusedForGood(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err)
}

// bindRefused gives up on the running intent of the workload of a pod
// whose binding the API server refused for good, and reports it back
// (the executor's side of the closed loop): the event puts the job back
// in the queue, its GPUs released (EvActionFailed: the engine applied the
// placement, which cannot be carried out); the refusal tells the policy
// which action failed and why, with RejectNever (the same binding would be
// refused again). A round follows at this step. Only a Job's pods: the
// engine's requeue suspends the Job, whose controller deletes the pods
// bound already; a plain-pod gang (never suspended) and a shared pod are
// retried with back-off, as are bindings refused for other reasons. Once
// the intent is given up the other pods' refusals of the same gang find
// none, so the job is reported once.
func (s *Scheduler) bindRefused(r opResult) {
	ws := s.ws[r.wl]
	if ws == nil || ws.id == cluster.NoJob || ws.w.kind == nil || ws.w.shared {
		return
	}
	in := s.x.get(ws.id)
	if j := s.eng.Job(ws.id); !in.run || j == nil || !j.State.Holding() {
		return // the engine moved on already
	}
	reason := r.err.Error()
	if err := s.apply(cluster.Event{Time: s.now(), Kind: cluster.EvActionFailed, Job: ws.id, Node: cluster.NoServer, Reason: reason}); err != nil {
		s.log.Warn("giving up a placement", "workload", ws.w.key, "err", err)
		return
	}
	s.eng.Refused(cluster.Rejection{Action: cluster.Action{Kind: in.kind, Job: ws.id, GPUs: slices.Clone(in.gpus)},
		Code: cluster.RejectNever, Reason: reason})
	s.stats.GaveUp++
	s.pending++
	s.event(ws, corev1.EventTypeWarning, "BindRefused", "the API server refused to bind pod %s/%s for good (%s): back in the queue; policy %s was told",
		r.bound.Namespace, r.bound.Name, reason, s.pol.Name())
}

// moved tells the engine that a migrating job's pods are all in place.
func (s *Scheduler) moved(ws *wstate, live []*corev1.Pod, now float64) {
	if !s.x.get(ws.id).moving {
		return
	}
	for _, p := range live {
		if p.Spec.NodeName == "" {
			return
		}
	}
	if err := s.apply(cluster.Event{Time: now, Kind: cluster.EvActionDone, Job: ws.id}); err == nil {
		s.pending++
	}
}

// reconcilePods handles plain pods: they are never suspended or moved
// (no controller would recreate them), so a running gang's pods are
// bound, all or nothing.
func (s *Scheduler) reconcilePods(ws *wstate, pods []*corev1.Pod, run bool, want placement, now float64) {
	if !run {
		return
	}
	G := max(ws.w.podGPUs, 1)
	var live, holding []*corev1.Pod
	for _, p := range pods {
		if terminal(p) {
			continue
		}
		if s.nodeOf(p) != "" {
			holding = append(holding, p)
		}
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	s.bindPods(ws, live, holding, want, ws.w.gang, G, now)
}

// result folds a finished op in.
func (s *Scheduler) result(r opResult, now time.Time) {
	if r.bound != nil && r.err == nil {
		s.mu.Lock()
		t, ok := s.seenAt[r.bound.UID]
		delete(s.seenAt, r.bound.UID)
		s.mu.Unlock()
		if ok {
			if len(s.stats.BindLatency) >= 100000 {
				// (new arrays: Stats' copy may share the old ones)
				s.stats.BindLatency, s.stats.BindCall = nil, nil
			}
			s.stats.BindLatency = append(s.stats.BindLatency, r.at.Sub(t))
			s.stats.BindCall = append(s.stats.BindCall, r.at.Sub(r.called))
			s.stats.BindTimed++
		}
	}
	if r.tok.job != 0 {
		if r.job != nil {
			s.patched.Finish(r.wl, r.tok.job, true, &r.job, now)
		} else {
			s.patched.Finish(r.wl, r.tok.job, false, nil, now)
		}
	}
	if r.err != nil && r.asg != "" {
		s.asg.Finish(r.asg, r.tok.asg, false, nil, now) // not written: the last written stands
	}
	if r.wrote != nil {
		s.asg.Finish(r.wroteOn, r.tok.asg, true, r.wrote, now)
	}
	if node, ok := strings.CutPrefix(r.key, "resv:"); ok {
		if r.err != nil {
			// a reservation not created or deleted: look at the node again later
			s.q.Retry(qkey{keyNode, node}, now)
		} else {
			s.q.Forget(qkey{keyNode, node})
		}
	}
	if r.bound != nil && r.err == nil {
		s.binds.Finish(r.bound.UID, r.tok.bind, true, nil, now)
	}
	if r.err != nil {
		if r.bound != nil {
			if b, ok := s.binds.Get(r.bound.UID); ok && s.binds.Finish(r.bound.UID, r.tok.bind, false, nil, now) {
				s.roomFreed(b.node)
				if b.shared {
					s.markNode(b.node) // the pods that waited for it there (mayRun) look again
				}
			}
		}
		if r.bound != nil && !r.conflict && refusedForGood(r.err) {
			s.bindRefused(r)
		}
		if r.conflict {
			s.stats.BindConflicts++
			s.log.Debug("conflict (the caches were behind; retried when they catch up)", "err", r.err)
		} else {
			s.stats.Errors++
			s.log.Warn("API call failed", "err", r.err)
		}
	}
}

// ---- what users see ----

// announce records an applied action as an Event on the workload.
func (s *Scheduler) announce(ws *wstate, a engineApplied) {
	ws.waitClass, ws.waitMsg, ws.shown.waitMsg = "", "", ""
	if ws.w.shared {
		s.announceShared(ws, a)
		return
	}
	switch a.Kind {
	case cluster.Resume:
		if a.Remote {
			s.event(ws, corev1.EventTypeNormal, "Resumed", "resumed on other nodes by policy %s (from its checkpoint)", s.pol.Name())
		} else {
			s.event(ws, corev1.EventTypeNormal, "Resumed", "resumed by policy %s (from its checkpoint)", s.pol.Name())
		}
	case cluster.Migrate:
		s.event(ws, corev1.EventTypeNormal, "Migrating", "migrating by policy %s (%s): checkpoint, stop, restart elsewhere", s.pol.Name(), a.Reason)
	case cluster.Resize:
		s.event(ws, corev1.EventTypeNormal, "Resizing", "resizing to %d GPUs by policy %s (%s)", len(a.GPUs), s.pol.Name(), a.Reason)
	case cluster.Suspend:
		s.event(ws, corev1.EventTypeNormal, "Preempted", "suspended by policy %s (%s)", s.pol.Name(), a.Reason)
	}
}

// event records an Event on the workload's Job, or on its first pod.
func (s *Scheduler) event(ws *wstate, typ, reason, format string, args ...any) {
	w, j, pods := s.observe(ws.w.key)
	if w == nil {
		return
	}
	if j != nil {
		s.rec.Eventf(j, typ, reason, format, args...)
	} else if len(pods) > 0 {
		s.rec.Eventf(pods[0], typ, reason, format, args...)
	}
}

func (s *Scheduler) warnBad(ws *wstate, j Object, pods []*corev1.Pod) {
	if ws.announced {
		return
	}
	ws.announced = true
	s.log.Warn("not scheduling workload", "workload", ws.w.key, "why", ws.w.bad)
	if j != nil {
		s.rec.Eventf(j, corev1.EventTypeWarning, "NotSchedulable", "Gandiva will not schedule it: %s", ws.w.bad)
	} else if len(pods) > 0 {
		s.rec.Eventf(pods[0], corev1.EventTypeWarning, "NotSchedulable", "Gandiva will not schedule it: %s", ws.w.bad)
	}
}

// waitNotice is how long a job waits before it is told why: most jobs start
// at once, and telling them would only cost API calls.
const waitNotice = 2.0

// waitRetell is how often at most a waiting workload is told again why it
// waits (and its ETA) while the reason's class stays the same.
const waitRetell = 30 * time.Second

// tellWaiting tells the workloads that have waited waitNotice seconds why
// they wait: an Event when the reason changes, and the PodScheduled
// condition of their pending pods (what `kubectl describe pod` shows), with
// their place in the queue. It returns when the next job becomes due to be
// told (0: none).
func (s *Scheduler) tellWaiting(now float64) float64 {
	snap := s.eng.Snapshot()
	var waiting []*cluster.Job
	for _, j := range snap.Active() {
		if j.State.Waiting() {
			waiting = append(waiting, j)
		}
	}
	// queue order: the order jobs wait in since they last waited
	slices.SortFunc(waiting, func(a, b *cluster.Job) int {
		if a.QueuedAt != b.QueuedAt {
			if a.QueuedAt < b.QueuedAt {
				return -1
			}
			return 1
		}
		return int(a.ID - b.ID)
	})
	due := 0.0
	wall := time.Now()
	ahead := 0
	caps := map[string]capacity{}
	for i, j := range waiting {
		ws := s.wsOf(j.ID)
		if ws == nil {
			continue
		}
		if t := j.QueuedAt + waitNotice*s.clk.rate(); t > now { // (waitNotice wall seconds)
			if due == 0 || t < due {
				due = t
			}
			ahead += j.Spec.GPUs
			continue
		}
		class, msg := s.waitReason(snap, j, i+1, len(waiting), ahead, caps)
		ahead += j.Spec.GPUs
		e := s.shownETA(ws, j, now)
		if e != "" {
			msg += "; " + e
		}
		if since := wall.Sub(ws.waitAt); class == ws.waitClass && since < waitRetell {
			if e != "" && !strings.HasSuffix(ws.waitMsg, e) {
				// a new ETA: told once the last telling is waitRetell old
				if t := now + s.clk.engineSecs(waitRetell-since); due == 0 || t < due {
					due = t
				}
			}
			continue
		}
		first := class != ws.waitClass
		ws.waitClass, ws.waitAt, ws.waitMsg = class, wall, msg
		if first {
			s.event(ws, corev1.EventTypeNormal, "Waiting", "%s", msg)
		}
		s.podsWaiting(ws, msg)
	}
	return due
}

// capacity is the GPUs of the nodes a constraint signature may use, and
// how many of them are free for it now.
type capacity struct{ total, free int }

// waitReason says why a job waits: a class (the Event's key) and a message.
// caps caches capacity by constraint signature for one round.
func (s *Scheduler) waitReason(snap *cluster.Snapshot, j *cluster.Job, pos, n, aheadGPUs int, caps map[string]capacity) (string, string) {
	ws := s.wsOf(j.ID)
	key := ws.w.sig
	if ws.w.shared {
		key = "shared:" + key // (shared jobs fit the shared nodes only)
	}
	cp, ok := caps[key]
	if !ok {
		for i := range snap.Servers {
			sv := cluster.ServerID(i)
			if !s.servers[i].alive || !s.Fits(j.ID, sv) {
				continue
			}
			cp.total += s.c.Servers[i].NumGPUs
			if snap.Servers[i].Schedulable() {
				cp.free += max(0, snap.Servers[i].NumFree()-s.Blocked(sv))
			}
		}
		caps[key] = cp
	}
	total, free := cp.total, cp.free
	need, _ := j.Spec.WidthRange()
	where := fmt.Sprintf("place %d of %d waiting (%s ahead %s for %s)", pos, n, plural.Of(pos-1, "job"), plural.Noun(pos-1, "asks|ask"), plural.Of(aheadGPUs, "GPU"))
	if pos == 1 {
		where = fmt.Sprintf("place 1 of %d waiting", n) // (no job ahead to count)
	}
	for _, r := range snap.Rejected {
		if r.Action.Job == j.ID && (r.Action.Kind == cluster.Start || r.Action.Kind == cluster.Resume) {
			// the engine's refusal of the policy's last try, under
			// Kubernetes' rules or its own (the policy hears of it)
			then := "the policy may try again once the cluster changes"
			if r.Code == cluster.RejectNever {
				then = "the policy must place it otherwise"
			}
			return "constraints", fmt.Sprintf("policy %s chose to run it, but it was refused (%s): %s; %s; %s", s.pol.Name(), r.Code, r.Reason, then, where)
		}
	}
	state := "queued"
	if j.State == cluster.Suspended || j.Suspends > 0 {
		state = "suspended"
	}
	if class, msg, ok := s.quotaWaitReason(j, state, need, where); ok {
		return class, msg // (gqueue_kube.go)
	}
	if ws.w.shared {
		if class, msg, ok := s.sharedWaitReason(j, state, need, total, free, where); ok {
			return class, msg
		}
	}
	switch {
	case need > total:
		return "too-big", fmt.Sprintf("%s: needs %d GPUs; the nodes its pods may run on (taints, node selector, affinity) have %d in all", state, need, total)
	case need > free:
		return state + "-full", fmt.Sprintf("%s: needs %d GPUs, %d free on the nodes its pods may run on; policy %s decides the order: %s", state, need, free, s.pol.Name(), where)
	default:
		return state + "-policy", fmt.Sprintf("%s: %d GPUs free but policy %s runs others first: %s", state, free, s.pol.Name(), where)
	}
}

// sharedWaitReason says why a shared job waits when the shared nodes are
// the cause (ok false otherwise): no node is labelled
// gandiva.io/shared=true, the shared nodes it may run on have too few
// GPUs, or some of them are not Gandiva's yet (pods of Gandiva's
// exclusive jobs or of other schedulers hold GPUs there, and the
// reservation pod is made once they end). total and free are the GPUs of
// the nodes it may run on, in all and free for it.
func (s *Scheduler) sharedWaitReason(j *cluster.Job, state string, need, total, free int, where string) (class, msg string, ok bool) {
	label := shared.LabelSharedNode + "=true"
	some := false
	var held []string
	for _, ns := range s.servers {
		if !ns.alive || !ns.shared {
			continue
		}
		some = true
		if ns.reserved || !s.Fits(j.ID, ns.id) {
			continue
		}
		switch {
		case ns.ours > 0:
			held = append(held, fmt.Sprintf("%s (exclusive jobs of Gandiva's run there until they end)", ns.name))
		case ns.foreign > 0:
			held = append(held, fmt.Sprintf("%s (pods of other schedulers hold %d of its GPUs)", ns.name, ns.foreign))
		default:
			held = append(held, fmt.Sprintf("%s (its reservation pod is being made)", ns.name))
		}
	}
	slices.Sort(held)
	switch {
	case !some:
		return "no-shared-node", fmt.Sprintf("%s: a shared job (annotation %s) runs on shared nodes only, and no node is labelled %s: "+
			"label one (kubectl label node NODE %s) and run the node agent there (gandiva agent --kube)", state, shared.AnnGPUs, label, label), true
	case need > total:
		return "too-big", fmt.Sprintf("%s: needs %d GPUs; the shared nodes (labelled %s) it may run on have %d in all "+
			"(taints, node selector, affinity): label more nodes %s", state, need, label, total, label), true
	case need > free && len(held) > 0:
		return state + "-unreserved", fmt.Sprintf("%s: needs %d GPUs, %d free on the shared nodes it may run on; shared nodes whose GPUs are not Gandiva's yet: %s; "+
			"a reservation pod takes a node's GPUs once no other pod holds them; policy %s decides the order: %s",
			state, need, free, strings.Join(held, ", "), s.pol.Name(), where), true
	}
	return "", "", false
}

// podsWaiting sets PodScheduled=False on the workload's pending pods.
func (s *Scheduler) podsWaiting(ws *wstate, msg string) {
	_, _, pods := s.observe(ws.w.key)
	for _, p := range pods {
		if p.Spec.NodeName != "" || p.DeletionTimestamp != nil || terminal(p) || s.busy("pod:"+string(p.UID)) {
			continue
		}
		if c := podCondition(p, corev1.PodScheduled); c != nil && c.Message == msg {
			continue
		}
		pod := p
		key := "cond:" + string(p.UID)
		if s.busy(key) {
			continue
		}
		body, _ := json.Marshal(map[string]any{"status": map[string]any{"conditions": []map[string]any{{
			"type": string(corev1.PodScheduled), "status": "False", "reason": "Unschedulable",
			"message": "Gandiva: " + msg, "lastTransitionTime": metav1.Now().UTC().Format(time.RFC3339),
		}}}})
		s.submitLow(op{key: key, do: func(ctx context.Context) opResult {
			_, err := s.low.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, body, metav1.PatchOptions{}, "status")
			if err != nil && !apierrors.IsNotFound(err) {
				return opResult{err: fmt.Errorf("setting pod %s/%s condition: %w", pod.Namespace, pod.Name, err)}
			}
			return opResult{}
		}})
	}
}

func podCondition(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

var _ = strconv.Itoa

func metav1ObjectMeta(ns, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name}
}
