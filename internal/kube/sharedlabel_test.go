package kube

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
	"github.com/gandiva-sched/gandiva/internal/kube/kubetest"
	"github.com/gandiva-sched/gandiva/internal/kube/shared"
)

// labelShared sets (or, with on false, removes) a node's
// gandiva.io/shared=true label.
func labelShared(t testing.TB, cs kubernetes.Interface, node string, on bool) {
	t.Helper()
	v := `"true"`
	if !on {
		v = "null"
	}
	body := []byte(`{"metadata":{"labels":{"` + shared.LabelSharedNode + `":` + v + `}}}`)
	if _, err := cs.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitingMessage is the PodScheduled=False message of a Job's first
// pending pod ("" if none has one).
func waitingMessage(cs kubernetes.Interface, ns, job string) (string, error) {
	_, all, err := jobPods(cs, ns, job)
	if err != nil {
		return "", err
	}
	for _, p := range all {
		if c := podCondition(&p, corev1.PodScheduled); p.Spec.NodeName == "" && c != nil && c.Status == corev1.ConditionFalse {
			return c.Message, nil
		}
	}
	return "", nil
}

// A node labelled gandiva.io/shared=true while an exclusive job runs there
// stays one node of the engine (the dashboard shows the cluster's 2 nodes
// and 4 GPUs, not a third node); the exclusive job keeps running there
// until it ends (no suspension, no Event blaming the policy), while a
// shared job waits saying why; once the exclusive job has ended, the
// reservation takes the node's GPUs and the shared job runs there.
func TestSharedLabelWhileRunning(t *testing.T) {
	t.Parallel() // a control plane of its own; it mostly waits
	p := kubetest.Start(t, cplane.Options{Kwok: true, Controllers: true})
	cs := kubetest.Client(t, p)
	ctx := context.Background()
	kubetest.AddNodes(t, cs, kubetest.Nodes{Count: 2, GPUs: 2})
	kubetest.Namespace(t, cs, "team-a")
	kubetest.Namespace(t, cs, "gandiva-system")
	h := startAgentHarness(t, cs, 1<<40, 10, false) // the shared job runs until the test ends
	d := NewDashboard()
	runGandiva(t, p, Options{Policy: "tiresias-l", Dashboard: d})
	createJob(t, cs, jobSpec{ns: "team-a", name: "e1", pods: 1, gpus: 2, preemptible: true})
	createJob(t, cs, jobSpec{ns: "team-a", name: "e2", pods: 1, gpus: 2, preemptible: true})
	nodeOf := map[string]string{}
	kubetest.Eventually(t, 60*time.Second, "e1 and e2 run, one on each node", func() (bool, error) {
		for _, name := range []string{"e1", "e2"} {
			b, _, err := jobPods(cs, "team-a", name)
			if err != nil || len(b) != 1 {
				return false, err
			}
			nodeOf[name] = b[0].Spec.NodeName
		}
		return nodeOf["e1"] != nodeOf["e2"], nil
	})
	a := nodeOf["e1"]
	labelShared(t, cs, a, true)
	createJob(t, cs, jobSpec{ns: "team-a", name: "s", pods: 1, gpus: 2, shared: true})

	// the scheduler has seen the label and told s why it waits
	var msg string
	kubetest.Eventually(t, 60*time.Second, "the scheduler sees "+a+" shared, and s is told why it waits", func() (bool, error) {
		seen := false
		if err := d.with(func(s *Scheduler, _ uint64) error {
			seen = s.nodes[a] != nil && s.nodes[a].shared
			return nil
		}); err != nil {
			return false, nil // not leading yet
		}
		m, err := waitingMessage(cs, "team-a", "s")
		msg = m
		return seen && m != "", err
	})
	t.Logf("s waits: %s", msg)
	if !strings.Contains(msg, a) || !strings.Contains(msg, "exclusive") {
		t.Errorf("s's waiting reason %q does not say that the exclusive job on shared node %s holds its GPUs", msg, a)
	}
	sum, err := d.Summary(ctx, api.Principal{Admin: true})
	if err != nil {
		t.Fatal(err)
	}
	nodes := 0
	for _, n := range sum.Nodes {
		nodes += n
	}
	if nodes != 2 || sum.GPUs != 4 {
		t.Errorf("the dashboard shows %d nodes (%v) and %d GPUs; the cluster has 2 nodes of 2 GPUs", nodes, sum.Nodes, sum.GPUs)
	}
	d.with(func(s *Scheduler, _ uint64) error {
		if n := len(s.c.Servers); n != 2 {
			t.Errorf("the engine has %d servers for 2 nodes", n)
		}
		return nil
	})
	// e1 runs on: not suspended, no Event saying the policy suspended it
	b, _, err := jobPods(cs, "team-a", "e1")
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 1 || b[0].Spec.NodeName != a || b[0].DeletionTimestamp != nil {
		t.Errorf("e1's pods on %s: %d (want its one pod, not leaving)", a, len(b))
	}
	j, err := cs.BatchV1().Jobs("team-a").Get(ctx, "e1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if j.Spec.Suspend != nil && *j.Spec.Suspend {
		t.Errorf("e1 was suspended when its node became shared (annotations %v)", j.Annotations)
	}
	noSuspension := func(name string) {
		t.Helper()
		v, err := Describe(ctx, cs, "team-a", name)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range v.Events {
			if e.Reason == "Preempted" || e.Reason == "Suspended" || e.Reason == "Migrating" {
				t.Errorf("%s: Event %s %q after node %s became shared", name, e.Reason, e.Message, a)
			}
		}
	}
	noSuspension("e1")
	if r := reservation(t, cs, a); r != nil {
		t.Errorf("reservation %s created on %s while exclusive job e1 holds its GPUs", r.Name, a)
	}

	// e1 ends: the reservation holds the node, s runs there
	finishPods(t, cs, "team-a", "e1")
	kubetest.Eventually(t, 60*time.Second, "e1 completes", jobDone(cs, "team-a", "e1"))
	kubetest.Eventually(t, 60*time.Second, "the reservation holds "+a+"'s GPUs, s runs there on GPUs [0 1]", func() (bool, error) {
		r := reservation(t, cs, a)
		b, _, err := jobPods(cs, "team-a", "s")
		if r == nil || len(b) != 1 {
			return false, err
		}
		as, err := shared.ParseAssign(b[0].Annotations[shared.AnnAssign])
		return gpusOf(&r.Spec) == 2 && b[0].Spec.NodeName == a && err == nil && as.State == shared.Running && slices.Equal(as.GPUs, []int{0, 1}), nil
	})
	b, _, err = jobPods(cs, "team-a", "e2")
	if err != nil || len(b) != 1 || b[0].Spec.NodeName != nodeOf["e2"] {
		t.Errorf("e2 moved or ended (pods %d, err %v)", len(b), err)
	}
	noSuspension("e2")
	sum, err = d.Summary(ctx, api.Principal{Admin: true})
	if err != nil {
		t.Fatal(err)
	}
	if sum.GPUs != 4 {
		t.Errorf("the dashboard shows %d GPUs, want 4", sum.GPUs)
	}
	h.check(t)
}

// Shared jobs (gandiva.io/gpus) on a cluster without shared nodes wait
// saying that no node is labelled gandiva.io/shared=true and how to label
// one. Once a node is labelled (the label alone: another scheduler's pod
// holds one of its GPUs, so no reservation is made and no pod changes),
// one asking for more GPUs than the shared nodes have says how many they
// have, and the other says which shared node is not Gandiva's yet and
// why; when that pod is gone, the reservation is made and the job runs.
func TestSharedJobWaitsSayingWhy(t *testing.T) {
	t.Parallel() // a control plane of its own; it mostly waits
	p := kubetest.Start(t, cplane.Options{Kwok: true, Controllers: true})
	cs := kubetest.Client(t, p)
	ctx := context.Background()
	nodes := kubetest.AddNodes(t, cs, kubetest.Nodes{Count: 2, GPUs: 2})
	kubetest.Namespace(t, cs, "team-a")
	kubetest.Namespace(t, cs, "gandiva-system")
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "other"},
		Spec: corev1.PodSpec{NodeName: nodes[0], Containers: []corev1.Container{{Name: "c", Image: "x",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{GPU: resource.MustParse("1")}}}}}}
	if _, err := cs.CoreV1().Pods("team-a").Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h := startAgentHarness(t, cs, 1<<40, 10, false)
	runGandiva(t, p, Options{Policy: "tiresias-l"})
	createJob(t, cs, jobSpec{ns: "team-a", name: "s2", pods: 1, gpus: 2, shared: true})
	createJob(t, cs, jobSpec{ns: "team-a", name: "s4", pods: 1, gpus: 4, shared: true})
	waitFor := func(job, what string, ok func(string) bool) string {
		t.Helper()
		var msg string
		kubetest.Eventually(t, 2*time.Minute, job+"'s waiting reason "+what, func() (bool, error) {
			m, err := waitingMessage(cs, "team-a", job)
			msg = m
			return m != "" && ok(m), err
		})
		t.Logf("%s waits: %s", job, msg)
		return msg
	}
	for _, job := range []string{"s2", "s4"} {
		waitFor(job, "names the shared-node label and how to set it", func(m string) bool {
			return strings.Contains(m, "no node is labelled "+shared.LabelSharedNode+"=true") &&
				strings.Contains(m, "kubectl label node NODE "+shared.LabelSharedNode+"=true")
		})
	}
	labelShared(t, cs, nodes[0], true)
	want := fmt.Sprintf("needs 4 GPUs; the shared nodes (labelled %s=true) it may run on have 2 in all", shared.LabelSharedNode)
	waitFor("s4", "counts the shared nodes' GPUs", func(m string) bool { return strings.Contains(m, want) })
	want = nodes[0] + " (pods of other schedulers hold 1 of its GPUs)"
	waitFor("s2", "says which shared node is not Gandiva's yet", func(m string) bool { return strings.Contains(m, want) })
	if r := reservation(t, cs, nodes[0]); r != nil {
		t.Fatalf("reservation %s made while another scheduler's pod holds a GPU of %s", r.Name, nodes[0])
	}
	if err := cs.CoreV1().Pods("team-a").Delete(ctx, "other", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
		t.Fatal(err)
	}
	if err := kubetest.Wait(2*time.Minute, func() (bool, error) {
		b, _, err := jobPods(cs, "team-a", "s2")
		return len(b) == 1 && b[0].Spec.NodeName == nodes[0] && reservation(t, cs, nodes[0]) != nil, err
	}); err != nil {
		m, _ := waitingMessage(cs, "team-a", "s2")
		t.Fatalf("s2 does not run on %s, with its reservation: %v; s2 waits: %s", nodes[0], err, m)
	}
	h.check(t)
}
