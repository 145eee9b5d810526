package workloads

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/gandiva-sched/gandiva/internal/kube"
	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
	"github.com/gandiva-sched/gandiva/internal/kube/kubetest"
)

var (
	rayJobGVR = schema.GroupVersionResource{Group: "ray.io", Version: "v1", Resource: "rayjobs"}
	crdGVR    = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
)

// installCRD creates the CustomResourceDefinition in file (relative to the
// repository root) and waits until it is established.
func installCRD(t *testing.T, dc dynamic.Interface, file string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", file))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(b, &u.Object); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	ctx := context.Background()
	if _, err := dc.Resource(crdGVR).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 60*time.Second, "CRD "+u.GetName()+" established", func() (bool, error) {
		c, err := dc.Resource(crdGVR).Get(ctx, u.GetName(), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(c.Object, "status", "conditions")
		for _, x := range conds {
			m, _ := x.(map[string]any)
			if m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
}

// rayJob is a RayJob whose head is left to kube-scheduler (no GPU) and
// whose one worker group is 2 pods of a GPU each, scheduled by Gandiva.
func rayJob(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	head := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "head", Image: "ray"}}}}
	hm, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&head)
	if err != nil {
		t.Fatal(err)
	}
	wt := podTemplate()
	wm, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&wt)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "ray.io/v1", "kind": "RayJob",
		"metadata": map[string]any{"namespace": ns, "name": name,
			"annotations": map[string]any{kube.AnnPreemptible: "true"}},
		"spec": map[string]any{"entrypoint": "python train.py", "shutdownAfterJobFinishes": true,
			"rayClusterSpec": map[string]any{
				"headGroupSpec": map[string]any{"rayStartParams": map[string]any{}, "template": hm},
				"workerGroupSpecs": []any{map[string]any{"groupName": "gpu", "replicas": int64(2), "minReplicas": int64(0),
					"maxReplicas": int64(2), "rayStartParams": map[string]any{}, "template": wm}},
			}},
	}}
}

// playKubeRay does what KubeRay does with a RayJob's worker pods, until
// the test ends: while the RayJob is not suspended, a RayCluster
// NAME-xxxxx (named in its status) with 2 worker pods; when suspended, the
// cluster's pods deleted (KubeRay deletes the RayCluster).
func playKubeRay(t *testing.T, cs kubernetes.Interface, dc dynamic.Interface, name string) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		gen := 0
		for ctx.Err() == nil {
			time.Sleep(100 * time.Millisecond)
			rj, err := dc.Resource(rayJobGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				continue
			}
			susp, _, _ := unstructured.NestedBool(rj.Object, "spec", "suspend")
			cluster, _, _ := unstructured.NestedString(rj.Object, "status", "rayClusterName")
			sel := "ray.io/cluster"
			pods, err := livePods(cs, sel)
			if err != nil {
				continue
			}
			switch {
			case susp && cluster != "":
				for _, p := range pods {
					cs.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
				}
				unstructured.SetNestedField(rj.Object, "", "status", "rayClusterName")
				unstructured.SetNestedField(rj.Object, "Suspended", "status", "jobDeploymentStatus")
				dc.Resource(rayJobGVR).Namespace(ns).UpdateStatus(ctx, rj, metav1.UpdateOptions{})
			case !susp && cluster == "" && len(pods) == 0:
				gen++
				cluster = fmt.Sprintf("%s-c%04d", name, gen)
				unstructured.SetNestedField(rj.Object, cluster, "status", "rayClusterName")
				unstructured.SetNestedField(rj.Object, "Running", "status", "jobDeploymentStatus")
				if _, err := dc.Resource(rayJobGVR).Namespace(ns).UpdateStatus(ctx, rj, metav1.UpdateOptions{}); err != nil {
					gen--
					continue
				}
				for i := range 2 {
					pt := podTemplate()
					p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-worker-%d", cluster, i),
						Labels: map[string]string{"ray.io/cluster": cluster, "ray.io/node-type": "worker", "ray.io/group": "gpu"},
						OwnerReferences: []metav1.OwnerReference{{APIVersion: "ray.io/v1", Kind: "RayCluster", Name: cluster,
							UID: types.UID(fmt.Sprintf("rc-%s", cluster)), Controller: ptr.To(true)}}},
						Spec: pt.Spec}
					cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
				}
			}
		}
	}()
}

