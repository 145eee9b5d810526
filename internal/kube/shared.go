package kube

// Shared mode: the scheduler's side (see the package comment, "Mechanisms
// (shared mode)", and package shared for the annotations it shares with
// the node agent).

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/handoff"
	"github.com/gandiva-sched/gandiva/internal/kube/shared"
)

// DefaultReservationImage is the image of reservation pods: a pause
// container, which does nothing but hold the pod's resources.
const DefaultReservationImage = "registry.k8s.io/pause:3.10"

// isSharedNode reports whether a node is a shared node (labelled
// gandiva.io/shared=true).
func isSharedNode(n *corev1.Node) bool { return n != nil && n.Labels[shared.LabelSharedNode] == "true" }

// isReservation reports whether p is one of this scheduler's reservation
// pods (in its namespace, labelled gandiva.io/reservation).
func (s *Scheduler) isReservation(p *corev1.Pod) bool {
	_, ok := p.Labels[shared.LabelReservation]
	return ok && p.Namespace == s.o.Namespace
}

// reservationName is the reservation pod of a node.
func reservationName(node string) string {
	n := "gandiva-reservation-" + node
	if len(n) > 253 {
		n = n[:253]
	}
	return strings.TrimRight(n, ".-")
}

// reservationPod is the pod that holds all of a shared node's GPUs for
// Gandiva: bound there at creation (spec.nodeName), tolerating every
// taint, requesting every nvidia.com/gpu of the node, running a pause
// container with no privileges and no credentials.
func (s *Scheduler) reservationPod(ns *nstate) *corev1.Pod {
	q := *resource.NewQuantity(int64(ns.shape.gpus), resource.DecimalSI)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.o.Namespace, Name: reservationName(ns.name),
			Labels: map[string]string{shared.LabelReservation: ns.name}},
		Spec: corev1.PodSpec{
			NodeName:                     ns.name,
			SchedulerName:                SchedulerName,
			Tolerations:                  []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			AutomountServiceAccountToken: ptr.To(false),
			EnableServiceLinks:           ptr.To(false),
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To(int64(65535)),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "reserve", Image: s.o.ReservationImage,
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{GPU: q}, Requests: corev1.ResourceList{GPU: q}},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			}},
		},
	}
}

// keepReservation makes a node's reservation pod what the node needs: one
// on every shared node whose GPUs no other scheduler's pod holds (it is
// created only then, so that the kubelet admits it), recreated when it
// is deleted or ends (an ended one is deleted first), also on a node no
// longer shared while shared pods are bound there (their GPUs stay
// Gandiva's); deleted on a node that is no longer shared, or whose GPU
// count changed, but only once no shared pod is bound there. It is created
// only while no pod holds a GPU of the node (no other scheduler's, no
// exclusive one of Gandiva's), so that the kubelet admits it.
func (s *Scheduler) keepReservation(ns *nstate) {
	key := "resv:" + ns.name
	if s.busy(key) {
		return
	}
	r := ns.resv
	wanted := ns.alive && (ns.shared || ns.sharedPods > 0) && ns.node != nil && ns.node.DeletionTimestamp == nil
	switch {
	case r != nil && r.DeletionTimestamp != nil:
		// leaving: a new one once it is gone
	case r != nil && (!wanted || terminal(r) || gpusOf(&r.Spec) != ns.shape.gpus):
		if ns.sharedPods > 0 && !terminal(r) {
			return // its shared pods keep it until they end
		}
		name, uid := r.Name, r.UID
		s.submit(op{key: key, do: func(ctx context.Context) opResult {
			err := s.cs.CoreV1().Pods(s.o.Namespace).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return opResult{err: fmt.Errorf("deleting reservation pod %s/%s: %w", s.o.Namespace, name, err)}
			}
			s.log.Info("reservation deleted", "node", ns.name)
			return opResult{}
		}})
	case r == nil && wanted && ns.foreign == 0 && ns.ours == 0:
		pod := s.reservationPod(ns)
		s.submit(op{key: key, do: func(ctx context.Context) opResult {
			_, err := s.cs.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				return opResult{err: fmt.Errorf("creating reservation pod %s/%s on node %s: %w", pod.Namespace, pod.Name, ns.name, err)}
			}
			s.log.Info("reservation created", "node", ns.name, "gpus", ns.shape.gpus)
			return opResult{}
		}})
	}
}

