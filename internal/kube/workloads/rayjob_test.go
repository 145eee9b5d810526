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
	"k8s.io/utils/ptr"

	"github.com/gandiva-sched/gandiva/internal/kube"
	"github.com/gandiva-sched/gandiva/internal/kube/kubetest"
)

// A RayJob (its CRD from KubeRay's release in third_party; the test does
// what KubeRay's operator does with the pods, PlayKubeRay, so that it runs
// without the operator) whose 2 worker pods name Gandiva: bound whole, suspended by spec.suspend
// when a job of a higher Tiresias queue arrives, resumed on other nodes
// (its old ones cordoned) as a new cluster.
func TestRayJobBoundWholeSuspendedResumedElsewhere(t *testing.T) {
	p, cs, dc := Plane(t)
	ctx := context.Background()
	InstallCRD(t, dc, "third_party/kuberay/ray-operator/config/crd/ray.io_rayjobs.yaml")
	first := kubetest.AddNodes(t, cs, kubetest.Nodes{Count: 2, GPUs: 1})
	kubetest.Namespace(t, cs, NS)
	kubetest.Namespace(t, cs, "gandiva-system")
	RunGandiva(t, p, kube.Options{Policy: "tiresias-l:limits=1/100000"})
	if _, err := dc.Resource(RayJobGVR).Namespace(NS).Create(ctx, RayJob(t, "rj", PodTemplate()), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	PlayKubeRay(t, cs, dc, "rj", func(int) corev1.PodTemplateSpec { return PodTemplate() })
	getRJ := func() (string, string, bool, error) {
		u, err := dc.Resource(RayJobGVR).Namespace(NS).Get(ctx, "rj", metav1.GetOptions{})
		if err != nil {
			return "", "", false, err
		}
		s, _, _ := unstructured.NestedBool(u.Object, "spec", "suspend")
		return u.GetAnnotations()[kube.AnnState], u.GetAnnotations()[kube.AnnPlacement], s, nil
	}
	var pods []corev1.Pod
	var err error
	kubetest.Eventually(t, 90*time.Second, "RayJob rj's 2 worker pods bound to the 2 nodes", func() (bool, error) {
		pods, err = LivePods(cs, "ray.io/cluster")
		return err == nil && len(pods) == 2 && slices.Equal(NodesOf(pods), first), err
	})
	if st, pl, susp, err := getRJ(); err != nil || st != kube.StateRunning || pl != "gpu-0=1,gpu-1=1" || susp {
		t.Fatalf("RayJob rj: state %q, placement %q, suspend %v (%v); want running on gpu-0=1,gpu-1=1", st, pl, susp, err)
	}

	time.Sleep(1500 * time.Millisecond) // rj passes 1 GPU-second: the lower queue
	// hi is not preemptible: it too passes 1 GPU-second (in half a second)
	// and drops to the lower queue, where rj, which came first, would take
	// its nodes back before they are cordoned
	if _, err := cs.BatchV1().Jobs(NS).Create(ctx, GangJob("hi", 2, false), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 90*time.Second, "rj suspended, its pods gone, hi's 2 pods bound", func() (bool, error) {
		st, _, susp, err := getRJ()
		if err != nil {
			return false, err
		}
		rjPods, err := LivePods(cs, "ray.io/cluster")
		if err != nil {
			return false, err
		}
		hiPods, err := LivePods(cs, "batch.kubernetes.io/job-name=hi")
		if err != nil {
			return false, err
		}
		return st == kube.StateSuspended && susp && len(rjPods) == 0 && len(hiPods) == 2, nil
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
			t.Logf("rj at the last look: %s", seen)
		}
	})
	kubetest.Eventually(t, 90*time.Second, "rj resumed on gpu-2 and gpu-3 as a new cluster, its 2 pods bound there", func() (bool, error) {
		st, pl, susp, err := getRJ()
		if err != nil {
			return false, err
		}
		rjPods, err := LivePods(cs, "ray.io/cluster")
		if err != nil {
			return false, err
		}
		seen = fmt.Sprintf("state %q placement %q suspend %v, live pods on %v", st, pl, susp, NodesOf(rjPods))
		return st == kube.StateRunning && pl == "gpu-2=1,gpu-3=1" && !susp && len(rjPods) == 2 && slices.Equal(NodesOf(rjPods), second), nil
	})
	now, err := LivePods(cs, "ray.io/cluster")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range now {
		for _, o := range pods {
			if p.UID == o.UID || p.Labels["ray.io/cluster"] == o.Labels["ray.io/cluster"] {
				t.Errorf("pod %s (cluster %s) ran through the suspension", p.Name, p.Labels["ray.io/cluster"])
			}
		}
	}
}
