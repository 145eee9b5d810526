// Package workloads tests Gandiva's workload kinds other than the batch/v1
// Job against their real controllers on the local control plane (a package
// of its own so that these tests run beside internal/kube's). Its non-test
// code is what its tests and those of internal/kube/workloads/trainers
// (the same kinds running trainers that checkpoint) share: running
// `gandiva kube` in the test, the kinds' resources and CRDs, and KubeRay's
// part played by the test.
package workloads

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
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

// The resources of the workload kinds, and of CRDs.
var (
	TrainingRuntimeGVR = schema.GroupVersionResource{Group: "trainer.kubeflow.org", Version: "v1alpha1", Resource: "trainingruntimes"}
	JobSetGVR          = schema.GroupVersionResource{Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "jobsets"}
	RayJobGVR          = schema.GroupVersionResource{Group: "ray.io", Version: "v1", Resource: "rayjobs"}
	LWSGVR             = schema.GroupVersionResource{Group: "leaderworkerset.x-k8s.io", Version: "v1", Resource: "leaderworkersets"}
	TrainJobGVR        = schema.GroupVersionResource{Group: "trainer.kubeflow.org", Version: "v1alpha1", Resource: "trainjobs"}
	CRDGVR             = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	// PyTorchJobGVR is the Kubeflow Training Operator v1's PyTorchJobs
	// (its controller: ctl.PyTorch).
	PyTorchJobGVR = schema.GroupVersionResource{Group: "kubeflow.org", Version: "v1", Resource: "pytorchjobs"}
)

const (
	// NS is the namespace of the tests' workloads.
	NS = "team-a"
	// JobSetLabel names a pod's or child Job's JobSet.
	JobSetLabel = "jobset.sigs.k8s.io/jobset-name"
)

type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Logf("%s", b)
	return len(b), nil
}

// Plane starts a local control plane with kwok and the Job controller,
// and the named workload controllers, for the test; it returns the plane
// and admin clients of it.
func Plane(t testing.TB, controllers ...string) (*cplane.Plane, kubernetes.Interface, dynamic.Interface) {
	t.Helper()
	p := kubetest.Start(t, cplane.Options{Kwok: true, Controllers: true})
	if len(controllers) > 0 {
		kubetest.StartControllers(t, p, controllers...)
	}
	return p, kubetest.Client(t, p), kubetest.Dynamic(t, p)
}

// RunGandiva runs `gandiva kube` with o in the test process until the
// test ends, logging to the test (debug level when GANDIVA_KUBE_DEBUG is
// set).
func RunGandiva(t testing.TB, p *cplane.Plane, o kube.Options) {
	t.Helper()
	runGandiva(t, p, o, false)
}

// RunGandivaChecked is RunGandiva that also fails the test when `gandiva
// kube` returns an error before the test ends.
func RunGandivaChecked(t testing.TB, p *cplane.Plane, o kube.Options) {
	t.Helper()
	runGandiva(t, p, o, true)
}

func runGandiva(t testing.TB, p *cplane.Plane, o kube.Options, check bool) {
	ctx, cancel := context.WithCancel(context.Background())
	lvl := slog.LevelInfo
	if os.Getenv("GANDIVA_KUBE_DEBUG") != "" {
		lvl = slog.LevelDebug
	}
	o.Log = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: lvl}))
	o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 4*time.Second, 3*time.Second, 200*time.Millisecond
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := kube.Run(ctx, p.Config(), o); err != nil && check && ctx.Err() == nil {
			t.Errorf("gandiva kube: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// PodTemplate is a pod of one GPU scheduled by Gandiva (kwok plays it).
func PodTemplate() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		SchedulerName: kube.SchedulerName,
		RestartPolicy: corev1.RestartPolicyNever,
		Containers: []corev1.Container{{Name: "main", Image: "trainer",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{kube.GPU: resource.MustParse("1")}}}},
	}}
}

// IgnoreDisruptions is a pod failure policy under which a pod that Gandiva
// marked disrupted (a suspension) counts no failure.
func IgnoreDisruptions() *batchv1.PodFailurePolicy {
	return &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
		Action:          batchv1.PodFailurePolicyActionIgnore,
		OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}},
	}}}
}

