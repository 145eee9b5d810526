package workloads

import (
	"context"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/gandiva-sched/gandiva/internal/kube"
	"github.com/gandiva-sched/gandiva/internal/kube/kubetest"
)

// A JobSet of 2 replicas × 1 pod, its pods naming schedulerName gandiva,
// with the real JobSet controller: Gandiva schedules it as ONE gang (its
// child Jobs are no workloads of their own), bound whole; a job of a
// higher Tiresias queue preempts it by the JobSet's spec.suspend (the
// controller suspends its child Jobs and their pods go); it then resumes,
// with new pods, on two other nodes (its old ones cordoned: Move),
// Gandiva's decision on the JobSet's annotations throughout.
func TestJobSetBoundWholeSuspendedResumedElsewhere(t *testing.T) {
	p, cs, dc := Plane(t, kubetest.JobSetController)
	ctx := context.Background()
	first := kubetest.AddNodes(t, cs, kubetest.Nodes{Count: 2, GPUs: 1})
	kubetest.Namespace(t, cs, NS)
	kubetest.Namespace(t, cs, "gandiva-system")
	RunGandiva(t, p, kube.Options{Policy: "tiresias-l:limits=1/100000"})

	if _, err := dc.Resource(JobSetGVR).Namespace(NS).Create(ctx, JobSet(t, "js", 2, batchv1.JobSpec{Parallelism: ptr.To[int32](1), Completions: ptr.To[int32](1), BackoffLimit: ptr.To[int32](0),
		PodFailurePolicy: IgnoreDisruptions(), Template: PodTemplate()}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	Move(t, cs, Moved{Name: "js", Pods: JobSetLabel + "=js",
		Get: func() (string, string, bool, error) {
			u, err := dc.Resource(JobSetGVR).Namespace(NS).Get(ctx, "js", metav1.GetOptions{})
			if err != nil {
				return "", "", false, err
			}
			s, _, _ := unstructured.NestedBool(u.Object, "spec", "suspend")
			return u.GetAnnotations()[kube.AnnState], u.GetAnnotations()[kube.AnnPlacement], s, nil
		},
		// its child Jobs are the JobSet's, never patched by Gandiva as
		// Jobs of their own
		Bound: func([]corev1.Pod) {
			jobs, err := cs.BatchV1().Jobs(NS).List(ctx, metav1.ListOptions{LabelSelector: JobSetLabel + "=js"})
			if err != nil || len(jobs.Items) != 2 {
				t.Fatalf("child Jobs of js: %v (err %v), want 2", len(jobs.Items), err)
			}
			for _, j := range jobs.Items {
				if _, ok := j.Annotations[kube.AnnState]; ok {
					t.Errorf("child Job %s carries %s: scheduled as a workload of its own", j.Name, kube.AnnState)
				}
			}
		},
	}, first)
}
