package kube

import (
	"context"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
)

// `gandiva kube dev` plays the pods of a JobSet's Jobs (and so of a
// TrainJob's) with the work the JobSet's annotations declare, where
// Gandiva reads it (its child Jobs carry none), each Job its own
// checkpoint; a plain Job's pods with the Job's.
func TestDevJobOfJobSet(t *testing.T) {
	yes := true
	js := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
		"metadata": map[string]any{"namespace": "team-a", "name": "bert", "uid": "js-uid",
			"annotations": map[string]any{AnnIters: "20000", AnnIterTime: "0.05"}},
	}}
	child := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "bert-workers-1", UID: "job-uid",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet", Name: "bert", UID: "js-uid", Controller: &yes}}}}
	plain := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "resnet", UID: "resnet-uid",
		Annotations: map[string]string{AnnIters: "10"}}}
	podOf := func(j *batchv1.Job) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: j.Name + "-0", UID: types.UID(j.Name + "-pod"),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: j.Name, UID: j.UID, Controller: &yes}}}}
	}
	pt := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
		"metadata": map[string]any{"namespace": "team-a", "name": "mnist", "uid": "pt-uid",
			"annotations": map[string]any{AnnIters: "300"}},
	}}
	ptPod := func(typ, ix string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "mnist-" + typ + "-" + ix, UID: types.UID(typ + ix),
			Labels:          map[string]string{labelKubeflowJobName: "mnist", labelKubeflowReplicaType: typ, labelKubeflowReplicaIndex: ix},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "kubeflow.org/v1", Kind: "PyTorchJob", Name: "mnist", UID: "pt-uid", Controller: &yes}}}}
	}
	dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{jobSetGVR: "JobSetList", pytorchJobGVR: "PyTorchJobList"}, js, pt)
	pl := &devPlayer{cs: fake.NewSimpleClientset(child, plain), dc: dyn}
	ctx := context.Background()

	key, ann, err := pl.jobOf(ctx, podOf(child))
	if err != nil {
		t.Fatal(err)
	}
	if w := devWorkOf(ann); key != "js-uid/bert-workers-1" || w.iters != 20000 || w.iterTime.Seconds() != 0.05 {
		t.Errorf("a JobSet's pod: key %q, work %+v; want key js-uid/bert-workers-1, 20000 iters of 50ms (the JobSet's)", key, w)
	}
	key, ann, err = pl.jobOf(ctx, podOf(plain))
	if err != nil {
		t.Fatal(err)
	}
	if w := devWorkOf(ann); key != "resnet-uid" || w.iters != 10 {
		t.Errorf("a Job's pod: key %q, work %+v; want key resnet-uid, 10 iters (the Job's)", key, w)
	}
	// a PyTorchJob's pods: its work, a checkpoint per replica
	for _, tc := range []struct{ typ, ix, key string }{{"master", "0", "pt-uid/master-0"}, {"worker", "0", "pt-uid/worker-0"}} {
		key, ann, err = pl.jobOf(ctx, ptPod(tc.typ, tc.ix))
		if err != nil {
			t.Fatal(err)
		}
		if w := devWorkOf(ann); key != tc.key || w.iters != 300 {
			t.Errorf("a PyTorchJob's %s pod: key %q, work %+v; want key %s, 300 iters (the PyTorchJob's)", tc.typ, key, w, tc.key)
		}
	}
}
