package kube

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/kube/shared"
)

// Names Gandiva reads and writes on Kubernetes objects.
const (
	// SchedulerName is the spec.schedulerName of the pods Gandiva schedules.
	SchedulerName = shared.SchedulerName
	// GPU is the extended resource of a GPU (NVIDIA's device plugin).
	GPU corev1.ResourceName = "nvidia.com/gpu"

	// LabelJob groups plain pods (no Job) into one workload.
	LabelJob = "gandiva.io/job"

	// What a user may set on a Job (or on the pods of a plain-pod workload).
	AnnMinGPUs     = "gandiva.io/min-gpus"    // elastic: fewest GPUs (a multiple of a pod's)
	AnnMaxGPUs     = "gandiva.io/max-gpus"    // elastic: most GPUs
	AnnMemGiB      = "gandiva.io/mem-gib"     // peak GPU memory per GPU
	AnnIters       = "gandiva.io/iters"       // mini-batches in all (with iter-time)
	AnnIterTime    = "gandiva.io/iter-time"   // seconds per mini-batch on a reference GPU
	AnnGroup       = "gandiva.io/group"       // the jobs of one hyper-parameter search
	AnnGangSize    = "gandiva.io/gang-size"   // plain pods: pods in the gang
	AnnPreemptible = "gandiva.io/preemptible" // "true"/"false": overrides the default (see preemptible)

	// What Gandiva writes on a Job: its decision, the one record that
	// survives a restart (the scheduler keeps no other state).
	AnnState     = "gandiva.io/state"     // running, moving, suspended or killed
	AnnPlacement = "gandiva.io/placement" // where it runs: "node-a=2,node-b=2" (GPUs per node)

	// PodGroup labels and annotations of scheduler-plugins and Volcano.
	labelPodGroup        = "scheduling.x-k8s.io/pod-group"
	annVolcanoGroup      = "scheduling.k8s.io/group-name"
	reasonGandivaSuspend = "PreemptionByGandiva"
)

// The values of AnnState.
const (
	StateRunning   = "running"   // unsuspended; its pods are bound to AnnPlacement
	StateMoving    = "moving"    // suspended until its old pods are gone, then running on AnnPlacement
	StateSuspended = "suspended" // suspended by Gandiva (checkpointed); waits to be resumed
	StateKilled    = "killed"    // stopped for good by the policy (left suspended)
)

// workload is one unit the engine schedules: an object of a Kind (a Job,
// a JobSet), or a group of plain pods.
type workload struct {
	key  string // "PREFIX/NS/NAME" (kinds.go) or "pods/NS/GROUP"
	kind Kind   // nil: plain pods
	ns   string
	name string
	uid  types.UID
	// created orders submissions (and so FIFO order) across restarts.
	created time.Time
	spec    cluster.JobSpec
	// podGPUs is what each pod requests; gang the pods of the gang.
	podGPUs, gang int
	preemptible   bool
	// template stands for the pods, for node constraints.
	template *corev1.Pod
	// sig keys the cache of nodes that fit the template.
	sig string
	// bad says why the workload cannot be scheduled (not submitted).
	bad string
	// shared: its pods carry gandiva.io/gpus (shared.AnnGPUs) instead of
	// requesting nvidia.com/gpu; they run on shared nodes, where Gandiva
	// suspends and resumes them in place and may pack them.
	shared bool
}

// sharedGPUs reads a pod (template)'s shared.AnnGPUs: its GPUs per pod and
// whether it is a shared pod; a bad value or a pod that also requests
// nvidia.com/gpu gives a reason.
func sharedGPUs(ann map[string]string, spec *corev1.PodSpec, where string) (n int, ok bool, bad string) {
	v, ok := ann[shared.AnnGPUs]
	if !ok {
		return 0, false, ""
	}
	n, err := shared.ParseGPUs(v)
	if err != nil {
		return 0, true, fmt.Sprintf("%s: %v", where, err)
	}
	if g := gpusOf(spec); g > 0 {
		return 0, true, fmt.Sprintf("%s: annotation %s=%q and %d %s requested: a shared job's pods request no %s (Gandiva's reservation pods hold the shared nodes' GPUs)", where, shared.AnnGPUs, v, g, GPU, GPU)
	}
	return n, true, ""
}

