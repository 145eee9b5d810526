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
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gandiva-sched/gandiva/internal/cluster"
)

type metav1ListOptions = metav1.ListOptions

func labelsEverything() labels.Selector { return labels.Everything() }

func metav1ControllerOf(p *corev1.Pod) *metav1.OwnerReference { return metav1.GetControllerOf(p) }

// desired is where the engine wants a workload.
func (s *Scheduler) desired(ws *wstate) (run bool, p placement, width int, killed bool) {
	j := s.eng.Job(ws.id)
	if j == nil {
		return false, nil, 0, false
	}
	if j.State.Terminal() {
		return false, nil, 0, j.State == cluster.Cancelled || j.State == cluster.Failed
	}
	if !j.State.Holding() {
		return false, nil, 0, false
	}
	p = placement{}
	for _, g := range j.GPUs {
		p[s.servers[s.c.ServerOf(g)].name]++
	}
	return true, p, len(j.GPUs) / max(ws.w.podGPUs, 1), false
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
		if w.kind == kindPods {
			j, width = nil, w.gang
		}
		s.reconcileShared(ws, j, pods, run, want, width, killed, now)
	case w.kind == kindJob:
		s.reconcileJob(ws, j, pods, run, want, width, killed, now)
	case w.kind == kindPods:
		s.reconcilePods(ws, pods, run, want, now)
	}
}

// holds reports whether a pod holds GPUs: bound (by the API or by a binding
// of ours not seen yet) and not ended.
func (s *Scheduler) nodeOf(p *corev1.Pod) string {
	if p.Spec.NodeName != "" {
		return p.Spec.NodeName
	}
	if b, ok := s.binding[p.UID]; ok {
		return b.node
	}
	return ""
}

func (s *Scheduler) reconcileJob(ws *wstate, j *batchv1.Job, pods []*corev1.Pod, run bool, want placement, width int, killed bool, now float64) {
	key := "job:" + ws.w.key
	if s.inflight[key] {
		return
	}
	state := j.Annotations[AnnState]
	suspended := j.Spec.Suspend != nil && *j.Spec.Suspend
	cur, _ := parsePlacement(j.Annotations[AnnPlacement])
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
	if over, _, _ := jobFinished(j); over {
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
	case state == StateRunning && cur.equal(want) && !suspended && parallelism(j) == width:
		s.bindJob(ws, j, live, holding, want, width, now)
	case len(holding) == 0 && dying == 0:
		// nothing runs: (re)start it on the target
		s.patchJob(ws, j, nil, false, StateRunning, want, width, "Started", "to run on "+want.String())
	case state == StateMoving && cur.equal(want) && suspended:
		// its old pods are still leaving
	case parallelism(j) == width && dying == 0 && !suspended && fitsWithin(s, holding, want, G):
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

// patchJob records a decision on a Job in one patch: spec.suspend, the
// state and placement annotations, and the width; before a suspension it
// marks the pods that hold GPUs with a DisruptionTarget condition, so that
// their ending counts no failure (the Job's pod failure policy ignores it).
func (s *Scheduler) patchJob(ws *wstate, j *batchv1.Job, disrupt []*corev1.Pod, suspend bool, state string, p placement, width int, reason, note string) {
	ann := map[string]any{AnnState: state}
	if p != nil {
		ann[AnnPlacement] = p.String()
	} else {
		ann[AnnPlacement] = nil
	}
	spec := map[string]any{"suspend": suspend}
	if width > 0 && width != parallelism(j) {
		spec["parallelism"] = width
		if ws.w.elasticIndexed {
			spec["completions"] = width
		}
	}
	body, _ := json.Marshal(map[string]any{
		"metadata": map[string]any{"annotations": ann, "resourceVersion": j.ResourceVersion},
		"spec":     spec,
	})
	ns, name := j.Namespace, j.Name
	uid := j.UID
	job := j
	key := "job:" + ws.w.key
	s.inflight[key] = true
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
		out, err := s.cs.BatchV1().Jobs(ns).Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{})
		if err != nil {
			return opResult{err: fmt.Errorf("patching Job %s/%s: %w", ns, name, err), conflict: apierrors.IsConflict(err)}
		}
		if out.UID != uid {
			return opResult{}
		}
		if reason != "" {
			s.rec.Event(job, corev1.EventTypeNormal, reason, note)
		}
		return opResult{job: out}
	}})
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
func (s *Scheduler) bindJob(ws *wstate, j *batchv1.Job, live, holding []*corev1.Pod, want placement, width int, now float64) {
	G := max(ws.w.podGPUs, 1)
	need := width - int(j.Status.Succeeded)
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
	s.inflight[key] = true
	s.binding[p.UID] = bindRec{node: node, gpus: g}
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
	}})
	s.stats.Binds++
}

