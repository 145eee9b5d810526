package kube

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// PyTorchJob (the Kubeflow Training Operator v1's kubeflow.org/v1): read
// as unstructured objects, only the fields below (the operator's module
// is not a dependency).
var (
	pytorchJobGVR = schema.GroupVersionResource{Group: "kubeflow.org", Version: "v1", Resource: "pytorchjobs"}
	pytorchJobGVK = schema.GroupVersionKind{Group: "kubeflow.org", Version: "v1", Kind: "PyTorchJob"}
)

// labelKubeflowJobName is the label the Training Operator puts on the
// pods of its jobs: the job's name.
const labelKubeflowJobName = "training.kubeflow.org/job-name"

// The Training Operator's labels of a pod's replica: its type (in lower
// case: master, worker) and its index within the type.
const (
	labelKubeflowReplicaType  = "training.kubeflow.org/replica-type"
	labelKubeflowReplicaIndex = "training.kubeflow.org/replica-index"
)

// maxPyTorchPods bounds the gang of a PyTorchJob (a hostile spec's
// replicas).
const maxPyTorchPods = 100000

// pytorchReplicaTypes are the replica types of a PyTorchJob, in the order
// of its pod sets.
var pytorchReplicaTypes = []string{"Master", "Worker"}

// pytorchJob is the part of a PyTorchJob that Gandiva reads.
type pytorchJob struct {
	Spec struct {
		RunPolicy struct {
			Suspend *bool `json:"suspend,omitempty"`
		} `json:"runPolicy"`
		ReplicaSpecs map[string]struct {
			Replicas *int32                  `json:"replicas,omitempty"`
			Template *corev1.PodTemplateSpec `json:"template,omitempty"`
		} `json:"pytorchReplicaSpecs"`
	} `json:"spec"`
	Status struct {
		Conditions []struct {
			Type    string `json:"type"`
			Status  string `json:"status"`
			Reason  string `json:"reason,omitempty"`
			Message string `json:"message,omitempty"`
		} `json:"conditions,omitempty"`
		ReplicaStatuses map[string]struct {
			Succeeded int32 `json:"succeeded,omitempty"`
		} `json:"replicaStatuses,omitempty"`
	} `json:"status"`
}

// readPyTorchJob reads a PyTorchJob object; a malformed one gives an
// error.
func readPyTorchJob(obj Object) (*pytorchJob, error) {
	return readObject[pytorchJob](obj, "PyTorchJob")
}

// pytorchJobKind is the Training Operator's PyTorchJob: a gang of the
// pods of its replica specs (Master and Worker, replicas pods each; the
// operator's default of one replica where replicas is unset), suspended
// through its spec.runPolicy.suspend (the operator then deletes its pods,
// and creates them again on resumption). Fixed width: its elastic policy
// is the operator's, not Gandiva's. Its pods are its own (controller
// owner reference) and carry labelKubeflowJobName.
type pytorchJobKind struct{}

var _ Kind = pytorchJobKind{}

func (pytorchJobKind) Prefix() string { return "pytorchjob" }

func (pytorchJobKind) GVK() schema.GroupVersionKind { return pytorchJobGVK }

func (pytorchJobKind) Informer(c *Clients) (cache.SharedIndexInformer, error) {
	return crdInformer(c, pytorchJobGVR)
}

// PodOf: a pod whose controller is a PyTorchJob of kubeflow.org and whose
// job-name label names it.
func (pytorchJobKind) PodOf(p *corev1.Pod) (string, bool) {
	ref := metav1.GetControllerOfNoCopy(p)
	if ref == nil || ref.Kind != pytorchJobGVK.Kind {
		return "", false
	}
	if gv, err := schema.ParseGroupVersion(ref.APIVersion); err != nil || gv.Group != pytorchJobGVK.Group {
		return "", false
	}
	name := p.Labels[labelKubeflowJobName]
	if name == "" || name != ref.Name {
		return "", false
	}
	return name, true
}

// Owns: the pod's controller is the object (by UID), not an earlier
// PyTorchJob of the same name.
func (pytorchJobKind) Owns(obj Object, p *corev1.Pod) bool {
	ref := metav1.GetControllerOfNoCopy(p)
	return ref != nil && ref.UID == obj.GetUID()
}

