package kube

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
)

// testJobSet is a JobSet of Gandiva's: replicated jobs "workers" (2
// replicas × 1 pod) and "ps" (1 × 2), a GPU per pod, as unstructured.
func testJobSet(t *testing.T, mutate func(map[string]any)) *unstructured.Unstructured {
	t.Helper()
	tmpl := func(par int32, gpus string) map[string]any {
		spec := batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Parallelism: ptr.To(par), Completions: ptr.To(par),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{SchedulerName: SchedulerName,
				NodeSelector: map[string]string{"pool": "a"},
				Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
					Limits: corev1.ResourceList{GPU: resource.MustParse(gpus)}}}}}}}}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&spec)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
		"metadata": map[string]any{"namespace": "team-a", "name": "js", "uid": "js-uid",
			"annotations": map[string]any{AnnIters: "1000", AnnIterTime: "0.5"}},
		"spec": map[string]any{"replicatedJobs": []any{
			map[string]any{"name": "workers", "replicas": int64(2), "template": tmpl(1, "1")},
			map[string]any{"name": "ps", "replicas": int64(1), "template": tmpl(2, "1")},
		}},
	}}
	if mutate != nil {
		mutate(u.Object)
	}
	return u
}

func replicated(u map[string]any, i int) map[string]any {
	return u["spec"].(map[string]any)["replicatedJobs"].([]any)[i].(map[string]any)
}

// A JobSet's gang is the sum over its replicated jobs of replicas ×
// parallelism; its annotations give the engine's spec; it is fixed-width.
func TestJobSetGang(t *testing.T) {
	w := fromObject(jobSetKind{}, testJobSet(t, nil))
	if w.bad != "" {
		t.Fatalf("refused: %s", w.bad)
	}
	if w.gang != 4 || w.podGPUs != 1 || w.spec.GPUs != 4 || w.key != "jobset/team-a/js" || w.spec.Name != "team-a/jobset:js" {
		t.Fatalf("gang %d × %d GPUs (spec %d), key %q, name %q; want 4 × 1 (4), jobset/team-a/js, team-a/jobset:js",
			w.gang, w.podGPUs, w.spec.GPUs, w.key, w.spec.Name)
	}
	if w.spec.Iters != 1000 || w.spec.IterTime != 0.5 || w.template.Spec.NodeSelector["pool"] != "a" {
		t.Fatalf("spec %+v, template node selector %v", w.spec, w.template.Spec.NodeSelector)
	}
	if w.preemptible {
		t.Fatal("preemptible without a pod failure policy ignoring DisruptionTarget")
	}
	if !managedObject(jobSetKind{}, testJobSet(t, nil)) {
		t.Fatal("a JobSet whose pods name gandiva is not managed")
	}

	for _, c := range []struct {
		name   string
		mutate func(map[string]any)
		want   string
	}{
		{"GPUs differ", func(u map[string]any) {
			c := replicated(u, 1)["template"].(map[string]any)["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
			c["resources"] = map[string]any{"limits": map[string]any{string(GPU): "2"}}
		}, "different GPUs"},
		{"node constraints differ", func(u map[string]any) {
			delete(replicated(u, 1)["template"].(map[string]any)["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any), "nodeSelector")
		}, "node constraints"},
		{"another scheduler", func(u map[string]any) {
			replicated(u, 1)["template"].(map[string]any)["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["schedulerName"] = "default-scheduler"
		}, "different schedulers"},
		{"malformed", func(u map[string]any) { replicated(u, 0)["replicas"] = "two" }, "no pod template"},
		{"too many pods", func(u map[string]any) { replicated(u, 0)["replicas"] = int64(1 << 30) }, "no pod template"},
		{"elastic", func(u map[string]any) {
			u["metadata"].(map[string]any)["annotations"].(map[string]any)[AnnMinGPUs] = "2"
		}, "cannot grow or shrink"},
	} {
		w := fromObject(jobSetKind{}, testJobSet(t, c.mutate))
		if !strings.Contains(w.bad, c.want) {
			t.Errorf("%s: refused for %q, want a reason with %q", c.name, w.bad, c.want)
		}
	}
}

// The pods of a JobSet's child Jobs are the JobSet's workload, not their
// Job's; the child Jobs are not workloads of their own; other Jobs' pods
// and plain pods map as before.
func TestPodWorkloadKey(t *testing.T) {
	ctl := func(kind, apiVersion, name string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID(name + "-uid"), Controller: ptr.To(true)}}
	}
	pod := func(refs []metav1.OwnerReference, labels map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", OwnerReferences: refs, Labels: labels},
			Spec: corev1.PodSpec{SchedulerName: SchedulerName}}
	}
	for _, c := range []struct {
		name string
		p    *corev1.Pod
		want string
	}{
		{"JobSet's", pod(ctl("Job", "batch/v1", "js-workers-0"), map[string]string{labelJobSetName: "js"}), "jobset/ns/js"},
		{"Job's", pod(ctl("Job", "batch/v1", "j"), nil), "job/ns/j"},
		{"label but no Job", pod(nil, map[string]string{labelJobSetName: "js"}), "pods/ns/p"},
		{"plain group", pod(nil, map[string]string{LabelJob: "g"}), "pods/ns/g"},
		{"another scheduler", func() *corev1.Pod {
			p := pod(ctl("Job", "batch/v1", "j"), nil)
			p.Spec.SchedulerName = "default-scheduler"
			return p
		}(), ""},
	} {
		if got := workloadKey(c.p); got != c.want {
			t.Errorf("%s: key %q, want %q", c.name, got, c.want)
		}
	}

	js := testJobSet(t, nil)
	mine := pod(ctl("Job", "batch/v1", "js-workers-0"), map[string]string{labelJobSetName: "js", labelJobSetUID: "js-uid"})
	old := pod(ctl("Job", "batch/v1", "js-workers-0"), map[string]string{labelJobSetName: "js", labelJobSetUID: "old-uid"})
	if !(jobSetKind{}).Owns(js, mine) || (jobSetKind{}).Owns(js, old) {
		t.Error("Owns does not tell the JobSet's pods from a deleted namesake's")
	}

	child := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "js-workers-0",
		OwnerReferences: ctl("JobSet", "jobset.x-k8s.io/v1alpha2", "js")},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{SchedulerName: SchedulerName}}}}
	if managedJob(child) {
		t.Error("a JobSet's child Job is scheduled as a Job of its own")
	}
	child.OwnerReferences = ctl("CronJob", "batch/v1", "cron")
	if !managedJob(child) {
		t.Error("a CronJob's Job is not scheduled")
	}
}

