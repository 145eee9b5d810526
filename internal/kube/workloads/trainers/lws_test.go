package trainers

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gandiva-sched/gandiva/internal/kube"
	"github.com/gandiva-sched/gandiva/internal/kube/kubetest"
	wl "github.com/gandiva-sched/gandiva/internal/kube/workloads"
)

// A LeaderWorkerSet (LWS v0.10.0's CRD; the test creates its group's pods
// as the LWS controller's StatefulSets would) of one group of 2 pods
// running ddp.py, each its rank from its worker-index label (the downward
// API, as LWS_WORKER_INDEX): bound whole on the 2 one-GPU nodes, the
// trainers run to the end, the final weights bit-identical to an
// uninterrupted run's. It has no spec.suspend: never preempted, so no
// checkpoint is restored.
func TestLWSDDPToCompletion(t *testing.T) {
	c := start(t, 2, nil, "third_party/lws/config/crd/leaderworkerset.x-k8s.io_leaderworkersets.yaml")
	ctx := context.Background()
	tmpl := c.template("lws", "node", corev1.EnvVar{Name: "RANK", ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['" + wl.LWSWorkerIndexLabel + "']"}}})
	if _, err := c.dc.Resource(wl.LWSGVR).Namespace(wl.NS).Create(ctx, wl.LWS(t, tmpl), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"lws-0", "lws-0-1"} {
		owner := "lws"
		if i > 0 {
			owner = "lws-0"
		}
		if _, err := c.cs.CoreV1().Pods(wl.NS).Create(ctx, wl.LWSPod(name, owner, i, tmpl), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("processes of lws:\n%s", kubetest.LogTails(c.procs("lws")))
		}
	})
	prs := c.training(t, "lws")
	nodes := []string{prs[0].Node, prs[1].Node}
	slices.Sort(nodes)
	if !slices.Equal(nodes, c.nodes) {
		t.Errorf("the ranks run on %v, want one on each of %v", nodes, c.nodes)
	}
	st, _, err := c.stateOf(wl.LWSGVR, "lws")
	if err != nil || st != kube.StateRunning {
		t.Errorf("LeaderWorkerSet lws: state %q (%v), want %q", st, err, kube.StateRunning)
	}
	prs = c.finished(t, "lws", 2)
	if len(prs) != 2 {
		t.Fatalf("%d processes of the gang, want 2 (never preempted)\n%s", len(prs), kubetest.LogTails(prs))
	}
	for _, pr := range prs {
		if pr.Exit != 0 {
			t.Errorf("rank %s exited %d", pr.Pod, pr.Exit)
		}
	}
	c.check(t, "lws", 0)
}
