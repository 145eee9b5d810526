package kube

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
)

// The loop never reads a PodGroup itself: a plain-pod workload that names
// one is not described (so not scheduled with a guessed gang) until the
// read, made on the low dispatcher with the term's context, answers; the
// answer's minMember is then its gang size, and the workload is looked at
// again. A rebuild waits for the reads of the workloads it finds.
func TestPodGroupReadOffTheLoop(t *testing.T) {
	pgGVR := schema.GroupVersionResource{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "podgroups"}
	pg := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
		"metadata": map[string]any{"name": "pg", "namespace": "team-a"},
		"spec":     map[string]any{"minMember": int64(3)}}}
	dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{pgGVR: "PodGroupList"}, pg)
	o := Options{Policy: "fifo", Dynamic: dyn}
	o.defaults()
	cs := fake.NewClientset()
	s, err := newScheduler(cs, cs, o, record.NewFakeRecorder(16))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"g0", "g1"} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, UID: types.UID("uid-" + name),
			Labels: map[string]string{LabelJob: "g", labelPodGroup: "pg"}},
			Spec: corev1.PodSpec{SchedulerName: SchedulerName, Containers: []corev1.Container{{Name: "c",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{GPU: resource.MustParse("1")}}}}}}
		if err := s.pods.GetIndexer().Add(p); err != nil {
			t.Fatal(err)
		}
	}
	key := "pods/team-a/g"

	s.rebuild()
	if n := len(dyn.Actions()); n != 0 {
		t.Fatalf("the rebuild called the API %d times itself", n)
	}
	if !s.rebuilding || len(s.ws) != 0 {
		t.Fatalf("rebuilt (%d workloads) before the PodGroup was read", len(s.ws))
	}
	if w, _, _ := s.observe(key); w != nil {
		t.Fatalf("workload described with gang %d before its PodGroup was read", w.gang)
	}
	if !s.busy(groupKey(key)) {
		t.Fatal("no PodGroup read queued")
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); s.lowDisp.run(ctx, 1) }()
	defer func() { cancel(); <-done }()
	answered := func() bool {
		s.lowDisp.mu.Lock()
		defer s.lowDisp.mu.Unlock()
		return len(s.lowDisp.answers) > 0
	}
	for !answered() {
		<-s.q.Kick() // (an answer pokes the queue)
	}
	s.step()
	if s.rebuilding {
		t.Fatal("still rebuilding once the PodGroup was read")
	}
	w, _, _ := s.observe(key)
	if w == nil || w.gang != 3 {
		t.Fatalf("workload %+v: want gang 3 (the PodGroup's minMember)", w)
	}
	if ws := s.ws[key]; ws == nil {
		t.Fatal("the rebuild did not submit the workload")
	}
	gets := 0
	for _, a := range dyn.Actions() {
		if a.GetVerb() == "get" {
			gets++
		}
	}
	if gets != 1 {
		t.Fatalf("%d PodGroup reads, want 1", gets)
	}
}
