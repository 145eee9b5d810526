package workloads

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gandiva-sched/gandiva/internal/kube"
	"github.com/gandiva-sched/gandiva/internal/kube/kubetest"
)

// A LeaderWorkerSet (its CRD from the LWS release in third_party; the test
// creates its pods as the LWS controller's StatefulSets would) of one
// group of 2 pods naming Gandiva, on 2 one-GPU nodes: nothing is bound
// while only the leader exists (a gang is bound whole), then both are.
// It has no spec.suspend: Gandiva never suspends it (unit tests).
func TestLWSBoundWhole(t *testing.T) {
	p, cs, dc := Plane(t)
	ctx := context.Background()
	InstallCRD(t, dc, "third_party/lws/config/crd/leaderworkerset.x-k8s.io_leaderworkersets.yaml")
	first := kubetest.AddNodes(t, cs, kubetest.Nodes{Count: 2, GPUs: 1})
	kubetest.Namespace(t, cs, NS)
	kubetest.Namespace(t, cs, "gandiva-system")
	RunGandiva(t, p, kube.Options{Policy: "tiresias-l"})
	lws := LWS(t, PodTemplate())
	if _, err := dc.Resource(LWSGVR).Namespace(NS).Create(ctx, lws, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := func(name, owner string, index int) {
		t.Helper()
		if _, err := cs.CoreV1().Pods(NS).Create(ctx, LWSPod(name, owner, index, PodTemplate()), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	sel := kubetest.LWSNameLabel + "=lws"
	pod("lws-0", "lws", 0)
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		pods, err := LivePods(cs, sel)
		if err != nil {
			t.Fatal(err)
		}
		if n := slices.IndexFunc(pods, func(p corev1.Pod) bool { return p.Spec.NodeName != "" }); n >= 0 {
			t.Fatalf("pod %s bound before its gang's other pod exists", pods[n].Name)
		}
		time.Sleep(100 * time.Millisecond)
	}
	pod("lws-0-1", "lws-0", 1)
	kubetest.Eventually(t, 90*time.Second, "the LeaderWorkerSet's 2 pods bound to the 2 nodes", func() (bool, error) {
		pods, err := LivePods(cs, sel)
		return err == nil && len(pods) == 2 && slices.Equal(NodesOf(pods), first), err
	})
	u, err := dc.Resource(LWSGVR).Namespace(NS).Get(ctx, "lws", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st, pl := u.GetAnnotations()[kube.AnnState], u.GetAnnotations()[kube.AnnPlacement]; st != kube.StateRunning || pl != fmt.Sprintf("%s=1,%s=1", first[0], first[1]) {
		t.Fatalf("LeaderWorkerSet: state %q, placement %q; want running on both nodes", st, pl)
	}
}
