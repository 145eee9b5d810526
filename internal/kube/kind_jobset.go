package kube

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// JobSet (jobset.x-k8s.io/v1alpha2): read as unstructured objects, only
// the fields below (the JobSet module is not a dependency).
var (
	jobSetGVR = schema.GroupVersionResource{Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "jobsets"}
	jobSetGVK = schema.GroupVersionKind{Group: "jobset.x-k8s.io", Version: "v1alpha2", Kind: "JobSet"}
)

// Labels the JobSet controller puts on its child Jobs and their pods.
const (
	labelJobSetName = "jobset.sigs.k8s.io/jobset-name"
	labelJobSetUID  = "jobset.sigs.k8s.io/jobset-uid"
)

// maxJobSetPods bounds the gang of a JobSet (a hostile spec's replicas).
const maxJobSetPods = 100000

// jobSet is the part of a JobSet that Gandiva reads.
type jobSet struct {
	Spec struct {
		Suspend        *bool `json:"suspend,omitempty"`
		ReplicatedJobs []struct {
			Name     string                  `json:"name"`
			Replicas *int32                  `json:"replicas,omitempty"`
			Template batchv1.JobTemplateSpec `json:"template"`
		} `json:"replicatedJobs"`
	} `json:"spec"`
	Status struct {
		TerminalState        string             `json:"terminalState,omitempty"`
		Conditions           []metav1.Condition `json:"conditions,omitempty"`
		ReplicatedJobsStatus []struct {
			Name      string `json:"name"`
			Succeeded int32  `json:"succeeded"`
		} `json:"replicatedJobsStatus,omitempty"`
	} `json:"status"`
}

// readJobSet reads a JobSet object; a malformed one gives an error.
func readJobSet(obj Object) (*jobSet, error) { return readObject[jobSet](obj, "JobSet") }

// jobSetKind is the JobSet: a gang of the pods of all its child Jobs
// (replicas × parallelism per replicated job), suspended through its
// spec.suspend (its controller then suspends or deletes its child Jobs,
// whose pods go); fixed width. Its child Jobs are no workloads of their
// own (ownedByKind); their pods carry labelJobSetName.
type jobSetKind struct{}

var _ Kind = jobSetKind{}

func (jobSetKind) Prefix() string { return "jobset" }

func (jobSetKind) GVK() schema.GroupVersionKind { return jobSetGVK }

func (jobSetKind) Informer(c *Clients) (cache.SharedIndexInformer, error) {
	return crdInformer(c, jobSetGVR)
}

// PodOf: a pod of a Job that carries the JobSet's name label.
func (jobSetKind) PodOf(p *corev1.Pod) (string, bool) {
	ref := metav1.GetControllerOfNoCopy(p)
	if ref == nil || ref.Kind != "Job" {
		return "", false
	}
	name, ok := p.Labels[labelJobSetName]
	return name, ok && name != ""
}

// Owns: the pod's JobSet UID label, where it has one, is the JobSet's.
func (jobSetKind) Owns(obj Object, p *corev1.Pod) bool {
	uid, ok := p.Labels[labelJobSetUID]
	return !ok || types.UID(uid) == obj.GetUID()
}

// PodSets: one per replicated job, replicas × parallelism pods; none for
// a malformed JobSet (fromObject then refuses it).
func (jobSetKind) PodSets(obj Object) []PodSet {
	js, err := readJobSet(obj)
	if err != nil {
		return nil
	}
	var out []PodSet
	total := 0
	for i := range js.Spec.ReplicatedJobs {
		rj := &js.Spec.ReplicatedJobs[i]
		replicas := 1
		if rj.Replicas != nil {
			replicas = int(*rj.Replicas)
		}
		par := 1
		if p := rj.Template.Spec.Parallelism; p != nil {
			par = int(*p)
		}
		if replicas < 0 || par < 0 || total+replicas*par > maxJobSetPods || (par > 0 && replicas > maxJobSetPods/par) {
			return nil
		}
		total += replicas * par
		out = append(out, PodSet{Name: rj.Name, Count: replicas * par, Template: &rj.Template.Spec.Template})
	}
	return out
}

