package kube

import (
	"context"
	"fmt"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"strings"
	"sync"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Object is one object of a workload kind as an informer's cache shows
// it: a *batchv1.Job, an *unstructured.Unstructured of a custom resource.
type Object interface {
	metav1.Object
	runtime.Object
}

// PodSet is a group of alike pods of a workload (Kueue's PodSet): Count
// pods made from Template.
type PodSet struct {
	Name     string
	Count    int
	Template *corev1.PodTemplateSpec
}

// Kind is a suspendable workload kind: a controller's object (a batch/v1
// Job, a JobSet) whose pods Gandiva schedules as one gang, in the shape of
// Kueue's jobframework.GenericJob. Gandiva suspends and resumes it through
// the object's own spec.suspend (the kind's controller then deletes or
// recreates its pods), and writes its decision on the object as the
// annotations AnnState and AnnPlacement: the one record that survives a
// restart. Gandiva binds the pods itself, all of the gang or none.
//
// The methods read only their arguments (no API call, no cache) except
// Informer and Patch; an object given to them may be hostile (a user
// wrote it): they validate what they read and never panic.
//
// A new kind is one file with a type implementing Kind and its entry in
// workloadKinds (kinds.go).
type Kind interface {
	// Prefix names the kind in workload keys ("job" gives "job/NS/NAME")
	// and events; unique among the kinds, lower case, no '/'.
	Prefix() string
	// GVK is the kind's group, version and kind. An object whose
	// controller owner reference names another registered kind (a Job
	// of a JobSet) is that kind's, never a workload of its own.
	GVK() schema.GroupVersionKind
	// Informer makes the informer of the kind's objects (with transform
	// trim), or says why the API server does not serve the kind (a CRD not
	// installed, see Clients.Served).
	Informer(c *Clients) (cache.SharedIndexInformer, error)
	// PodOf names the object of this kind a pod belongs to (in the pod's
	// namespace), from what the pod carries: its owner references and
	// labels; ok is false when it is none of this kind's.
	PodOf(p *corev1.Pod) (name string, ok bool)
	// Owns reports whether pod p (which PodOf gave to obj's name) is obj's
	// and not a leftover of a deleted object of the same name.
	Owns(obj Object, p *corev1.Pod) bool
	// PodSets is the gang: its pods, in groups of one template each. The
	// pods of all sets must be alike in GPUs (the engine's gang is
	// PodGPUs × pods); a kind with no pods yet may return none.
	PodSets(obj Object) []PodSet
	// Finished reports whether the object is over (complete or failed).
	Finished(obj Object) (done, failed bool, why string)
	// Suspended reports whether its spec.suspend is true.
	Suspended(obj Object) bool
	// Width is the pods it runs when not suspended, Succeeded those of
	// them that completed (not to be run again).
	Width(obj Object) int
	Succeeded(obj Object) int
	// Resizable reports whether SpecPatch may change the width (the kind
	// is elastic: gandiva.io/min-gpus and max-gpus allowed).
	Resizable() bool
	// Preemptible is whether a suspension of it loses no more than the
	// work since its last checkpoint by default (gandiva.io/preemptible
	// overrides it): Gandiva then may suspend and move it.
	Preemptible(obj Object) bool
	// SpecPatch is the "spec" part of the JSON merge patch that suspends
	// (suspend true) or resumes it, at width pods (0: the width unchanged).
	SpecPatch(obj Object, suspend bool, width int) map[string]any
	// Patch applies a JSON merge patch to the object and returns it as
	// patched.
	Patch(ctx context.Context, c *Clients, ns, name string, body []byte) (Object, error)
	// WriteStatus shows Gandiva's decision on obj (conditions.go): the
	// annotation AnnReason, and st's conditions merged by type into its
	// status.conditions where the kind's status has conditions (the
	// owning controller's kept as obj shows them, guarded by obj's
	// resourceVersion where the patch replaces the list). A conflict
	// error: obj changed meanwhile (written again later).
	WriteStatus(ctx context.Context, c *Clients, obj Object, st WorkloadStatus) error
}

// workloadKinds are the workload kinds, asked in order which one a pod
// belongs to: a kind whose objects own another kind's (a JobSet owns
// Jobs) goes before it. Plain pods (gandiva.io/job, or one pod) are the
// last resort and no Kind (fromPods).
var workloadKinds = []Kind{jobSetKind{}, rayJobKind{}, lwsKind{}, pytorchJobKind{}, jobKind{}}

// Clients is what kinds' informers and patches use.
type Clients struct {
	Typed kubernetes.Interface
	// Dynamic is nil where custom resources cannot be read (some unit
	// tests): their kinds are then off.
	Dynamic dynamic.Interface
	// Factory makes typed informers (trimmed); started by the scheduler.
	Factory informers.SharedInformerFactory
}

// Served reports whether the API server serves resource of group version
// gv (a custom resource's CRD installed), by discovery, and whether this
// scheduler may list, watch and patch it (a SelfSubjectAccessReview per
// verb): nil if so, else why not. A kind served but forbidden stays off:
// its informer would never sync, and the term would wait for it for ever.
func (c *Clients) Served(gv schema.GroupVersion, resource string) error {
	if c.Dynamic == nil {
		return fmt.Errorf("no dynamic client")
	}
	l, err := c.Typed.Discovery().ServerResourcesForGroupVersion(gv.String())
	if err != nil {
		return fmt.Errorf("%s not served: %w", gv, err)
	}
	served := false
	for _, r := range l.APIResources {
		served = served || r.Name == resource
	}
	if !served {
		return fmt.Errorf("%s not served by %s", resource, gv)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, verb := range []string{"list", "watch", "patch"} {
		r, err := c.Typed.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authzv1.SelfSubjectAccessReview{
			Spec: authzv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authzv1.ResourceAttributes{
				Group: gv.Group, Version: gv.Version, Resource: resource, Verb: verb}}}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("asking whether this scheduler may %s %s.%s: %w", verb, resource, gv.Group, err)
		}
		if !r.Status.Allowed {
			return fmt.Errorf("%s.%s is served, but this scheduler may not %s them: grant it in its ClusterRole (deploy/base/rbac.yaml, or the Helm chart's)", resource, gv.Group, verb)
		}
	}
	return nil
}