// ---- engine.Constraints ----

// Shared implements engine.Constraints.
func (s *Scheduler) Shared(j cluster.JobID) bool {
	ws := s.wsOf(j)
	return ws != nil && ws.w.shared
}

// Pinned implements engine.Constraints: the GPUs of a shared workload's live pods,
// when all of its gang is bound with an assignment and none failed.
func (s *Scheduler) Pinned(j cluster.JobID) []cluster.GPUID {
	ws := s.wsOf(j)
	if ws == nil || !ws.w.shared {
		return nil
	}
	_, _, pods := s.observe(ws.w.key)
	var out []cluster.GPUID
	n := 0
	for _, p := range pods {
		if terminal(p) || p.DeletionTimestamp != nil || s.nodeOf(p) == "" {
			continue
		}
		a, ok := s.assignOf(p)
		ns := s.nodes[s.nodeOf(p)]
		if !ok || ns == nil || !ns.alive || s.agentFailed(p) {
			return nil
		}
		first := s.c.Servers[ns.id].FirstGPU
		for _, g := range a.GPUs {
			if g >= ns.shape.gpus {
				return nil
			}
			out = append(out, first+cluster.GPUID(g))
		}
		n++
	}
	if n == 0 || n > ws.w.gang {
		return nil
	}
	// (a gang bound in part, as a failover between its bindings leaves
	// it: its bound pods' GPUs; the engine keeps them and the rest of
	// the policy's placement)
	slices.Sort(out)
	return out
}

// ---- assignments ----

// assignOf is a pod's assignment: the one being written, else the last
// this term wrote, whatever the annotation shows (only this scheduler
// writes it, deploy/base/pods-vap.yaml sees to that; what else it shows is
// an informer behind, or someone else's, and not trusted: see tampered);
// else, for a pod this term has not assigned (a previous term did), the
// annotation, if valid and for as many GPUs as the pod asks for
// (Assign.ForPod).
func (s *Scheduler) assignOf(p *corev1.Pod) (shared.Assign, bool) {
	if r, mine := s.asg.InFlight(p.UID); mine {
		return r, true
	}
	a, err := shared.ParseAssign(p.Annotations[shared.AnnAssign])
	if w, shown, mine := s.asg.Done(p.UID); mine {
		if !shown && err == nil && sameAssign(a, w) {
			s.asg.Confirm(p.UID)
		}
		return w, true
	}
	if err == nil {
		err = a.ForPod(p.Annotations[shared.AnnGPUs])
	}
	return a, err == nil
}

// tampered reports whether a pod's annotation, after it showed the
// assignment this term last wrote, shows something else: someone but
// this scheduler wrote it (a cluster without pods-vap.yaml). It returns
// the assignment that stands (to write again, above the other's
// generation, so that the agent follows it).
func (s *Scheduler) tampered(p *corev1.Pod) (shared.Assign, bool) {
	if _, writing := s.asg.InFlight(p.UID); writing {
		return shared.Assign{}, false
	}
	s.assignOf(p) // (marks it shown)
	w, shown, mine := s.asg.Done(p.UID)
	if !mine || !shown {
		return shared.Assign{}, false
	}
	a, err := shared.ParseAssign(p.Annotations[shared.AnnAssign])
	return w, err != nil || !sameAssign(a, w)
}

func sameAssign(a, b shared.Assign) bool {
	return a.Gen == b.Gen && a.State == b.State && slices.Equal(a.GPUs, b.GPUs)
}

// cachedGen is the generation of a pod's assignment as the informer shows
// it (0: none).
func cachedGen(p *corev1.Pod) int64 {
	if a, err := shared.ParseAssign(p.Annotations[shared.AnnAssign]); err == nil {
		return a.Gen
	}
	return 0
}

// statusOf is a pod's agent status, if it has a valid one.
func statusOf(p *corev1.Pod) (shared.Status, bool) {
	v, ok := p.Annotations[shared.AnnStatus]
	if !ok {
		return shared.Status{}, false
	}
	st, err := shared.ParseStatus(v)
	return st, err == nil
}

// agentFailed reports whether a pod's agent says it cannot carry out its
// assignment.
func (s *Scheduler) agentFailed(p *corev1.Pod) bool {
	st, ok := statusOf(p)
	return ok && st.State == shared.Failed
}

