package kube

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// podTemplate is an unstructured pod template of scheduler sched with
// gpus nvidia.com/gpu, node selector pool=a.
func podTemplate(t *testing.T, sched, gpus string) map[string]any {
	t.Helper()
	pt := corev1.PodTemplateSpec{Spec: corev1.PodSpec{SchedulerName: sched, NodeSelector: map[string]string{"pool": "a"},
		Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{GPU: resource.MustParse(gpus)}}}}}}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&pt)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// testRayJob is a RayJob of Gandiva's: a head of 1 GPU and one worker
// group of 1 replica of 1 GPU, as unstructured, running on cluster
// rj-abcde.
func testRayJob(t *testing.T, mutate func(map[string]any)) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "ray.io/v1", "kind": "RayJob",
		"metadata": map[string]any{"namespace": "team-a", "name": "rj", "uid": "rj-uid",
			"annotations": map[string]any{AnnIters: "1000", AnnIterTime: "0.5"}},
		"spec": map[string]any{"shutdownAfterJobFinishes": true, "rayClusterSpec": map[string]any{
			"headGroupSpec": map[string]any{"template": podTemplate(t, SchedulerName, "1")},
			"workerGroupSpecs": []any{map[string]any{"groupName": "gpu", "replicas": int64(1),
				"template": podTemplate(t, SchedulerName, "1")}},
		}},
		"status": map[string]any{"rayClusterName": "rj-abcde", "jobDeploymentStatus": "Running"},
	}}
	if mutate != nil {
		mutate(u.Object)
	}
	return u
}

func rayCluster(u map[string]any) map[string]any {
	return u["spec"].(map[string]any)["rayClusterSpec"].(map[string]any)
}

func rayWorkers(u map[string]any) map[string]any {
	return rayCluster(u)["workerGroupSpecs"].([]any)[0].(map[string]any)
}

// A RayJob's gang is its head (when it names Gandiva) and replicas ×
// numOfHosts pods per worker group; it is fixed-width and not preemptible
// unless its annotation says so.
func TestRayJobGang(t *testing.T) {
	w := fromObject(rayJobKind{}, testRayJob(t, nil))
	if w.bad != "" {
		t.Fatalf("refused: %s", w.bad)
	}
	if w.gang != 2 || w.podGPUs != 1 || w.spec.GPUs != 2 || w.key != "rayjob/team-a/rj" || w.spec.Name != "team-a/rayjob:rj" {
		t.Fatalf("gang %d × %d GPUs (spec %d), key %q, name %q; want 2 × 1 (2), rayjob/team-a/rj, team-a/rayjob:rj",
			w.gang, w.podGPUs, w.spec.GPUs, w.key, w.spec.Name)
	}
	if w.preemptible || !managedObject(rayJobKind{}, testRayJob(t, nil)) {
		t.Fatalf("preemptible %v by default, or not managed", w.preemptible)
	}
	yes := fromObject(rayJobKind{}, testRayJob(t, func(u map[string]any) {
		u["metadata"].(map[string]any)["annotations"].(map[string]any)[AnnPreemptible] = "true"
	}))
	if !yes.preemptible || yes.bad != "" {
		t.Fatalf("gandiva.io/preemptible=true: preemptible %v, bad %q", yes.preemptible, yes.bad)
	}

	// a head without GPUs left to kube-scheduler: the gang is the workers
	cpuHead := testRayJob(t, func(u map[string]any) {
		rayCluster(u)["headGroupSpec"] = map[string]any{"template": podTemplate(t, "default-scheduler", "0")}
		rayWorkers(u)["replicas"] = int64(2)
		rayWorkers(u)["numOfHosts"] = int64(2)
	})
	if w := fromObject(rayJobKind{}, cpuHead); w.bad != "" || w.gang != 4 || (rayJobKind{}).Width(cpuHead) != 4 {
		t.Fatalf("head left to kube-scheduler, 2 replicas × 2 hosts: gang %d (bad %q), want 4", w.gang, w.bad)
	}

	for _, c := range []struct {
		name   string
		mutate func(map[string]any)
		want   string
	}{
		{"head without GPUs", func(u map[string]any) {
			rayCluster(u)["headGroupSpec"] = map[string]any{"template": podTemplate(t, SchedulerName, "0")}
		}, "different GPUs"},
		{"malformed", func(u map[string]any) { rayWorkers(u)["replicas"] = "two" }, "no pod template"},
		{"too many pods", func(u map[string]any) { rayWorkers(u)["replicas"] = int64(1 << 30) }, "no pod template"},
		{"negative", func(u map[string]any) { rayWorkers(u)["replicas"] = int64(-1) }, "no pod template"},
		{"no cluster spec", func(u map[string]any) { delete(u["spec"].(map[string]any), "rayClusterSpec") }, "no pod template"},
		{"elastic", func(u map[string]any) {
			u["metadata"].(map[string]any)["annotations"].(map[string]any)[AnnMaxGPUs] = "4"
		}, "cannot grow or shrink"},
	} {
		w := fromObject(rayJobKind{}, testRayJob(t, c.mutate))
		if !strings.Contains(w.bad, c.want) {
			t.Errorf("%s: refused for %q, want a reason with %q", c.name, w.bad, c.want)
		}
	}
}

