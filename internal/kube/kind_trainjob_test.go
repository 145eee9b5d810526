package kube

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynfake "k8s.io/client-go/dynamic/fake"
)

// A JobSet of a Kubeflow TrainJob is suspended and resumed through the
// TrainJob (whose controller would undo a suspension of the JobSet alone)
// and the JobSet; a JobSet of no TrainJob only through itself.
func TestTrainJobSuspendsThroughOwner(t *testing.T) {
	owned := testJobSet(t, func(u map[string]any) {
		u["metadata"].(map[string]any)["name"] = "tj"
		u["metadata"].(map[string]any)["ownerReferences"] = []any{map[string]any{"apiVersion": "trainer.kubeflow.org/v1alpha1",
			"kind": "TrainJob", "name": "tj", "uid": "tj-uid", "controller": true}}
	})
	plain := testJobSet(t, nil) // team-a/js
	tj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
		"metadata": map[string]any{"namespace": "team-a", "name": "tj", "uid": "tj-uid"},
		"spec":     map[string]any{"runtimeRef": map[string]any{"name": "torch-distributed"}, "suspend": false}}}
	dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		jobSetGVR: "JobSetList", trainJobGVR: "TrainJobList"}, owned, plain, tj)
	c := &Clients{Dynamic: dyn}
	ctx := context.Background()
	body := []byte(`{"metadata":{"annotations":{"gandiva.io/state":"suspended"}},"spec":{"suspend":true}}`)

	out, err := (jobSetKind{}).Patch(ctx, c, "team-a", "tj", body)
	if err != nil {
		t.Fatal(err)
	}
	if !(jobSetKind{}).Suspended(out) || out.GetAnnotations()[AnnState] != "suspended" {
		t.Fatalf("JobSet after the patch: suspended %v, annotations %v", (jobSetKind{}).Suspended(out), out.GetAnnotations())
	}
	got, err := dyn.Resource(trainJobGVR).Namespace("team-a").Get(ctx, "tj", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s, _, _ := unstructured.NestedBool(got.Object, "spec", "suspend"); !s {
		t.Fatal("the TrainJob was not suspended")
	}

	// a plain JobSet: no TrainJob of its name is touched (none exists)
	if _, err := (jobSetKind{}).Patch(ctx, c, "team-a", "js", body); err != nil {
		t.Fatalf("plain JobSet: %v", err)
	}
	// annotations alone: the TrainJob is left as it is
	if _, err := (jobSetKind{}).Patch(ctx, c, "team-a", "tj", []byte(`{"metadata":{"annotations":{"gandiva.io/state":"running"}}}`)); err != nil {
		t.Fatal(err)
	}
	patches := 0
	for _, a := range dyn.Actions() {
		if a.GetVerb() == "patch" && a.GetResource() == trainJobGVR {
			patches++
		}
	}
	if patches != 1 {
		t.Fatalf("%d patches of TrainJobs, want 1 (the suspension; none for a plain JobSet or an annotations-only patch)", patches)
	}
	if p, err := ownerSuspend([]byte(`{"spec":{"parallelism":2}}`)); p != nil || err != nil {
		t.Fatalf("a patch without suspend gives a TrainJob patch %s (%v)", p, err)
	}
	if _, ok := trainJobOwner(plain); ok {
		t.Fatal("a plain JobSet has a TrainJob owner")
	}
}
