package trainers

import (
	"context"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	wl "github.com/gandiva-sched/gandiva/internal/kube/workloads"
)

// A RayJob (KubeRay's CRD; the test does what KubeRay's operator does with
// its worker pods, wl.PlayKubeRay, as the operator cannot run the workload
// here) whose 2 worker pods run ddp.py, each its rank in RANK: bound
// whole, suspended through spec.suspend after its trainers checkpoint (its
// cluster's pods deleted, the ranks get SIGTERM), resumed on other nodes as
// a new cluster, its final weights bit-identical to an uninterrupted
// run's (suspendResume).
func TestRayJobDDPCheckpointResume(t *testing.T) {
	c := start(t, 4, nil, "third_party/kuberay/ray-operator/config/crd/ray.io_rayjobs.yaml")
	suspendResume(t, c, suspendable{
		name: "rj",
		create: func(t *testing.T, tmpl corev1.PodTemplateSpec) {
			if _, err := c.dc.Resource(wl.RayJobGVR).Namespace(wl.NS).Create(context.Background(), wl.RayJob(t, "rj", tmpl), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			wl.PlayKubeRay(t, c.cs, c.dc, "rj", func(i int) corev1.PodTemplateSpec {
				w := *tmpl.DeepCopy()
				ctr := &w.Spec.Containers[0]
				ctr.Env = append(ctr.Env, corev1.EnvVar{Name: "RANK", Value: strconv.Itoa(i)})
				return w
			})
		},
		suspended: c.suspendedBy(wl.RayJobGVR, "rj", wl.RayJobGVR),
	})
}