// gpusOf is the nvidia.com/gpu a pod spec asks for: limits (which the
// device plugin honours) or else requests, summed over containers, or the
// largest of an init container if more.
func gpusOf(spec *corev1.PodSpec) int {
	q := func(c *corev1.Container) int64 {
		if v, ok := c.Resources.Limits[GPU]; ok {
			return v.Value()
		}
		if v, ok := c.Resources.Requests[GPU]; ok {
			return v.Value()
		}
		return 0
	}
	var sum, init int64
	for i := range spec.Containers {
		sum += q(&spec.Containers[i])
	}
	for i := range spec.InitContainers {
		init = max(init, q(&spec.InitContainers[i]))
	}
	return int(max(sum, init))
}

// jobFinished reports whether a Job is complete or failed (or about to be).
func jobFinished(j *batchv1.Job) (done, failed bool, reason string) {
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete, batchv1.JobSuccessCriteriaMet:
			return true, false, "completed"
		case batchv1.JobFailed, batchv1.JobFailureTarget:
			return true, true, "failed: " + c.Reason + " " + c.Message
		}
	}
	return false, false, ""
}

// fromObject describes an object of kind k that Gandiva schedules: its
// pod sets make one gang of alike pods.
func fromObject(k Kind, obj Object) *workload {
	ns, name := obj.GetNamespace(), obj.GetName()
	w := &workload{key: objectKey(k, ns, name), kind: k, ns: ns, name: name,
		uid: obj.GetUID(), created: obj.GetCreationTimestamp().Time}
	sets := k.PodSets(obj)
	if len(sets) == 0 || sets[0].Template == nil {
		w.template = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns}}
		w.bad = "it has no pod template, or a spec Gandiva cannot read (malformed, or over " + fmt.Sprint(maxJobSetPods) + " pods)"
		return w
	}
	where := func(ps PodSet) string {
		if len(sets) == 1 {
			return "pod template"
		}
		return "pod template " + ps.Name
	}
	t := sets[0].Template
	w.template = &corev1.Pod{ObjectMeta: t.ObjectMeta, Spec: t.Spec}
	w.template.Namespace = ns
	w.podGPUs = gpusOf(&t.Spec)
	if n, ok, bad := sharedGPUs(t.Annotations, &t.Spec, where(sets[0])); ok {
		w.podGPUs, w.shared, w.bad = n, true, bad
	}
	sig := constraintSig(w.template)
	for _, ps := range sets {
		w.gang += ps.Count
		if ps.Template == nil || w.bad != "" || ps.Template == t {
			continue
		}
		p := &corev1.Pod{ObjectMeta: ps.Template.ObjectMeta, Spec: ps.Template.Spec}
		g := gpusOf(&p.Spec)
		n, sh, bad := sharedGPUs(p.Annotations, &p.Spec, where(ps))
		if sh {
			g = n
		}
		switch {
		case bad != "":
			w.bad = bad
		case p.Spec.SchedulerName != t.Spec.SchedulerName:
			w.bad = fmt.Sprintf("%s and %s name different schedulers (%q, %q); a gang's pods must be alike", where(sets[0]), where(ps), t.Spec.SchedulerName, p.Spec.SchedulerName)
		case sh != w.shared || g != w.podGPUs:
			w.bad = fmt.Sprintf("%s and %s ask for different GPUs (%d, %d; shared %v, %v); a gang's pods must be alike", where(sets[0]), where(ps), w.podGPUs, g, w.shared, sh)
		case constraintSig(p) != sig:
			w.bad = fmt.Sprintf("%s and %s differ in node constraints (node selector, required affinity, tolerations); a gang's pods must be alike", where(sets[0]), where(ps))
		}
	}
	w.preemptible = k.Preemptible(obj)
	w.fill(obj.GetAnnotations(), k.GVK().Kind)
	return w
}

