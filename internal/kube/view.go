package kube

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/gandiva-sched/gandiva/internal/kube/shared"
)

// JobView is what `gandiva jobs/status/explain --kube` show of one workload
// of Gandiva's, read from the API server alone (the same objects the
// scheduler reads and writes; there is nothing else to ask).
type JobView struct {
	// Namespace is the user; Name the Job's (or custom resource's) name,
	// or the plain pods' gandiva.io/job label (or the pod's name); a
	// TrainJob's for the JobSet Gandiva schedules it as.
	Namespace, Name string
	// Kind is "Job", "Pods", or a custom-resource kind's ("JobSet",
	// "RayJob", "LeaderWorkerSet", "TrainJob").
	Kind string
	// Object is the object Gandiva schedules ("JobSet/NAME") where it is
	// not the one shown (a TrainJob's JobSet).
	Object  string `json:",omitempty"`
	Created time.Time
	// GPUs is the gang's: pods times GPUs per pod.
	GPUs, PodGPUs, Gang int
	// State: Gandiva's decision (gandiva.io/state: running, moving,
	// suspended, killed), or pending (not started yet), completed, failed.
	// A shared job whose bound pods are all assigned "suspended" (in place,
	// on their node) is suspended.
	State string
	// Shared: its pods carry gandiva.io/gpus (shared mode); its pods'
	// GPUs, assignments and agent reports are in Pods.
	Shared bool
	// Placement is gandiva.io/placement ("node-a=2,node-b=2") or, for
	// plain pods, where its pods are bound.
	Placement string
	// Reason is why it waits, as the scheduler last said it (the
	// PodScheduled condition of a pending pod, else its latest Waiting
	// Event): the policy's reason and the job's place in the queue.
	Reason string
	// ETA is when a running workload is expected to end, as the
	// scheduler last wrote it on a bound pod (AnnETA; at most MaxETAShown
	// bytes). Its pods' owner can write that annotation too: it is their
	// text, shown as such, never used to schedule.
	ETA  string `json:",omitempty"`
	Pods []PodView
	// Events are Gandiva's Events on the Job and its pods, oldest first
	// (only from Describe).
	Events []EventView
}

// PodView is one pod of a workload.
type PodView struct {
	Name, Node, Phase string
	// Shared pods only: the node-local GPUs, state and generation of its
	// gandiva.io/assign, and what its node agent last reported
	// (gandiva.io/agent-status: state, the generation carried out,
	// mini-batches done, seconds per mini-batch, start-up over, error).
	GPUs       []int   `json:",omitempty"`
	Assign     string  `json:",omitempty"`
	AssignGen  int64   `json:",omitempty"`
	Agent      string  `json:",omitempty"`
	AgentGen   int64   `json:",omitempty"`
	Done       int64   `json:",omitempty"`
	IterTime   float64 `json:",omitempty"`
	Ready      bool    `json:",omitempty"`
	AgentError string  `json:",omitempty"`
}

// EventView is one Event.
type EventView struct {
	At                   time.Time
	Object, Type, Reason string
	Message              string
	Count                int32
}

// List returns the batch/v1 Jobs and plain-pod workloads Gandiva
// schedules in namespace ns ("" for all), ordered by namespace, then
// creation, then name. ListKinds adds the custom-resource kinds.
func List(ctx context.Context, cs kubernetes.Interface, ns string) ([]JobView, error) {
	views, _, err := ListKinds(ctx, cs, nil, ns)
	return views, err
}