// Suspension is the object's own spec.suspend; a Job's patch also carries
// its width (completions with it when Indexed and equal), a JobSet's never.
func TestSpecPatch(t *testing.T) {
	js := testJobSet(t, nil)
	if got := (jobSetKind{}).SpecPatch(js, true, 7); !reflect.DeepEqual(got, map[string]any{"suspend": true}) {
		t.Errorf("JobSet suspend patch %v", got)
	}
	j := &batchv1.Job{Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](2), Completions: ptr.To[int32](2),
		CompletionMode: ptr.To(batchv1.IndexedCompletion)}}
	got, _ := json.Marshal((jobKind{}).SpecPatch(j, false, 4))
	if string(got) != `{"completions":4,"parallelism":4,"suspend":false}` {
		t.Errorf("Job resume patch %s", got)
	}
	got, _ = json.Marshal((jobKind{}).SpecPatch(j, true, 2))
	if string(got) != `{"suspend":true}` {
		t.Errorf("Job suspend patch %s", got)
	}

	if (jobSetKind{}).Suspended(js) {
		t.Error("suspended without spec.suspend")
	}
	js.Object["spec"].(map[string]any)["suspend"] = true
	if !(jobSetKind{}).Suspended(js) {
		t.Error("not suspended with spec.suspend true")
	}
	js.Object["status"] = map[string]any{"terminalState": "Failed",
		"replicatedJobsStatus": []any{map[string]any{"name": "ps", "succeeded": int64(1)}}}
	if done, failed, _ := (jobSetKind{}).Finished(js); !done || !failed {
		t.Error("a Failed JobSet is not over")
	}
	if n := (jobSetKind{}).Succeeded(js); n != 2 {
		t.Errorf("succeeded %d pods, want 2 (one ps Job of 2 pods)", n)
	}
}