// GangJob is a batch/v1 Job of pods pods of PodTemplate (kwok plays them),
// preemptible when preemptible (its pod failure policy ignores
// disruptions).
func GangJob(name string, pods int32, preemptible bool) *batchv1.Job {
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: NS, Name: name},
		Spec: batchv1.JobSpec{Parallelism: ptr.To(pods), Completions: ptr.To(pods), BackoffLimit: ptr.To[int32](0),
			Template: PodTemplate()}}
	if preemptible {
		j.Spec.PodFailurePolicy = IgnoreDisruptions()
	}
	return j
}

// JobSet is a JobSet whose one replicated job "workers" is replicas child
// Jobs of spec each.
func JobSet(t testing.TB, name string, replicas int, spec batchv1.JobSpec) *unstructured.Unstructured {
	t.Helper()
	m, err := kruntime.DefaultUnstructuredConverter.ToUnstructured(&batchv1.JobTemplateSpec{Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
		"metadata": map[string]any{"namespace": NS, "name": name},
		"spec": map[string]any{"replicatedJobs": []any{
			map[string]any{"name": "workers", "replicas": int64(replicas), "template": m},
		}},
	}}
}

// LivePods are the pods of NS with the label selector sel that are not
// ending.
func LivePods(cs kubernetes.Interface, sel string) ([]corev1.Pod, error) {
	l, err := cs.CoreV1().Pods(NS).List(context.Background(), metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			out = append(out, p)
		}
	}
	return out, nil
}

// NodesOf is the sorted nodes of the pods, "" for an unbound one.
func NodesOf(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Spec.NodeName)
	}
	slices.Sort(out)
	return out
}

// RepoRoot is the repository's root directory.
func RepoRoot(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("workloads: no source path of RepoRoot")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// Docs are the YAML documents of file (relative to the repository root),
// empty ones left out.
func Docs(t testing.TB, file string) []*unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(RepoRoot(t), file))
	if err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(string(b), "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
	return out
}

// InstallCRD creates the CustomResourceDefinition in file (relative to the
// repository root) and waits until it is established.
func InstallCRD(t testing.TB, dc dynamic.Interface, file string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(RepoRoot(t), file))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(b, &u.Object); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	ctx := context.Background()
	if _, err := dc.Resource(CRDGVR).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.WaitCRDEstablished(t, dc, u.GetName(), 60*time.Second)
}

// HasCondition reports whether object u's status.conditions has one of
// type typ whose status is True.
func HasCondition(u *unstructured.Unstructured, typ string) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, x := range conds {
		m, _ := x.(map[string]any)
		if m["type"] == typ && m["status"] == "True" {
			return true
		}
	}
	return false
}

// RayJob is a RayJob whose head is left to kube-scheduler (no GPU) and
// whose one worker group is 2 pods of worker, preemptible
// (gandiva.io/preemptible).
func RayJob(t testing.TB, name string, worker corev1.PodTemplateSpec) *unstructured.Unstructured {
	t.Helper()
	head := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "head", Image: "ray"}}}}
	hm, err := kruntime.DefaultUnstructuredConverter.ToUnstructured(&head)
	if err != nil {
		t.Fatal(err)
	}
	wm, err := kruntime.DefaultUnstructuredConverter.ToUnstructured(&worker)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "ray.io/v1", "kind": "RayJob",
		"metadata": map[string]any{"namespace": NS, "name": name,
			"annotations": map[string]any{kube.AnnPreemptible: "true"}},
		"spec": map[string]any{"entrypoint": "python train.py", "shutdownAfterJobFinishes": true,
			"rayClusterSpec": map[string]any{
				"headGroupSpec": map[string]any{"rayStartParams": map[string]any{}, "template": hm},
				"workerGroupSpecs": []any{map[string]any{"groupName": "gpu", "replicas": int64(2), "minReplicas": int64(0),
					"maxReplicas": int64(2), "rayStartParams": map[string]any{}, "template": wm}},
			}},
	}}
}