// writeAssign writes a pod's next assignment (generation one above the
// newest it has; the patch carries the pod's resourceVersion, so that a
// write made on a stale view fails rather than going backwards) and, with
// bindTo, then binds the pod there.
func (s *Scheduler) writeAssign(ws *wstate, p *corev1.Pod, state string, gpus []int, bindTo string) {
	cur, _ := s.assignOf(p)
	// (above the annotation's generation too: the agent follows only a
	// newer one, and someone else's may be there)
	a := shared.Assign{Gen: max(cur.Gen, cachedGen(p)) + 1, State: state, GPUs: slices.Clone(gpus)}
	key := "pod:" + string(p.UID)
	tok := tokens{asg: s.asg.Assume(p.UID, a)}
	fail := opResult{asg: p.UID}
	if bindTo != "" {
		tok.bind = s.binds.Assume(p.UID, bindRec{node: bindTo, shared: true, pod: p})
		fail.bound = p
		if ns := s.nodes[bindTo]; ns != nil {
			ns.sharedPods++
		}
		s.stats.Binds++
	}
	body, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": p.ResourceVersion,
		"annotations":     map[string]any{shared.AnnAssign: a.String()}}})
	pod := p
	if s.debug {
		s.log.Debug("assigning", "pod", p.Namespace+"/"+p.Name, "assign", a.String(), "bind", bindTo)
	}
	s.submit(op{key: key, wl: ws.w.key, do: func(ctx context.Context) opResult {
		called := time.Now()
		_, err := s.cs.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, body, metav1.PatchOptions{})
		if err != nil {
			r := opResult{err: fmt.Errorf("writing %s on pod %s/%s: %w", shared.AnnAssign, pod.Namespace, pod.Name, err),
				conflict: apierrors.IsConflict(err), asg: pod.UID}
			if bindTo != "" {
				r.bound = pod
			}
			return r
		}
		if bindTo == "" {
			return opResult{wrote: &a, wroteOn: pod.UID}
		}
		err = s.cs.CoreV1().Pods(pod.Namespace).Bind(ctx, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
			Target:     corev1.ObjectReference{Kind: "Node", Name: bindTo},
		}, metav1.CreateOptions{})
		if err != nil {
			return opResult{err: fmt.Errorf("binding pod %s/%s to %s: %w", pod.Namespace, pod.Name, bindTo, err), conflict: apierrors.IsConflict(err), bound: pod,
				wrote: &a, wroteOn: pod.UID}
		}
		s.rec.Eventf(pod, corev1.EventTypeNormal, "Scheduled", "Successfully assigned %s/%s to %s, GPUs %v (Gandiva shared mode, policy %s)", pod.Namespace, pod.Name, bindTo, gpus, s.pol.Name())
		return opResult{bound: pod, boundTo: bindTo, called: called, at: time.Now(), wrote: &a, wroteOn: pod.UID}
	}, tok: tok, fail: fail})
}

// localGPUs maps the engine's GPUs to node-local indices, per node.
func (s *Scheduler) localGPUs(gpus []cluster.GPUID) map[string][]int {
	out := map[string][]int{}
	for _, g := range gpus {
		sv := s.c.ServerOf(g)
		ns := s.servers[sv]
		out[ns.name] = append(out[ns.name], int(g-s.c.Servers[sv].FirstGPU))
	}
	for _, l := range out {
		slices.Sort(l)
	}
	return out
}

// wantsRunning reports whether the engine wants the workload of pod p
// running on (at least) the node-local GPUs gpus of node.
func (s *Scheduler) wantsRunning(p *corev1.Pod, node string, gpus []int) bool {
	ws := s.ws[workloadKey(p)]
	if ws == nil || ws.id == cluster.NoJob {
		return false
	}
	in := s.x.get(ws.id)
	if !in.run {
		return false
	}
	have := s.localGPUs(in.gpus)[node]
	for _, g := range gpus {
		if !slices.Contains(have, g) {
			return false
		}
	}
	return true
}

