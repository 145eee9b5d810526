package kube

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
	"github.com/gandiva-sched/gandiva/internal/kube/kubetest"
)

// tiresias-l preempts around other schedulers' pods: on four one-GPU
// nodes, another scheduler's pods hold the GPUs of two and job a (2 pods,
// preemptible) runs on the other two; once a is demoted by its attained
// service, job b (2 pods) arrives in the top queue and preempts it. (Before
// the fix the preemption planner counted the other scheduler's GPUs as
// capacity: b fitted "beside" a, a was no victim, and b waited for ever.)
func TestTiresiasPreemptsAroundOtherSchedulersGPUs(t *testing.T) {
	t.Parallel() // each has a control plane of its own; they mostly wait
	p := kubetest.Start(t, cplane.Options{Kwok: true, Controllers: true})
	cs := kubetest.Client(t, p)
	ctx := context.Background()
	nodes := kubetest.AddNodes(t, cs, kubetest.Nodes{Count: 4, GPUs: 1})
	kubetest.Namespace(t, cs, "team-a")
	kubetest.Namespace(t, cs, "gandiva-system")
	// another scheduler's pods take the GPUs of the last two nodes
	for i, n := range nodes[2:] {
		other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: fmt.Sprintf("other-%d", i)},
			Spec: corev1.PodSpec{NodeName: n, Containers: []corev1.Container{{Name: "c", Image: "x",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{GPU: resource.MustParse("1")}}}}}}
		if _, err := cs.CoreV1().Pods("team-a").Create(ctx, other, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// a (2 GPUs) passes the 16 GPU·s threshold 8 s into its run; b then
	// runs 8 s in queue 0 before it is demoted in its turn
	runGandiva(t, p, Options{Policy: "tiresias-l:limits=16/100000"})
	createJob(t, cs, jobSpec{ns: "team-a", name: "a", pods: 2, gpus: 1, preemptible: true, grace: 1})
	kubetest.Eventually(t, 60*time.Second, "job a running on both free nodes", func() (bool, error) {
		return boundCount(t, cs, "team-a", "a") == 2, nil
	})
	bound := time.Now()
	for time.Since(bound) < 9*time.Second { // a is in queue 1 after this (not a race: its attained service only grows)
		time.Sleep(100 * time.Millisecond)
	}
	createJob(t, cs, jobSpec{ns: "team-a", name: "b", pods: 2, gpus: 1, preemptible: true, grace: 1})
	kubetest.Eventually(t, 90*time.Second, "job b bound on a's nodes, preempting a", func() (bool, error) {
		return boundCount(t, cs, "team-a", "b") == 2, nil
	})
	kubetest.Eventually(t, 60*time.Second, "a's Preempted Event", func() (bool, error) {
		v, err := Describe(ctx, cs, "team-a", "a")
		return err == nil && slices.ContainsFunc(v.Events, func(e EventView) bool { return e.Reason == "Preempted" }), err
	})
	for i := range 2 {
		if _, err := cs.CoreV1().Pods("team-a").Get(ctx, fmt.Sprintf("other-%d", i), metav1.GetOptions{}); err != nil {
			t.Fatalf("the other scheduler's pod %d: %v", i, err)
		}
	}
}
