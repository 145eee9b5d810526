package conditions

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/gandiva-sched/gandiva/internal/kube"
	"github.com/gandiva-sched/gandiva/internal/kube/kubetest"
)

// indexedJob is a Job Gandiva schedules of width pods of one GPU, Indexed
// with its completions equal to its parallelism, not elastic (no
// gandiva.io/min-gpus or max-gpus).
func indexedJob(name string, width int32) *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: batchv1.JobSpec{Parallelism: ptr.To(width), Completions: ptr.To(width),
			CompletionMode: ptr.To(batchv1.IndexedCompletion), BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{SchedulerName: kube.SchedulerName, RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "main", Image: "trainer:1",
					Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{kube.GPU: resource.MustParse("1")}}}}}}}}
}

// boundPods counts a Job's pods bound to a node and not ended, and its pods.
func boundPods(ctx context.Context, cs kubernetes.Interface, job string) (bound, all int, err error) {
	l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + job})
	if err != nil {
		return 0, 0, err
	}
	for _, p := range l.Items {
		if p.Spec.NodeName != "" && p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			bound++
		}
	}
	return bound, len(l.Items), nil
}

// A queued Job whose parallelism its user changes runs at the new width,
// with Gandiva under its service account and admission policy
// (deploy/base/rbac.yaml) and the Job controller: behind a Job that holds
// both nodes' GPUs, a Job of 1 pod waits; its user makes it 2 pods (and
// its completions 2, as Kubernetes allows of an Indexed Job); when the
// first Job is deleted, the second runs with its 2 pods bound, one on each
// node. Its start patch once wrote parallelism 1 back, which the policy
// refuses of a Job that is not elastic: it never started.
func TestQueuedJobWidthEditedRunsAtNewWidth(t *testing.T) {
	t.Parallel()
	cs, _, leader := startAsScheduler(t, "fifo", "")
	ctx := context.Background()
	jobs := cs.BatchV1().Jobs(ns)
	if _, err := jobs.Create(ctx, indexedJob("first", 2), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 120*time.Second, "Job first runs: 2 pods bound", func() (bool, error) {
		b, _, err := boundPods(ctx, cs, "first")
		return b == 2, fmt.Errorf("%d bound (%v)", b, err)
	})
	if _, err := jobs.Create(ctx, indexedJob("second", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 60*time.Second, "Job second waits (its reason says so)", func() (bool, error) {
		j, err := jobs.Get(ctx, "second", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		r := j.Annotations[kube.AnnReason]
		return len(r) > 8 && r[:8] == "Waiting:", fmt.Errorf("%s %q", kube.AnnReason, r)
	})
	// its user makes it 2 pods wide
	j, err := jobs.Get(ctx, "second", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	j.Spec.Parallelism, j.Spec.Completions = ptr.To[int32](2), ptr.To[int32](2)
	if _, err := jobs.Update(ctx, j, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// the first Job goes (the plane runs no garbage collector: its pods
	// are deleted too)
	if err := jobs.Delete(ctx, "first", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)},
		metav1.ListOptions{LabelSelector: "job-name=first"}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 120*time.Second, "Job second runs at 2 pods, bound", func() (bool, error) {
		j, err := jobs.Get(ctx, "second", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		b, all, err := boundPods(ctx, cs, "second")
		fb, fall, _ := boundPods(ctx, cs, "first")
		return b == 2 && *j.Spec.Parallelism == 2 && j.Annotations[kube.AnnState] == kube.StateRunning,
			fmt.Errorf("parallelism %d, %d pods, %d bound, annotations %v (%v); the first Job's pods: %d, %d bound", *j.Spec.Parallelism, all, b, j.Annotations, err, fall, fb)
	})
	noRefusedWrites(t, leader)
}

// A running Job whose parallelism its user changes restarts at its new
// width, as a preempted job resumes: a Job of 1 pod (preemptible: its pod
// failure policy ignores DisruptionTarget) runs on one of 2 nodes of 1
// GPU; its user makes it 2 pods (and completions 2). Its new gang (2
// GPUs) does not fit beside its running pod, so Gandiva suspends it (the
// pod is asked to checkpoint and stop; the Job controller deletes it and
// the new pod it made for the new width), then starts it at 2 pods, one
// on each node. No node ever holds 2 of its pods, the Job does not fail,
// it has an Event saying what happened, and no write is refused.
func TestRunningJobWidthEditedRestarts(t *testing.T) {
	t.Parallel()
	cs, _, leader := startAsScheduler(t, "fifo", "")
	ctx := context.Background()
	jobs := cs.BatchV1().Jobs(ns)
	grow := indexedJob("grow", 1)
	grow.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
		Action:          batchv1.PodFailurePolicyActionIgnore,
		OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}}}}}
	if _, err := jobs.Create(ctx, grow, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 120*time.Second, "Job grow runs: 1 pod bound", func() (bool, error) {
		b, _, err := boundPods(ctx, cs, "grow")
		return b == 1, fmt.Errorf("%d bound (%v)", b, err)
	})
	l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "job-name=grow"})
	if err != nil || len(l.Items) != 1 {
		t.Fatalf("pods of grow: %v (%v)", l, err)
	}
	first := l.Items[0].UID
	j, err := jobs.Get(ctx, "grow", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	j.Spec.Parallelism, j.Spec.Completions = ptr.To[int32](2), ptr.To[int32](2)
	if _, err := jobs.Update(ctx, j, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 120*time.Second, "Job grow runs again at 2 pods, one on each node", func() (bool, error) {
		l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "job-name=grow"})
		if err != nil {
			return false, err
		}
		nodes := map[string]int{}
		restarted := true
		for _, p := range l.Items {
			if p.Spec.NodeName != "" && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				nodes[p.Spec.NodeName]++
				restarted = restarted && p.UID != first
			}
		}
		for n, k := range nodes {
			if k > 1 {
				t.Fatalf("node %s holds %d pods of grow (1 GPU): double-booked", n, k)
			}
		}
		j, err := jobs.Get(ctx, "grow", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if done, _ := jobOver(j); done {
			t.Fatalf("Job grow is over: %v", j.Status.Conditions)
		}
		return len(nodes) == 2 && restarted && j.Annotations[kube.AnnState] == kube.StateRunning && (j.Spec.Suspend == nil || !*j.Spec.Suspend),
			fmt.Errorf("bound per node %v, restarted %v, annotations %v", nodes, restarted, j.Annotations)
	})
	kubetest.Eventually(t, 30*time.Second, "an Event on grow saying it was queued again while it ran", func() (bool, error) {
		l, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=grow,reason=Reshaped"})
		if err != nil {
			return false, err
		}
		for _, e := range l.Items {
			if strings.Contains(e.Message, "its gang changed from 1 to 2 pods while it ran") {
				return true, nil
			}
		}
		return false, fmt.Errorf("%d Reshaped events", len(l.Items))
	})
	noRefusedWrites(t, leader)
}

// jobOver reports whether a Job completed or failed.
func jobOver(j *batchv1.Job) (bool, string) {
	for _, c := range j.Status.Conditions {
		if c.Status == corev1.ConditionTrue && (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed || c.Type == batchv1.JobFailureTarget) {
			return true, string(c.Type)
		}
	}
	return false, ""
}
