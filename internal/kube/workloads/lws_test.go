package workloads

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/gandiva-sched/gandiva/internal/kube"
	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
	"github.com/gandiva-sched/gandiva/internal/kube/kubetest"
)

var lwsGVR = schema.GroupVersionResource{Group: "leaderworkerset.x-k8s.io", Version: "v1", Resource: "leaderworkersets"}

// A LeaderWorkerSet (its CRD from the LWS release in third_party; the test
// creates its pods as the LWS controller's StatefulSets would) of one
// group of 2 pods naming Gandiva, on 2 one-GPU nodes: nothing is bound
// while only the leader exists (a gang is bound whole), then both are.
// It has no spec.suspend: Gandiva never suspends it (unit tests).
func TestLWSBoundWhole(t *testing.T) {
	p := kubetest.Start(t, cplane.Options{Kwok: true, Controllers: true})
	cs := kubetest.Client(t, p)
	dc, err := dynamic.NewForConfig(p.Config())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	installCRD(t, dc, "third_party/lws/config/crd/leaderworkerset.x-k8s.io_leaderworkersets.yaml")
	first := kubetest.AddNodes(t, cs, kubetest.Nodes{Count: 2, GPUs: 1})
	kubetest.Namespace(t, cs, ns)
	kubetest.Namespace(t, cs, "gandiva-system")
	runGandiva(t, p, kube.Options{Policy: "tiresias-l"})
	wt := podTemplate()
	wm, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&wt)
	if err != nil {
		t.Fatal(err)
	}
	lws := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
		"metadata": map[string]any{"namespace": ns, "name": "lws"},
		"spec": map[string]any{"replicas": int64(1), "leaderWorkerTemplate": map[string]any{
			"size": int64(2), "workerTemplate": wm}},
	}}
	if _, err := dc.Resource(lwsGVR).Namespace(ns).Create(ctx, lws, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := func(name, owner string) {
		t.Helper()
		pt := podTemplate()
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels: map[string]string{kubetest.LWSNameLabel: "lws", "leaderworkerset.sigs.k8s.io/group-index": "0"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: owner,
				UID: types.UID("sts-" + owner), Controller: ptr.To(true)}}},
			Spec: pt.Spec}
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	sel := kubetest.LWSNameLabel + "=lws"
	pod("lws-0", "lws")
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		pods, err := livePods(cs, sel)
		if err != nil {
			t.Fatal(err)
		}
		if n := slices.IndexFunc(pods, func(p corev1.Pod) bool { return p.Spec.NodeName != "" }); n >= 0 {
			t.Fatalf("pod %s bound before its gang's other pod exists", pods[n].Name)
		}
		time.Sleep(100 * time.Millisecond)
	}
	pod("lws-0-1", "lws-0")
	kubetest.Eventually(t, 90*time.Second, "the LeaderWorkerSet's 2 pods bound to the 2 nodes", func() (bool, error) {
		pods, err := livePods(cs, sel)
		return err == nil && len(pods) == 2 && slices.Equal(nodesOf(pods), first), err
	})
	u, err := dc.Resource(lwsGVR).Namespace(ns).Get(ctx, "lws", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st, pl := u.GetAnnotations()[kube.AnnState], u.GetAnnotations()[kube.AnnPlacement]; st != kube.StateRunning || pl != fmt.Sprintf("%s=1,%s=1", first[0], first[1]) {
		t.Fatalf("LeaderWorkerSet: state %q, placement %q; want running on both nodes", st, pl)
	}
}