// ListKinds is List with the workloads of every custom-resource kind
// (JobSet, RayJob, LeaderWorkerSet: listkinds.go) read through dyn (nil:
// none). notes says, once for each kind, what is not shown and why (a kind
// served that the caller may not list); a kind the API server does not
// serve contributes nothing.
func ListKinds(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface, ns string) (_ []JobView, notes []string, _ error) {
	jobs, err := cs.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("listing Jobs: %w", err)
	}
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("listing pods: %w", err)
	}
	views := map[string]*JobView{}
	if dyn != nil {
		if notes, err = kindViews(ctx, cs, dyn, ns, views); err != nil {
			return nil, nil, err
		}
	}
	for i := range jobs.Items {
		j := &jobs.Items[i]
		if managedJob(j) {
			views["job/"+j.Namespace+"/"+j.Name] = jobView(j)
		}
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		k := workloadKey(p)
		if k == "" {
			continue
		}
		v := views[k]
		if v == nil {
			if !strings.HasPrefix(k, "pods/") {
				continue // a pod of an object that is gone, or of a kind not listed
			}
			v = &JobView{Namespace: p.Namespace, Name: strings.TrimPrefix(k, "pods/"+p.Namespace+"/"), Kind: "Pods",
				Created: p.CreationTimestamp.Time, PodGPUs: gpusOf(&p.Spec)}
			if n, ok, _ := sharedGPUs(p.Annotations, &p.Spec, ""); ok {
				v.PodGPUs, v.Shared = n, true
			}
			views[k] = v
		}
		if n, err := strconv.Atoi(p.Annotations[AnnGangSize]); err == nil && n > v.Gang {
			v.Gang = n
		}
		v.Created = minTime(v.Created, p.CreationTimestamp.Time)
		v.Pods = append(v.Pods, sharedPodView(p, PodView{Name: p.Name, Node: p.Spec.NodeName, Phase: string(p.Status.Phase)}))
		if a := p.Annotations[AnnETA]; a != "" && v.ETA == "" && p.Spec.NodeName != "" && p.DeletionTimestamp == nil && !terminal(p) {
			if len(a) > MaxETAShown {
				a = strings.ToValidUTF8(a[:MaxETAShown], "") + "…"
			}
			v.ETA = a
		}
		if c := podCondition(p, corev1.PodScheduled); c != nil && c.Status == corev1.ConditionFalse && p.Spec.NodeName == "" &&
			p.DeletionTimestamp == nil && !terminal(p) {
			v.Reason = strings.TrimPrefix(c.Message, "Gandiva: ")
		}
	}
	out := make([]JobView, 0, len(views))
	for _, v := range views {
		sort.Slice(v.Pods, func(a, b int) bool { return v.Pods[a].Name < v.Pods[b].Name })
		if v.Kind == "Pods" {
			v.Gang = max(v.Gang, len(v.Pods))
			v.GPUs = v.PodGPUs * v.Gang
			v.State, v.Placement = podsState(v.Pods)
		}
		if v.Shared && v.State == StateRunning && suspendedInPlace(v.Pods) {
			v.State = StateSuspended
		}
		if v.State != StateSuspended && v.State != "pending" && v.State != "" {
			v.Reason = "" // a reason left on a pod from before it ran
		}
		if v.State != StateRunning && v.State != StateMoving {
			v.ETA = "" // an end told while it ran
		}
		out = append(out, *v)
	}
	slices.SortFunc(out, func(a, b JobView) int {
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out, notes, nil
}

// Describe returns one workload of namespace ns (a Job's name, or a plain
// pods' gandiva.io/job label or pod name) with its Events.
func Describe(ctx context.Context, cs kubernetes.Interface, ns, name string) (JobView, error) {
	v, _, err := DescribeKinds(ctx, cs, nil, ns, name)
	return v, err
}

// DescribeKinds is Describe among the workloads ListKinds shows (the
// first, oldest, of those of that name); notes are ListKinds'.
func DescribeKinds(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface, ns, name string) (JobView, []string, error) {
	all, notes, err := ListKinds(ctx, cs, dyn, ns)
	if err != nil {
		return JobView{}, notes, err
	}
	i := slices.IndexFunc(all, func(v JobView) bool { return v.Name == name })
	if i < 0 {
		return JobView{}, notes, fmt.Errorf("no job %q of Gandiva's in namespace %s", name, ns)
	}
	v, err := describe(ctx, cs, ns, all[i])
	return v, notes, err
}

// describe adds to v its Events (and the waiting reason they give).
func describe(ctx context.Context, cs kubernetes.Interface, ns string, v JobView) (JobView, error) {
	objs := map[string]bool{}
	if v.Kind != "Pods" {
		objs[v.Kind+"/"+v.Name] = true
	}
	if v.Object != "" {
		objs[v.Object] = true
	}
	for _, p := range v.Pods {
		objs["Pod/"+p.Name] = true
	}
	evs, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("source", "gandiva").String()})
	if err != nil {
		return v, fmt.Errorf("listing Events: %w", err)
	}
	for _, e := range evs.Items {
		obj := e.InvolvedObject.Kind + "/" + e.InvolvedObject.Name
		if !objs[obj] {
			continue
		}
		at := e.LastTimestamp.Time
		if at.IsZero() {
			at = e.EventTime.Time
		}
		v.Events = append(v.Events, EventView{At: at, Object: obj, Type: e.Type, Reason: e.Reason, Message: e.Message, Count: e.Count})
		if e.Reason == "Waiting" && v.Reason == "" && (v.State == "pending" || v.State == StateSuspended) {
			v.Reason = e.Message
		}
	}
	slices.SortStableFunc(v.Events, func(a, b EventView) int {
		if c := a.At.Compare(b.At); c != 0 {
			return c
		}
		return strings.Compare(a.Object+a.Reason, b.Object+b.Reason)
	})
	if v.Reason == "" && (v.State == "pending" || v.State == StateSuspended) {
		// the latest Waiting Event, if none of its pods is pending
		for k := len(v.Events) - 1; k >= 0; k-- {
			if v.Events[k].Reason == "Waiting" {
				v.Reason = v.Events[k].Message
				break
			}
		}
	}
	return v, nil
}

