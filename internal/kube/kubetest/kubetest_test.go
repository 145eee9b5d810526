package kubetest

import (
	"context"
	"os"
	"regexp"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
)

// The versions in scripts/kube-tools are the ones cplane looks for.
func TestVersionsMatchScript(t *testing.T) {
	data, err := os.ReadFile("../../../scripts/kube-tools")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"KUBE_VERSION": cplane.KubeVersion, "ETCD_VERSION": cplane.EtcdVersion, "KWOK_VERSION": cplane.KwokVersion} {
		m := regexp.MustCompile(`(?m)^` + name + `=(\S+)$`).FindSubmatch(data)
		if m == nil || string(m[1]) != want {
			t.Errorf("scripts/kube-tools: %s=%q, cplane says %q", name, m, want)
		}
	}
}

func gpuPod(ns, name string, gpus int64) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			SchedulerName: "gandiva",
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "main", Image: "trainer",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{GPU: *resource.NewQuantity(gpus, resource.DecimalSI)}}}},
		},
	}
}

func bind(ctx context.Context, cs kubernetes.Interface, ns, pod, node string) error {
	return cs.CoreV1().Pods(ns).Bind(ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pod},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}, metav1.CreateOptions{})
}

func phaseIs(ctx context.Context, cs kubernetes.Interface, ns, name string, want corev1.PodPhase) func() (bool, error) {
	return func() (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return p.Status.Phase == want, nil
	}
}

