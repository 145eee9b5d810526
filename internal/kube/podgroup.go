package kube

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// groupAnswer is the answer of a PodGroup read: its minMember (0: none),
// and the error that made it unreadable (counted as none).
type groupAnswer struct {
	min int
	err error
}

// groupKey is the dispatcher key of the read of a workload's PodGroup.
func groupKey(wl string) string { return "podgroup:" + wl }

// podGroupOf names the PodGroup a pod belongs to (scheduler-plugins' label,
// else Volcano's annotation), or "".
func podGroupOf(p *corev1.Pod) (string, schema.GroupVersionResource) {
	if name := p.Labels[labelPodGroup]; name != "" {
		return name, schema.GroupVersionResource{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "podgroups"}
	}
	return p.Annotations[annVolcanoGroup], schema.GroupVersionResource{Group: "scheduling.volcano.sh", Version: "v1beta1", Resource: "podgroups"}
}

// podGroupMin is the gang size of the PodGroup that pod p of plain-pod
// workload key names: its minMember, 0 if it names none, none exists or
// it cannot be read (a warning). known is false while the PodGroup is
// being read: the loop never calls the API itself; the read is a call on
// the low dispatcher (the term's context, a timeout), made once per
// workload, whose answer (result) records the size and has the loop look
// at the workload again.
func (s *Scheduler) podGroupMin(key string, p *corev1.Pod) (n int, known bool) {
	if v, ok := s.groups[key]; ok {
		return v, true
	}
	name, gvr := podGroupOf(p)
	if name == "" || s.o.Dynamic == nil {
		s.groups[key] = 0
		return 0, true
	}
	if !s.busy(groupKey(key)) {
		dyn, ns := s.o.Dynamic, p.Namespace
		s.submitLow(op{key: groupKey(key), wl: key, do: func(ctx context.Context) opResult {
			u, err := dyn.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
			a := &groupAnswer{}
			switch {
			case err == nil:
				a.min = minMember(u)
			case !apierrors.IsNotFound(err):
				a.err = err
			}
			return opResult{group: a}
		}})
	}
	return 0, false
}

// minMember reads spec.minMember of a PodGroup (0 if absent or not a number).
func minMember(u *unstructured.Unstructured) int {
	v, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "minMember")
	if !ok {
		return 0
	}
	switch x := v.(type) {
	case int64:
		return int(x)
	case float64:
		return int(x)
	}
	return 0
}

// groupRead records a PodGroup read's answer r for its workload.
func (s *Scheduler) groupRead(r opResult) {
	if r.group == nil {
		return // refused by a full queue: read again when next looked at
	}
	if r.group.err != nil {
		s.log.Warn("reading PodGroup (its gang size is ignored)", "workload", r.wl, "err", r.group.err)
	}
	s.groups[r.wl] = r.group.min
}