// kindOf is the kind of a workload key's prefix, or nil.
func kindOf(prefix string) Kind {
	for _, k := range workloadKinds {
		if k.Prefix() == prefix {
			return k
		}
	}
	return nil
}

// kindIndex is the index in workloadKinds of a kind, or -1.
func kindIndex(k Kind) int {
	for i, x := range workloadKinds {
		if x.Prefix() == k.Prefix() {
			return i
		}
	}
	return -1
}

// objectKey is the workload key of an object of kind k.
func objectKey(k Kind, ns, name string) string { return k.Prefix() + "/" + ns + "/" + name }

// splitKey splits a workload key into its prefix, namespace and name.
func splitKey(key string) (prefix, ns, name string) {
	prefix, rest, _ := strings.Cut(key, "/")
	ns, name, _ = strings.Cut(rest, "/")
	return prefix, ns, name
}

// ownedByKind reports whether an object's controller is an object of a
// registered kind (then it is part of that workload, not one of its own).
func ownedByKind(obj metav1.Object) bool {
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref == nil {
		return false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return false
	}
	for _, k := range workloadKinds {
		if g := k.GVK(); g.Group == gv.Group && g.Kind == ref.Kind {
			return true
		}
	}
	return false
}

// managedTemplates reports whether Gandiva schedules a workload with these
// pod sets: a template names schedulerName gandiva (fromObject refuses a
// workload whose templates name several schedulers).
func managedTemplates(sets []PodSet) bool {
	for _, ps := range sets {
		if ps.Template != nil && ps.Template.Spec.SchedulerName == SchedulerName {
			return true
		}
	}
	return false
}

// managedObject reports whether Gandiva schedules an object of kind k as
// a workload of its own.
func managedObject(k Kind, obj Object) bool {
	return !ownedByKind(obj) && managedTemplates(k.PodSets(obj))
}

