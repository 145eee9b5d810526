// Package workloads tests Gandiva's workload kinds other than the batch/v1
// Job against their real controllers on the local control plane (a package
// of its own so that these tests run beside internal/kube's).
package workloads

import (
	"context"
	"fmt"
	"log/slog"
	"os"
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
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/gandiva-sched/gandiva/internal/kube"
	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
	"github.com/gandiva-sched/gandiva/internal/kube/kubetest"
)

var jobSetGVR = schema.GroupVersionResource{Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "jobsets"}

const (
	ns          = "team-a"
	jobSetLabel = "jobset.sigs.k8s.io/jobset-name"
)

type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Logf("%s", b)
	return len(b), nil
}

// runGandiva runs `gandiva kube` in the test process until the test ends.
func runGandiva(t *testing.T, p *cplane.Plane, o kube.Options) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	lvl := slog.LevelInfo
	if os.Getenv("GANDIVA_KUBE_DEBUG") != "" {
		lvl = slog.LevelDebug
	}
	o.Log = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: lvl}))
	o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 4*time.Second, 3*time.Second, 200*time.Millisecond
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); kube.Run(ctx, p.Config(), o) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// podTemplate is a pod of one GPU scheduled by Gandiva (kwok plays it).
func podTemplate() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		SchedulerName: kube.SchedulerName,
		RestartPolicy: corev1.RestartPolicyNever,
		Containers: []corev1.Container{{Name: "main", Image: "trainer",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{kube.GPU: resource.MustParse("1")}}}},
	}}
}

// ignoreDisruptions is a pod failure policy under which a pod that Gandiva
// marked disrupted (a suspension) counts no failure.
func ignoreDisruptions() *batchv1.PodFailurePolicy {
	return &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
		Action:          batchv1.PodFailurePolicyActionIgnore,
		OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}},
	}}}
}

// jobSet is a JobSet of replicas child Jobs of one pod each.
func jobSet(t *testing.T, name string, replicas int) *unstructured.Unstructured {
	t.Helper()
	tmpl := batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
		Parallelism: ptr.To[int32](1), Completions: ptr.To[int32](1), BackoffLimit: ptr.To[int32](0),
		PodFailurePolicy: ignoreDisruptions(), Template: podTemplate()}}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&tmpl)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
		"metadata": map[string]any{"namespace": ns, "name": name},
		"spec": map[string]any{"replicatedJobs": []any{
			map[string]any{"name": "workers", "replicas": int64(replicas), "template": m},
		}},
	}}
}

// livePods are the pods with the label selector sel that are not ending.
func livePods(cs kubernetes.Interface, sel string) ([]corev1.Pod, error) {
	l, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: sel})
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

// nodesOf is the sorted nodes of the pods, "" for an unbound one.
func nodesOf(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Spec.NodeName)
	}
	slices.Sort(out)
	return out
}

