// Package ctltest checks that the real workload controllers that
// kubetest.StartControllers runs (built from third_party/ by
// scripts/kube-workloads) act on the local control plane: they create their
// children, and suspending and resuming a workload deletes and recreates its
// pods.
package ctltest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
	"github.com/gandiva-sched/gandiva/internal/kube/kubetest"
	"github.com/gandiva-sched/gandiva/internal/kube/workloads"
)

var (
	jobSetGVR   = workloads.JobSetGVR
	trainJobGVR = workloads.TrainJobGVR
)

const jobSetLabel = workloads.JobSetLabel

// plane starts a control plane with the Job controller (the JobSet's child
// Jobs need it to get pods) and the named workload controllers.
func plane(t *testing.T, names ...string) (kubernetes.Interface, dynamic.Interface) {
	t.Helper()
	p := kubetest.Start(t, cplane.Options{Controllers: true})
	kubetest.StartControllers(t, p, names...)
	cs := kubetest.Client(t, p)
	dc := kubetest.Dynamic(t, p)
	kubetest.Namespace(t, cs, "smoke")
	return cs, dc
}

// livePods returns the names of the pods of the JobSet that are not being deleted.
func livePods(cs kubernetes.Interface, jobSet string) (map[types.UID]string, error) {
	pods, err := cs.CoreV1().Pods("smoke").List(context.Background(), metav1.ListOptions{LabelSelector: jobSetLabel + "=" + jobSet})
	if err != nil {
		return nil, err
	}
	out := map[types.UID]string{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			out[p.UID] = p.Name
		}
	}
	return out, nil
}

// waitPods waits until the JobSet has exactly n live pods, and returns them.
func waitPods(t *testing.T, cs kubernetes.Interface, jobSet string, n int) map[types.UID]string {
	t.Helper()
	var got map[types.UID]string
	kubetest.Eventually(t, 2*time.Minute, fmt.Sprintf("%d live pods of JobSet %s", n, jobSet), func() (bool, error) {
		var err error
		got, err = livePods(cs, jobSet)
		if err != nil {
			return false, err
		}
		return len(got) == n, fmt.Errorf("%d live pods", len(got))
	})
	return got
}

// setSuspend merge-patches spec.suspend of a workload.
func setSuspend(t *testing.T, dc dynamic.Interface, gvr schema.GroupVersionResource, name string, suspend bool) {
	t.Helper()
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"suspend": suspend}})
	if _, err := dc.Resource(gvr).Namespace("smoke").Patch(context.Background(), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("setting %s %s suspend=%v: %v", gvr.Resource, name, suspend, err)
	}
}

// suspendResume suspends the workload, waits until the JobSet's pods are
// gone and its Jobs suspended, resumes it, and waits for n new pods.
func suspendResume(t *testing.T, cs kubernetes.Interface, dc dynamic.Interface, gvr schema.GroupVersionResource, name, jobSet string, n int) {
	t.Helper()
	before := waitPods(t, cs, jobSet, n)
	setSuspend(t, dc, gvr, name, true)
	waitPods(t, cs, jobSet, 0)
	kubetest.Eventually(t, time.Minute, "the Jobs of "+jobSet+" suspended", func() (bool, error) {
		jobs, err := cs.BatchV1().Jobs("smoke").List(context.Background(), metav1.ListOptions{LabelSelector: jobSetLabel + "=" + jobSet})
		if err != nil || len(jobs.Items) == 0 {
			return false, err
		}
		for _, j := range jobs.Items {
			if j.Spec.Suspend == nil || !*j.Spec.Suspend {
				return false, fmt.Errorf("job %s not suspended", j.Name)
			}
		}
		return true, nil
	})
	setSuspend(t, dc, gvr, name, false)
	after := waitPods(t, cs, jobSet, n)
	for uid, pod := range after {
		if _, ok := before[uid]; ok {
			t.Errorf("pod %s survived the suspension", pod)
		}
	}
}

func TestJobSetController(t *testing.T) {
	cs, dc := plane(t, kubetest.JobSetController)
	js := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "jobset.x-k8s.io/v1alpha2",
		"kind":       "JobSet",
		"metadata":   map[string]any{"name": "js", "namespace": "smoke"},
		"spec": map[string]any{
			"replicatedJobs": []any{map[string]any{
				"name":     "workers",
				"replicas": int64(2),
				"template": map[string]any{"spec": map[string]any{
					"parallelism": int64(2), "completions": int64(2),
					"template": map[string]any{"spec": map[string]any{
						"containers": []any{map[string]any{"name": "c", "image": "none", "command": []any{"true"}}},
					}},
				}},
			}},
		},
	}}
	got, err := dc.Resource(jobSetGVR).Namespace("smoke").Create(context.Background(), js, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The mutating webhook ran: the JobSet was defaulted on its way in.
	if op, _, _ := unstructured.NestedString(got.Object, "spec", "successPolicy", "operator"); op != "All" {
		t.Errorf("spec.successPolicy.operator = %q, want All (the JobSet webhook's default)", op)
	}
	kubetest.Eventually(t, 2*time.Minute, "the JobSet's two child Jobs", func() (bool, error) {
		jobs, err := cs.BatchV1().Jobs("smoke").List(context.Background(), metav1.ListOptions{LabelSelector: jobSetLabel + "=js"})
		if err != nil {
			return false, err
		}
		return len(jobs.Items) == 2, fmt.Errorf("%d jobs", len(jobs.Items))
	})
	suspendResume(t, cs, dc, jobSetGVR, "js", "js", 4)
}

func TestTrainJobController(t *testing.T) {
	cs, dc := plane(t, kubetest.TrainerController)
	tj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "trainer.kubeflow.org/v1alpha1",
		"kind":       "TrainJob",
		"metadata":   map[string]any{"name": "tj", "namespace": "smoke"},
		"spec": map[string]any{
			"runtimeRef": map[string]any{"name": kubetest.TorchRuntime},
			"trainer": map[string]any{
				"numNodes": int64(2),
				"command":  []any{"true"},
			},
		},
	}}
	if _, err := dc.Resource(trainJobGVR).Namespace("smoke").Create(context.Background(), tj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 2*time.Minute, "the TrainJob's JobSet", func() (bool, error) {
		_, err := dc.Resource(jobSetGVR).Namespace("smoke").Get(context.Background(), "tj", metav1.GetOptions{})
		return err == nil, err
	})
	suspendResume(t, cs, dc, trainJobGVR, "tj", "tj", 2)
}