// mayRun reports whether pod p may be told to run on GPUs gpus of node
// now: the hand-off fence (handoff.MayRun) over the other shared pods
// there, each as occupant describes it. Every one whose assignment
// overlaps gpus must be meant to run beside p (the engine packs them), or
// have acknowledged its suspension at its generation, or its agent have
// failed (and the pod not be leaving). Suspensions go first; resumptions
// after their acknowledgements. (Whether the node is alive and reserved
// is the callers' to check.)
//
// The pods there are those the informer shows bound to node and those we
// are binding to it (a pod told to run and bound a moment ago, whose
// binding the informer does not show yet, runs there as soon as its agent
// sees it: the engine may have given its GPUs to another job since).
func (s *Scheduler) mayRun(p *corev1.Pod, node string, gpus []int) bool {
	o := handoff.Occupant{ID: p.Namespace + "/" + p.Name, Want: handoff.Run, GPUs: gpus}
	return handoff.MayRun(&o, handoff.Facts{Ready: true}, s.sharedOn(p, node)).OK()
}

// sharedOn yields the occupants of node's GPUs but p: the shared pods the
// informer shows bound there, then those being bound there.
func (s *Scheduler) sharedOn(p *corev1.Pod, node string) iter.Seq[*handoff.Occupant] {
	return func(yield func(*handoff.Occupant) bool) {
		objs, _ := s.pods.GetIndexer().ByIndex(indexNode, node)
		for _, obj := range objs {
			if q, ok := s.occupant(obj.(*corev1.Pod), p, node); ok && !yield(&q) {
				return
			}
		}
		s.binds.Range(func(uid types.UID, b bindRec) bool {
			if !b.shared || b.node != node || uid == p.UID {
				return true
			}
			q := b.pod
			if cur, err := s.podLister.Pods(q.Namespace).Get(q.Name); err == nil && cur.UID == uid {
				if cur.Spec.NodeName != "" {
					return true // shown bound: among objs (or bound elsewhere)
				}
				q = cur
			}
			o, ok := s.occupant(q, p, node)
			return !ok || yield(&o)
		})
	}
}

// occupant is pod q, on node, as the hand-off fence sees it (false: it is
// p, or not a live shared pod of this scheduler with an assignment, so no
// process of it is on the node's GPUs): told its assignment (state, GPUs,
// generation); acknowledged what its agent-status says; wanted running
// where it is told to run and the engine has its workload on all of its
// assignment's GPUs (a pod told to suspend is resumed through this fence
// too: until then it counts as suspending), killed while it is being
// deleted, else suspended.
func (s *Scheduler) occupant(q, p *corev1.Pod, node string) (handoff.Occupant, bool) {
	if q.UID == p.UID || terminal(q) || q.Spec.SchedulerName != SchedulerName {
		return handoff.Occupant{}, false
	}
	if _, ok := q.Annotations[shared.AnnGPUs]; !ok {
		return handoff.Occupant{}, false
	}
	a, ok := s.assignOf(q)
	if !ok {
		return handoff.Occupant{}, false
	}
	o := handoff.Occupant{ID: q.Namespace + "/" + q.Name, Want: handoff.Suspend, GPUs: a.GPUs, Live: true,
		Told: handoff.Told{Order: assignOrder(a.State), GPUs: a.GPUs, Gen: a.Gen}}
	switch {
	case q.DeletionTimestamp != nil:
		o.Want = handoff.Kill
	case a.State == shared.Running && s.wantsRunning(q, node, a.GPUs):
		o.Want = handoff.Run
	}
	if st, ok := statusOf(q); ok {
		o.Ack = handoff.Ack{Order: assignOrder(st.State), Gen: st.Gen, Failed: st.State == shared.Failed}
	}
	return o, true
}

// assignOrder maps an assignment's (or agent-status's) state to the
// hand-off's orders (None: neither running nor suspended).
func assignOrder(state string) handoff.Order {
	switch state {
	case shared.Running:
		return handoff.Run
	case shared.Suspended:
		return handoff.Suspend
	}
	return handoff.None
}

// waitOn notes that a workload waits for something on a node (an
// acknowledgement, a pod leaving): it is looked at again when that
// node's pods change.
func (s *Scheduler) waitOn(node, wl string) {
	if s.waitRoom[node] == nil {
		s.waitRoom[node] = map[string]bool{}
	}
	s.waitRoom[node][wl] = true
}

