package trainers

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gandiva-sched/gandiva/internal/kube"
	"github.com/gandiva-sched/gandiva/internal/kube/kubetest"
	wl "github.com/gandiva-sched/gandiva/internal/kube/workloads"
)

// A LeaderWorkerSet of one group of 2 pods running ddp.py under the real
// LWS controller (v0.10.0, with its webhooks) and Kubernetes' StatefulSet
// controller: the controller makes the group's pods (the leader's
// StatefulSet, and the worker StatefulSet its leader pod owns), each rank
// its pod's worker-index label (set by the LWS pod webhook, read through
// the downward API); Gandiva binds the group whole on the 2 one-GPU nodes.
//
// A LeaderWorkerSet has no spec.suspend, so Gandiva never preempts it:
// a 2-pod Job created while it trains, in Tiresias' top queue (the set has
// dropped to the lower one, as the gangs the other kinds' tests preempt
// in the same setting), waits ("Waiting"): the ranks are never
// signalled, both run to the end and exit 0, and the final weights are
// bit-identical to an uninterrupted run's.
//
// An LWS serves: its StatefulSets make the pods that end again, so the
// ended group comes back, bound where it ran (the set keeps its GPUs), and
// would train again; the Job still waits, and gets the nodes once the set
// is deleted. Rank 0 therefore writes its result and loss log under its
// pod's UID, and the test checks its first pod's.
func TestLWSDDPToCompletion(t *testing.T) {
	c := start(t, 2, []string{kubetest.LWSController})
	ctx := context.Background()
	tmpl := c.template("lws", "node",
		corev1.EnvVar{Name: "RANK", ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['" + wl.LWSWorkerIndexLabel + "']"}}},
		corev1.EnvVar{Name: "POD_UID", ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.uid"}}})
	// a StatefulSet's pods must restart Always (the API server refuses
	// Never in a StatefulSet's template)
	tmpl.Spec.RestartPolicy = corev1.RestartPolicyAlways
	cmd := tmpl.Spec.Containers[0].Command
	for i := 0; i+1 < len(cmd); i++ {
		switch cmd[i] {
		case "--out":
			cmd[i+1] = filepath.Join(c.dir, "lws-$(POD_UID).json")
		case "--loss-log":
			cmd[i+1] = filepath.Join(c.dir, "lws-$(POD_UID).loss")
		}
	}
	if _, err := c.dc.Resource(wl.LWSGVR).Namespace(wl.NS).Create(ctx, wl.LWS(t, tmpl), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("processes of lws:\n%s", kubetest.LogTails(c.procs("lws")))
		}
	})

	// the group's first pods train: rank 0 (the leader, lws-0) logged 10
	// mini-batches
	var first []*kubetest.Process
	kubetest.Eventually(t, 3*time.Minute, "the LeaderWorkerSet's first mini-batches", func() (bool, error) {
		first = c.procs("lws")
		if len(first) < 2 {
			return false, fmt.Errorf("%d processes", len(first))
		}
		first = first[:2]
		i := slices.IndexFunc(first, func(pr *kubetest.Process) bool { return pr.Pod == "lws-0" })
		if i < 0 {
			return false, fmt.Errorf("no process of the leader pod lws-0 among %s, %s", first[0].Pod, first[1].Pod)
		}
		b, err := os.ReadFile(filepath.Join(c.dir, "lws-"+string(first[i].UID)+".loss"))
		return err == nil && strings.Count(string(b), "\n") >= 10, err
	})
	pods := []string{first[0].Pod, first[1].Pod}
	slices.Sort(pods)
	if !slices.Equal(pods, []string{"lws-0", "lws-0-1"}) {
		t.Fatalf("the ranks run in pods %v, want the LWS controller's lws-0 (leader) and lws-0-1 (worker)", pods)
	}
	leader := first[slices.IndexFunc(first, func(pr *kubetest.Process) bool { return pr.Pod == "lws-0" })]
	nodes := []string{first[0].Node, first[1].Node}
	slices.Sort(nodes)
	if !slices.Equal(nodes, c.nodes) {
		t.Errorf("the ranks run on %v, want one on each of %v", nodes, c.nodes)
	}
	for _, name := range pods {
		p, err := c.cs.CoreV1().Pods(wl.NS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ref := metav1.GetControllerOf(p); ref == nil || ref.Kind != "StatefulSet" {
			t.Errorf("pod %s: controller %v, want a StatefulSet (the LWS controller's)", name, ref)
		}
	}
	st, _, err := c.stateOf(wl.LWSGVR, "lws")
	if err != nil || st != kube.StateRunning {
		t.Errorf("LeaderWorkerSet lws: state %q (%v), want %q", st, err, kube.StateRunning)
	}

	// a job of the top queue waits for the set's GPUs: it is never taken
	// from the set while its ranks run
	if _, err := c.cs.BatchV1().Jobs(wl.NS).Create(ctx, wl.GangJob("urgent", 2, false), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var reason string
	kubetest.Eventually(t, 4*time.Minute, "the LeaderWorkerSet's first ranks ended", func() (bool, error) {
		urgent, err := c.gangPods("urgent")
		if err != nil {
			return false, err
		}
		j, err := c.cs.BatchV1().Jobs(wl.NS).Get(ctx, "urgent", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		prs := c.procs("lws")[:2] // read after urgent's pods: what ran then
		bound := slices.IndexFunc(urgent, func(p corev1.Pod) bool { return p.Spec.NodeName != "" }) >= 0
		if bound && !ended(prs) {
			t.Fatalf("Job urgent bound while the LeaderWorkerSet's ranks run (nodes %v)", wl.NodesOf(urgent))
		}
		if !ended(prs) {
			if r := j.Annotations[kube.AnnReason]; r != "" {
				reason = r
			}
		}
		return ended(prs), nil
	})
	first = c.procs("lws")[:2]
	for _, pr := range first {
		if pr.Exit != 0 {
			t.Errorf("rank %s exited %d, want 0 (never signalled)", pr.Pod, pr.Exit)
		}
	}
	// (Gandiva may not have written it yet when the ranks end on a slow
	// machine; it is waited for below)
	if reason != "" && !strings.HasPrefix(reason, kube.ReasonWaiting+":") {
		t.Errorf("Job urgent's %s while the set trained: %q, want %s: ...", kube.AnnReason, reason, kube.ReasonWaiting)
	}
	t.Logf("Job urgent while the LeaderWorkerSet trained: %q", reason)
	c.check(t, "lws-"+string(leader.UID), 0)

	// the set serves: the ended group is made again (new pods of the same
	// names) and bound to the set's GPUs, which it keeps until it is
	// deleted: Job urgent still waits
	kubetest.Eventually(t, 2*time.Minute, "the LeaderWorkerSet's group made again and bound", func() (bool, error) {
		pods, err := wl.LivePods(c.cs, kubetest.LWSNameLabel+"=lws")
		if err != nil {
			return false, err
		}
		var again []corev1.Pod
		for _, p := range pods {
			if p.UID != first[0].UID && p.UID != first[1].UID {
				again = append(again, p)
			}
		}
		names := make([]string, len(again))
		for i, p := range again {
			names[i] = p.Name
		}
		slices.Sort(names)
		return slices.Equal(names, []string{"lws-0", "lws-0-1"}) && slices.Equal(wl.NodesOf(again), c.nodes),
			fmt.Errorf("new pods %v on %v", names, wl.NodesOf(again))
	})
	if urgent, err := c.gangPods("urgent"); err != nil || slices.ContainsFunc(urgent, func(p corev1.Pod) bool { return p.Spec.NodeName != "" }) {
		t.Fatalf("Job urgent's pods on %v (%v) while the LeaderWorkerSet holds the nodes, want unbound", wl.NodesOf(urgent), err)
	}
	kubetest.Eventually(t, time.Minute, "Job urgent waiting", func() (bool, error) {
		j, err := c.cs.BatchV1().Jobs(wl.NS).Get(ctx, "urgent", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		r := j.Annotations[kube.AnnReason]
		return strings.HasPrefix(r, kube.ReasonWaiting+":"), fmt.Errorf("%s %q", kube.AnnReason, r)
	})

	// the set deleted (its StatefulSets and pods by the garbage
	// collector), Job urgent gets the nodes
	if err := c.dc.Resource(wl.LWSGVR).Namespace(wl.NS).Delete(ctx, "lws", metav1.DeleteOptions{
		PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 2*time.Minute, "Job urgent's 2 pods bound to the 2 nodes", func() (bool, error) {
		urgent, err := c.gangPods("urgent")
		return err == nil && slices.Equal(wl.NodesOf(urgent), c.nodes), fmt.Errorf("bound to %v (%v)", wl.NodesOf(urgent), err)
	})
	for _, pr := range c.procs("lws") {
		t.Logf("process of pod %s (uid %s) on %s: %v to %v, exit %d", pr.Pod, pr.UID, pr.Node,
			pr.Start.Format(time.TimeOnly), pr.End.Format(time.TimeOnly), pr.Exit)
	}
}
