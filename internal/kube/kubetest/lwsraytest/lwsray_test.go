// Package lwsraytest checks that the real LeaderWorkerSet controller and the
// real KubeRay operator, as kubetest.StartControllers runs them (built from
// third_party/ by scripts/kube-workloads), act on the local control plane:
// they create their pods, and suspending and resuming a workload deletes and
// recreates them.
package lwsraytest

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
	"github.com/gandiva-sched/gandiva/internal/kube/kubetest"
)

const ns = "smoke"

var (
	lwsGVR        = schema.GroupVersionResource{Group: "leaderworkerset.x-k8s.io", Version: "v1", Resource: "leaderworkersets"}
	rayJobGVR     = schema.GroupVersionResource{Group: "ray.io", Version: "v1", Resource: "rayjobs"}
	rayClusterGVR = schema.GroupVersionResource{Group: "ray.io", Version: "v1", Resource: "rayclusters"}
)

// plane starts a control plane and the named workload controllers. No
// kube-scheduler and no nodes: the pods stay Pending, unbound, as they would
// wait for Gandiva.
func plane(t *testing.T, names ...string) (kubernetes.Interface, dynamic.Interface) {
	t.Helper()
	p := kubetest.Start(t, cplane.Options{})
	kubetest.StartControllers(t, p, names...)
	cs := kubetest.Client(t, p)
	dc := kubetest.Dynamic(t, p)
	kubetest.Namespace(t, cs, ns)
	return cs, dc
}

// livePods returns the pods matching selector that are not being deleted,
// by name.
func livePods(cs kubernetes.Interface, selector string) (map[string]corev1.Pod, error) {
	pods, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	out := map[string]corev1.Pod{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			out[p.Name] = p
		}
	}
	return out, nil
}

// waitPods waits until exactly the named pods match selector, and returns them.
func waitPods(t *testing.T, cs kubernetes.Interface, selector string, names ...string) map[string]corev1.Pod {
	t.Helper()
	sort.Strings(names)
	want := strings.Join(names, ",")
	var got map[string]corev1.Pod
	kubetest.Eventually(t, 2*time.Minute, fmt.Sprintf("pods %s=[%s]", selector, want), func() (bool, error) {
		var err error
		got, err = livePods(cs, selector)
		if err != nil {
			return false, err
		}
		have := make([]string, 0, len(got))
		for n := range got {
			have = append(have, n)
		}
		sort.Strings(have)
		return strings.Join(have, ",") == want, fmt.Errorf("pods [%s]", strings.Join(have, ","))
	})
	return got
}

// waitCount waits until n pods match selector, and returns them.
func waitCount(t *testing.T, cs kubernetes.Interface, selector string, n int) map[string]corev1.Pod {
	t.Helper()
	var got map[string]corev1.Pod
	kubetest.Eventually(t, 2*time.Minute, fmt.Sprintf("%d pods %s", n, selector), func() (bool, error) {
		var err error
		got, err = livePods(cs, selector)
		if err != nil {
			return false, err
		}
		return len(got) == n, fmt.Errorf("%d pods", len(got))
	})
	return got
}

// patch merge-patches a workload's spec.
func patch(t *testing.T, dc dynamic.Interface, gvr schema.GroupVersionResource, name string, spec map[string]any) {
	t.Helper()
	b, err := json.Marshal(map[string]any{"spec": spec})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dc.Resource(gvr).Namespace(ns).Patch(context.Background(), name, types.MergePatchType, b, metav1.PatchOptions{}); err != nil {
		t.Fatalf("patching %s %s with %s: %v", gvr.Resource, name, b, err)
	}
}

// notAgain fails if a pod of before is among after (same UID): a pod that
// was recreated is a new object.
func notAgain(t *testing.T, before, after map[string]corev1.Pod) {
	t.Helper()
	for n, p := range after {
		if b, ok := before[n]; ok && b.UID == p.UID {
			t.Errorf("pod %s (uid %s) was not recreated", n, p.UID)
		}
	}
}

func container(name string) map[string]any {
	return map[string]any{"name": name, "image": "busybox", "command": []any{"sleep", "3600"}}
}