// reconcileShared is reconcile for a shared workload (a Job, or plain
// pods): the Job's record as in exclusive mode (started, moving), but a
// suspension or resumption is an assignment on each pod, carried out in
// place by the node's agent; the pods stay bound. Pods whose GPUs are
// not the engine's (a move, a resumption elsewhere, an agent's failure)
// are replaced: the Job is suspended until they are gone (they
// checkpoint on SIGTERM), then restarted on the new placement.
func (s *Scheduler) reconcileShared(ws *wstate, j Object, pods []*corev1.Pod, run bool, want placement, width int, killed bool, now float64) {
	jobKey := "job:" + ws.w.key
	if j != nil {
		if s.busy(jobKey) {
			return
		}
		if over, _, _ := ws.w.kind.Finished(j); over {
			return
		}
	}
	var live, holding []*corev1.Pod
	dying := 0
	for _, p := range pods {
		if terminal(p) {
			continue
		}
		if p.DeletionTimestamp != nil {
			if s.nodeOf(p) != "" {
				dying++
			}
			continue
		}
		if s.nodeOf(p) != "" {
			holding = append(holding, p)
		}
		live = append(live, p)
	}
	// an assignment someone else wrote over ours is not carried out: ours
	// is written again, above its generation
	for _, p := range holding {
		if s.busy("pod:" + string(p.UID)) {
			continue
		}
		if w, bad := s.tampered(p); bad {
			s.log.Warn("a pod's assignment was changed by someone else; writing Gandiva's again", "pod", p.Namespace+"/"+p.Name,
				"found", p.Annotations[shared.AnnAssign], "gandiva", w.String())
			s.event(ws, corev1.EventTypeWarning, "AssignmentChanged", "pod %s: annotation %s was changed by someone other than Gandiva; Gandiva's assignment (GPUs %v, %s) is written again (deploy/base/pods-vap.yaml keeps pod owners from writing it)",
				p.Name, shared.AnnAssign, w.GPUs, w.State)
			s.writeAssign(ws, p, w.State, w.GPUs, "")
		}
	}
	if killed {
		if j != nil && j.GetAnnotations()[AnnState] != StateKilled {
			s.patchJob(ws, j, holding, true, StateKilled, nil, 0, "Killed", "stopped for good by policy "+s.pol.Name())
		}
		return
	}
	if !run {
		// waiting: every pod of it that runs is suspended in place
		for _, p := range holding {
			if s.busy("pod:" + string(p.UID)) {
				continue
			}
			a, ok := s.assignOf(p)
			if !ok || a.Gen > cachedGen(p) || a.State == shared.Suspended {
				continue
			}
			s.writeAssign(ws, p, shared.Suspended, a.GPUs, "")
		}
		return
	}
	local := s.localGPUs(s.x.get(ws.id).gpus)
	G := max(ws.w.podGPUs, 1)
	// the engine's GPUs in pods' chunks, per node; pods that hold a chunk
	// keep it, the others must go
	chunks := map[string][][]int{}
	for node, l := range local {
		for i := 0; i+G <= len(l); i += G {
			chunks[node] = append(chunks[node], l[i:i+G])
		}
	}
	fits := true
	kept := map[types.UID][]int{}
	for _, p := range holding {
		node := s.nodeOf(p)
		a, ok := s.assignOf(p)
		i := -1
		if ok && !s.agentFailed(p) {
			i = slices.IndexFunc(chunks[node], func(c []int) bool { return slices.Equal(c, a.GPUs) })
		}
		if i < 0 {
			fits = false
			continue
		}
		kept[p.UID] = a.GPUs
		chunks[node] = slices.Delete(chunks[node], i, i+1)
	}
	if j != nil {
		state := j.GetAnnotations()[AnnState]
		suspended := ws.w.kind.Suspended(j)
		cur, _ := parsePlacement(j.GetAnnotations()[AnnPlacement])
		switch {
		case state == StateRunning && cur.equal(want) && !suspended && ws.w.kind.Width(j) == width && fits:
			// below: assignments and bindings
		case len(holding) == 0 && dying == 0:
			s.patchJob(ws, j, nil, false, StateRunning, want, width, "Started", "to run on "+want.String()+" (shared mode)")
			return
		case state == StateMoving && cur.equal(want) && suspended:
			return // its old pods are still leaving
		case fits && ws.w.kind.Width(j) == width && dying == 0 && !suspended:
			s.patchJob(ws, j, nil, false, StateRunning, want, width, "", "")
			return
		case !ws.w.preemptible:
			s.warnOnce(ws, "its pods hold GPUs other than those policy "+s.pol.Name()+" gives it, and it is not preemptible (no pod failure policy ignoring DisruptionTarget): it cannot be moved")
			return
		default:
			if i := slices.IndexFunc(holding, s.agentFailed); i >= 0 {
				s.patchJob(ws, j, holding, true, StateMoving, want, width, "Replacing",
					"the node agent of pod "+holding[i].Name+" failed: its pods checkpoint and stop, then new ones start on "+want.String())
				return
			}
			s.patchJob(ws, j, holding, true, StateMoving, want, width, "Moving",
				"moving to "+want.String()+": its pods checkpoint and stop, then start there (a shared job's process keeps the GPUs it started on)")
			return
		}
	} else if !fits {
		s.warnOnce(ws, "its pods hold GPUs other than those policy "+s.pol.Name()+" gives it; plain pods cannot be moved")
		return
	}
	// resumptions in place, once what else is on those GPUs has yielded
	for _, p := range holding {
		if s.busy("pod:" + string(p.UID)) {
			continue
		}
		a, _ := s.assignOf(p)
		if a.Gen > cachedGen(p) || a.State == shared.Running {
			continue
		}
		node := s.nodeOf(p)
		if !s.mayRun(p, node, a.GPUs) {
			s.waitOn(node, ws.w.key)
			continue
		}
		s.writeAssign(ws, p, shared.Running, a.GPUs, "")
	}
	// pods to bind: the gang whole (each with its chunk), then replacements
	need := ws.w.gang
	if j != nil {
		need = width - ws.w.kind.Succeeded(j)
	}
	bound := len(holding)
	if bound >= need {
		s.sharedMoved(ws, holding, kept)
		s.startedUp(ws, holding, need, now, s.sharedRuns)
		return
	}
	unbound := s.unbound(live)
	if bound == 0 && len(unbound) < need {
		return // the gang is not all there yet
	}
	nodes := keysOf(chunks)
	type plan struct {
		p    *corev1.Pod
		node string
		gpus []int
	}
	var plans []plan
	for _, p := range unbound {
		if len(plans)+bound >= need {
			break
		}
		for _, n := range nodes {
			if len(chunks[n]) > 0 {
				plans = append(plans, plan{p, n, chunks[n][0]})
				chunks[n] = chunks[n][1:]
				break
			}
		}
	}
	ok := true
	for _, pl := range plans {
		ns := s.nodes[pl.node]
		if ns == nil || !ns.alive || !ns.reserved || !s.mayRun(pl.p, pl.node, pl.gpus) {
			s.waitOn(pl.node, ws.w.key)
			ok = false
		}
	}
	if !ok && bound == 0 {
		return // all or nothing
	}
	for _, pl := range plans {
		ns := s.nodes[pl.node]
		if ns == nil || !ns.alive || !ns.reserved || !s.mayRun(pl.p, pl.node, pl.gpus) {
			continue
		}
		s.writeAssign(ws, pl.p, shared.Running, pl.gpus, pl.node)
	}
}

