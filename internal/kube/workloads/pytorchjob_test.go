package workloads

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

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
// Training Operator v1.8.1 (its CRD from third_party): bound whole,
// suspended through spec.runPolicy.suspend when a job of a higher Tiresias
// queue arrives (the operator deletes its pods), resumed on other nodes
// (its old ones cordoned) with new pods the operator makes; its status
// shows Gandiva's condition beside the operator's.
func TestPyTorchJobOperatorBoundWholeSuspendedResumedElsewhere(t *testing.T) {
	bin := TrainingOperator(t)
	p, cs, dc := Plane(t)
	ctx := context.Background()
	InstallCRD(t, dc, PyTorchJobCRD)
	first := kubetest.AddNodes(t, cs, kubetest.Nodes{Count: 2, GPUs: 1})
	kubetest.Namespace(t, cs, NS)
	kubetest.Namespace(t, cs, "gandiva-system")
	StartTrainingOperator(t, p, bin)
	RunGandiva(t, p, kube.Options{Policy: "tiresias-l:limits=1/100000"})
	if _, err := dc.Resource(PyTorchJobGVR).Namespace(NS).Create(ctx, pytorchJob(t, "pt"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const sel = "training.kubeflow.org/job-name=pt"
	get := func() (string, string, bool, error) {
		u, err := dc.Resource(PyTorchJobGVR).Namespace(NS).Get(ctx, "pt", metav1.GetOptions{})
		if err != nil {
			return "", "", false, err
		}
		s, _, _ := unstructured.NestedBool(u.Object, "spec", "runPolicy", "suspend")
		return u.GetAnnotations()[kube.AnnState], u.GetAnnotations()[kube.AnnPlacement], s, nil
	}
	var pods []corev1.Pod
	var err error
	kubetest.Eventually(t, 120*time.Second, "PyTorchJob pt's 2 pods made by the operator, bound to the 2 nodes", func() (bool, error) {
		pods, err = LivePods(cs, sel)
		return err == nil && len(pods) == 2 && slices.Equal(NodesOf(pods), first), err
	})
	if st, pl, susp, err := get(); err != nil || st != kube.StateRunning || pl != "gpu-0=1,gpu-1=1" || susp {
		t.Fatalf("PyTorchJob pt: state %q, placement %q, suspend %v (%v); want running on gpu-0=1,gpu-1=1", st, pl, susp, err)
	}

	time.Sleep(1500 * time.Millisecond) // pt passes 1 GPU-second: the lower queue
	if _, err := cs.BatchV1().Jobs(NS).Create(ctx, GangJob("hi", 2, false), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 120*time.Second, "pt suspended, its pods gone, hi's 2 pods bound", func() (bool, error) {
		st, _, susp, err := get()
		if err != nil {
			return false, err
		}
		ptPods, err := LivePods(cs, sel)
		if err != nil {
			return false, err
		}
		hiPods, err := LivePods(cs, "batch.kubernetes.io/job-name=hi")
		if err != nil {
			return false, err
		}
		return st == kube.StateSuspended && susp && len(ptPods) == 0 && len(hiPods) == 2, nil
	})

	for _, n := range first {
		if _, err := cs.CoreV1().Nodes().Patch(ctx, n, "application/merge-patch+json", []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	second := kubetest.AddNodes(t, cs, kubetest.Nodes{First: 2, Count: 2, GPUs: 1})
	if err := cs.BatchV1().Jobs(NS).Delete(ctx, "hi", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationOrphan)}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Pods(NS).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)},
		metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=hi"}); err != nil {
		t.Fatal(err)
	}
	var seen string // what the last look saw, for a failure
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("pt at the last look: %s", seen)
		}
	})
	kubetest.Eventually(t, 120*time.Second, "pt resumed on gpu-2 and gpu-3, its 2 new pods bound there", func() (bool, error) {
		st, pl, susp, err := get()
		if err != nil {
			return false, err
		}
		ptPods, err := LivePods(cs, sel)
		if err != nil {
			return false, err
		}
		seen = fmt.Sprintf("state %q placement %q suspend %v, live pods on %v", st, pl, susp, NodesOf(ptPods))
		return st == kube.StateRunning && pl == "gpu-2=1,gpu-3=1" && !susp && len(ptPods) == 2 && slices.Equal(NodesOf(ptPods), second), nil
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
	now, err := LivePods(cs, sel)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range now {
		for _, o := range pods {
			if p.UID == o.UID {
				t.Errorf("pod %s ran through the suspension", p.Name)
			}
		}
	}
}
