package kube

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// listFixture is a namespace with a JobSet running (its state and
// placement written by Gandiva, a bound pod with an ETA), a TrainJob's
// JobSet waiting (a pending pod saying why), a JobSet of another
// scheduler's, and a RayJob; discovery serves JobSets and RayJobs, not
// LeaderWorkerSets.
func listFixture(t *testing.T) (*fake.Clientset, *dynfake.FakeDynamicClient) {
	t.Helper()
	running := testJobSet(t, func(u map[string]any) {
		md := u["metadata"].(map[string]any)
		md["annotations"].(map[string]any)[AnnState] = StateRunning
		md["annotations"].(map[string]any)[AnnPlacement] = "n1=4"
		md["creationTimestamp"] = "2026-11-27T10:00:00Z"
	})
	ofTrain := testJobSet(t, func(u map[string]any) {
		md := u["metadata"].(map[string]any)
		md["name"], md["uid"], md["creationTimestamp"] = "tj", "tj-js-uid", "2026-11-27T11:00:00Z"
		md["ownerReferences"] = []any{map[string]any{"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
			"name": "tj", "uid": "tj-uid", "controller": true}}
	})
	other := testJobSet(t, func(u map[string]any) {
		u["metadata"].(map[string]any)["name"] = "theirs"
		for i := range 2 {
			tmpl := replicated(u, i)["template"].(map[string]any)["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
			tmpl["schedulerName"] = "default-scheduler"
		}
	})
	ray := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "ray.io/v1", "kind": "RayJob",
		"metadata": map[string]any{"namespace": "team-a", "name": "rj", "uid": "rj-uid"}}}
	dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		jobSetGVR: "JobSetList", rayJobGVR: "RayJobList", lwsGVR: "LeaderWorkerSetList", trainJobGVR: "TrainJobList"},
		running, ofTrain, other, ray)
	pod := func(name, jobset, node string, ann map[string]string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, Annotations: ann,
			Labels:          map[string]string{labelJobSetName: jobset},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: jobset + "-workers-0", UID: "j", Controller: ptr.To(true)}}},
			Spec: corev1.PodSpec{SchedulerName: SchedulerName, NodeName: node}, Status: corev1.PodStatus{Phase: corev1.PodPending}}
		if node != "" {
			p.Status.Phase = corev1.PodRunning
		} else {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
				Message: "Gandiva: queued: needs 4 GPUs"}}
		}
		return p
	}
	cs := fake.NewClientset(pod("js-w-0", "js", "n1", map[string]string{AnnETA: "end ~12:00 UTC"}), pod("tj-w-0", "tj", "", nil))
	cs.Discovery().(*fakediscovery.FakeDiscovery).Resources = []*metav1.APIResourceList{
		{GroupVersion: jobSetGVR.GroupVersion().String(), APIResources: []metav1.APIResource{
			{Name: "jobsets", Kind: "JobSet", Namespaced: true}, {Name: "jobsets/status", Kind: "JobSet", Namespaced: true}}},
		{GroupVersion: rayJobGVR.GroupVersion().String(), APIResources: []metav1.APIResource{{Name: "rayjobs", Kind: "RayJob", Namespaced: true}}},
	}
	return cs, dyn
}

// ListKinds shows the custom-resource kinds' workloads with their state,
// placement, pods, reason and ETA; a TrainJob's JobSet as the TrainJob;
// not another scheduler's; a kind not served adds nothing.
func TestListKinds(t *testing.T) {
	cs, dyn := listFixture(t)
	views, notes, err := ListKinds(t.Context(), cs, dyn, "team-a")
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) != 0 {
		t.Errorf("notes %q, want none", notes)
	}
	var got []string
	for _, v := range views {
		got = append(got, v.Kind+"/"+v.Name+" "+v.State+" "+v.Placement)
	}
	want := []string{"JobSet/js running n1=4", "TrainJob/tj pending "}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("listed %q, want %q (in creation order)", got, want)
	}
	js, tj := views[0], views[1]
	if js.GPUs != 4 || js.Gang != 4 || len(js.Pods) != 1 || js.ETA != "end ~12:00 UTC" || js.Object != "" {
		t.Errorf("the JobSet's view: %+v", js)
	}
	if tj.Reason != "queued: needs 4 GPUs" || tj.Object != "JobSet/tj" || len(tj.Pods) != 1 || tj.GPUs != 4 {
		t.Errorf("the TrainJob's view: %+v", tj)
	}
	// List (no dynamic client) shows none of them, as before
	if old, err := List(t.Context(), cs, "team-a"); err != nil || len(old) != 0 {
		t.Errorf("List: %v, %v; want none (no custom resources without a dynamic client)", old, err)
	}
	// Describe finds the TrainJob by its name
	v, _, err := DescribeKinds(t.Context(), cs, dyn, "team-a", "tj")
	if err != nil || v.Kind != "TrainJob" {
		t.Errorf("DescribeKinds tj: %+v, %v", v, err)
	}
}

// A kind the caller may not list is said once, in a note, and the other
// kinds are still listed; any other error of a kind's list is an error.
func TestListKindsForbidden(t *testing.T) {
	cs, dyn := listFixture(t)
	dyn.PrependReactor("list", "jobsets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(jobSetGVR.GroupResource(), "", nil)
	})
	views, notes, err := ListKinds(t.Context(), cs, dyn, "team-a")
	if err != nil {
		t.Fatal(err)
	}
	if len(views) != 0 {
		t.Errorf("views %+v, want none (the JobSets are not listed, the RayJob is not Gandiva's)", views)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "may not list jobsets.jobset.x-k8s.io in namespace team-a") {
		t.Errorf("notes %q, want one saying JobSets may not be listed", notes)
	}
	dyn.PrependReactor("list", "rayjobs", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInternalError(errString("boom"))
	})
	if _, _, err := ListKinds(t.Context(), cs, dyn, "team-a"); err == nil || !strings.Contains(err.Error(), "rayjobs.ray.io") {
		t.Errorf("a kind's list failing: %v, want an error naming it", err)
	}
}

type errString string

func (e errString) Error() string { return string(e) }
