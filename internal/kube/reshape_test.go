package kube

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/dynamic"
	dynfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/gandiva-sched/gandiva/internal/cluster"
)

// A Job of fixed width (no gandiva.io/min-gpus or max-gpus) whose
// parallelism a user changes after Gandiva saw it runs at its new width:
// queued at 3 pods on a node of 2 GPUs, edited to 2, it starts there, and
// no patch of Gandiva's ever writes a width (the admission policy refuses
// that of a Job that is not elastic; the start patch once wrote the old
// width back, and the Job never started). Edited again while it runs (to
// 1 pod), it runs at 1; edited to 0 pods it is withdrawn with a Warning;
// back at 2 it runs at 2. Each time its engine job carries its first
// submission time and its checkpoint, and the Job gets an Event saying
// what happened. The
// test plays no Job controller: the Job's pods are not made, only its
// decisions (spec.suspend, gandiva.io/state and placement) are looked at.
// reshapeRig runs a scheduler (policy fifo) on a fake API with one node
// of 2 GPUs, records the patches of Jobs and the Events, and edits Jobs'
// widths as a user would. The test plays no Job controller: no pod is
// made, only the Jobs' decisions (spec.suspend, gandiva.io/state and
// placement) are looked at.
type reshapeRig struct {
	t       *testing.T
	s       *Scheduler
	cs      *fake.Clientset
	ctx     context.Context
	mu      sync.Mutex
	patches []string
	events  []string
	stop    func()
}

func newReshapeRig(t *testing.T) *reshapeRig { return newReshapeRigWith(t, nil) }

// newReshapeRigWith is newReshapeRig with JobSets served by dyn (nil:
// none): the fake API's discovery shows them and grants the scheduler
// their verbs.
func newReshapeRigWith(t *testing.T, dyn dynamic.Interface) *reshapeRig {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{GPU: resource.MustParse("2")},
			Allocatable: corev1.ResourceList{GPU: resource.MustParse("2")},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	r := &reshapeRig{t: t, cs: fake.NewClientset(node)}
	r.cs.PrependReactor("patch", "jobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if p, ok := a.(k8stesting.PatchAction); ok && p.GetSubresource() == "" {
			r.mu.Lock()
			r.patches = append(r.patches, p.GetName()+" "+string(p.GetPatch()))
			r.mu.Unlock()
		}
		return false, nil, nil // (the tracker applies it)
	})
	o := Options{Policy: "fifo", Dynamic: dyn}
	o.defaults()
	if dyn != nil {
		r.cs.Discovery().(*fakediscovery.FakeDiscovery).Resources = []*metav1.APIResourceList{{
			GroupVersion: jobSetGVR.GroupVersion().String(),
			APIResources: []metav1.APIResource{{Name: "jobsets", Kind: "JobSet", Namespaced: true}},
		}}
		r.cs.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
			rv := a.(k8stesting.CreateAction).GetObject().(*authzv1.SelfSubjectAccessReview).DeepCopy()
			ra := rv.Spec.ResourceAttributes
			rv.Status.Allowed = ra.Group == jobSetGVR.Group && ra.Resource == "jobsets"
			return true, rv, nil
		})
	}
	rec := record.NewFakeRecorder(1024)
	s, err := newScheduler(r.cs, r.cs, o, rec)
	if err != nil {
		t.Fatal(err)
	}
	r.s = s
	evDone := make(chan struct{})
	go func() {
		defer close(evDone)
		for e := range rec.Events {
			r.mu.Lock()
			r.events = append(r.events, e)
			r.mu.Unlock()
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	r.ctx = ctx
	done := make(chan error, 1)
	go func() { done <- s.run(ctx) }()
	stopped := false
	r.stop = func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
			close(rec.Events)
			<-evDone
		}
	}
	t.Cleanup(r.stop)
	return r
}

func (r *reshapeRig) create(name string, pods int, ann map[string]string) {
	r.t.Helper()
	js := jobSpec{ns: "team-a", name: name, pods: pods, gpus: 1, annotations: ann}
	if _, err := r.cs.BatchV1().Jobs("team-a").Create(r.ctx, js.object(), metav1.CreateOptions{}); err != nil {
		r.t.Fatal(err)
	}
}

