package workloads

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gandiva-sched/gandiva/internal/kube"
	"github.com/gandiva-sched/gandiva/internal/kube/kubetest"
)

// pytorchJob is a PyTorchJob of a Master and a Worker of PodTemplate,
// preemptible by its annotation (its script, here none, would resume from
// a checkpoint).
func pytorchJob(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	pt := PodTemplate()
	pt.Spec.Containers[0].Name = "pytorch" // the operator's container: it adds its port to it
	tmpl, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&pt)
	if err != nil {
		t.Fatal(err)
	}
	spec := func() map[string]any {
		return map[string]any{"replicas": int64(1), "restartPolicy": "Never", "template": runtime.DeepCopyJSON(tmpl)}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
		"metadata": map[string]any{"namespace": NS, "name": name,
			"annotations": map[string]any{kube.AnnPreemptible: "true"}},
		"spec": map[string]any{"pytorchReplicaSpecs": map[string]any{"Master": spec(), "Worker": spec()}},
	}}
}

// A PyTorchJob of a Master and a Worker naming Gandiva, under the real
// Training Operator v1.8.1 as kubetest.StartControllers (ctl.Start) runs
// it, with its CRD from third_party: bound whole, suspended through
// spec.runPolicy.suspend when a job of a higher Tiresias queue arrives
// (the operator deletes its pods), resumed on other nodes (its old ones
// cordoned) with new pods the operator makes (Move); its status shows
// Gandiva's condition beside the operator's.
func TestPyTorchJobOperatorBoundWholeSuspendedResumedElsewhere(t *testing.T) {
	p, cs, dc := Plane(t, kubetest.PyTorchController)
	ctx := context.Background()
	first := kubetest.AddNodes(t, cs, kubetest.Nodes{Count: 2, GPUs: 1})
	kubetest.Namespace(t, cs, NS)
	RunGandiva(t, p, kube.Options{Policy: "tiresias-l:limits=1/100000"})
	if _, err := dc.Resource(PyTorchJobGVR).Namespace(NS).Create(ctx, pytorchJob(t, "pt"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	Move(t, cs, Moved{Name: "pt", Pods: "training.kubeflow.org/job-name=pt", Get: func() (string, string, bool, error) {
		u, err := dc.Resource(PyTorchJobGVR).Namespace(NS).Get(ctx, "pt", metav1.GetOptions{})
		if err != nil {
			return "", "", false, err
		}
		s, _, _ := unstructured.NestedBool(u.Object, "spec", "runPolicy", "suspend")
		return u.GetAnnotations()[kube.AnnState], u.GetAnnotations()[kube.AnnPlacement], s, nil
	}}, first)
	var seen string // what the last look saw, for a failure
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("pt's status at the last look: %s", seen)
		}
	})
	// Gandiva's status condition beside the operator's, which keeps it
	kubetest.Eventually(t, 90*time.Second, "pt's status showing GandivaScheduling beside the operator's Running", func() (bool, error) {
		u, err := dc.Resource(PyTorchJobGVR).Namespace(NS).Get(ctx, "pt", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		seen = fmt.Sprintf("status %v, annotation %q", u.Object["status"], u.GetAnnotations()[kube.AnnReason])
		return HasCondition(u, kube.CondScheduling) && HasCondition(u, "Running"), nil
	})
}