// PlayKubeRay does what KubeRay does with RayJob name's worker pods, until
// the test ends: while the RayJob is not suspended, a RayCluster
// NAME-cNNNN (named in its status) with 2 worker pods, worker(i) the
// template of the i-th; when suspended, the cluster's pods deleted (KubeRay
// deletes the RayCluster).
func PlayKubeRay(t testing.TB, cs kubernetes.Interface, dc dynamic.Interface, name string, worker func(i int) corev1.PodTemplateSpec) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		gen := 0
		for ctx.Err() == nil {
			time.Sleep(100 * time.Millisecond)
			rj, err := dc.Resource(RayJobGVR).Namespace(NS).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				continue
			}
			susp, _, _ := unstructured.NestedBool(rj.Object, "spec", "suspend")
			cluster, _, _ := unstructured.NestedString(rj.Object, "status", "rayClusterName")
			pods, err := LivePods(cs, "ray.io/cluster")
			if err != nil {
				continue
			}
			switch {
			case susp && cluster != "":
				for _, p := range pods {
					cs.CoreV1().Pods(NS).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
				}
				unstructured.SetNestedField(rj.Object, "", "status", "rayClusterName")
				unstructured.SetNestedField(rj.Object, "Suspended", "status", "jobDeploymentStatus")
				dc.Resource(RayJobGVR).Namespace(NS).UpdateStatus(ctx, rj, metav1.UpdateOptions{})
			case !susp && cluster == "" && len(pods) == 0:
				gen++
				cluster = fmt.Sprintf("%s-c%04d", name, gen)
				unstructured.SetNestedField(rj.Object, cluster, "status", "rayClusterName")
				unstructured.SetNestedField(rj.Object, "Running", "status", "jobDeploymentStatus")
				if _, err := dc.Resource(RayJobGVR).Namespace(NS).UpdateStatus(ctx, rj, metav1.UpdateOptions{}); err != nil {
					gen--
					continue
				}
				for i := range 2 {
					pt := worker(i)
					labels := map[string]string{"ray.io/cluster": cluster, "ray.io/node-type": "worker", "ray.io/group": "gpu"}
					for k, v := range pt.Labels {
						labels[k] = v
					}
					p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: NS, Name: fmt.Sprintf("%s-worker-%d", cluster, i),
						Labels: labels,
						OwnerReferences: []metav1.OwnerReference{{APIVersion: "ray.io/v1", Kind: "RayCluster", Name: cluster,
							UID: types.UID(fmt.Sprintf("rc-%s", cluster)), Controller: ptr.To(true)}}},
						Spec: pt.Spec}
					cs.CoreV1().Pods(NS).Create(ctx, p, metav1.CreateOptions{})
				}
			}
		}
	}()
}

// LWSPod is pod name of LeaderWorkerSet "lws"'s group 0, worker index
// index (0: the leader), made of tmpl as the LWS controller's StatefulSets
// make it: the LWS labels, and owned by StatefulSet owner.
func LWSPod(name, owner string, index int, tmpl corev1.PodTemplateSpec) *corev1.Pod {
	labels := map[string]string{kubetest.LWSNameLabel: "lws", "leaderworkerset.sigs.k8s.io/group-index": "0",
		LWSWorkerIndexLabel: fmt.Sprint(index)}
	for k, v := range tmpl.Labels {
		labels[k] = v
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: NS, Name: name, Labels: labels,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: owner,
			UID: types.UID("sts-" + owner), Controller: ptr.To(true)}}},
		Spec: tmpl.Spec}
}

// LWSWorkerIndexLabel is the label the LWS controller puts on a group's
// pods: the pod's index in its group.
const LWSWorkerIndexLabel = "leaderworkerset.sigs.k8s.io/worker-index"

// LWS is LeaderWorkerSet "lws" of one group of 2 pods of tmpl.
func LWS(t testing.TB, tmpl corev1.PodTemplateSpec) *unstructured.Unstructured {
	t.Helper()
	wm, err := kruntime.DefaultUnstructuredConverter.ToUnstructured(&tmpl)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
		"metadata": map[string]any{"namespace": NS, "name": "lws"},
		"spec": map[string]any{"replicas": int64(1), "leaderWorkerTemplate": map[string]any{
			"size": int64(2), "workerTemplate": wm}},
	}}
}

