package kube

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// jobKind is the batch/v1 Job: a gang of parallelism pods of one
// template; elastic (parallelism, and completions of an Indexed Job whose
// completions equal its parallelism, follow the width).
type jobKind struct{}

var _ Kind = jobKind{}

func (jobKind) Prefix() string { return "job" }

func (jobKind) GVK() schema.GroupVersionKind { return batchv1.SchemeGroupVersion.WithKind("Job") }

func (jobKind) Informer(c *Clients) (cache.SharedIndexInformer, error) {
	return c.Factory.Batch().V1().Jobs().Informer(), nil
}

// PodOf: the Job that controls the pod.
func (jobKind) PodOf(p *corev1.Pod) (string, bool) {
	if ref := metav1.GetControllerOfNoCopy(p); ref != nil && ref.Kind == "Job" {
		return ref.Name, true
	}
	return "", false
}

// Owns: the pod's controller is this Job (not one of its name deleted).
func (jobKind) Owns(obj Object, p *corev1.Pod) bool {
	ref := metav1.GetControllerOfNoCopy(p)
	return ref != nil && ref.UID == obj.GetUID()
}

func (jobKind) PodSets(obj Object) []PodSet {
	j := obj.(*batchv1.Job)
	return []PodSet{{Name: "main", Count: parallelism(j), Template: &j.Spec.Template}}
}

func (jobKind) Finished(obj Object) (bool, bool, string) { return jobFinished(obj.(*batchv1.Job)) }

func (jobKind) Suspended(obj Object) bool {
	j := obj.(*batchv1.Job)
	return j.Spec.Suspend != nil && *j.Spec.Suspend
}

func (jobKind) Width(obj Object) int { return parallelism(obj.(*batchv1.Job)) }

func (jobKind) Succeeded(obj Object) int { return int(obj.(*batchv1.Job).Status.Succeeded) }

func (jobKind) Resizable() bool { return true }

func (jobKind) Preemptible(obj Object) bool { return ignoresDisruptions(obj.(*batchv1.Job)) }

// SpecPatch sets suspend, and parallelism (with completions for an elastic
// Indexed Job) to the width.
func (jobKind) SpecPatch(obj Object, suspend bool, width int) map[string]any {
	j := obj.(*batchv1.Job)
	spec := map[string]any{"suspend": suspend}
	if width > 0 && width != parallelism(j) {
		spec["parallelism"] = width
		if elasticIndexed(j) {
			spec["completions"] = width
		}
	}
	return spec
}

func (jobKind) Patch(ctx context.Context, c *Clients, ns, name string, body []byte) (Object, error) {
	return c.Typed.BatchV1().Jobs(ns).Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{})
}

// elasticIndexed reports whether a Job is Indexed with completions equal to
// its parallelism: its completions change with its width.
func elasticIndexed(j *batchv1.Job) bool {
	return j.Spec.CompletionMode != nil && *j.Spec.CompletionMode == batchv1.IndexedCompletion &&
		j.Spec.Completions != nil && j.Spec.Parallelism != nil && *j.Spec.Completions == *j.Spec.Parallelism
}

// managedJob reports whether Gandiva schedules the Job as a workload of
// its own (its pods name Gandiva, and no other kind's object owns it).
func managedJob(j *batchv1.Job) bool { return managedObject(jobKind{}, j) }

// fromJob describes a Job Gandiva schedules.
func fromJob(j *batchv1.Job) *workload { return fromObject(jobKind{}, j) }

// WriteStatus: one strategic merge patch of the Job's status (conditions.go).
func (jobKind) WriteStatus(ctx context.Context, c *Clients, obj Object, st WorkloadStatus) error {
	return writeJobStatus(ctx, c, obj, st)
}