// ignoresDisruptions reports whether the Job's pod failure policy ignores
// pods that fail with a DisruptionTarget condition: then a suspension (which
// Gandiva marks so) counts no failure against its backoffLimit, and the Job
// controller waits for the old pods to end before it creates new ones.
func ignoresDisruptions(j *batchv1.Job) bool {
	if j.Spec.PodFailurePolicy == nil {
		return false
	}
	for _, r := range j.Spec.PodFailurePolicy.Rules {
		if r.Action != batchv1.PodFailurePolicyActionIgnore {
			continue
		}
		for _, p := range r.OnPodConditions {
			if p.Type == corev1.DisruptionTarget && p.Status == corev1.ConditionTrue {
				return true
			}
		}
	}
	return false
}

// fromPods describes plain pods of one group (sorted by name; at least one).
// minMember is the gang size of their PodGroup, or 0.
func fromPods(ns, group string, pods []*corev1.Pod, minMember int) *workload {
	first := pods[0]
	w := &workload{key: "pods/" + ns + "/" + group, ns: ns, name: group,
		uid: first.UID, created: first.CreationTimestamp.Time}
	for _, p := range pods {
		if p.CreationTimestamp.Time.Before(w.created) {
			w.created = p.CreationTimestamp.Time
		}
	}
	w.template = first
	w.podGPUs = gpusOf(&first.Spec)
	if n, ok, bad := sharedGPUs(first.Annotations, &first.Spec, "pod "+first.Name); ok {
		w.podGPUs, w.shared, w.bad = n, true, bad
		if bad != "" {
			return w
		}
	}
	for _, p := range pods[1:] {
		if n, ok, _ := sharedGPUs(p.Annotations, &p.Spec, ""); ok != w.shared || (ok && n != w.podGPUs) {
			w.bad = fmt.Sprintf("pods %s and %s differ in annotation %s (%q, %q); a gang's pods must be alike", first.Name, p.Name, shared.AnnGPUs, first.Annotations[shared.AnnGPUs], p.Annotations[shared.AnnGPUs])
			return w
		}
		if w.shared {
			continue
		}
		if g := gpusOf(&p.Spec); g != w.podGPUs {
			w.bad = fmt.Sprintf("its pods ask for different GPU counts (%s: %d, %s: %d); a gang's pods must be alike", first.Name, w.podGPUs, p.Name, g)
			return w
		}
	}
	w.gang = len(pods)
	if minMember > 0 {
		w.gang = minMember
	}
	if v, ok := first.Annotations[AnnGangSize]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 || n > 10000 {
			w.bad = fmt.Sprintf("annotation %s=%q on pod %s: want a pod count from 1 to 10000", AnnGangSize, v, first.Name)
			return w
		}
		w.gang = n
	}
	w.fill(first.Annotations, "pod "+first.Name)
	w.preemptible = false // no controller would recreate its pods
	return w
}