func (r *reshapeRig) wait(what string, cond func() bool) {
	r.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			r.mu.Lock()
			defer r.mu.Unlock()
			l, _ := r.cs.BatchV1().Jobs("team-a").List(r.ctx, metav1.ListOptions{})
			var jobs []string
			for _, j := range l.Items {
				jobs = append(jobs, fmt.Sprintf("%s: parallelism %d, annotations %v", j.Name, *j.Spec.Parallelism, j.Annotations))
			}
			r.t.Fatalf("%s: not within 60 s (Jobs %q; patches %q; events %q)", what, jobs, r.patches, r.events)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// width edits a Job's parallelism (and its completions, equal: an
// Indexed Job's completions follow its parallelism) as a user would.
func (r *reshapeRig) width(name string, n int32) {
	r.t.Helper()
	jobs := r.cs.BatchV1().Jobs("team-a")
	j, err := jobs.Get(r.ctx, name, metav1.GetOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
	j.Spec.Parallelism, j.Spec.Completions = ptr.To(n), ptr.To(n)
	if _, err := jobs.Update(r.ctx, j, metav1.UpdateOptions{}); err != nil {
		r.t.Fatal(err)
	}
}

// placed reports whether a Job runs on placement want (unsuspended).
func (r *reshapeRig) placed(name, want string) func() bool {
	return func() bool {
		j, err := r.cs.BatchV1().Jobs("team-a").Get(r.ctx, name, metav1.GetOptions{})
		return err == nil && j.Annotations[AnnState] == StateRunning && j.Annotations[AnnPlacement] == want &&
			(j.Spec.Suspend == nil || !*j.Spec.Suspend)
	}
}

// event reports whether an Event's text contains what.
func (r *reshapeRig) event(what string) func() bool {
	return func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, e := range r.events {
			if strings.Contains(e, what) {
				return true
			}
		}
		return false
	}
}

// noWidthWritten fails the test for a patch of a Job that writes a width
// (the admission policy refuses that of a Job that is not elastic).
func (r *reshapeRig) noWidthWritten() {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.patches {
		if strings.Contains(p, "parallelism") || strings.Contains(p, "completions") {
			r.t.Errorf("a patch of a Job writes its width: %s", p)
		}
	}
}

// A Job of fixed width (no gandiva.io/min-gpus or max-gpus) whose
// parallelism a user changes after Gandiva saw it runs at its new width:
// queued at 3 pods on a node of 2 GPUs, edited to 2, it starts there, and
// no patch of Gandiva's writes a width. Edited again while it runs (to 1
// pod), it runs at 1; edited to 0 pods it is withdrawn with a Warning;
// back at 2 it runs at 2. Each time its engine job carries its first
// submission time and its checkpoint, and the Job gets an Event saying
// what happened.
func TestReshapedJobRunsAtNewWidth(t *testing.T) {
	r := newReshapeRig(t)
	s := r.s
	// its trainer checkpointed (as a Job that ran before, then waited)
	ck := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	r.create("wide", 3, map[string]string{AnnCheckpointTime: ck, AnnCheckpointStep: "300"})
	// queued: 3 pods do not fit a node of 2 GPUs
	r.wait("the Job submitted", func() bool { st := s.Stats(); return st.Submitted == 1 && st.Rounds > 0 })
	if j, _ := r.cs.BatchV1().Jobs("team-a").Get(r.ctx, "wide", metav1.GetOptions{}); j.Annotations[AnnState] != "" {
		t.Fatalf("a gang of 3 on 2 GPUs is %q, want queued", j.Annotations[AnnState])
	}
	r.width("wide", 2)
	r.wait("queued at 3 pods, edited to 2: running on n1 at 2", r.placed("wide", "n1=2"))
	r.wait("an Event saying it was queued again", r.event("Reshaped its gang changed from 3 to 2 pods before it started"))

	// running (no pods: nothing holds GPUs yet), edited to 1 pod
	r.width("wide", 1)
	r.wait("running at 2 pods, edited to 1: running on n1 at 1", r.placed("wide", "n1=1"))
	r.wait("an Event saying it was queued again while it ran", r.event("Reshaped its gang changed from 2 to 1 pods while it ran"))

	// 0 pods: withdrawn, with a Warning; back to 2: runs at 2
	r.width("wide", 0)
	r.wait("edited to 0 pods: a Warning", r.event("NotSchedulable Gandiva will not schedule it: its parallelism is 0"))
	r.width("wide", 2)
	r.wait("edited back to 2 pods: running on n1 at 2", r.placed("wide", "n1=2"))

	r.stop()
	r.noWidthWritten()
	if st := s.Stats(); st.Submitted != 1 {
		t.Errorf("%d submissions counted, want 1 (the Job's; its reshapes are not new submissions)", st.Submitted)
	}
	// the engine: the first job and those of its reshapes (to 2, 1, then 2
	// again after 0), each carrying the first's submission time; the last
	// one alone live, on 2 GPUs
	var live []*cluster.Job
	var names []string
	for _, j := range s.eng.Jobs() {
		names = append(names, fmt.Sprintf("%s:%s:%d", j.Spec.Name, j.State, j.Spec.GPUs))
		if j.Spec.Submit != s.eng.Jobs()[0].Spec.Submit {
			t.Errorf("engine job %s submitted at %v, want the first's %v", j.Spec.Name, j.Spec.Submit, s.eng.Jobs()[0].Spec.Submit)
		}
		if !j.State.Terminal() {
			live = append(live, j)
		}
	}
	if len(names) != 4 || len(live) != 1 || live[0].Spec.GPUs != 2 || live[0].State != cluster.Running {
		t.Fatalf("engine jobs %v, want 4, the last one alone live, running on 2 GPUs", names)
	}
	if j := live[0]; !j.Saved || j.Done != 300 {
		t.Errorf("the last engine job: checkpoint saved %v, done %v; want its checkpoint of step 300", j.Saved, j.Done)
	}
}

// The bug as users met it: a queued Job whose old width fits. Behind a
// Job that holds the node's 2 GPUs, a Job of 1 pod waits; its user makes
// it 2 pods. When the first Job completes, the second starts at 2 pods:
// its start patch once wrote parallelism 1 back (which the admission
// policy refuses of a Job that is not elastic: it never started).
func TestReshapedQueuedJobStartPatchKeepsNewWidth(t *testing.T) {
	r := newReshapeRig(t)
	r.create("first", 2, nil)
	r.wait("the first Job running on n1 at 2", r.placed("first", "n1=2"))
	r.create("second", 1, nil)
	r.wait("the second Job submitted", func() bool { st := r.s.Stats(); return st.Submitted == 2 })
	r.width("second", 2)
	jobs := r.cs.BatchV1().Jobs("team-a")
	j, err := jobs.Get(r.ctx, "first", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue})
	if _, err := jobs.UpdateStatus(r.ctx, j, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r.wait("the first Job done: the second running on n1 at 2", r.placed("second", "n1=2"))
	r.wait("an Event saying the second was queued again", r.event("Reshaped its gang changed from 1 to 2 pods before it started"))
	r.stop()
	r.noWidthWritten()
	if j, _ := jobs.Get(r.ctx, "second", metav1.GetOptions{}); *j.Spec.Parallelism != 2 {
		t.Errorf("the second Job's parallelism is %d, want the user's 2", *j.Spec.Parallelism)
	}
}

// Which workloads are reshaped (reshaped, mayReshape): a Job or JobSet of
// fixed width whose gang changed on its object, waiting or running; never
// an elastic Job (its width is the engine's), nor one whose gang did not
// change; a running LeaderWorkerSet (no spec.suspend) keeps its engine
// job, a waiting one is reshaped; a shared job only while queued (its
// pods are suspended in place); plain pods never are.
func TestReshapedWhich(t *testing.T) {
	submitted := func(w *workload, st cluster.JobState) *cluster.Job {
		if w.bad != "" {
			t.Fatalf("%s: %s", w.key, w.bad)
		}
		spec := w.spec
		return &cluster.Job{Spec: &spec, State: st}
	}
	job := func(par int32, ann map[string]string) *workload {
		j := jobSpec{ns: "team-a", name: "j", pods: int(par), gpus: 2, annotations: ann}.object()
		return fromJob(j)
	}
	old := job(2, nil)
	for _, st := range []cluster.JobState{cluster.Queued, cluster.Suspended, cluster.Running} {
		prev := submitted(old, st)
		if w := job(3, nil); !reshaped(prev, old.podGPUs, w) || !mayReshape(prev, w) {
			t.Errorf("a %s Job of 2 pods made 3: not reshaped", st)
		}
		if w := job(2, nil); reshaped(prev, old.podGPUs, w) {
			t.Errorf("a %s Job of 2 pods still 2: reshaped", st)
		}
		if w := job(0, nil); !reshaped(prev, old.podGPUs, w) || w.bad == "" {
			t.Errorf("a %s Job of 2 pods made 0: not reshaped (bad %q)", st, w.bad)
		}
		// a running one made unschedulable keeps its engine job (and so
		// the scheduler's control of its pods): withdrawn, nothing would
		// suspend it; made 0 pods wide, its controller ends its pods
		if w := job(0, nil); !mayReshape(prev, w) {
			t.Errorf("a %s Job of 2 pods made 0 (its pods ended by its controller): may not reshape", st)
		}
		bad := job(3, map[string]string{AnnIters: "lots"})
		if w := bad; w.bad == "" || mayReshape(prev, w) != st.Waiting() {
			t.Errorf("a %s Job of 2 pods made 3 and malformed (bad %q): may reshape %v", st, w.bad, mayReshape(prev, w))
		}
	}
	elastic := map[string]string{AnnMinGPUs: "2", AnnMaxGPUs: "8"}
	if prev := submitted(job(2, elastic), cluster.Queued); reshaped(prev, 2, job(3, elastic)) {
		t.Error("an elastic Job resized: reshaped")
	}
	// made elastic, or fixed: while it waits its next start follows the
	// object; a running one keeps its terms
	if prev := submitted(old, cluster.Queued); !reshaped(prev, 2, job(2, elastic)) {
		t.Error("a queued Job made elastic: not reshaped")
	}
	if prev := submitted(job(2, elastic), cluster.Suspended); !reshaped(prev, 2, job(2, nil)) {
		t.Error("a suspended elastic Job made fixed: not reshaped")
	}
	if prev := submitted(old, cluster.Running); reshaped(prev, 2, job(3, elastic)) {
		t.Error("a running Job made elastic: reshaped")
	}
	if prev := submitted(old, cluster.Cancelled); reshaped(prev, 2, job(3, nil)) {
		t.Error("a Job the engine is done with: reshaped")
	}

	// a JobSet: 2 workers × 1 + 1 ps × 2 = 4 pods; its workers made 3
	js := fromObject(jobSetKind{}, testJobSet(t, nil))
	wider := fromObject(jobSetKind{}, testJobSet(t, func(u map[string]any) { replicated(u, 0)["replicas"] = int64(3) }))
	if js.gang != 4 || wider.gang != 5 {
		t.Fatalf("JobSet gangs %d and %d, want 4 and 5", js.gang, wider.gang)
	}
	for _, st := range []cluster.JobState{cluster.Queued, cluster.Running} {
		if prev := submitted(js, st); !reshaped(prev, js.podGPUs, wider) || !mayReshape(prev, wider) {
			t.Errorf("a %s JobSet of 4 pods made 5: not reshaped", st)
		}
	}

	// a running LeaderWorkerSet or shared job keeps its engine job
	lws := &workload{key: "lws/team-a/l", kind: lwsKind{}, gang: 2, podGPUs: 1}
	lws.spec = cluster.JobSpec{Name: "team-a/lws:l", User: "team-a", GPUs: 2}
	lwsWider := &workload{key: lws.key, kind: lwsKind{}, gang: 4, podGPUs: 1}
	if prev := submitted(lws, cluster.Running); !reshaped(prev, 1, lwsWider) || mayReshape(prev, lwsWider) {
		t.Error("a running LeaderWorkerSet of 2 pods made 4: reshaped")
	}
	if prev := submitted(lws, cluster.Queued); !mayReshape(prev, lwsWider) {
		t.Error("a waiting LeaderWorkerSet of 2 pods made 4: not reshaped")
	}
	sh := job(3, nil)
	sh.shared = true
	for _, st := range []cluster.JobState{cluster.Running, cluster.Suspended} {
		if prev := submitted(old, st); mayReshape(prev, sh) {
			t.Errorf("a %s shared Job reshaped (its pods hold their processes)", st)
		}
	}
	if prev := submitted(old, cluster.Queued); !mayReshape(prev, sh) {
		t.Error("a queued shared Job not reshaped")
	}
	// plain pods: their gang is fixed at first sight
	pods := &workload{key: "pods/team-a/g", gang: 2, podGPUs: 1, spec: cluster.JobSpec{Name: "team-a/pods:g", User: "team-a", GPUs: 2}}
	if prev := submitted(pods, cluster.Queued); reshaped(prev, 1, &workload{key: pods.key, gang: 3, podGPUs: 1}) {
		t.Error("a group of plain pods that grew: reshaped")
	}
}

// A JobSet (fixed width) whose replicas a user changes while it waits
// runs at its new width, as a Job does: 3 pods (workers 1 × 1, ps 2 × 1)
// queued on a node of 2 GPUs; its ps made 1 replica, it starts there on 2
// GPUs. (No JobSet controller: its pods are not made.)
func TestReshapedJobSetRunsAtNewWidth(t *testing.T) {
	js := testJobSet(t, func(u map[string]any) {
		replicated(u, 0)["replicas"] = int64(1)
		tmpl := replicated(u, 1)["template"].(map[string]any)["spec"].(map[string]any)
		tmpl["parallelism"], tmpl["completions"] = int64(1), int64(1)
		replicated(u, 1)["replicas"] = int64(2)
		u["metadata"].(map[string]any)["annotations"] = map[string]any{}
		for i := range 2 { // (the rig's node has no labels)
			pod := replicated(u, i)["template"].(map[string]any)["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
			delete(pod, "nodeSelector")
		}
	})
	dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{jobSetGVR: "JobSetList", QueueGVR: "GandivaQueueList"}, js)
	r := newReshapeRigWith(t, dyn)
	get := func() (*unstructured.Unstructured, error) {
		return dyn.Resource(jobSetGVR).Namespace("team-a").Get(r.ctx, "js", metav1.GetOptions{})
	}
	r.wait("the JobSet submitted", func() bool { st := r.s.Stats(); return st.Submitted == 1 && st.Rounds > 0 })
	if u, err := get(); err != nil || u.GetAnnotations()[AnnState] != "" {
		t.Fatalf("a JobSet of 3 pods on 2 GPUs: %v (%v), want queued", u.GetAnnotations(), err)
	}
	u, err := get()
	if err != nil {
		t.Fatal(err)
	}
	replicated(u.Object, 1)["replicas"] = int64(1)
	if _, err := dyn.Resource(jobSetGVR).Namespace("team-a").Update(r.ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r.wait("queued at 3 pods, made 2: running on n1 at 2", func() bool {
		u, err := get()
		if err != nil {
			return false
		}
		susp, _, _ := unstructured.NestedBool(u.Object, "spec", "suspend")
		return u.GetAnnotations()[AnnState] == StateRunning && u.GetAnnotations()[AnnPlacement] == "n1=2" && !susp
	})
	r.wait("an Event saying it was queued again", r.event("Reshaped its gang changed from 3 to 2 pods before it started"))
}

// A Job first seen at 0 pods (Gandiva will not schedule it: a Warning)
// runs once its user gives it a width: it is submitted then.
func TestJobFirstSeenAtZeroWidthRunsWhenGiven(t *testing.T) {
	r := newReshapeRig(t)
	r.create("later", 0, nil)
	r.wait("a Warning", r.event("NotSchedulable Gandiva will not schedule it: its parallelism is 0"))
	r.width("later", 2)
	r.wait("given 2 pods: running on n1 at 2", r.placed("later", "n1=2"))
	r.stop()
	r.noWidthWritten()
	if st := r.s.Stats(); st.Submitted != 1 {
		t.Errorf("%d submissions counted, want 1", st.Submitted)
	}
}

// count is how many Events' texts contain what.
func (r *reshapeRig) count(what string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.events {
		if strings.Contains(e, what) {
			n++
		}
	}
	return n
}

// A reshape keeps the service the job attained: a width edited back and
// forth does not make a job Tiresias demoted look new again.
func TestReshapeCarriesAttainedService(t *testing.T) {
	r := newReshapeRig(t)
	r.create("a", 2, nil)
	r.wait("a running on n1 at 2", r.placed("a", "n1=2"))
	time.Sleep(1500 * time.Millisecond) // (service to carry)
	r.width("a", 1)
	r.wait("a running on n1 at 1", r.placed("a", "n1=1"))
	r.stop()
	now := r.s.eng.Now()
	var old, cur *cluster.Job
	for _, j := range r.s.eng.Jobs() {
		if j.State.Terminal() {
			old = j
		} else {
			cur = j
		}
	}
	if old == nil || cur == nil {
		t.Fatalf("want the withdrawn job and its successor, have %v", r.s.eng.Jobs())
	}
	if a := old.Attained(now); a < 1 || cur.Attained(now) < a {
		t.Errorf("attained service %.2f GPU-s before the reshape, %.2f after: not carried", a, cur.Attained(now))
	}
}

// A running Job made one Gandiva cannot schedule (its width and a
// malformed annotation in one update) keeps its engine job: withdrawn,
// nothing would ever suspend its pods.
func TestRunningJobMadeBadStaysScheduled(t *testing.T) {
	r := newReshapeRig(t)
	r.create("a", 2, nil)
	r.wait("a running on n1 at 2", r.placed("a", "n1=2"))
	jobs := r.cs.BatchV1().Jobs("team-a")
	j, err := jobs.Get(r.ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	j.Spec.Parallelism, j.Spec.Completions = ptr.To(int32(1)), ptr.To(int32(1))
	j.Annotations[AnnIters] = "lots"
	if _, err := jobs.Update(r.ctx, j, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // (the scheduler's sync of the update)
	r.stop()
	live := 0
	for _, ej := range r.s.eng.Jobs() {
		if !ej.State.Terminal() {
			live++
		}
	}
	j, _ = jobs.Get(r.ctx, "a", metav1.GetOptions{})
	if live == 0 && (j.Spec.Suspend == nil || !*j.Spec.Suspend) {
		t.Errorf("no engine job, and Job a is not suspended (%q on %q): it runs outside the scheduler", j.Annotations[AnnState], j.Annotations[AnnPlacement])
	}
}

// The reshapes of one workload are bounded (maxReshapes): each is a new
// engine job, so past the bound it is refused, saying so.
func TestReshapesBounded(t *testing.T) {
	r := newReshapeRig(t)
	r.create("big", 3, nil) // 3 GPUs on a node of 2: it waits
	r.wait("big queued", r.event("needs 3 GPUs"))
	for i := 1; i <= maxReshapes; i++ {
		r.width("big", int32(3+i%2))
		r.wait(fmt.Sprintf("reshape %d", i), func() bool { return r.count("Reshaped") >= i })
	}
	r.width("big", 5)
	r.wait("refused past the bound", r.event("delete it and create it again"))
	r.stop()
	if n := r.count("Reshaped"); n != maxReshapes {
		t.Errorf("%d reshapes, want at most %d", n, maxReshapes)
	}
	if n := len(r.s.eng.Jobs()); n > maxReshapes+1 {
		t.Errorf("%d engine jobs for one workload", n)
	}
}