// A JobSet whose every replicated job's pod failure policy ignores
// DisruptionTarget is preemptible by default, as such a Job is.
func TestJobSetPreemptible(t *testing.T) {
	pfp := map[string]any{"rules": []any{map[string]any{"action": "Ignore",
		"onPodConditions": []any{map[string]any{"type": "DisruptionTarget", "status": "True"}}}}}
	one := testJobSet(t, func(u map[string]any) {
		replicated(u, 0)["template"].(map[string]any)["spec"].(map[string]any)["podFailurePolicy"] = pfp
	})
	if (jobSetKind{}).Preemptible(one) {
		t.Error("preemptible with one replicated job counting disruptions")
	}
	both := testJobSet(t, func(u map[string]any) {
		for i := range 2 {
			replicated(u, i)["template"].(map[string]any)["spec"].(map[string]any)["podFailurePolicy"] = pfp
		}
	})
	if !(jobSetKind{}).Preemptible(both) || !fromObject(jobSetKind{}, both).preemptible {
		t.Error("not preemptible though every replicated job ignores disruptions")
	}
}

// A kind whose CRD the API server does not serve when the term starts is
// off; once discovery shows it, startKinds starts its informer and has
// the loop look at every object of it (pods may wait for them already).
func TestKindServedLater(t *testing.T) {
	js := testJobSet(t, nil)
	dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{jobSetGVR: "JobSetList"}, js)
	o := Options{Policy: "fifo", Dynamic: dyn}
	o.defaults()
	cs := fake.NewClientset()
	s, err := newScheduler(cs, cs, o, record.NewFakeRecorder(16))
	if err != nil {
		t.Fatal(err)
	}
	ki := s.kinds[kindIndex(jobSetKind{})]
	if ki.informer() != nil || ki.reason() == "" {
		t.Fatalf("JobSet kind on (why off: %q) though discovery does not show it", ki.reason())
	}
	if _, err := s.cached(jobSetKind{}, "team-a", "js"); err == nil {
		t.Fatal("an object of a kind that is off was found")
	}
	// the CRD installed (before startKinds runs: the fake's discovery is not synchronized)
	cs.Discovery().(*fakediscovery.FakeDiscovery).Resources = []*metav1.APIResourceList{{
		GroupVersion: jobSetGVR.GroupVersion().String(),
		APIResources: []metav1.APIResource{{Name: "jobsets", Kind: "JobSet", Namespaced: true}},
	}}
	// served, but this scheduler's ClusterRole lacks the kind: it stays
	// off, saying so (its informer would never sync); once granted, on
	var allowed atomic.Bool
	cs.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*authzv1.SelfSubjectAccessReview).DeepCopy()
		ra := r.Spec.ResourceAttributes
		r.Status.Allowed = allowed.Load() && ra.Group == jobSetGVR.Group && ra.Resource == "jobsets"
		return true, r, nil
	})
	if err := (&s.cl).Served(jobSetGVR.GroupVersion(), "jobsets"); err == nil || !strings.Contains(err.Error(), "may not list") {
		t.Fatalf("a kind served but not granted: %v, want an error saying it may not be listed", err)
	}
	allowed.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.startKinds(ctx, 10*time.Millisecond) }()
	defer func() { cancel(); <-done }()
	want := qkey{keyWorkload, "jobset/team-a/js"}
	deadline := time.Now().Add(30 * time.Second)
	for ki.informer() == nil {
		if time.Now().After(deadline) {
			t.Fatal("the JobSet kind was not started within 30 s of discovery showing it")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for found := false; !found; {
		if time.Now().After(deadline) {
			t.Fatal("the JobSet's object was not queued after its kind was started")
		}
		found = slices.Contains(s.q.Take(time.Now()), want)
		if !found {
			time.Sleep(10 * time.Millisecond)
		}
	}
	obj, err := s.cached(jobSetKind{}, "team-a", "js")
	if err != nil || obj.GetUID() != "js-uid" {
		t.Fatalf("the JobSet from the started informer: %v, %v", obj, err)
	}
}

// List (the CLI's and dashboard's view of Jobs and plain pods) shows no
// pod of another kind's workload as a plain-pod group of its own.
func TestListSkipsOtherKindsPods(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "js-workers-0-0-abcde",
		Labels:          map[string]string{labelJobSetName: "js"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "js-workers-0", UID: "j-uid", Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{SchedulerName: SchedulerName}}
	cs := fake.NewClientset(p)
	views, err := List(context.Background(), cs, "team-a")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range views {
		t.Errorf("listed %s %s/%s for a JobSet's pod", v.Kind, v.Namespace, v.Name)
	}
}