// A JobSet of 2 replicas × 1 pod, its pods naming schedulerName gandiva,
// with the real JobSet controller: Gandiva schedules it as ONE gang (its
// child Jobs are no workloads of their own), bound whole; a job of a
// higher Tiresias queue preempts it by the JobSet's spec.suspend (the
// controller suspends its child Jobs and their pods go); it then resumes,
// with new pods, on two other nodes (uncordoned meanwhile), Gandiva's
// decision on the JobSet's annotations throughout.
func TestJobSetBoundWholeSuspendedResumedElsewhere(t *testing.T) {
	p := kubetest.Start(t, cplane.Options{Kwok: true, Controllers: true})
	kubetest.StartControllers(t, p, kubetest.JobSetController)
	cs := kubetest.Client(t, p)
	dc, err := dynamic.NewForConfig(p.Config())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	first := kubetest.AddNodes(t, cs, kubetest.Nodes{Count: 2, GPUs: 1})
	// two more nodes, cordoned until js is suspended
	second := kubetest.AddNodes(t, cs, kubetest.Nodes{First: 2, Count: 2, GPUs: 1})
	cordon := func(nodes []string, on bool) {
		for _, n := range nodes {
			body := fmt.Sprintf(`{"spec":{"unschedulable":%v}}`, on)
			if _, err := cs.CoreV1().Nodes().Patch(ctx, n, types.MergePatchType, []byte(body), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	cordon(second, true)
	kubetest.Namespace(t, cs, ns)
	kubetest.Namespace(t, cs, "gandiva-system")
	// a job that has had 10 GPU-seconds of service drops to Tiresias' lower queue
	runGandiva(t, p, kube.Options{Policy: "tiresias-l:limits=10/100000"})

	if _, err := dc.Resource(jobSetGVR).Namespace(ns).Create(ctx, jobSet(t, "js", 2), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	getJS := func() (*unstructured.Unstructured, error) {
		return dc.Resource(jobSetGVR).Namespace(ns).Get(ctx, "js", metav1.GetOptions{})
	}
	state := func(u *unstructured.Unstructured) (string, string, bool) {
		s, _, _ := unstructured.NestedBool(u.Object, "spec", "suspend")
		return u.GetAnnotations()[kube.AnnState], u.GetAnnotations()[kube.AnnPlacement], s
	}
	var pods []corev1.Pod
	kubetest.Eventually(t, 90*time.Second, "JobSet js's 2 pods bound to the 2 nodes", func() (bool, error) {
		pods, err = livePods(cs, jobSetLabel+"=js")
		return err == nil && len(pods) == 2 && slices.Equal(nodesOf(pods), first), err
	})
	js, err := getJS()
	if err != nil {
		t.Fatal(err)
	}
	if st, pl, susp := state(js); st != kube.StateRunning || pl != "gpu-0=1,gpu-1=1" || susp {
		t.Fatalf("JobSet js: state %q, placement %q, suspend %v; want running on gpu-0=1,gpu-1=1", st, pl, susp)
	}
	// its child Jobs are the JobSet's, never patched by Gandiva as Jobs of their own
	jobs, err := cs.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{LabelSelector: jobSetLabel + "=js"})
	if err != nil || len(jobs.Items) != 2 {
		t.Fatalf("child Jobs of js: %v (err %v), want 2", len(jobs.Items), err)
	}
	for _, j := range jobs.Items {
		if _, ok := j.Annotations[kube.AnnState]; ok {
			t.Errorf("child Job %s carries %s: scheduled as a workload of its own", j.Name, kube.AnnState)
		}
	}

	// js passes 10 GPU-seconds of service (2 GPUs, 6 s of wall time at
	// least): the lower queue; hi arrives in the top queue (where it stays
	// for 10 s of wall time at least) and needs one of js's GPUs
	time.Sleep(6 * time.Second)
	hi := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hi"},
		Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](1), Completions: ptr.To[int32](1), BackoffLimit: ptr.To[int32](0),
			PodFailurePolicy: ignoreDisruptions(), Template: podTemplate()}}
	if _, err := cs.BatchV1().Jobs(ns).Create(ctx, hi, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 90*time.Second, "js suspended (spec.suspend, state suspended), its pods gone, hi's pod bound", func() (bool, error) {
		js, err := getJS()
		if err != nil {
			return false, err
		}
		st, _, susp := state(js)
		jsPods, err := livePods(cs, jobSetLabel+"=js")
		if err != nil {
			return false, err
		}
		hiPods, err := livePods(cs, "batch.kubernetes.io/job-name=hi")
		if err != nil {
			return false, err
		}
		return st == kube.StateSuspended && susp && len(jsPods) == 0 && len(hiPods) == 1 && slices.Contains(first, hiPods[0].Spec.NodeName),
			fmt.Errorf("js: state %q, suspend %v, pods on %q; hi's pods on %q", st, susp, nodesOf(jsPods), nodesOf(hiPods))
	})

	// js no longer fits its old nodes (hi holds one): it resumes on the
	// two others once they are uncordoned
	cordon(second, false)
	kubetest.Eventually(t, 90*time.Second, "js resumed on other nodes, its 2 new pods bound where its placement says", func() (bool, error) {
		js, err := getJS()
		if err != nil {
			return false, err
		}
		st, pl, susp := state(js)
		jsPods, err := livePods(cs, jobSetLabel+"=js")
		if err != nil {
			return false, err
		}
		var want []string
		for _, part := range strings.Split(pl, ",") {
			n, _, _ := strings.Cut(part, "=")
			want = append(want, n)
		}
		moved := slices.Contains(want, second[0]) || slices.Contains(want, second[1])
		return st == kube.StateRunning && moved && !susp && len(jsPods) == 2 && slices.Equal(nodesOf(jsPods), want),
			fmt.Errorf("state %q, placement %q, suspend %v, pods on %q", st, pl, susp, nodesOf(jsPods))
	})
	// the new pods are new (the controller recreated them after the suspension)
	now, err := livePods(cs, jobSetLabel+"=js")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range now {
		for _, o := range pods {
			if p.UID == o.UID {
				t.Errorf("pod %s ran through the suspension", p.Name)
			}
		}
	}
}