// fill sets the engine's job spec from the annotations (and the preemptible
// override), or bad.
func (w *workload) fill(ann map[string]string, where string) {
	if w.bad != "" {
		return
	}
	if w.podGPUs <= 0 {
		w.bad = fmt.Sprintf("its pods request no %s and carry no %s; Gandiva schedules GPU pods only", GPU, shared.AnnGPUs)
		return
	}
	if w.gang <= 0 {
		w.bad = "its parallelism is 0"
		return
	}
	s := &w.spec
	switch {
	case w.kind == nil:
		s.Name = w.ns + "/pods:" + w.name
	case w.kind.Prefix() == "job":
		s.Name = w.ns + "/" + w.name
	default:
		s.Name = w.ns + "/" + w.kind.Prefix() + ":" + w.name
	}
	s.User = w.ns
	s.GPUs = w.gang * w.podGPUs
	s.Group = ann[AnnGroup]
	bad := func(key, format string, args ...any) {
		if w.bad == "" {
			w.bad = fmt.Sprintf("annotation %s=%q on %s: ", key, ann[key], where) + fmt.Sprintf(format, args...)
		}
	}
	num := func(key string, lo, hi float64) float64 {
		v, ok := ann[key]
		if !ok {
			return 0
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || math.IsNaN(f) || f < lo || f > hi {
			bad(key, "want a number from %g to %g", lo, hi)
			return 0
		}
		return f
	}
	gpus := func(key string) int {
		f := num(key, 1, 1<<20)
		if f != math.Trunc(f) || int(f)%w.podGPUs != 0 {
			bad(key, "want a whole number of pods of %d GPUs", w.podGPUs)
			return 0
		}
		return int(f)
	}
	s.MinGPUs, s.MaxGPUs = gpus(AnnMinGPUs), gpus(AnnMaxGPUs)
	s.MemGiB = num(AnnMemGiB, 0, 1e4)
	s.Iters = num(AnnIters, 0, 1e15)
	s.IterTime = num(AnnIterTime, 0, 86400)
	if (s.Iters > 0) != (s.IterTime > 0) && w.bad == "" {
		w.bad = fmt.Sprintf("annotations on %s: %s and %s go together (the policies use their product)", where, AnnIters, AnnIterTime)
	}
	if s.Elastic() && w.kind == nil && w.bad == "" {
		w.bad = fmt.Sprintf("annotations on %s: plain pods cannot grow or shrink; use a Job", where)
	}
	if s.Elastic() && w.kind != nil && !w.kind.Resizable() && w.bad == "" {
		w.bad = fmt.Sprintf("annotations on %s: a %s cannot grow or shrink; use a Job", where, w.kind.GVK().Kind)
	}
	if v, ok := ann[AnnPreemptible]; ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			bad(AnnPreemptible, "want true or false")
		} else if w.kind != nil {
			w.preemptible = b
			if _, no := w.kind.(unsuspendable); no && b {
				bad(AnnPreemptible, "a %s has no spec.suspend: Gandiva cannot suspend it", w.kind.GVK().Kind)
			}
		}
	}
	if w.bad == "" {
		if err := s.Validate(); err != nil {
			w.bad = err.Error()
		}
	}
	w.sig = constraintSig(w.template)
}

// constraintSig keys the node constraints of a pod: node selector, required
// affinity and tolerations (their printed form; equal specs give equal keys).
func constraintSig(p *corev1.Pod) string {
	var b strings.Builder
	if _, ok := p.Annotations[shared.AnnGPUs]; ok {
		b.WriteString("shared;") // shared nodes only (Scheduler.Fits)
	}
	keys := make([]string, 0, len(p.Spec.NodeSelector))
	for k := range p.Spec.NodeSelector {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "s:%s=%s;", k, p.Spec.NodeSelector[k])
	}
	if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		fmt.Fprintf(&b, "a:%v;", a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.String())
	}
	for _, t := range p.Spec.Tolerations {
		fmt.Fprintf(&b, "t:%s;", t.String())
	}
	return b.String()
}

// placement is GPUs per node.
type placement map[string]int

// String is the AnnPlacement form: "a=2,b=2", nodes sorted.
func (p placement) String() string {
	nodes := make([]string, 0, len(p))
	for n := range p {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	var b strings.Builder
	for i, n := range nodes {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%d", n, p[n])
	}
	return b.String()
}

// total is the GPU count.
func (p placement) total() int {
	n := 0
	for _, k := range p {
		n += k
	}
	return n
}

// parsePlacement reads the AnnPlacement form.
func parsePlacement(s string) (placement, error) {
	p := placement{}
	if strings.TrimSpace(s) == "" {
		return p, nil
	}
	for _, part := range strings.Split(s, ",") {
		node, n, ok := strings.Cut(part, "=")
		k, err := strconv.Atoi(n)
		if !ok || node == "" || err != nil || k <= 0 {
			return nil, fmt.Errorf("placement %q: bad entry %q (want NODE=GPUS)", s, part)
		}
		p[node] += k
	}
	return p, nil
}

// equal reports whether two placements are the same.
func (p placement) equal(q placement) bool {
	if len(p) != len(q) {
		return false
	}
	for n, k := range p {
		if q[n] != k {
			return false
		}
	}
	return true
}
