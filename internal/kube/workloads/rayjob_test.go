package workloads

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gandiva-sched/gandiva/internal/kube"
	"github.com/gandiva-sched/gandiva/internal/kube/kubetest"
)

// A RayJob (its CRD from KubeRay's release in third_party; the test does
// what KubeRay's operator does with the pods, PlayKubeRay, so that it runs
// without the operator) whose 2 worker pods name Gandiva: bound whole,
// suspended by spec.suspend when a job of a higher Tiresias queue
// arrives, resumed on other nodes (its old ones cordoned) as a new
// cluster (Move).
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
	Move(t, cs, Moved{Name: "rj", Pods: "ray.io/cluster",
		Get: func() (string, string, bool, error) {
			u, err := dc.Resource(RayJobGVR).Namespace(NS).Get(ctx, "rj", metav1.GetOptions{})
			if err != nil {
				return "", "", false, err
			}
			s, _, _ := unstructured.NestedBool(u.Object, "spec", "suspend")
			return u.GetAnnotations()[kube.AnnState], u.GetAnnotations()[kube.AnnPlacement], s, nil
		},
		// a new cluster: no pod of the old one
		SameRun: func(before, after corev1.Pod) bool {
			return before.Labels["ray.io/cluster"] == after.Labels["ray.io/cluster"]
		},
	}, first)
}
