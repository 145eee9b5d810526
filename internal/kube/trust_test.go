package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
	"github.com/gandiva-sched/gandiva/internal/kube/kubetest"
	"github.com/gandiva-sched/gandiva/internal/kube/shared"
)

// The scheduler does not trust a gandiva.io/assign it did not write (on a
// cluster without deploy/base/pods-vap.yaml, where a pod's owner can
// write it): an assignment written over its own (other GPUs, a fake
// suspension, more GPUs than the pod asks for) is replaced by its own,
// at a generation above the other's so that the agent follows it, with a
// Warning Event.
func TestSharedAssignNotTrusted(t *testing.T) {
	t.Parallel() // each has a control plane of its own; they mostly wait
	p := kubetest.Start(t, cplane.Options{Kwok: true, Controllers: true})
	cs := kubetest.Client(t, p)
	ctx := context.Background()
	kubetest.AddNodes(t, cs, kubetest.Nodes{Prefix: "shared-", Count: 1, GPUs: 2, Labels: map[string]string{shared.LabelSharedNode: "true"}})
	kubetest.Namespace(t, cs, "team-a")
	kubetest.Namespace(t, cs, "gandiva-system")
	startAgentHarness(t, cs, 1<<40, 10, false)
	runGandiva(t, p, Options{Policy: "fifo"})
	createJob(t, cs, jobSpec{ns: "team-a", name: "a", pods: 1, gpus: 1, shared: true})

	var pod corev1.Pod
	var own shared.Assign
	kubetest.Eventually(t, 60*time.Second, "job a bound, running", func() (bool, error) {
		b, _, err := jobPods(cs, "team-a", "a")
		if len(b) != 1 {
			return false, err
		}
		pod = b[0]
		a, err := shared.ParseAssign(pod.Annotations[shared.AnnAssign])
		st, ok := statusOf(&pod)
		own = a
		return err == nil && a.State == shared.Running && ok && st.State == shared.StatusRunning && st.Gen == a.Gen, err
	})
	other := []int{1}
	if own.GPUs[0] == 1 {
		other = []int{0}
	}
	for _, forged := range []shared.Assign{
		{State: shared.Running, GPUs: other},          // other GPUs
		{State: shared.Suspended, GPUs: own.GPUs},     // a fake suspension
		{State: shared.Running, GPUs: []int{0, 1}},    // more GPUs than it asks for
		{State: shared.Running, GPUs: other, Gen: 50}, // far ahead
	} {
		cur, err := cs.CoreV1().Pods("team-a").Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		at, err := shared.ParseAssign(cur.Annotations[shared.AnnAssign])
		if err != nil {
			t.Fatal(err)
		}
		if forged.Gen == 0 {
			forged.Gen = at.Gen + 1
		}
		body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{shared.AnnAssign: forged.String()}}})
		if _, err := cs.CoreV1().Pods("team-a").Patch(ctx, pod.Name, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		kubetest.Eventually(t, 30*time.Second, fmt.Sprintf("the forged %s replaced by gandiva's assignment", forged), func() (bool, error) {
			cur, err := cs.CoreV1().Pods("team-a").Get(ctx, pod.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			a, err := shared.ParseAssign(cur.Annotations[shared.AnnAssign])
			if err != nil {
				return false, err
			}
			if a.Gen > forged.Gen && (a.State != shared.Running || !shared.Equal(a.GPUs, own.GPUs)) {
				return false, fmt.Errorf("gandiva wrote %s over the forged %s, want %s on GPUs %v", a, forged, shared.Running, own.GPUs)
			}
			return a.Gen > forged.Gen, fmt.Errorf("assignment %s", a)
		})
	}
	kubetest.Eventually(t, 30*time.Second, "a Warning AssignmentChanged on job a", func() (bool, error) {
		v, err := Describe(ctx, cs, "team-a", "a")
		if err != nil {
			return false, err
		}
		for _, e := range v.Events {
			if e.Reason == "AssignmentChanged" {
				t.Logf("event: %s", e.Message)
				return true, nil
			}
		}
		return false, nil
	})
}
