package kube

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// hostileKinds are the kinds read from unstructured objects (a user's, or
// a controller's status), each with the bound of its gang.
var hostileKinds = []struct {
	k   Kind
	max int
}{{jobSetKind{}, maxJobSetPods}, {rayJobKind{}, maxRayPods}, {lwsKind{}, maxLWSPods}, {pytorchJobKind{}, maxPyTorchPods}}

// checkHostile calls every method of each unstructured kind that reads an
// object on u, and fails when one panics or gives a count out of bounds.
func checkHostile(t *testing.T, u *unstructured.Unstructured) {
	t.Helper()
	for _, hk := range hostileKinds {
		k := hk.k
		w, sum := k.Width(u), 0
		for _, ps := range k.PodSets(u) {
			if ps.Count < 0 || ps.Count > hk.max {
				t.Fatalf("%s: pod set %q of %d pods", k.Prefix(), ps.Name, ps.Count)
			}
			sum += ps.Count
		}
		if w < 0 || w > hk.max || w != sum {
			t.Fatalf("%s: width %d (pod sets %d), want 0 to %d and their sum", k.Prefix(), w, sum, hk.max)
		}
		if n := k.Succeeded(u); n < 0 || n > hk.max {
			t.Fatalf("%s: %d pods succeeded, want 0 to %d", k.Prefix(), n, hk.max)
		}
		k.Finished(u)
		k.Suspended(u)
		k.Preemptible(u)
		k.SpecPatch(u, true, 0)
		k.SpecPatch(u, false, w)
		managedObject(k, u)
		if managedTemplates(k.PodSets(u)) {
			fromObject(k, u)
		}
	}
	checkTrainerStatus(t, u)
}

// Replica counts that overflow when multiplied, listed many times: a
// JobSet's succeeded pods stay within its bound (they wrapped around to a
// negative count, which made its need of pods to bind larger than its
// width).
func TestJobSetSucceededBounded(t *testing.T) {
	u := testJobSet(t, func(o map[string]any) {
		rj := replicated(o, 0)
		rj["template"].(map[string]any)["spec"].(map[string]any)["parallelism"] = int64(2147483647)
		var st []any
		for range 4 {
			st = append(st, map[string]any{"name": "workers", "succeeded": int64(2147483647)})
		}
		o["status"] = map[string]any{"replicatedJobsStatus": st}
	})
	if n := (jobSetKind{}).Succeeded(u); n != maxJobSetPods {
		t.Fatalf("succeeded %d, want the bound %d", n, maxJobSetPods)
	}
	checkHostile(t, u)
}

// Objects of any shape (wrong types, negative and huge counts, missing
// fields) never panic an adapter, and its counts stay in bounds.
func FuzzKindsHostile(f *testing.F) {
	for _, s := range []string{
		`{}`,
		`{"spec": 5}`,
		`{"spec": {"replicatedJobs": [{"name": "a", "replicas": -1}]}}`,
		`{"spec": {"replicatedJobs": [{"name": "a", "replicas": 2147483647, "template": {"spec": {"parallelism": 2147483647}}}]}}`,
		`{"spec": {"replicatedJobs": [{"name": "a", "replicas": 1, "template": {"spec": {"parallelism": 2147483647}}}]},
		  "status": {"replicatedJobsStatus": [{"name": "a", "succeeded": 2147483647}, {"name": "a", "succeeded": 2147483647},
		  {"name": "a", "succeeded": 2147483647}, {"name": "a", "succeeded": 2147483647}]}}`,
		`{"spec": {"replicatedJobs": "x"}}`,
		`{"spec": {"replicatedJobs": [null, 3, {"template": {"spec": {"template": {"spec": {"schedulerName": "gandiva", "containers": [{"name": "c"}]}}}}}]}}`,
		`{"spec": {"rayClusterSpec": {"workerGroupSpecs": [{"replicas": 2147483647, "numOfHosts": 2147483647}]}}}`,
		`{"spec": {"rayClusterSpec": {"headGroupSpec": {"template": {"spec": {"schedulerName": "gandiva"}}}, "workerGroupSpecs": [{"replicas": -5, "numOfHosts": -5}]}}}`,
		`{"spec": {"rayClusterSpec": null, "suspend": "yes"}}`,
		`{"spec": {"replicas": 2147483647, "leaderWorkerTemplate": {"size": 2147483647}}}`,
		`{"spec": {"replicas": -1, "leaderWorkerTemplate": {"size": 0}}}`,
		`{"spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 2147483647, "template": {}}, "worker": {"replicas": 2147483647, "template": {}}}}}`,
		`{"spec": {"runPolicy": {"suspend": "yes"}, "pytorchReplicaSpecs": {"Worker": {"replicas": -1, "template": null}, "Launcher": 3}},
		  "status": {"replicaStatuses": {"Master": {"succeeded": 2147483647}, "Worker": {"succeeded": -2147483648}}}}`,
		`{"status": {"terminalState": 7, "conditions": [{"type": "Failed", "status": "True", "reason": "x"}]}}`,
		`{"status": {"jobDeploymentStatus": "Failed", "reason": "\u001b[2J"}}`,
		`{"status": {"trainerStatus": {"progressPercentage": 101, "estimatedRemainingSeconds": -1, "lastUpdatedTime": "2026-01-02T03:04:05Z"}}}`,
		`{"status": {"trainerStatus": {"progressPercentage": 50.5, "estimatedRemainingSeconds": 1e300, "lastUpdatedTime": 7}}}`,
		`{"status": {"trainerStatus": {"progressPercentage": "50", "estimatedRemainingSeconds": [1], "metrics": {"loss": 1}}}}`,
		`{"status": {"trainerStatus": "done"}}`,
		`{"status": {"trainerStatus": {"progressPercentage": 100, "estimatedRemainingSeconds": 2147483647, "lastUpdatedTime": "9999-12-31T23:59:59Z"}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var m map[string]any
		if err := utiljson.Unmarshal(data, &m); err != nil || m == nil {
			return
		}
		m["metadata"] = map[string]any{"namespace": "ns", "name": "w", "uid": "u"}
		checkHostile(t, &unstructured.Unstructured{Object: m})
	})
}

// A pod labelled and owned as if it were a pod of another namespace's
// workload counts only toward the workload of that name in its own
// namespace.
func TestPodClaimsStayInItsNamespace(t *testing.T) {
	ctl := true
	for _, labels := range []map[string]string{
		{labelJobSetName: "victim"},
		{labelJobSetName: "victim", labelJobSetUID: "victim-uid"},
		{LabelJob: "victim"},
	} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "mallory", Name: "p", Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "victim", UID: "victim-uid", Controller: &ctl}}}}
		key := podKind(p)
		if _, ns, _ := splitKey(key); ns != "mallory" {
			t.Errorf("pod of namespace mallory with labels %v: workload %s, want one of mallory", labels, key)
		}
	}
}
