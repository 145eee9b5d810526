package trainers

import (
	"context"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/gandiva-sched/gandiva/internal/kube/kubetest"
	wl "github.com/gandiva-sched/gandiva/internal/kube/workloads"
)

var trainingRuntimeGVR = schema.GroupVersionResource{Group: "trainer.kubeflow.org", Version: "v1alpha1", Resource: "trainingruntimes"}

// trainingRuntime is TrainingRuntime "ddp" of NS: Trainer's plain ML
// policy (no torchrun: ddp.py is started by env) whose trainer step is one
// Indexed Job of pods of tmpl (each rank is its pod's completion index),
// preemptible (its pod failure policy ignores disruptions).
func trainingRuntime(t *testing.T, tmpl corev1.PodTemplateSpec) *unstructured.Unstructured {
	t.Helper()
	job := batchv1.JobTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
		Spec: batchv1.JobSpec{CompletionMode: ptr.To(batchv1.IndexedCompletion), BackoffLimit: ptr.To[int32](0),
			PodFailurePolicy: wl.IgnoreDisruptions(), Template: tmpl}}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&job)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainingRuntime",
		"metadata": map[string]any{"namespace": wl.NS, "name": "ddp"},
		"spec": map[string]any{
			"mlPolicy": map[string]any{"numNodes": int64(2)},
			"template": map[string]any{"spec": map[string]any{"replicatedJobs": []any{
				map[string]any{"name": "node", "template": m},
			}}},
		},
	}}
}

// A Kubeflow Trainer v2 TrainJob of 2 nodes with the real Trainer v2.0.0
// controller (and the JobSet controller it needs), its TrainingRuntime's
// pods running ddp.py: Gandiva schedules the JobSet the Trainer makes of
// it, bound whole; preempted through the TrainJob's spec.suspend after its
// trainers checkpoint, resumed on other nodes, its final weights
// bit-identical to an uninterrupted run's (suspendResume); the TrainJob
// then completes.
func TestTrainJobDDPCheckpointResume(t *testing.T) {
	c := start(t, 4, []string{kubetest.TrainerController})
	ctx := context.Background()
	suspendResume(t, c, suspendable{
		name: "tj",
		create: func(t *testing.T, tmpl corev1.PodTemplateSpec) {
			if _, err := c.dc.Resource(trainingRuntimeGVR).Namespace(wl.NS).Create(ctx, trainingRuntime(t, tmpl), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			tj := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
				"metadata": map[string]any{"namespace": wl.NS, "name": "tj"},
				"spec": map[string]any{
					"runtimeRef": map[string]any{"name": "ddp", "kind": "TrainingRuntime", "apiGroup": "trainer.kubeflow.org"},
					"trainer":    map[string]any{"numNodes": int64(2)},
				},
			}}
			if _, err := c.dc.Resource(wl.TrainJobGVR).Namespace(wl.NS).Create(ctx, tj, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		},
		// Gandiva's decision is on the JobSet the Trainer made; the
		// suspension on the TrainJob
		suspended: c.suspendedBy(wl.JobSetGVR, "tj", wl.TrainJobGVR),
	})
	c.completes(t, wl.TrainJobGVR, "tj", "Complete")
}
