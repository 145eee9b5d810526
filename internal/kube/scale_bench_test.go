package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes/fake"
	ktesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
)

// storeAPI is an API server made of the scheduler's own informer caches,
// for benchmarks and tests of the loop without a control plane: a
// binding binds and runs the pod, a patch of a pod or a Job (any
// subresource) is applied to the cached object, and the informer's
// handler is called, as a watch event would; anything else succeeds and
// changes nothing. Objects are never changed in place.
type storeAPI struct {
	s   *Scheduler
	job int // index of the batch/v1 Job kind in s.kinds
	// calls counts the calls by verb, resource and subresource
	mu    sync.Mutex
	calls map[string]int
	// store serializes the changes of the caches (a read, then a write)
	// and guards rv, the last resource version given
	store sync.Mutex
	rv    int64
}

func newStoreAPI(tb testing.TB, policy string) (*Scheduler, *storeAPI) {
	tb.Helper()
	o := Options{Policy: policy}
	o.defaults()
	cs := fake.NewClientset()
	s, err := newScheduler(cs, cs, o, &record.FakeRecorder{})
	if err != nil {
		tb.Fatal(err)
	}
	a := &storeAPI{s: s, job: kindIndex(jobKind{}), calls: map[string]int{}}
	cs.PrependReactor("*", "*", a.react)
	return s, a
}

func (a *storeAPI) react(act ktesting.Action) (bool, runtime.Object, error) {
	s := a.s
	a.mu.Lock()
	a.calls[strings.TrimSuffix(act.GetVerb()+" "+act.GetResource().Resource+"/"+act.GetSubresource(), "/")]++
	a.mu.Unlock()
	a.store.Lock()
	defer a.store.Unlock()
	switch act := act.(type) {
	case ktesting.CreateAction:
		b, ok := act.GetObject().(*corev1.Binding)
		if !ok || act.GetSubresource() != "binding" {
			return true, nil, nil
		}
		old, ok := a.pod(b.Namespace, b.Name)
		if !ok {
			return true, nil, fmt.Errorf("pod %s/%s not found", b.Namespace, b.Name)
		}
		p := old.DeepCopy()
		p.Spec.NodeName = b.Target.Name
		p.Status.Phase = corev1.PodRunning
		a.putPod(old, p)
		return true, nil, nil
	case ktesting.PatchAction:
		switch act.GetResource().Resource {
		case "pods":
			old, ok := a.pod(act.GetNamespace(), act.GetName())
			if !ok {
				return true, nil, fmt.Errorf("pod %s/%s not found", act.GetNamespace(), act.GetName())
			}
			p := &corev1.Pod{}
			if err := patchInto(old, act.GetPatch(), p); err != nil {
				return true, nil, err
			}
			a.putPod(old, p)
			return true, p, nil
		case "jobs":
			inf := s.kinds[a.job].informer()
			o, ok, _ := inf.GetIndexer().GetByKey(act.GetNamespace() + "/" + act.GetName())
			if !ok {
				return true, nil, fmt.Errorf("job %s/%s not found", act.GetNamespace(), act.GetName())
			}
			j := &batchv1.Job{}
			if err := patchInto(o.(*batchv1.Job), act.GetPatch(), j); err != nil {
				return true, nil, err
			}
			a.bump(&j.ObjectMeta)
			a.putJob(j)
			return true, j, nil
		}
	}
	return true, nil, nil
}

// patchInto applies a merge or strategic merge patch (the scheduler's are
// both, and alike for the fields it writes) to old, into out.
func patchInto(old runtime.Object, patch []byte, out runtime.Object) error {
	raw, err := json.Marshal(old)
	if err != nil {
		return err
	}
	raw, err = strategicpatch.StrategicMergePatch(raw, patch, out)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, out)
}

// bump gives m the next resource version (a.store held).
func (a *storeAPI) bump(m *metav1.ObjectMeta) {
	a.rv++
	m.ResourceVersion = strconv.FormatInt(1000+a.rv, 10)
}