// unbound returns the pods of live that are not bound and have no call in
// flight (a binding on its way).
func (s *Scheduler) unbound(live []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range live {
		if s.nodeOf(p) == "" && !s.busy("pod:"+string(p.UID)) {
			out = append(out, p)
		}
	}
	return out
}

// keysOf returns m's keys, sorted.
func keysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// sharedMoved tells the engine a migrating shared job is in place: all its
// pods bound where it wants them and told to run.
func (s *Scheduler) sharedMoved(ws *wstate, holding []*corev1.Pod, kept map[types.UID][]int) {
	if !s.x.get(ws.id).moving {
		return
	}
	for _, p := range holding {
		a, ok := s.assignOf(p)
		if p.Spec.NodeName == "" || !ok || a.State != shared.Running || kept[p.UID] == nil {
			return
		}
	}
	if err := s.apply(cluster.Event{Time: s.now(), Kind: cluster.EvActionDone, Job: ws.id}); err == nil {
		s.pending++
	}
}

// warnOnce records a Warning Event on the workload, once per reason.
func (s *Scheduler) warnOnce(ws *wstate, why string) {
	if ws.warned == why {
		return
	}
	ws.warned = why
	s.log.Warn("shared workload", "workload", ws.w.key, "why", why)
	s.event(ws, corev1.EventTypeWarning, "CannotMove", "%s", why)
}

