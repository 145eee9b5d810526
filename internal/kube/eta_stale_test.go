package kube

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
)

// TestIdleSchedulerReforecasts: a scheduler with nothing to do still makes
// its forecast again once it is stale (the ETAs shown move with the
// clock), and the re-forecast makes no engine round of its own.
func TestIdleSchedulerReforecasts(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{GPU: resource.MustParse("2")},
			Allocatable: corev1.ResourceList{GPU: resource.MustParse("2")},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	cs := fake.NewClientset(node)
	o := Options{Policy: "fifo"}
	o.defaults()
	s, err := newScheduler(cs, cs, o, record.NewFakeRecorder(64))
	if err != nil {
		t.Fatal(err)
	}
	// stale after 3 s: longer than the rounds the term's start and a status
	// scan held back (writeStatus: once a wall second) make after a
	// forecast, so only a re-forecast of the idle loop's own makes another
	s.fc.staleAfter = 3 * time.Second // (before the loop starts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	// waitVersion waits for the forecasts made to reach v; it returns the
	// rounds run by then
	waitVersion := func(v uint64, what string) int {
		deadline := time.Now().Add(90 * time.Second)
		for s.ETAVersion() < v {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d forecasts made within 90 s, want %d", what, s.ETAVersion(), v)
			}
			time.Sleep(20 * time.Millisecond)
		}
		return s.Stats().Rounds
	}
	// the first forecast comes after the term's first round; after that
	// the scheduler is idle: its forecast is made again once stale, no
	// sooner than kubeETAEvery after the last one ended, and again
	waitVersion(1, "the first forecast")
	r2 := waitVersion(2, "an idle scheduler's stale forecast")
	r3 := waitVersion(3, "an idle scheduler's stale forecast, again")
	// a re-forecast makes no round of its own; the one round allowed is
	// the status scan's held back after the forecast came (writeStatus)
	if r3-r2 > 1 {
		t.Errorf("a stale re-forecast ran %d engine rounds, want at most 1 (a status scan's)", r3-r2)
	}
}
