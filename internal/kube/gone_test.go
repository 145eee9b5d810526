package kube

import (
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
)

// A pod deleted while we were binding it (the informer showed it unbound,
// then gone; the binding's answer, "not found", comes after) had its GPUs
// counted in its node's usage until some other pod on that node changed:
// under TestKill9's churn two gangs placed on an emptied node waited for
// room there for ever. Forgetting the binding has the node looked at
// again, and its usage then counts nothing of the pod.
func TestGonePodBeingBoundFreesItsNode(t *testing.T) {
	o := Options{Policy: "tiresias-l"}
	o.defaults()
	cs := fake.NewClientset()
	s, err := newScheduler(cs, cs, o, record.NewFakeRecorder(16))
	if err != nil {
		t.Fatal(err)
	}
	uid := types.UID("uid-a")
	tok := s.binds.Assume(uid, bindRec{node: "gpu-2", gpus: 2})
	ns := &nstate{name: "gpu-2"}
	s.nodes["gpu-2"] = ns
	s.waitRoom["gpu-2"] = map[string]bool{"job/team-a/j07": true}
	s.usage(ns)
	if ns.ours != 2 {
		t.Fatalf("usage counts %d GPUs of ours on gpu-2 with a binding in flight, want 2", ns.ours)
	}
	s.q.Take(time.Now()) // (nothing else queued)
	s.forgetGone([]types.UID{uid})
	if keys := s.q.Take(time.Now()); !slices.Contains(keys, qkey{keyWorkload, "job/team-a/j07"}) {
		t.Fatalf("after its pod went, the gang waiting for room on the node of the binding in flight is not woken (queued: %v)", keys)
	}
	if ns.ours != 0 {
		t.Errorf("usage counts %d GPUs of ours on gpu-2 after the pod went, want 0", ns.ours)
	}
	// the binding's late answer changes nothing
	if s.binds.Finish(uid, tok, false, nil, time.Now()) {
		t.Error("the late answer of a forgotten binding was taken")
	}
	// a pod with no binding of ours: nothing to look at
	s.forgetGone([]types.UID{"uid-b"})
	if keys := s.q.Take(time.Now()); len(keys) != 0 {
		t.Errorf("a gone pod with no binding queued %v", keys)
	}
}

// A binding refused (the pod went before the API server took it: "not
// found") frees its GPUs on the node and wakes the gangs waiting for room
// there, as a pod leaving the node does.
func TestRefusedBindingWakesItsNode(t *testing.T) {
	o := Options{Policy: "tiresias-l"}
	o.defaults()
	cs := fake.NewClientset()
	s, err := newScheduler(cs, cs, o, record.NewFakeRecorder(16))
	if err != nil {
		t.Fatal(err)
	}
	p := sharedPod("a", "", nil, nil)
	delete(p.Annotations, "gandiva.io/gpus")
	tok := s.binds.Assume(p.UID, bindRec{node: "gpu-2", gpus: 2})
	ns := &nstate{name: "gpu-2"}
	s.nodes["gpu-2"] = ns
	s.waitRoom["gpu-2"] = map[string]bool{"job/team-a/j07": true}
	s.usage(ns)
	s.q.Take(time.Now())
	notFound := apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, p.Name)
	s.result(opResult{key: "pod:" + string(p.UID), bound: p, tok: tokens{bind: tok}, err: notFound}, time.Now())
	if keys := s.q.Take(time.Now()); !slices.Contains(keys, qkey{keyWorkload, "job/team-a/j07"}) {
		t.Fatalf("a refused binding does not wake the gang waiting for room on its node (queued: %v)", keys)
	}
	if ns.ours != 0 {
		t.Errorf("usage counts %d GPUs of ours on gpu-2 after the binding was refused, want 0", ns.ours)
	}
}
