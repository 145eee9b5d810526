package kube

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// RayJob (KubeRay's ray.io/v1): read as unstructured objects, only the
// fields below (the KubeRay module is not a dependency).
var (
	rayJobGVR = schema.GroupVersionResource{Group: "ray.io", Version: "v1", Resource: "rayjobs"}
	rayJobGVK = schema.GroupVersionKind{Group: "ray.io", Version: "v1", Kind: "RayJob"}
)

// Labels KubeRay puts on the pods of a RayCluster.
const (
	labelRayCluster  = "ray.io/cluster"   // the RayCluster's name
	labelRayNodeType = "ray.io/node-type" // head or worker
	// KubeRay names a RayJob's RayCluster NAME-xxxxx (5 random
	// characters: GenerateRayClusterName) and records it in the
	// RayJob's status.rayClusterName.
	rayClusterSuffix = 6
)

// maxRayPods bounds the gang of a RayJob (a hostile spec's replicas).
const maxRayPods = 100000

// rayJob is the part of a RayJob that Gandiva reads.
type rayJob struct {
	Spec struct {
		Suspend                  bool `json:"suspend,omitempty"`
		ShutdownAfterJobFinishes bool `json:"shutdownAfterJobFinishes,omitempty"`
		RayClusterSpec           *struct {
			HeadGroupSpec struct {
				Template corev1.PodTemplateSpec `json:"template"`
			} `json:"headGroupSpec"`
			WorkerGroupSpecs []struct {
				GroupName  string                 `json:"groupName"`
				Replicas   *int32                 `json:"replicas,omitempty"`
				NumOfHosts int32                  `json:"numOfHosts,omitempty"`
				Template   corev1.PodTemplateSpec `json:"template"`
			} `json:"workerGroupSpecs,omitempty"`
		} `json:"rayClusterSpec,omitempty"`
	} `json:"spec"`
	Status struct {
		RayClusterName      string `json:"rayClusterName,omitempty"`
		JobDeploymentStatus string `json:"jobDeploymentStatus,omitempty"`
		JobStatus           string `json:"jobStatus,omitempty"`
		Reason              string `json:"reason,omitempty"`
		Message             string `json:"message,omitempty"`
	} `json:"status"`
}

// readRayJob reads a RayJob object; a malformed one gives an error.
func readRayJob(obj Object) (*rayJob, error) { return readObject[rayJob](obj, "RayJob") }

// rayJobKind is KubeRay's RayJob: a gang of the pods of the RayCluster it
// creates (its head, when the head's template names Gandiva, and
// replicas × numOfHosts pods per worker group), suspended through its
// spec.suspend (KubeRay then deletes the RayCluster, and creates a new one
// on resumption). Fixed width. A head that names another scheduler (a
// head without GPUs, scheduled by kube-scheduler) is no part of the gang.
type rayJobKind struct{}

var _ Kind = rayJobKind{}

func (rayJobKind) Prefix() string { return "rayjob" }

func (rayJobKind) GVK() schema.GroupVersionKind { return rayJobGVK }

func (rayJobKind) Informer(c *Clients) (cache.SharedIndexInformer, error) {
	return crdInformer(c, rayJobGVR)
}

// PodOf: a pod of a RayCluster (its controller) named NAME-xxxxx, as
// KubeRay names a RayJob's cluster, is RayJob NAME's (Owns checks the
// RayJob's status.rayClusterName).
func (rayJobKind) PodOf(p *corev1.Pod) (string, bool) {
	ref := metav1.GetControllerOfNoCopy(p)
	if ref == nil || ref.Kind != "RayCluster" {
		return "", false
	}
	c := p.Labels[labelRayCluster]
	if c == "" || c != ref.Name || len(c) <= rayClusterSuffix || c[len(c)-rayClusterSuffix] != '-' {
		return "", false
	}
	return c[:len(c)-rayClusterSuffix], true
}