// podKind is the workload key of a pod of Gandiva's: the first kind that
// claims it, else its plain-pod group.
func podKind(p *corev1.Pod) string {
	for _, k := range workloadKinds {
		if name, ok := k.PodOf(p); ok && name != "" {
			return objectKey(k, p.Namespace, name)
		}
	}
	if g := p.Labels[LabelJob]; g != "" {
		return "pods/" + p.Namespace + "/" + g
	}
	return "pods/" + p.Namespace + "/" + p.Name
}

// kindInf is a workload kind's informer in one term: set once the API
// server serves the kind (at the term's start, or later by startKinds).
type kindInf struct {
	k   Kind
	mu  sync.Mutex
	inf cache.SharedIndexInformer // nil: not served (yet); synced once set after the start
	why string                    // why not served
}

func (ki *kindInf) informer() cache.SharedIndexInformer {
	ki.mu.Lock()
	defer ki.mu.Unlock()
	return ki.inf
}

func (ki *kindInf) reason() string {
	ki.mu.Lock()
	defer ki.mu.Unlock()
	return ki.why
}

// kindPoll is how often the kinds the API server did not serve are looked
// for again (a CRD installed after the scheduler started).
const kindPoll = 20 * time.Second

// startKinds looks every poll for the kinds not served at the term's
// start; one served now gets its informer, started and synced, and then
// the loop looks at each of its objects (their pods may wait already).
// It returns when ctx ends.
func (s *Scheduler) startKinds(ctx context.Context, poll time.Duration) {
	var wg sync.WaitGroup
	defer wg.Wait()
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, ki := range s.kinds {
			if ki.informer() != nil {
				continue
			}
			inf, err := ki.k.Informer(&s.cl)
			if err != nil {
				ki.mu.Lock()
				ki.why = err.Error()
				ki.mu.Unlock()
				continue
			}
			s.watchKind(ki, inf)
			wg.Add(1)
			go func() { defer wg.Done(); inf.Run(ctx.Done()) }()
			if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
				return
			}
			ki.mu.Lock()
			ki.inf, ki.why = inf, ""
			ki.mu.Unlock()
			s.log.Info("workload kind on: the API server serves it now", "kind", ki.k.GVK().String())
			for _, o := range inf.GetStore().List() {
				if obj, ok := o.(Object); ok {
					s.q.Add(qkey{keyWorkload, objectKey(ki.k, obj.GetNamespace(), obj.GetName())})
				}
			}
		}
	}
}

// crdInformer is the informer of a custom-resource kind's objects in every
// namespace (dynamic, trimmed like the others), or why the kind is off
// (Served).
func crdInformer(c *Clients, gvr schema.GroupVersionResource) (cache.SharedIndexInformer, error) {
	if err := c.Served(gvr.GroupVersion(), gvr.Resource); err != nil {
		return nil, err
	}
	inf := dynamicinformer.NewFilteredDynamicInformer(c.Dynamic, gvr, metav1.NamespaceAll, 0,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}, nil).Informer()
	if err := inf.SetTransform(trim); err != nil {
		return nil, err
	}
	return inf, nil
}

// readObject reads the fields of T (the few a kind reads) from obj, an
// unstructured object of kind; a malformed one gives an error naming it.
func readObject[T any](obj Object, kind string) (*T, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("%s %s/%s: not an unstructured object (%T)", kind, obj.GetNamespace(), obj.GetName(), obj)
	}
	v := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, v); err != nil {
		return nil, fmt.Errorf("%s %s/%s: %w", kind, obj.GetNamespace(), obj.GetName(), err)
	}
	return v, nil
}

// patchCRD merge-patches a custom-resource kind's object and returns it.
func patchCRD(ctx context.Context, c *Clients, gvr schema.GroupVersionResource, ns, name string, body []byte) (Object, error) {
	if c.Dynamic == nil {
		return nil, fmt.Errorf("no dynamic client")
	}
	return c.Dynamic.Resource(gvr).Namespace(ns).Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{})
}