// A RayJob (its CRD from KubeRay's release in third_party; the test does
// what KubeRay's operator does with the pods, playKubeRay, so that it runs
// without the operator) whose 2 worker pods name Gandiva: bound whole, suspended by spec.suspend
// when a job of a higher Tiresias queue arrives, resumed on other nodes
// (its old ones cordoned) as a new cluster.
func TestRayJobBoundWholeSuspendedResumedElsewhere(t *testing.T) {
	p := kubetest.Start(t, cplane.Options{Kwok: true, Controllers: true})
	cs := kubetest.Client(t, p)
	dc, err := dynamic.NewForConfig(p.Config())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	installCRD(t, dc, "third_party/kuberay/ray-operator/config/crd/ray.io_rayjobs.yaml")
	first := kubetest.AddNodes(t, cs, kubetest.Nodes{Count: 2, GPUs: 1})
	kubetest.Namespace(t, cs, ns)
	kubetest.Namespace(t, cs, "gandiva-system")
	runGandiva(t, p, kube.Options{Policy: "tiresias-l:limits=1/100000"})
	if _, err := dc.Resource(rayJobGVR).Namespace(ns).Create(ctx, rayJob(t, "rj"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	playKubeRay(t, cs, dc, "rj")
	getRJ := func() (string, string, bool, error) {
		u, err := dc.Resource(rayJobGVR).Namespace(ns).Get(ctx, "rj", metav1.GetOptions{})
		if err != nil {
			return "", "", false, err
		}
		s, _, _ := unstructured.NestedBool(u.Object, "spec", "suspend")
		return u.GetAnnotations()[kube.AnnState], u.GetAnnotations()[kube.AnnPlacement], s, nil
	}
	var pods []corev1.Pod
	kubetest.Eventually(t, 90*time.Second, "RayJob rj's 2 worker pods bound to the 2 nodes", func() (bool, error) {
		pods, err = livePods(cs, "ray.io/cluster")
		return err == nil && len(pods) == 2 && slices.Equal(nodesOf(pods), first), err
	})
	if st, pl, susp, err := getRJ(); err != nil || st != kube.StateRunning || pl != "gpu-0=1,gpu-1=1" || susp {
		t.Fatalf("RayJob rj: state %q, placement %q, suspend %v (%v); want running on gpu-0=1,gpu-1=1", st, pl, susp, err)
	}

	time.Sleep(1500 * time.Millisecond) // rj passes 1 GPU-second: the lower queue
	hi := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hi"},
		Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](2), Completions: ptr.To[int32](2), BackoffLimit: ptr.To[int32](0),
			PodFailurePolicy: ignoreDisruptions(), Template: podTemplate()}}
	if _, err := cs.BatchV1().Jobs(ns).Create(ctx, hi, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 90*time.Second, "rj suspended, its pods gone, hi's 2 pods bound", func() (bool, error) {
		st, _, susp, err := getRJ()
		if err != nil {
			return false, err
		}
		rjPods, err := livePods(cs, "ray.io/cluster")
		if err != nil {
			return false, err
		}
		hiPods, err := livePods(cs, "batch.kubernetes.io/job-name=hi")
		if err != nil {
			return false, err
		}
		return st == kube.StateSuspended && susp && len(rjPods) == 0 && len(hiPods) == 2, nil
	})

	for _, n := range first {
		if _, err := cs.CoreV1().Nodes().Patch(ctx, n, "application/merge-patch+json", []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	second := kubetest.AddNodes(t, cs, kubetest.Nodes{First: 2, Count: 2, GPUs: 1})
	if err := cs.BatchV1().Jobs(ns).Delete(ctx, "hi", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationOrphan)}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)},
		metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=hi"}); err != nil {
		t.Fatal(err)
	}
	var seen string // what the last look saw, for a failure
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("rj at the last look: %s", seen)
		}
	})
	kubetest.Eventually(t, 90*time.Second, "rj resumed on gpu-2 and gpu-3 as a new cluster, its 2 pods bound there", func() (bool, error) {
		st, pl, susp, err := getRJ()
		if err != nil {
			return false, err
		}
		rjPods, err := livePods(cs, "ray.io/cluster")
		if err != nil {
			return false, err
		}
		seen = fmt.Sprintf("state %q placement %q suspend %v, live pods on %v", st, pl, susp, nodesOf(rjPods))
		return st == kube.StateRunning && pl == "gpu-2=1,gpu-3=1" && !susp && len(rjPods) == 2 && slices.Equal(nodesOf(rjPods), second), nil
	})
	now, err := livePods(cs, "ray.io/cluster")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range now {
		for _, o := range pods {
			if p.UID == o.UID || p.Labels["ray.io/cluster"] == o.Labels["ray.io/cluster"] {
				t.Errorf("pod %s (cluster %s) ran through the suspension", p.Name, p.Labels["ray.io/cluster"])
			}
		}
	}
}