// Moved is what Move watches of a workload.
type Moved struct {
	// Name is the workload's name, for messages.
	Name string
	// Pods is the label selector of its pods.
	Pods string
	// Get returns its gandiva.io/state and gandiva.io/placement, and
	// whether its kind's suspend field is set.
	Get func() (state, placement string, suspended bool, err error)
	// Bound, if set, runs once its first pods are bound (what a kind
	// checks beside them).
	Bound func(pods []corev1.Pod)
	// SameRun, if set, says whether a pod after the move is of the same
	// run as one before it (beyond the same UID).
	SameRun func(before, after corev1.Pod) bool
}

// Move is the kinds' "move": workload w, made by the test on a plane of
// two one-GPU nodes first (gpu-0 and gpu-1) under `gandiva kube` with
// tiresias-l:limits=1/100000, must be bound whole there, running; after
// its first GPU-second (the lower queue) a Job of the top queue, hi (2
// pods, not preemptible), arrives: w must be suspended (its state and
// its kind's suspend field), its pods gone, hi's 2 pods bound. Then first
// is cordoned, gpu-2 and gpu-3 added, and hi deleted: w must resume there,
// running on gpu-2=1,gpu-3=1 with 2 pods bound there, none of them a pod
// (or, by SameRun, of the run) before the move. hi stays not preemptible
// because it too drops to the lower queue at once, where w, which came
// first, would take its nodes back before they are cordoned.
func Move(t *testing.T, cs kubernetes.Interface, w Moved, first []string) {
	t.Helper()
	ctx := context.Background()
	var seen string // what the last look saw, for a failure
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s at the last look: %s", w.Name, seen)
		}
	})
	look := func() (string, string, bool, []corev1.Pod, error) {
		st, pl, susp, err := w.Get()
		if err != nil {
			return "", "", false, nil, err
		}
		pods, err := LivePods(cs, w.Pods)
		seen = fmt.Sprintf("state %q placement %q suspend %v, live pods on %q", st, pl, susp, NodesOf(pods))
		return st, pl, susp, pods, err
	}
	var before []corev1.Pod
	kubetest.Eventually(t, 120*time.Second, w.Name+"'s 2 pods bound to "+strings.Join(first, " and ")+", running there", func() (bool, error) {
		st, pl, susp, pods, err := look()
		before = pods
		return err == nil && st == kube.StateRunning && pl == "gpu-0=1,gpu-1=1" && !susp &&
			len(pods) == 2 && slices.Equal(NodesOf(pods), first), err
	})
	if w.Bound != nil {
		w.Bound(before)
	}

	time.Sleep(1500 * time.Millisecond) // w passes 1 GPU-second: the lower queue
	if _, err := cs.BatchV1().Jobs(NS).Create(ctx, GangJob("hi", 2, false), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 120*time.Second, w.Name+" suspended, its pods gone, hi's 2 pods bound", func() (bool, error) {
		st, _, susp, pods, err := look()
		if err != nil {
			return false, err
		}
		hiPods, err := LivePods(cs, "batch.kubernetes.io/job-name=hi")
		if err != nil {
			return false, err
		}
		return st == kube.StateSuspended && susp && len(pods) == 0 && len(hiPods) == 2, nil
	})

	for _, n := range first {
		if _, err := cs.CoreV1().Nodes().Patch(ctx, n, types.MergePatchType, []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	second := kubetest.AddNodes(t, cs, kubetest.Nodes{First: 2, Count: 2, GPUs: 1})
	if err := cs.BatchV1().Jobs(NS).Delete(ctx, "hi", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationOrphan)}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Pods(NS).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)},
		metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=hi"}); err != nil {
		t.Fatal(err)
	}
	var after []corev1.Pod
	kubetest.Eventually(t, 120*time.Second, w.Name+" resumed on "+strings.Join(second, " and ")+", its 2 new pods bound there", func() (bool, error) {
		st, pl, susp, pods, err := look()
		after = pods
		return err == nil && st == kube.StateRunning && pl == "gpu-2=1,gpu-3=1" && !susp &&
			len(pods) == 2 && slices.Equal(NodesOf(pods), second), err
	})
	for _, a := range after {
		for _, b := range before {
			if a.UID == b.UID || w.SameRun != nil && w.SameRun(b, a) {
				t.Errorf("pod %s (before: %s) ran through the suspension", a.Name, b.Name)
			}
		}
	}
}