// Finished: its terminal state, or a Completed or Failed condition.
func (jobSetKind) Finished(obj Object) (bool, bool, string) {
	js, err := readJobSet(obj)
	if err != nil {
		return false, false, ""
	}
	switch js.Status.TerminalState {
	case "Completed":
		return true, false, "completed"
	case "Failed":
		return true, true, "failed"
	}
	for _, c := range js.Status.Conditions {
		if c.Status != metav1.ConditionTrue {
			continue
		}
		switch c.Type {
		case "Completed":
			return true, false, "completed"
		case "Failed":
			return true, true, "failed: " + c.Reason + " " + c.Message
		}
	}
	return false, false, ""
}

func (jobSetKind) Suspended(obj Object) bool {
	js, err := readJobSet(obj)
	return err == nil && js.Spec.Suspend != nil && *js.Spec.Suspend
}

// Width is the gang: a JobSet runs all its pods or none.
func (k jobSetKind) Width(obj Object) int {
	n := 0
	for _, ps := range k.PodSets(obj) {
		n += ps.Count
	}
	return n
}

// Succeeded: the pods of its child Jobs that succeeded (parallelism each),
// at most maxJobSetPods.
func (jobSetKind) Succeeded(obj Object) int {
	js, err := readJobSet(obj)
	if err != nil {
		return 0
	}
	n := 0
	for _, st := range js.Status.ReplicatedJobsStatus {
		for i := range js.Spec.ReplicatedJobs {
			rj := &js.Spec.ReplicatedJobs[i]
			if rj.Name != st.Name {
				continue
			}
			par := 1
			if p := rj.Template.Spec.Parallelism; p != nil {
				par = int(*p)
			}
			// each term at most 2^62, the sum kept at most twice the bound:
			// no overflow, whatever the status lists
			n = min(n+min(int(max(st.Succeeded, 0))*max(par, 0), maxJobSetPods), maxJobSetPods)
		}
	}
	return n
}

func (jobSetKind) Resizable() bool { return false }

// Preemptible: every replicated job's pod failure policy ignores pods that
// end with a DisruptionTarget condition (as for a Job).
func (jobSetKind) Preemptible(obj Object) bool {
	js, err := readJobSet(obj)
	if err != nil || len(js.Spec.ReplicatedJobs) == 0 {
		return false
	}
	for i := range js.Spec.ReplicatedJobs {
		j := &batchv1.Job{Spec: js.Spec.ReplicatedJobs[i].Template.Spec}
		if !ignoresDisruptions(j) {
			return false
		}
	}
	return true
}

// SpecPatch sets spec.suspend (the width of a JobSet is fixed).
func (jobSetKind) SpecPatch(_ Object, suspend bool, _ int) map[string]any {
	return map[string]any{"suspend": suspend}
}

// Patch: a JobSet of a Kubeflow TrainJob is suspended and resumed
// through its TrainJob too (patchJobSet, kind_trainjob.go).
func (jobSetKind) Patch(ctx context.Context, c *Clients, ns, name string, body []byte) (Object, error) {
	return patchJobSet(ctx, c, ns, name, body)
}

// WriteStatus: its status has conditions; a JobSet of a TrainJob shows
// them on the TrainJob too (conditions.go).
func (jobSetKind) WriteStatus(ctx context.Context, c *Clients, obj Object, st WorkloadStatus) error {
	if err := writeCRDStatus(ctx, c, jobSetGVR, obj, st, true); err != nil {
		return err
	}
	if owner, ok := trainJobOwner(obj); ok {
		if err := writeTrainJobStatus(ctx, c, obj.GetNamespace(), owner, st); err != nil {
			return fmt.Errorf("TrainJob %s/%s (the JobSet's owner): %w", obj.GetNamespace(), owner, err)
		}
	}
	return nil
}