func jobView(j *batchv1.Job) *JobView {
	done, failed, _ := jobFinished(j)
	return newJobView(j, "Job", fromJob(j), done, failed)
}

// newJobView is the view of obj, workload w of kind kind, finished (failed
// or not) when done: its state is then completed or failed, else its
// gandiva.io/state, pending when it has none (its pods are added by the
// caller).
func newJobView(obj metav1.Object, kind string, w *workload, done, failed bool) *JobView {
	ann := obj.GetAnnotations()
	v := &JobView{Namespace: obj.GetNamespace(), Name: obj.GetName(), Kind: kind, Created: obj.GetCreationTimestamp().Time,
		PodGPUs: w.podGPUs, Gang: w.gang, GPUs: w.podGPUs * w.gang, Shared: w.shared,
		State: ann[AnnState], Placement: ann[AnnPlacement]}
	switch {
	case done && failed:
		v.State = "failed"
	case done:
		v.State = "completed"
	case v.State == "":
		v.State = "pending"
	}
	return v
}

// sharedPodView adds a shared pod's assignment and agent report to its view.
func sharedPodView(p *corev1.Pod, v PodView) PodView {
	if a, err := shared.ParseAssign(p.Annotations[shared.AnnAssign]); err == nil {
		v.GPUs, v.Assign, v.AssignGen = a.GPUs, a.State, a.Gen
	}
	if st, ok := statusOf(p); ok {
		v.Agent, v.AgentGen, v.Done, v.IterTime, v.Ready, v.AgentError = st.State, st.Gen, st.Done, st.IterTime, st.Ready, st.Error
	}
	return v
}

// suspendedInPlace reports whether a shared workload's bound, live pods
// are all assigned "suspended" (and there is at least one).
func suspendedInPlace(pods []PodView) bool {
	n := 0
	for _, p := range pods {
		if p.Node == "" || p.Phase == string(corev1.PodSucceeded) || p.Phase == string(corev1.PodFailed) {
			continue
		}
		if p.Assign != shared.Suspended {
			return false
		}
		n++
	}
	return n > 0
}

// podsState is a plain-pod workload's state and where its pods are bound.
func podsState(pods []PodView) (state, placement string) {
	per := map[string]int{}
	live, ok, failed := 0, 0, 0
	for _, p := range pods {
		switch corev1.PodPhase(p.Phase) {
		case corev1.PodSucceeded:
			ok++
			continue
		case corev1.PodFailed:
			failed++
			continue
		}
		live++
		if p.Node != "" {
			per[p.Node]++
		}
	}
	nodes := make([]string, 0, len(per))
	for n := range per {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	parts := make([]string, len(nodes))
	for i, n := range nodes {
		parts[i] = fmt.Sprintf("%s=%d", n, per[n])
	}
	switch {
	case live == 0 && failed > 0:
		state = "failed"
	case live == 0:
		state = "completed"
	case len(per) == 0:
		state = "pending"
	default:
		state = StateRunning
	}
	return state, strings.Join(parts, ",")
}

func minTime(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}
