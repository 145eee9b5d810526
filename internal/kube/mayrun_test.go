package kube

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/gandiva-sched/gandiva/internal/kube/shared"
)

// sharedPod is a shared job's pod as the informer shows it: bound to node
// ("" if not), with an assignment and an agent status when given.
func sharedPod(name, node string, a *shared.Assign, st *shared.Status) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, UID: types.UID("uid-" + name),
			Labels:      map[string]string{"job-name": name},
			Annotations: map[string]string{shared.AnnGPUs: "1"}},
		Spec: corev1.PodSpec{SchedulerName: SchedulerName, NodeName: node},
	}
	if a != nil {
		p.Annotations[shared.AnnAssign] = a.String()
	}
	if st != nil {
		p.Annotations[shared.AnnStatus] = st.String()
	}
	return p
}

// mayRun sees the pods we are binding to a node, not only those the
// informer shows bound there: a pod told to run and bound a moment ago
// runs as soon as its agent sees it, even when the engine gave its GPU
// to another job since (under TestSharedKill9's load the informer showed
// such a binding only after the next turn had started another pod on
// the same GPU: both ran).
func TestMayRunSeesBindingsInFlight(t *testing.T) {
	o := Options{Policy: "gandiva"}
	o.defaults()
	cs := fake.NewClientset()
	s, err := newScheduler(cs, cs, o, record.NewFakeRecorder(16))
	if err != nil {
		t.Fatal(err)
	}
	idx := s.pods.GetIndexer()
	// q: told to run on GPU 0 of node n and being bound there (its
	// assignment written, the informer shows it unbound)
	run := shared.Assign{Gen: 1, State: shared.Running, GPUs: []int{0}}
	q := sharedPod("q", "", &run, nil)
	if err := idx.Add(q); err != nil {
		t.Fatal(err)
	}
	s.binding[q.UID] = bindRec{node: "n", shared: true, pod: q}
	p := sharedPod("p", "n", &shared.Assign{Gen: 2, State: shared.Suspended, GPUs: []int{0}},
		&shared.Status{Gen: 2, State: shared.Suspended})
	if err := idx.Add(p); err != nil {
		t.Fatal(err)
	}
	if s.mayRun(p, "n", []int{0}) {
		t.Error("p may run on n/0 while q is being bound there to run")
	}
	if !s.mayRun(p, "n", []int{1}) {
		t.Error("p may not run on n/1, which q does not use")
	}
	if !s.mayRun(p, "m", []int{0}) {
		t.Error("p may not run on m/0: q is bound to n")
	}
	// q's suspension acknowledged (the informer shows the agent's status
	// before it shows the binding): p may run
	susp := shared.Assign{Gen: 2, State: shared.Suspended, GPUs: []int{0}}
	q2 := sharedPod("q", "", &susp, &shared.Status{Gen: 2, State: shared.Suspended})
	if err := idx.Update(q2); err != nil {
		t.Fatal(err)
	}
	if !s.mayRun(p, "n", []int{0}) {
		t.Error("p may not run on n/0 though q acknowledged its suspension")
	}
	// not acknowledged yet: p waits
	q3 := sharedPod("q", "", &susp, &shared.Status{Gen: 1, State: shared.Running})
	if err := idx.Update(q3); err != nil {
		t.Fatal(err)
	}
	if s.mayRun(p, "n", []int{0}) {
		t.Error("p may run on n/0 before q acknowledged its suspension")
	}
	// the informer shows q bound there: the binding record is not needed
	delete(s.binding, q.UID)
	q4 := sharedPod("q", "n", &run, nil)
	if err := idx.Update(q4); err != nil {
		t.Fatal(err)
	}
	if s.mayRun(p, "n", []int{0}) {
		t.Error("p may run on n/0 while q runs there")
	}
}
