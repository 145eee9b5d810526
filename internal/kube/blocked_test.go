package kube

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
	"github.com/gandiva-sched/gandiva/internal/kube/kubetest"
)

// gandiva time-slices on the GPUs Kubernetes leaves it: on a node of 4
// GPUs where another scheduler's pod holds 2 and job a runs on 2, job b
// (2 GPUs) gets its turn on a's GPUs at a quantum boundary (a is
// suspended), rather than being placed at every quantum on the GPUs of
// the other scheduler's pod, refused, and left waiting as long as a runs.
func TestGandivaTimeSlicesAroundOtherSchedulersGPUs(t *testing.T) {
	t.Parallel() // each has a control plane of its own; they mostly wait
	p := kubetest.Start(t, cplane.Options{Kwok: true, Controllers: true})
	cs := kubetest.Client(t, p)
	ctx := context.Background()
	kubelet := kubetest.StartKubelet(t, cs, map[string]string{"trainer": kubetest.Trainer(t)})
	nodes := kubetest.AddNodes(t, cs, kubetest.Nodes{Count: 1, GPUs: 4})
	kubetest.Namespace(t, cs, "team-a")
	kubetest.Namespace(t, cs, "gandiva-system")
	dir := t.TempDir()
	long := func(name string) jobSpec {
		js := trainerJob("team-a", name, dir, 1_000_000) // runs for hours: it never ends in the test
		js.gpus = 2
		return js
	}
	runGandiva(t, p, Options{Policy: "gandiva:quantum=5;pack=false;migrate=false"})
	createJob(t, cs, long("a"))
	kubetest.Eventually(t, 60*time.Second, "job a running", func() (bool, error) {
		return boundCount(t, cs, "team-a", "a") == 1, nil
	})
	// another scheduler's pod takes the node's other 2 GPUs
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "other"},
		Spec: corev1.PodSpec{NodeName: nodes[0], Containers: []corev1.Container{{Name: "c", Image: "x",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{GPU: resource.MustParse("2")}}}}}}
	if _, err := cs.CoreV1().Pods("team-a").Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createJob(t, cs, long("b"))
	started := func(job string) bool {
		for _, pr := range kubelet.Processes() {
			if pr.Job == job {
				return true
			}
		}
		return false
	}
	kubetest.Eventually(t, 90*time.Second, "job b's turn (a trainer process of b started)", func() (bool, error) {
		return started("b"), nil
	})
	// b took a's GPUs: a was suspended (its trainer checkpointed and
	// exited on SIGTERM), the other scheduler's pod still holds its GPUs
	suspended := false
	for _, pr := range kubelet.Processes() {
		suspended = suspended || pr.Job == "a" && pr.Exit == 143
	}
	if !suspended {
		t.Fatalf("b started but a was not suspended by SIGTERM (processes: %+v)", kubelet.Processes())
	}
	if _, err := cs.CoreV1().Pods("team-a").Get(ctx, "other", metav1.GetOptions{}); err != nil {
		t.Fatalf("the other scheduler's pod: %v", err)
	}
}