func (a *storeAPI) pod(ns, name string) (*corev1.Pod, bool) {
	o, ok, _ := a.s.pods.GetIndexer().GetByKey(ns + "/" + name)
	if !ok {
		return nil, false
	}
	return o.(*corev1.Pod), true
}

// putPod stores p (old: the pod it replaces, nil for a new one) and tells
// the scheduler, as the informer would (a.store held).
func (a *storeAPI) putPod(old, p *corev1.Pod) {
	a.bump(&p.ObjectMeta)
	if err := a.s.pods.GetIndexer().Update(p); err != nil {
		panic(err)
	}
	if old == nil {
		a.s.podChanged(nil, p)
	} else {
		a.s.podChanged(old, p)
	}
}

func (a *storeAPI) putJob(j *batchv1.Job) {
	if err := a.s.kinds[a.job].informer().GetIndexer().Update(j); err != nil {
		panic(err)
	}
	a.s.q.Add(qkey{keyWorkload, objectKey(jobKind{}, j.Namespace, j.Name)})
}

// addNode adds a Ready node of gpus GPUs.
func (a *storeAPI) addNode(name string, gpus int) {
	a.store.Lock()
	defer a.store.Unlock()
	q := *resource.NewQuantity(int64(gpus), resource.DecimalSI)
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("node-" + name)},
		Status: corev1.NodeStatus{Capacity: corev1.ResourceList{GPU: q}, Allocatable: corev1.ResourceList{GPU: q},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	if err := a.s.node.GetIndexer().Add(n); err != nil {
		panic(err)
	}
	a.s.markNode(name)
}

// addJob adds an Indexed Job of pods pods of one GPU each, created at t,
// with its pods pending, as the Job controller makes them.
func (a *storeAPI) addJob(ns, name string, pods int, t time.Time) {
	a.store.Lock()
	defer a.store.Unlock()
	j := jobSpec{ns: ns, name: name, pods: pods, gpus: 1}.object()
	j.UID = types.UID("job-" + ns + "-" + name)
	j.CreationTimestamp = metav1.NewTime(t)
	a.bump(&j.ObjectMeta)
	a.putJob(j)
	for i := range pods {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%d", name, i),
			UID:               types.UID(fmt.Sprintf("pod-%s-%s-%d", ns, name, i)),
			CreationTimestamp: metav1.NewTime(t),
			Labels:            map[string]string{"job-name": name},
			Annotations:       map[string]string{batchv1.JobCompletionIndexAnnotation: strconv.Itoa(i)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: name, UID: j.UID,
				Controller: new(true)}}},
			Spec:   *j.Spec.Template.Spec.DeepCopy(),
			Status: corev1.PodStatus{Phase: corev1.PodPending}}
		a.putPod(nil, p)
	}
}

// takeCalls returns the calls counted since the last take.
func (a *storeAPI) takeCalls() map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := a.calls
	a.calls = map[string]int{}
	return c
}

// start runs the scheduler's API calls (the dispatchers' workers) until
// the returned stop is called.
func (a *storeAPI) start() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { a.s.disp.run(ctx, 256); done <- struct{}{} }()
	go func() { a.s.lowDisp.run(ctx, 4); done <- struct{}{} }()
	return func() { cancel(); <-done; <-done }
}

// idle reports whether d has no call queued, in flight or unanswered.
func idle(d *dispatcher) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.line) == 0 && len(d.flying) == 0 && len(d.answers) == 0
}

