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
	s.binds.Assume(q.UID, bindRec{node: "n", shared: true, pod: q})
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
	s.binds.Forget(q.UID)
	q4 := sharedPod("q", "n", &run, nil)
	if err := idx.Update(q4); err != nil {
		t.Fatal(err)
	}
	if s.mayRun(p, "n", []int{0}) {
		t.Error("p may run on n/0 while q runs there")
	}
}

// mayRun decides through the hand-off fence, the pods rendered as its
// occupants: a suspension counts once acknowledged at its generation; a
// pod being deleted holds its GPUs whatever its status says; one whose
// agent failed does not, unless it is being deleted.
func TestMayRunFence(t *testing.T) {
	o := Options{Policy: "gandiva"}
	o.defaults()
	cs := fake.NewClientset()
	s, err := newScheduler(cs, cs, o, record.NewFakeRecorder(16))
	if err != nil {
		t.Fatal(err)
	}
	idx := s.pods.GetIndexer()
	p := sharedPod("p", "n", &shared.Assign{Gen: 2, State: shared.Suspended, GPUs: []int{0}},
		&shared.Status{Gen: 2, State: shared.Suspended})
	if err := idx.Add(p); err != nil {
		t.Fatal(err)
	}
	susp := shared.Assign{Gen: 4, State: shared.Suspended, GPUs: []int{0}}
	now := metav1.Now()
	for _, c := range []struct {
		name     string
		st       *shared.Status
		deleting bool
		may      bool
	}{
		{"suspension acknowledged", &shared.Status{Gen: 4, State: shared.Suspended}, false, true},
		{"an earlier suspension acknowledged", &shared.Status{Gen: 2, State: shared.Suspended}, false, false},
		{"still running", &shared.Status{Gen: 3, State: shared.Running}, false, false},
		{"no status", nil, false, false},
		{"its agent failed", &shared.Status{Gen: 3, State: shared.Failed, Error: "no GPU"}, false, true},
		{"being deleted, suspended", &shared.Status{Gen: 4, State: shared.Suspended}, true, false},
		{"being deleted, its agent failed", &shared.Status{Gen: 4, State: shared.Failed, Error: "no GPU"}, true, false},
	} {
		q := sharedPod("q", "n", &susp, c.st)
		if c.deleting {
			q.DeletionTimestamp = &now
		}
		if err := idx.Update(q); err != nil {
			if err := idx.Add(q); err != nil {
				t.Fatal(err)
			}
		}
		if got := s.mayRun(p, "n", []int{0}); got != c.may {
			t.Errorf("q %s: p may run on n/0: %v, want %v", c.name, got, c.may)
		}
		if !s.mayRun(p, "n", []int{1}) {
			t.Errorf("q %s: p may not run on n/1, which q does not use", c.name)
		}
	}
}