// TestLeaderWorkerSet: the real LeaderWorkerSet controller, with upstream's
// webhooks and Kubernetes' StatefulSet controller and garbage collector,
// makes a leader pod per group and size-1 worker pods, labelled by the
// webhooks; scaling the groups to 0 (how a LeaderWorkerSet is suspended: it
// has no spec.suspend) deletes every pod, and scaling back recreates them.
func TestLeaderWorkerSet(t *testing.T) {
	cs, dc := plane(t, kubetest.LWSController)
	lws := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "leaderworkerset.x-k8s.io/v1",
		"kind":       "LeaderWorkerSet",
		"metadata":   map[string]any{"name": "serve", "namespace": ns},
		"spec": map[string]any{
			"replicas": int64(2),
			"leaderWorkerTemplate": map[string]any{
				"size":           int64(3),
				"leaderTemplate": map[string]any{"spec": map[string]any{"containers": []any{container("leader")}}},
				"workerTemplate": map[string]any{"spec": map[string]any{"containers": []any{container("worker")}}},
			},
		},
	}}
	if _, err := dc.Resource(lwsGVR).Namespace(ns).Create(context.Background(), lws, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sel := kubetest.LWSNameLabel + "=serve"
	all := []string{"serve-0", "serve-0-1", "serve-0-2", "serve-1", "serve-1-1", "serve-1-2"}
	pods := waitPods(t, cs, sel, all...)
	for _, n := range all {
		p := pods[n]
		leader := !strings.Contains(strings.TrimPrefix(n, "serve-"), "-")
		group := strings.Split(strings.TrimPrefix(n, "serve-"), "-")[0]
		worker := "0"
		if !leader {
			worker = strings.Split(strings.TrimPrefix(n, "serve-"), "-")[1]
		}
		// The group index comes from the controller, the worker index from
		// its pod webhook (upstream's, served here).
		if g := p.Labels["leaderworkerset.sigs.k8s.io/group-index"]; g != group {
			t.Errorf("pod %s: group-index %q, want %q", n, g, group)
		}
		if w := p.Labels["leaderworkerset.sigs.k8s.io/worker-index"]; w != worker {
			t.Errorf("pod %s: worker-index %q, want %q (labels %v)", n, w, worker, p.Labels)
		}
		if len(p.OwnerReferences) != 1 || p.OwnerReferences[0].Kind != "StatefulSet" {
			t.Errorf("pod %s: owners %v, want one StatefulSet", n, p.OwnerReferences)
		}
	}

	patch(t, dc, lwsGVR, "serve", map[string]any{"replicas": int64(0)})
	waitCount(t, cs, sel, 0)
	patch(t, dc, lwsGVR, "serve", map[string]any{"replicas": int64(2)})
	notAgain(t, pods, waitPods(t, cs, sel, all...))
}

// TestRayJob: the real KubeRay operator makes a RayJob's RayCluster and the
// cluster's head and worker pods; spec.suspend=true deletes the RayCluster
// and (by the garbage collector) its pods, and resuming makes a new cluster
// with new pods.
func TestRayJob(t *testing.T) {
	cs, dc := plane(t, kubetest.KubeRayController)
	rj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "ray.io/v1",
		"kind":       "RayJob",
		"metadata":   map[string]any{"name": "train", "namespace": ns},
		"spec": map[string]any{
			"entrypoint": "python train.py",
			// The operator refuses to suspend a RayJob that would keep its
			// cluster after the job (ValidationFailed).
			"shutdownAfterJobFinishes": true,
			"rayClusterSpec": map[string]any{
				"headGroupSpec": map[string]any{
					"rayStartParams": map[string]any{},
					"template":       map[string]any{"spec": map[string]any{"containers": []any{container("ray-head")}}},
				},
				"workerGroupSpecs": []any{map[string]any{
					"groupName":      "gpu",
					"replicas":       int64(2),
					"minReplicas":    int64(2),
					"maxReplicas":    int64(2),
					"rayStartParams": map[string]any{},
					"template":       map[string]any{"spec": map[string]any{"containers": []any{container("ray-worker")}}},
				}},
			},
		},
	}}
	if _, err := dc.Resource(rayJobGVR).Namespace(ns).Create(context.Background(), rj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cluster := func() string {
		var name string
		kubetest.Eventually(t, 2*time.Minute, "the RayJob's RayCluster", func() (bool, error) {
			got, err := dc.Resource(rayJobGVR).Namespace(ns).Get(context.Background(), "train", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			name, _, _ = unstructured.NestedString(got.Object, "status", "rayClusterName")
			if name == "" {
				return false, nil
			}
			_, err = dc.Resource(rayClusterGVR).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
			return err == nil, err
		})
		return name
	}
	first := cluster()
	sel := "ray.io/cluster=" + first
	pods := waitCount(t, cs, sel, 3)
	nodeTypes := map[string]int{}
	for n, p := range pods {
		nodeTypes[p.Labels["ray.io/node-type"]]++
		if len(p.OwnerReferences) != 1 || p.OwnerReferences[0].Kind != "RayCluster" || p.OwnerReferences[0].Name != first {
			t.Errorf("pod %s: owners %v, want RayCluster %s", n, p.OwnerReferences, first)
		}
	}
	if nodeTypes["head"] != 1 || nodeTypes["worker"] != 2 {
		t.Errorf("pods by ray.io/node-type: %v, want 1 head and 2 workers", nodeTypes)
	}

	patch(t, dc, rayJobGVR, "train", map[string]any{"suspend": true})
	kubetest.Eventually(t, 2*time.Minute, "the RayJob Suspended", func() (bool, error) {
		got, err := dc.Resource(rayJobGVR).Namespace(ns).Get(context.Background(), "train", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		s, _, _ := unstructured.NestedString(got.Object, "status", "jobDeploymentStatus")
		return s == "Suspended", fmt.Errorf("jobDeploymentStatus %q", s)
	})
	waitCount(t, cs, sel, 0)
	kubetest.Eventually(t, 2*time.Minute, "RayCluster "+first+" deleted", func() (bool, error) {
		_, err := dc.Resource(rayClusterGVR).Namespace(ns).Get(context.Background(), first, metav1.GetOptions{})
		return err != nil && strings.Contains(err.Error(), "not found"), err
	})

	patch(t, dc, rayJobGVR, "train", map[string]any{"suspend": false})
	second := cluster()
	again := waitCount(t, cs, "ray.io/cluster="+second, 3)
	notAgain(t, pods, again)
}