// settle steps the loop until every pod is bound, a forecast came, every
// running pod shows its end ETA, no call is left and a step looks at no
// running workload's pods (5 minutes at most).
func (a *storeAPI) settle(tb testing.TB) {
	tb.Helper()
	s := a.s
	deadline := time.Now().Add(5 * time.Minute)
	for {
		looks := s.stats.ETALooks
		s.step()
		unbound, noETA := 0, 0
		for _, o := range s.pods.GetIndexer().List() {
			p := o.(*corev1.Pod)
			switch {
			case p.Spec.NodeName == "":
				unbound++
			case p.Status.Phase == corev1.PodRunning && p.Annotations[AnnETA] == "":
				noETA++
			}
		}
		// (a step that looked at no pods, after which no call is left in
		// flight or unanswered: every pod event is taken)
		if unbound == 0 && noETA == 0 && s.ETAVersion() > 0 && idle(s.disp) && idle(s.lowDisp) && s.stats.ETALooks == looks {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("not settled in 5 minutes: %d pods not bound, %d running with no ETA, %d forecasts", unbound, noETA, s.ETAVersion())
		}
		time.Sleep(time.Millisecond)
	}
}

// finishJob ends a Job: its pods succeeded, the Job complete.
func (a *storeAPI) finishJob(ns, name string, pods int) {
	a.store.Lock()
	defer a.store.Unlock()
	for i := range pods {
		old, ok := a.pod(ns, fmt.Sprintf("%s-%d", name, i))
		if !ok {
			continue
		}
		p := old.DeepCopy()
		p.Status.Phase = corev1.PodSucceeded
		a.putPod(old, p)
	}
	o, ok, _ := a.s.kinds[a.job].informer().GetIndexer().GetByKey(ns + "/" + name)
	if !ok {
		return
	}
	j := o.(*batchv1.Job).DeepCopy()
	j.Status.Succeeded = int32(pods)
	j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue})
	a.bump(&j.ObjectMeta)
	a.putJob(j)
}

// scaleJobs is the benchmark's mix: a gang of 8 one-GPU pods every 16th
// Job, else one pod of one GPU (1.44 GPUs a Job on average).
func scalePods(i int) int {
	if i%16 == 0 {
		return 8
	}
	return 1
}

// BenchmarkSchedulerStep is one step of `gandiva kube`'s loop at the arena's
// scale, with no control plane (storeAPI): 1,000 nodes of 8 GPUs, 5,000
// Jobs in 10 namespaces (7,191 GPUs: all run), their pods bound and
// running. Each iteration is what an event costs in steady state: a
// running Job completes, a new one is created, and the loop's step syncs
// both, runs a round (the engine, ETAs told, status written) and binds
// the new Job's pods. docs/PERFORMANCE.md ("Arena at scale") has the
// figures.
func BenchmarkSchedulerStep(b *testing.B) {
	const nodes, jobs = 1000, 5000
	defer func(f func(*Scheduler)) { intentCheck = f }(intentCheck)
	intentCheck = nil // (the tests' check of every step, not the loop's cost)
	s, a := newStoreAPI(b, "tiresias-l")
	defer a.start()()
	for i := range nodes {
		a.addNode(fmt.Sprintf("node-%04d", i), 8)
	}
	t0 := time.Now().Add(-time.Hour)
	ns := func(i int) string { return fmt.Sprintf("team-%d", i%10) }
	for i := range jobs {
		a.addJob(ns(i), fmt.Sprintf("j%05d", i), scalePods(i), t0.Add(time.Duration(i)*time.Millisecond))
	}
	s.rebuild()
	s.etaWrites.max = 1 << 30 // (every pod's first ETA at once, then the budget)
	a.settle(b)
	s.etaWrites.max = 0
	next := jobs
	looks := s.stats.ETALooks
	b.Logf("API calls while %d Jobs were bound and told their ETAs: %v", jobs, a.takeCalls())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		old := next - jobs
		a.finishJob(ns(old), fmt.Sprintf("j%05d", old), scalePods(old))
		a.addJob(ns(next), fmt.Sprintf("j%05d", next), scalePods(next), time.Now())
		next++
		b.StartTimer()
		s.step()
	}
	b.StopTimer()
	b.ReportMetric(float64(s.stats.ETALooks-looks)/float64(b.N), "eta-looks/op")
	b.Logf("API calls in %d steps: %v", b.N, a.takeCalls())
}