// PodSets: one per replica type (Master, Worker) with pods; none for a
// malformed PyTorchJob, one with a replica type Gandiva does not know, or
// one of more than maxPyTorchPods pods (fromObject then refuses it).
func (pytorchJobKind) PodSets(obj Object) []PodSet {
	pj, err := readPyTorchJob(obj)
	if err != nil {
		return nil
	}
	// the operator takes a replica type in any case ("master"): one key
	// per type, none Gandiva does not know
	byType := map[string]string{}
	for key := range pj.Spec.ReplicaSpecs {
		known := ""
		for _, rt := range pytorchReplicaTypes {
			if strings.EqualFold(key, rt) {
				known = rt
			}
		}
		if known == "" || byType[known] != "" {
			return nil
		}
		byType[known] = key
	}
	var out []PodSet
	total := 0
	for _, rt := range pytorchReplicaTypes {
		key, ok := byType[rt]
		if !ok {
			continue
		}
		rs := pj.Spec.ReplicaSpecs[key]
		if rs.Template == nil {
			return nil
		}
		n := 1
		if rs.Replicas != nil {
			n = int(*rs.Replicas)
		}
		if n < 0 || n > maxPyTorchPods-total {
			return nil
		}
		if n == 0 {
			continue
		}
		total += n
		out = append(out, PodSet{Name: rt, Count: n, Template: rs.Template})
	}
	return out
}

// Finished: a Succeeded or Failed condition that is true.
func (pytorchJobKind) Finished(obj Object) (bool, bool, string) {
	pj, err := readPyTorchJob(obj)
	if err != nil {
		return false, false, ""
	}
	for _, c := range pj.Status.Conditions {
		if c.Status != string(metav1.ConditionTrue) {
			continue
		}
		switch c.Type {
		case "Succeeded":
			return true, false, "completed"
		case "Failed":
			return true, true, "failed: " + c.Reason + " " + c.Message
		}
	}
	return false, false, ""
}

func (pytorchJobKind) Suspended(obj Object) bool {
	pj, err := readPyTorchJob(obj)
	return err == nil && pj.Spec.RunPolicy.Suspend != nil && *pj.Spec.RunPolicy.Suspend
}

// Width is the gang: a PyTorchJob runs all its pods or none.
func (k pytorchJobKind) Width(obj Object) int {
	n := 0
	for _, ps := range k.PodSets(obj) {
		n += ps.Count
	}
	return n
}

// Succeeded: the pods of its replica types that succeeded, as its status
// counts them, at most maxPyTorchPods.
func (pytorchJobKind) Succeeded(obj Object) int {
	pj, err := readPyTorchJob(obj)
	if err != nil {
		return 0
	}
	n := 0
	for _, rt := range pytorchReplicaTypes {
		if st, ok := pj.Status.ReplicaStatuses[rt]; ok {
			// each term at most maxPyTorchPods: no overflow
			n = min(n+min(int(max(st.Succeeded, 0)), maxPyTorchPods), maxPyTorchPods)
		}
	}
	return n
}

func (pytorchJobKind) Resizable() bool { return false }

// Preemptible: a suspended PyTorchJob's pods are deleted and made again
// on resumption, which starts its script anew: it loses no more than the
// work since its last checkpoint only if the script resumes from one,
// which nothing in its spec says (it has no pod failure policy). So not
// by default, as a RayJob; gandiva.io/preemptible: "true" says it does.
func (pytorchJobKind) Preemptible(Object) bool { return false }

// SpecPatch sets spec.runPolicy.suspend (the width of a PyTorchJob is
// fixed); a merge patch keeps runPolicy's other fields.
func (pytorchJobKind) SpecPatch(_ Object, suspend bool, _ int) map[string]any {
	return map[string]any{"runPolicy": map[string]any{"suspend": suspend}}
}

func (pytorchJobKind) Patch(ctx context.Context, c *Clients, ns, name string, body []byte) (Object, error) {
	return patchCRD(ctx, c, pytorchJobGVR, ns, name, body)
}

// WriteStatus: its status has conditions (the operator's JobConditions:
// type, status, reason, message, times), ours merged in by type beside
// the operator's.
func (pytorchJobKind) WriteStatus(ctx context.Context, c *Clients, obj Object, st WorkloadStatus) error {
	return writeCRDStatus(ctx, c, pytorchJobGVR, obj, st, true)
}
