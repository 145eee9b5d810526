package trainers

import (
	"context"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gandiva-sched/gandiva/internal/kube/kubetest"
	wl "github.com/gandiva-sched/gandiva/internal/kube/workloads"
)

// A JobSet of one replicated job of 2 pods (an Indexed Job: each rank is
// its pod's completion index) running ddp.py, with the real JobSet
// controller: bound whole, preempted through the JobSet's spec.suspend
// after its trainers checkpoint (the controller suspends its child Job,
// whose pods get SIGTERM), resumed on other nodes, its final weights
// bit-identical to an uninterrupted run's (suspendResume); the JobSet
// then completes.
func TestJobSetDDPCheckpointResume(t *testing.T) {
	c := start(t, 4, []string{kubetest.JobSetController})
	ctx := context.Background()
	suspendResume(t, c, suspendable{
		name: "js",
		create: func(t *testing.T, tmpl corev1.PodTemplateSpec) {
			js := wl.JobSet(t, "js", 1, batchv1.JobSpec{Parallelism: ptr.To[int32](2), Completions: ptr.To[int32](2),
				CompletionMode: ptr.To(batchv1.IndexedCompletion), BackoffLimit: ptr.To[int32](0),
				PodFailurePolicy: wl.IgnoreDisruptions(), Template: tmpl})
			if _, err := c.dc.Resource(wl.JobSetGVR).Namespace(wl.NS).Create(ctx, js, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		},
		suspended: c.suspendedBy(wl.JobSetGVR, "js", wl.JobSetGVR),
	})
	c.completes(t, wl.JobSetGVR, "js", "Completed")
}