// The pods of a RayJob's RayCluster (NAME-xxxxx, its controller) are the
// RayJob's workload; Owns tells the current cluster's from an old one's.
func TestRayJobPods(t *testing.T) {
	pod := func(kind, owner, cluster string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p",
			Labels: map[string]string{labelRayCluster: cluster, labelRayNodeType: "worker"}},
			Spec: corev1.PodSpec{SchedulerName: SchedulerName}}
		if kind != "" {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "ray.io/v1", Kind: kind, Name: owner, UID: types.UID(owner), Controller: ptr.To(true)}}
		}
		return p
	}
	for _, c := range []struct {
		name string
		p    *corev1.Pod
		want string
	}{
		{"RayJob's", pod("RayCluster", "rj-abcde", "rj-abcde"), "rayjob/ns/rj"},
		{"dashed name", pod("RayCluster", "my-job-x1y2z", "my-job-x1y2z"), "rayjob/ns/my-job"},
		{"label not its owner", pod("RayCluster", "rj-abcde", "other-abcde"), "pods/ns/p"},
		{"no suffix", pod("RayCluster", "rj", "rj"), "pods/ns/p"},
		{"not a RayCluster's", pod("ReplicaSet", "rj-abcde", "rj-abcde"), "pods/ns/p"},
		{"no owner", pod("", "", "rj-abcde"), "pods/ns/p"},
	} {
		if got := workloadKey(c.p); got != c.want {
			t.Errorf("%s: key %q, want %q", c.name, got, c.want)
		}
	}
	rj := testRayJob(t, nil)
	if !(rayJobKind{}).Owns(rj, pod("RayCluster", "rj-abcde", "rj-abcde")) || (rayJobKind{}).Owns(rj, pod("RayCluster", "rj-zzzzz", "rj-zzzzz")) {
		t.Error("Owns does not tell the current cluster's pods from an old cluster's")
	}
	delete(rj.Object, "status")
	if (rayJobKind{}).Owns(rj, pod("RayCluster", "rj-abcde", "rj-abcde")) {
		t.Error("a RayJob that names no cluster owns a pod")
	}
}

// Suspension is the RayJob's spec.suspend; it is over when its deployment
// status is Complete or Failed.
func TestRayJobSuspendFinish(t *testing.T) {
	rj := testRayJob(t, nil)
	if got := (rayJobKind{}).SpecPatch(rj, true, 9); !reflect.DeepEqual(got, map[string]any{"suspend": true}) {
		t.Errorf("suspend patch %v", got)
	}
	if (rayJobKind{}).Suspended(rj) {
		t.Error("suspended without spec.suspend")
	}
	rj.Object["spec"].(map[string]any)["suspend"] = true
	if !(rayJobKind{}).Suspended(rj) {
		t.Error("not suspended with spec.suspend true")
	}
	if done, _, _ := (rayJobKind{}).Finished(rj); done {
		t.Error("a running RayJob is over")
	}
	for st, failed := range map[string]bool{"Complete": false, "Failed": true} {
		rj.Object["status"].(map[string]any)["jobDeploymentStatus"] = st
		if done, f, _ := (rayJobKind{}).Finished(rj); !done || f != failed {
			t.Errorf("status %s: over %v, failed %v", st, done, f)
		}
	}
}
