package workloads

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/gandiva-sched/gandiva/internal/kube"
	"github.com/gandiva-sched/gandiva/internal/kube/kubetest"
)

// A JobSet of 2 replicas × 1 pod, its pods naming schedulerName gandiva,
// with the real JobSet controller: Gandiva schedules it as ONE gang (its
// child Jobs are no workloads of their own), bound whole; a job of a
// higher Tiresias queue preempts it by the JobSet's spec.suspend (the
// controller suspends its child Jobs and their pods go); it then resumes,
// with new pods, on two other nodes (uncordoned meanwhile), Gandiva's
// decision on the JobSet's annotations throughout.
func TestJobSetBoundWholeSuspendedResumedElsewhere(t *testing.T) {
	p, cs, dc := Plane(t, kubetest.JobSetController)
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
	kubetest.Namespace(t, cs, NS)
	kubetest.Namespace(t, cs, "gandiva-system")
	// a job that has had 10 GPU-seconds of service drops to Tiresias' lower queue
	RunGandiva(t, p, kube.Options{Policy: "tiresias-l:limits=10/100000"})

	if _, err := dc.Resource(JobSetGVR).Namespace(NS).Create(ctx, JobSet(t, "js", 2, batchv1.JobSpec{Parallelism: ptr.To[int32](1), Completions: ptr.To[int32](1), BackoffLimit: ptr.To[int32](0),
		PodFailurePolicy: IgnoreDisruptions(), Template: PodTemplate()}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	getJS := func() (*unstructured.Unstructured, error) {
		return dc.Resource(JobSetGVR).Namespace(NS).Get(ctx, "js", metav1.GetOptions{})
	}
	state := func(u *unstructured.Unstructured) (string, string, bool) {
		s, _, _ := unstructured.NestedBool(u.Object, "spec", "suspend")
		return u.GetAnnotations()[kube.AnnState], u.GetAnnotations()[kube.AnnPlacement], s
	}
	var pods []corev1.Pod
	var err error
	kubetest.Eventually(t, 90*time.Second, "JobSet js's 2 pods bound to the 2 nodes", func() (bool, error) {
		pods, err = LivePods(cs, JobSetLabel+"=js")
		return err == nil && len(pods) == 2 && slices.Equal(NodesOf(pods), first), err
	})
	js, err := getJS()
	if err != nil {
		t.Fatal(err)
	}
	if st, pl, susp := state(js); st != kube.StateRunning || pl != "gpu-0=1,gpu-1=1" || susp {
		t.Fatalf("JobSet js: state %q, placement %q, suspend %v; want running on gpu-0=1,gpu-1=1", st, pl, susp)
	}
	// its child Jobs are the JobSet's, never patched by Gandiva as Jobs of their own
	jobs, err := cs.BatchV1().Jobs(NS).List(ctx, metav1.ListOptions{LabelSelector: JobSetLabel + "=js"})
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
	if _, err := cs.BatchV1().Jobs(NS).Create(ctx, GangJob("hi", 1, true), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 90*time.Second, "js suspended (spec.suspend, state suspended), its pods gone, hi's pod bound", func() (bool, error) {
		js, err := getJS()
		if err != nil {
			return false, err
		}
		st, _, susp := state(js)
		jsPods, err := LivePods(cs, JobSetLabel+"=js")
		if err != nil {
			return false, err
		}
		hiPods, err := LivePods(cs, "batch.kubernetes.io/job-name=hi")
		if err != nil {
			return false, err
		}
		return st == kube.StateSuspended && susp && len(jsPods) == 0 && len(hiPods) == 1 && slices.Contains(first, hiPods[0].Spec.NodeName),
			fmt.Errorf("js: state %q, suspend %v, pods on %q; hi's pods on %q", st, susp, NodesOf(jsPods), NodesOf(hiPods))
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
		jsPods, err := LivePods(cs, JobSetLabel+"=js")
		if err != nil {
			return false, err
		}
		var want []string
		for _, part := range strings.Split(pl, ",") {
			n, _, _ := strings.Cut(part, "=")
			want = append(want, n)
		}
		moved := slices.Contains(want, second[0]) || slices.Contains(want, second[1])
		return st == kube.StateRunning && moved && !susp && len(jsPods) == 2 && slices.Equal(NodesOf(jsPods), want),
			fmt.Errorf("state %q, placement %q, suspend %v, pods on %q", st, pl, susp, NodesOf(jsPods))
	})
	// the new pods are new (the controller recreated them after the suspension)
	now, err := LivePods(cs, JobSetLabel+"=js")
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