// sharedProgress passes a shared workload's progress, as its first pod's
// agent reports it, to the engine (mini-batches done and their rate:
// what gandiva's introspection measures), and warns once about a pod
// whose agent failed.
func (s *Scheduler) sharedProgress(ws *wstate, pods []*corev1.Pod, now float64) {
	j := s.eng.Job(ws.id)
	if j == nil || j.State.Terminal() {
		return
	}
	first := true
	for _, p := range pods {
		if terminal(p) || p.DeletionTimestamp != nil || p.Spec.NodeName == "" {
			continue
		}
		st, ok := statusOf(p)
		if !ok {
			if v, has := p.Annotations[shared.AnnStatus]; has && ws.badStatus != v {
				ws.badStatus = v
				_, err := shared.ParseStatus(v)
				s.event(ws, corev1.EventTypeWarning, "BadAgentStatus", "pod %s: %v", p.Name, err)
			}
			continue
		}
		if st.State == shared.Failed && ws.failed[p.UID] != st.Gen+1 {
			if ws.failed == nil {
				ws.failed = map[types.UID]int64{}
			}
			ws.failed[p.UID] = st.Gen + 1
			s.event(ws, corev1.EventTypeWarning, "AgentFailed", "pod %s on %s: the node agent cannot carry out its assignment: %s", p.Name, p.Spec.NodeName, st.Error)
		}
		if !first {
			continue
		}
		first = false
		if !j.State.Holding() || st.IterTime <= 0 || (st.Done == ws.done && st.IterTime == ws.iterTime) {
			continue
		}
		if float64(st.Done) < j.Done {
			continue // a new process counting from its checkpoint's start
		}
		ws.done, ws.iterTime = st.Done, st.IterTime
		if err := s.eng.Apply(cluster.Event{Time: now, Kind: cluster.EvProfile, Job: ws.id, Done: float64(st.Done), IterTime: st.IterTime * s.clk.rate()}); err == nil { // (measured on the wall clock)
			s.pending++
		}
	}
}

// announceShared records a shared job's applied action as an Event.
func (s *Scheduler) announceShared(ws *wstate, a engineApplied) {
	switch a.Kind {
	case cluster.Suspend:
		s.event(ws, corev1.EventTypeNormal, "Suspended", "suspended in place by policy %s (%s): its pods stay bound, their state in host memory", s.pol.Name(), a.Reason)
	case cluster.Resume:
		where := "in place"
		if !slices.Equal(a.GPUs, a.Prev) {
			where = "on other GPUs: its pods are replaced (checkpoint, restore)"
		}
		s.event(ws, corev1.EventTypeNormal, "Resumed", "resumed %s by policy %s (GPUs %s)", where, s.pol.Name(), s.gpuNames(a.GPUs))
	case cluster.Migrate:
		s.event(ws, corev1.EventTypeNormal, "Migrating", "migrating by policy %s (%s) to GPUs %s: its pods checkpoint, stop, and restart there", s.pol.Name(), a.Reason, s.gpuNames(a.GPUs))
	case cluster.Resize:
		s.event(ws, corev1.EventTypeNormal, "Resizing", "resizing to %d GPUs by policy %s (%s)", len(a.GPUs), s.pol.Name(), a.Reason)
	}
	if a.Packed {
		s.event(ws, corev1.EventTypeNormal, "Packed", "packed by policy %s on GPUs %s with %s", s.pol.Name(), s.gpuNames(a.GPUs), strings.Join(s.neighbours(a.Job, a.GPUs), ", "))
	}
}

// gpuNames prints GPUs as NODE[local indices].
func (s *Scheduler) gpuNames(gpus []cluster.GPUID) string {
	l := s.localGPUs(gpus)
	parts := make([]string, 0, len(l))
	for _, n := range keysOf(l) {
		parts = append(parts, fmt.Sprintf("%s%v", n, l[n]))
	}
	return strings.Join(parts, " ")
}

// neighbours names the other jobs holding any of gpus.
func (s *Scheduler) neighbours(self cluster.JobID, gpus []cluster.GPUID) []string {
	var out []string
	for _, j := range s.eng.Snapshot().Active() {
		if j.ID == self || !j.State.Holding() {
			continue
		}
		for _, g := range j.GPUs {
			if slices.Contains(gpus, g) {
				name := j.Spec.Name
				if ws := s.wsOf(j.ID); ws != nil {
					name = ws.w.ns + "/" + ws.w.name
				}
				out = append(out, name)
				break
			}
		}
	}
	slices.Sort(out)
	return out
}