// moved tells the engine that a migrating job's pods are all in place.
func (s *Scheduler) moved(ws *wstate, live []*corev1.Pod, now float64) {
	j := s.eng.Job(ws.id)
	if j == nil || j.State != cluster.Migrating {
		return
	}
	for _, p := range live {
		if p.Spec.NodeName == "" {
			return
		}
	}
	if err := s.eng.Apply(cluster.Event{Time: now, Kind: cluster.EvActionDone, Job: ws.id}); err == nil {
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
func (s *Scheduler) result(r opResult) {
	delete(s.inflight, r.key)
	if r.bound != nil && r.err == nil {
		s.mu.Lock()
		t, ok := s.seenAt[r.bound.UID]
		delete(s.seenAt, r.bound.UID)
		s.mu.Unlock()
		if ok {
			if len(s.stats.BindLatency) >= 100000 {
				s.stats.BindLatency = s.stats.BindLatency[:0]
				s.stats.BindCall = s.stats.BindCall[:0]
			}
			s.stats.BindLatency = append(s.stats.BindLatency, r.at.Sub(t))
			s.stats.BindCall = append(s.stats.BindCall, r.at.Sub(r.called))
		}
	}
	if r.job != nil {
		s.patched[r.wl] = r.job
	}
	if r.err != nil && r.asg != "" {
		delete(s.assigns, r.asg) // not written: the last written stands
	}
	if r.wrote != nil {
		delete(s.assigns, r.wroteOn)
		if w, ok := s.wrote[r.wroteOn]; !ok || w.a.Gen < r.wrote.Gen {
			s.wrote[r.wroteOn] = wroteRec{a: *r.wrote}
		}
	}
	if node, ok := strings.CutPrefix(r.key, "resv:"); ok && r.err != nil {
		// a reservation not created or deleted: look at the node again later
		time.AfterFunc(2*time.Second, func() { s.markNode(node) })
	}
	if r.err != nil {
		if r.bound != nil {
			if b, ok := s.binding[r.bound.UID]; ok {
				delete(s.binding, r.bound.UID)
				if ns := s.nodes[b.node]; ns != nil {
					s.usage(ns)
				}
				if b.shared {
					s.markNode(b.node) // the pods that waited for it there (mayRun) look again
				}
			}
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

// submitLow queues a call that may wait behind bindings.
func (s *Scheduler) submitLow(o op) {
	select {
	case s.lowOps <- o:
	default:
		go func() { s.lowOps <- o }()
	}
}

func (s *Scheduler) submit(o op) {
	select {
	case s.ops <- o:
	default:
		// the queue is full: run it now rather than block the loop forever
		go func() { s.ops <- o }()
	}
}

// podGroupMin reads the gang size of the PodGroup a pod names (scheduler-
// plugins or Volcano), once per workload; 0 if none.
func (s *Scheduler) podGroupMin(key string, p *corev1.Pod) int {
	if v, ok := s.groups[key]; ok {
		return v
	}
	name, gvr := p.Labels[labelPodGroup], schema.GroupVersionResource{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "podgroups"}
	if name == "" {
		name, gvr = p.Annotations[annVolcanoGroup], schema.GroupVersionResource{Group: "scheduling.volcano.sh", Version: "v1beta1", Resource: "podgroups"}
	}
	n := 0
	if name != "" && s.o.Dynamic != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		u, err := s.o.Dynamic.Resource(gvr).Namespace(p.Namespace).Get(ctx, name, metav1.GetOptions{})
		cancel()
		if err == nil {
			if v, ok := u.Object["spec"].(map[string]any)["minMember"]; ok {
				switch x := v.(type) {
				case int64:
					n = int(x)
				case float64:
					n = int(x)
				}
			}
		} else if !apierrors.IsNotFound(err) {
			s.log.Warn("reading PodGroup", "group", name, "namespace", p.Namespace, "err", err)
		}
	}
	s.groups[key] = n
	return n
}

// ---- what users see ----

// announce records an applied action as an Event on the workload.
func (s *Scheduler) announce(ws *wstate, a engineApplied) {
	ws.waitClass, ws.waitMsg = "", ""
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

func (s *Scheduler) warnBad(ws *wstate, j *batchv1.Job, pods []*corev1.Pod) {
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
		if t := j.QueuedAt + waitNotice; t > now {
			if due == 0 || t < due {
				due = t
			}
			ahead += j.Spec.GPUs
			continue
		}
		class, msg := s.waitReason(snap, j, i+1, len(waiting), ahead, caps)
		ahead += j.Spec.GPUs
		if class == ws.waitClass && wall.Sub(ws.waitAt) < 30*time.Second {
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
	cp, ok := caps[ws.w.sig]
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
		caps[ws.w.sig] = cp
	}
	total, free := cp.total, cp.free
	need, _ := j.Spec.WidthRange()
	where := fmt.Sprintf("place %d of %d waiting (jobs ahead ask for %d GPUs)", pos, n, aheadGPUs)
	for _, d := range s.pol.Dropped {
		if d.Action.Job == j.ID {
			return "constraints", fmt.Sprintf("policy %s chose to run it, but %s; %s", s.pol.Name(), d.Reason, where)
		}
	}
	if until, why, ok := s.pol.Parked(j.ID); ok {
		return "constraints", fmt.Sprintf("policy %s chose to run it, but %s; held back from the policy until GPUs it may use are free (%.0f s at most); %s",
			s.pol.Name(), why, max(0, until-snap.Now), where)
	}
	state := "queued"
	if j.State == cluster.Suspended || j.Suspends > 0 {
		state = "suspended"
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

// podsWaiting sets PodScheduled=False on the workload's pending pods.
func (s *Scheduler) podsWaiting(ws *wstate, msg string) {
	_, _, pods := s.observe(ws.w.key)
	for _, p := range pods {
		if p.Spec.NodeName != "" || p.DeletionTimestamp != nil || terminal(p) || s.inflight["pod:"+string(p.UID)] {
			continue
		}
		if c := podCondition(p, corev1.PodScheduled); c != nil && c.Message == msg {
			continue
		}
		pod := p
		key := "cond:" + string(p.UID)
		if s.inflight[key] {
			continue
		}
		s.inflight[key] = true
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