// Owns: the pod is of the RayCluster the RayJob's status names.
func (rayJobKind) Owns(obj Object, p *corev1.Pod) bool {
	rj, err := readRayJob(obj)
	return err == nil && rj.Status.RayClusterName != "" && p.Labels[labelRayCluster] == rj.Status.RayClusterName
}

// PodSets: the head (when it names Gandiva) and one set per worker group;
// none for a malformed RayJob or one without a rayClusterSpec (one that
// runs on an existing cluster: no pods of its own).
func (rayJobKind) PodSets(obj Object) []PodSet {
	rj, err := readRayJob(obj)
	if err != nil || rj.Spec.RayClusterSpec == nil {
		return nil
	}
	spec := rj.Spec.RayClusterSpec
	var out []PodSet
	if spec.HeadGroupSpec.Template.Spec.SchedulerName == SchedulerName {
		out = append(out, PodSet{Name: "head", Count: 1, Template: &spec.HeadGroupSpec.Template})
	}
	total := len(out)
	for i := range spec.WorkerGroupSpecs {
		g := &spec.WorkerGroupSpecs[i]
		replicas, hosts := 0, 1
		if g.Replicas != nil {
			replicas = int(*g.Replicas)
		}
		if g.NumOfHosts > 0 {
			hosts = int(g.NumOfHosts)
		}
		if replicas < 0 || replicas > maxRayPods || hosts > maxRayPods || replicas*hosts > maxRayPods-total {
			return nil
		}
		if replicas == 0 {
			continue
		}
		total += replicas * hosts
		out = append(out, PodSet{Name: g.GroupName, Count: replicas * hosts, Template: &g.Template})
	}
	return out
}

// Finished: its deployment status is Complete or Failed.
func (rayJobKind) Finished(obj Object) (bool, bool, string) {
	rj, err := readRayJob(obj)
	if err != nil {
		return false, false, ""
	}
	switch rj.Status.JobDeploymentStatus {
	case "Complete":
		return true, false, "completed"
	case "Failed":
		return true, true, "failed: " + rj.Status.Reason + " " + rj.Status.Message
	}
	return false, false, ""
}

func (rayJobKind) Suspended(obj Object) bool {
	rj, err := readRayJob(obj)
	return err == nil && rj.Spec.Suspend
}

// Width is the gang: a RayJob runs all its pods or none.
func (k rayJobKind) Width(obj Object) int {
	n := 0
	for _, ps := range k.PodSets(obj) {
		n += ps.Count
	}
	return n
}

// Succeeded: a Ray cluster's pods do not complete one by one.
func (rayJobKind) Succeeded(Object) int { return 0 }

func (rayJobKind) Resizable() bool { return false }

// Preemptible: KubeRay suspends a running RayJob only with
// shutdownAfterJobFinishes set, and a resumed RayJob submits its
// entrypoint again on a new cluster: it loses no more than the work since
// its last checkpoint only if its script resumes from one. So not by
// default; gandiva.io/preemptible: "true" says it does.
func (rayJobKind) Preemptible(Object) bool { return false }

// SpecPatch sets spec.suspend (the width of a RayJob is fixed).
func (rayJobKind) SpecPatch(_ Object, suspend bool, _ int) map[string]any {
	return map[string]any{"suspend": suspend}
}

func (rayJobKind) Patch(ctx context.Context, c *Clients, ns, name string, body []byte) (Object, error) {
	return patchCRD(ctx, c, rayJobGVR, ns, name, body)
}

// WriteStatus: the annotation alone; a RayJob's status has no conditions
// (its CRD's schema has none: the API server would prune them).
func (rayJobKind) WriteStatus(ctx context.Context, c *Clients, obj Object, st WorkloadStatus) error {
	return writeCRDStatus(ctx, c, rayJobGVR, obj, st, false)
}

// Conditionless: its status has no conditions (conditions.go).
func (rayJobKind) Conditionless() bool { return true }