// The smoke test of the local control plane: kwok GPU nodes become Ready; a
// pod for the gandiva scheduler is bound through the binding subresource and
// kwok runs it; a second binding of the same pod fails (what makes Gandiva's
// bindings safe to retry after a crash); a test ends pods as it likes; a
// deleted pod goes away; a user with no rights is refused.
func TestSmoke(t *testing.T) {
	p := Start(t, cplane.Options{Kwok: true, Users: []cplane.User{{Name: "nobody"}}})
	cs := Client(t, p)
	ctx := context.Background()
	nodes := AddNodes(t, cs, Nodes{Count: 2, GPUs: 4})
	Namespace(t, cs, "team-a")
	n, err := cs.CoreV1().Nodes().Get(ctx, nodes[1], metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if q := n.Status.Allocatable[GPU]; q.Value() != 4 {
		t.Fatalf("node %s allocatable %s = %v, want 4", n.Name, GPU, q.String())
	}

	for _, name := range []string{"a", "b"} {
		if _, err := cs.CoreV1().Pods("team-a").Create(ctx, gpuPod("team-a", name, 2), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// nothing schedules a pod for "gandiva" but Gandiva: it stays Pending, unbound
	time.Sleep(200 * time.Millisecond)
	if pod, _ := cs.CoreV1().Pods("team-a").Get(ctx, "a", metav1.GetOptions{}); pod.Spec.NodeName != "" || pod.Status.Phase != corev1.PodPending {
		t.Fatalf("pod a: node %q phase %s before any binding", pod.Spec.NodeName, pod.Status.Phase)
	}
	if err := bind(ctx, cs, "team-a", "a", nodes[1]); err != nil {
		t.Fatalf("binding: %v", err)
	}
	Eventually(t, 30*time.Second, "pod a Running", phaseIs(ctx, cs, "team-a", "a", corev1.PodRunning))
	err = bind(ctx, cs, "team-a", "a", nodes[0])
	if !apierrors.IsConflict(err) {
		t.Fatalf("second binding of a bound pod: %v, want a conflict", err)
	}
	if pod, _ := cs.CoreV1().Pods("team-a").Get(ctx, "a", metav1.GetOptions{}); pod.Spec.NodeName != nodes[1] {
		t.Fatalf("pod a is on %q after a refused second binding, want %s", pod.Spec.NodeName, nodes[1])
	}

	// the test says when a pod's containers end
	patch := []byte(`{"metadata":{"annotations":{"kubetest.gandiva.io/exit":"0"}}}`)
	if _, err := cs.CoreV1().Pods("team-a").Patch(ctx, "a", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	Eventually(t, 30*time.Second, "pod a Succeeded", phaseIs(ctx, cs, "team-a", "a", corev1.PodSucceeded))

	// a deleted pod on a kwok node ends (Failed, as a killed container) and goes away
	if err := bind(ctx, cs, "team-a", "b", nodes[0]); err != nil {
		t.Fatal(err)
	}
	Eventually(t, 30*time.Second, "pod b Running", phaseIs(ctx, cs, "team-a", "b", corev1.PodRunning))
	if err := cs.CoreV1().Pods("team-a").Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	Eventually(t, 30*time.Second, "pod b gone", func() (bool, error) {
		_, err := cs.CoreV1().Pods("team-a").Get(ctx, "b", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})

	// a token with no role bound gets nothing
	nobody, err := kubernetes.NewForConfig(p.UserConfig("nobody"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nobody.CoreV1().Pods("team-a").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("listing pods without rights: %v, want forbidden", err)
	}
}

// The Job controller of the local control plane creates a Job's pods,
// deletes them when the Job is suspended (kwok ends them) and creates new
// ones when it is resumed; with a pod failure policy that ignores
// disruptions, the suspension counts no failure.
func TestJobController(t *testing.T) {
	p := Start(t, cplane.Options{Kwok: true, Controllers: true})
	cs := Client(t, p)
	ctx := context.Background()
	nodes := AddNodes(t, cs, Nodes{Count: 1, GPUs: 8})
	Namespace(t, cs, "team-a")
	tmpl := gpuPod("", "", 1)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "train"},
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To[int32](2), Completions: ptr.To[int32](2),
			CompletionMode: ptr.To(batchv1.IndexedCompletion),
			PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
				Action:          batchv1.PodFailurePolicyActionIgnore,
				OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}},
			}}},
			Template: corev1.PodTemplateSpec{Spec: tmpl.Spec},
		},
	}
	if _, err := cs.BatchV1().Jobs("team-a").Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := func(bound bool) func() ([]corev1.Pod, error) {
		return func() ([]corev1.Pod, error) {
			l, err := cs.CoreV1().Pods("team-a").List(ctx, metav1.ListOptions{LabelSelector: "job-name=train"})
			if err != nil {
				return nil, err
			}
			var out []corev1.Pod
			for _, p := range l.Items {
				if p.DeletionTimestamp == nil && (!bound || p.Spec.NodeName != "") {
					out = append(out, p)
				}
			}
			return out, nil
		}
	}
	var first []corev1.Pod
	Eventually(t, 30*time.Second, "the Job's 2 pods", func() (bool, error) {
		var err error
		first, err = pods(false)()
		return len(first) == 2, err
	})
	// an Indexed Job's pod learns its index from JOB_COMPLETION_INDEX, which
	// the Job controller sets from a pod field the Kubelet resolves (a
	// torch.distributed rank: examples/pytorch/ddp.py)
	indices := map[string]bool{}
	for _, pod := range first {
		for _, e := range pod.Spec.Containers[0].Env {
			if e.Name == "JOB_COMPLETION_INDEX" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
				indices[fieldOf(&pod, e.ValueFrom.FieldRef.FieldPath)] = true
			}
		}
	}
	if !indices["0"] || !indices["1"] {
		t.Fatalf("JOB_COMPLETION_INDEX of the Indexed Job's 2 pods as the Kubelet resolves it: %v, want 0 and 1", indices)
	}
	for _, pod := range first {
		if err := bind(ctx, cs, "team-a", pod.Name, nodes[0]); err != nil {
			t.Fatal(err)
		}
		Eventually(t, 30*time.Second, pod.Name+" Running", phaseIs(ctx, cs, "team-a", pod.Name, corev1.PodRunning))
		// as Gandiva does before it suspends a Job
		pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget,
			Status: corev1.ConditionTrue, Reason: "PreemptionByScheduler", LastTransitionTime: metav1.Now()})
		if _, err := cs.CoreV1().Pods("team-a").UpdateStatus(ctx, &pod, metav1.UpdateOptions{}); err != nil {
			// kwok may have written the status since: take the latest and retry once
			cur, _ := cs.CoreV1().Pods("team-a").Get(ctx, pod.Name, metav1.GetOptions{})
			cur.Status.Conditions = append(cur.Status.Conditions, pod.Status.Conditions[len(pod.Status.Conditions)-1])
			if _, err := cs.CoreV1().Pods("team-a").UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := cs.BatchV1().Jobs("team-a").Patch(ctx, "train", types.MergePatchType, []byte(`{"spec":{"suspend":true}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	Eventually(t, 30*time.Second, "the suspended Job's pods gone", func() (bool, error) {
		l, err := cs.CoreV1().Pods("team-a").List(ctx, metav1.ListOptions{LabelSelector: "job-name=train"})
		return err == nil && len(l.Items) == 0, err
	})
	if _, err := cs.BatchV1().Jobs("team-a").Patch(ctx, "train", types.MergePatchType, []byte(`{"spec":{"suspend":false}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	Eventually(t, 30*time.Second, "2 new pods", func() (bool, error) {
		l, err := pods(false)()
		if len(l) != 2 {
			return false, err
		}
		for _, p := range l {
			for _, f := range first {
				if p.UID == f.UID {
					return false, nil
				}
			}
		}
		return true, nil
	})
	j, err := cs.BatchV1().Jobs("team-a").Get(ctx, "train", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if j.Status.Failed != 0 {
		t.Fatalf("the suspension counted %d failed pods, want 0 (pod failure policy ignores disruptions)", j.Status.Failed)
	}
}
