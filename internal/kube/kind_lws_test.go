package kube

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
)

// testLWS is a LeaderWorkerSet of Gandiva's: 2 groups of size 2 (a
// leader and a worker), a GPU per pod, as unstructured.
func testLWS(t *testing.T, mutate func(map[string]any)) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
		"metadata": map[string]any{"namespace": "team-a", "name": "lws", "uid": "lws-uid",
			"annotations": map[string]any{}},
		"spec": map[string]any{"replicas": int64(2), "leaderWorkerTemplate": map[string]any{
			"size": int64(2), "workerTemplate": podTemplate(t, SchedulerName, "1")}},
	}}
	if mutate != nil {
		mutate(u.Object)
	}
	return u
}

func lwsTemplate(u map[string]any) map[string]any {
	return u["spec"].(map[string]any)["leaderWorkerTemplate"].(map[string]any)
}

// A LeaderWorkerSet's gang is replicas leaders and replicas × (size − 1)
// workers; it cannot be suspended, so it is never preemptible, and the
// annotation that would make it so is refused.
func TestLWSGang(t *testing.T) {
	w := fromObject(lwsKind{}, testLWS(t, nil))
	if w.bad != "" {
		t.Fatalf("refused: %s", w.bad)
	}
	if w.gang != 4 || w.podGPUs != 1 || w.key != "lws/team-a/lws" || w.preemptible {
		t.Fatalf("gang %d × %d GPUs, key %q, preemptible %v; want 4 × 1, lws/team-a/lws, not preemptible", w.gang, w.podGPUs, w.key, w.preemptible)
	}
	one := testLWS(t, func(u map[string]any) { delete(lwsTemplate(u), "size"); delete(u["spec"].(map[string]any), "replicas") })
	if n := (lwsKind{}).Width(one); n != 1 {
		t.Fatalf("defaults (1 group of 1): width %d", n)
	}
	if got := (lwsKind{}).SpecPatch(testLWS(t, nil), true, 0); len(got) != 0 || (lwsKind{}).Suspended(testLWS(t, nil)) {
		t.Fatalf("a LeaderWorkerSet's spec patch %v: it has no suspend field", got)
	}
	for _, c := range []struct {
		name   string
		mutate func(map[string]any)
		want   string
	}{
		{"preemptible", func(u map[string]any) {
			u["metadata"].(map[string]any)["annotations"].(map[string]any)[AnnPreemptible] = "true"
		}, "cannot suspend it"},
		{"leader without GPUs", func(u map[string]any) { lwsTemplate(u)["leaderTemplate"] = podTemplate(t, SchedulerName, "0") }, "different GPUs"},
		{"zero replicas", func(u map[string]any) { u["spec"].(map[string]any)["replicas"] = int64(0) }, "no pod template"},
		{"too many pods", func(u map[string]any) { lwsTemplate(u)["size"] = int64(1 << 20) }, "no pod template"},
		{"malformed", func(u map[string]any) { lwsTemplate(u)["size"] = "big" }, "no pod template"},
	} {
		w := fromObject(lwsKind{}, testLWS(t, c.mutate))
		if !strings.Contains(w.bad, c.want) {
			t.Errorf("%s: refused for %q, want a reason with %q", c.name, w.bad, c.want)
		}
	}
	if w := fromObject(lwsKind{}, testLWS(t, func(u map[string]any) {
		u["metadata"].(map[string]any)["annotations"].(map[string]any)[AnnPreemptible] = "false"
	})); w.bad != "" {
		t.Fatalf("gandiva.io/preemptible=false refused: %s", w.bad)
	}
}

// The pods of a LeaderWorkerSet's StatefulSets (leaders' and workers')
// carry its name label: they are its workload.
func TestLWSPods(t *testing.T) {
	pod := func(kind string, labels map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: "lws", UID: "u", Controller: ptr.To(true)}}},
			Spec: corev1.PodSpec{SchedulerName: SchedulerName}}
	}
	for _, c := range []struct {
		name string
		p    *corev1.Pod
		want string
	}{
		{"leader", pod("StatefulSet", map[string]string{labelLWSName: "lws"}), "lws/ns/lws"},
		{"no label", pod("StatefulSet", nil), "pods/ns/p"},
		{"not a StatefulSet's", pod("ReplicaSet", map[string]string{labelLWSName: "lws"}), "pods/ns/p"},
	} {
		if got := workloadKey(c.p); got != c.want {
			t.Errorf("%s: key %q, want %q", c.name, got, c.want)
		}
	}
}
