package kube

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// LeaderWorkerSet (leaderworkerset.x-k8s.io/v1): read as unstructured
// objects, only the fields below (the LWS module is not a dependency).
var (
	lwsGVR = schema.GroupVersionResource{Group: "leaderworkerset.x-k8s.io", Version: "v1", Resource: "leaderworkersets"}
	lwsGVK = schema.GroupVersionKind{Group: "leaderworkerset.x-k8s.io", Version: "v1", Kind: "LeaderWorkerSet"}
)

// labelLWSName is the label the LWS controller puts on every pod of a
// LeaderWorkerSet (its leaders' and workers' StatefulSets'): its name.
const labelLWSName = "leaderworkerset.sigs.k8s.io/name"

// maxLWSPods bounds the gang of a LeaderWorkerSet (a hostile spec's replicas).
const maxLWSPods = 100000

// leaderWorkerSet is the part of a LeaderWorkerSet that Gandiva reads.
type leaderWorkerSet struct {
	Spec struct {
		Replicas             *int32 `json:"replicas,omitempty"`
		LeaderWorkerTemplate struct {
			LeaderTemplate *corev1.PodTemplateSpec `json:"leaderTemplate,omitempty"`
			WorkerTemplate corev1.PodTemplateSpec  `json:"workerTemplate"`
			Size           *int32                  `json:"size,omitempty"`
		} `json:"leaderWorkerTemplate"`
	} `json:"spec"`
}

// readLWS reads a LeaderWorkerSet object; a malformed one gives an error.
func readLWS(obj Object) (*leaderWorkerSet, error) {
	return readObject[leaderWorkerSet](obj, "LeaderWorkerSet")
}

// lwsKind is the LeaderWorkerSet: one gang of all its groups' pods
// (replicas leaders and replicas × (size − 1) workers), bound whole. A
// LeaderWorkerSet has no spec.suspend (LWS v0.10.0, the version tested):
// Gandiva cannot suspend one, so it is never preemptible
// (gandiva.io/preemptible cannot make it so: see Preemptible) and it keeps
// its GPUs until it is deleted or scaled (its StatefulSets make the pods
// that end again, bound where the set runs). Fixed width.
type lwsKind struct{}

var _ Kind = lwsKind{}

func (lwsKind) Prefix() string { return "lws" }

func (lwsKind) GVK() schema.GroupVersionKind { return lwsGVK }

func (lwsKind) Informer(c *Clients) (cache.SharedIndexInformer, error) {
	return crdInformer(c, lwsGVR)
}

// PodOf: a pod of a StatefulSet that carries the LWS name label.
func (lwsKind) PodOf(p *corev1.Pod) (string, bool) {
	ref := metav1.GetControllerOfNoCopy(p)
	if ref == nil || ref.Kind != "StatefulSet" {
		return "", false
	}
	name, ok := p.Labels[labelLWSName]
	return name, ok && name != ""
}

// Owns: LWS pods carry no UID of their set; a pod of a deleted set of the
// same name is gone with its StatefulSets (owner references).
func (lwsKind) Owns(Object, *corev1.Pod) bool { return true }

// PodSets: the leaders (replicas, from leaderTemplate, else
// workerTemplate) and the workers (replicas × (size − 1)); none for a
// malformed set.
func (lwsKind) PodSets(obj Object) []PodSet {
	l, err := readLWS(obj)
	if err != nil {
		return nil
	}
	replicas, size := 1, 1
	if r := l.Spec.Replicas; r != nil {
		replicas = int(*r)
	}
	if s := l.Spec.LeaderWorkerTemplate.Size; s != nil {
		size = int(*s)
	}
	if replicas <= 0 || size <= 0 || replicas > maxLWSPods || size > maxLWSPods || replicas > maxLWSPods/size {
		return nil
	}
	t := &l.Spec.LeaderWorkerTemplate
	leader := t.LeaderTemplate
	if leader == nil {
		leader = &t.WorkerTemplate
	}
	out := []PodSet{{Name: "leader", Count: replicas, Template: leader}}
	if size > 1 {
		out = append(out, PodSet{Name: "worker", Count: replicas * (size - 1), Template: &t.WorkerTemplate})
	}
	return out
}

// Finished: a LeaderWorkerSet serves until it is deleted.
func (lwsKind) Finished(Object) (bool, bool, string) { return false, false, "" }

// Suspended: it has no spec.suspend.
func (lwsKind) Suspended(Object) bool { return false }

// Width is the gang: all its pods or none.
func (k lwsKind) Width(obj Object) int {
	n := 0
	for _, ps := range k.PodSets(obj) {
		n += ps.Count
	}
	return n
}

func (lwsKind) Succeeded(Object) int { return 0 }

func (lwsKind) Resizable() bool { return false }

// Preemptible: never (it cannot be suspended). The annotation
// gandiva.io/preemptible: "true" would let the policy suspend it, which
// Gandiva cannot carry out: the workload is refused (unsuspendable).
func (lwsKind) Preemptible(Object) bool { return false }

// unsuspendable marks a kind without spec.suspend: Gandiva binds its gang
// whole but never suspends, moves or resizes it.
type unsuspendable interface{ noSuspend() }

func (lwsKind) noSuspend() {}

// SpecPatch changes nothing of its spec: a LeaderWorkerSet cannot be
// suspended or resized; only Gandiva's annotations are written.
func (lwsKind) SpecPatch(Object, bool, int) map[string]any { return map[string]any{} }

func (lwsKind) Patch(ctx context.Context, c *Clients, ns, name string, body []byte) (Object, error) {
	return patchCRD(ctx, c, lwsGVR, ns, name, body)
}

// WriteStatus: its status has conditions (conditions.go).
func (lwsKind) WriteStatus(ctx context.Context, c *Clients, obj Object, st WorkloadStatus) error {
	return writeCRDStatus(ctx, c, lwsGVR, obj, st, true)
}
