package arena

import (
	"bytes"
	"context"
	"math"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/trace"
)

// A Job for KAI names the scheduler, its namespace's queue and its
// PodGroup; the PodGroup the arena writes for it is one gang of all its
// pods in that queue, preemptible, owned by the Job.
func TestKAIJob(t *testing.T) {
	_, plan, s := smallPlan(t, trace.SynthConfig{Jobs: 12, Seed: 3, Users: 2, Load: 8, GPUs: []int{1, 8}, MaxDuration: 600}, "kai")
	pl := newPlayer(&Config{Plan: plan, Speed: 10}, nil, s[0])
	multi := false
	for _, j := range plan.Jobs {
		job := pl.sched.decorate(j, pl.object(j))
		job.UID = types.UID("uid-" + j.Name)
		multi = multi || j.Pods > 1
		if got := job.Spec.Template.Spec.SchedulerName; got != "kai-scheduler" {
			t.Errorf("%s: schedulerName %q", j.Key(), got)
		}
		if got := job.Spec.Template.Labels[kaiQueueLabel]; got != j.Namespace {
			t.Errorf("%s: queue label %q, want %q", j.Key(), got, j.Namespace)
		}
		if got := job.Spec.Template.Annotations[kaiPodGroupAnn]; got != j.Name {
			t.Errorf("%s: pod group %q, want %q", j.Key(), got, j.Name)
		}
		if !preemptible(job) {
			t.Errorf("%s: not preemptible", j.Key())
		}
		pg := kaiPodGroup(job)
		min, _, _ := unstructured.NestedInt64(pg.Object, "spec", "minMember")
		q, _, _ := unstructured.NestedString(pg.Object, "spec", "queue")
		pre, _, _ := unstructured.NestedString(pg.Object, "spec", "preemptibility")
		pc, _, _ := unstructured.NestedString(pg.Object, "spec", "priorityClassName")
		if pg.GetName() != j.Name || pg.GetNamespace() != j.Namespace || int(min) != j.Pods || q != j.Namespace ||
			pre != "preemptible" || pc != kaiPriorityClass {
			t.Errorf("%s: PodGroup %v", j.Key(), pg.Object)
		}
		if o := pg.GetOwnerReferences(); len(o) != 1 || o[0].Kind != "Job" || o[0].Name != j.Name || o[0].UID != job.UID {
			t.Errorf("%s: PodGroup owners %+v", j.Key(), o)
		}
	}
	if !multi {
		t.Fatal("no job of several pods: the test shows nothing about gangs")
	}
}

// The watch writes a PodGroup for each Job for KAI as it appears, and none
// for a Job of another scheduler; it stops with the function it returns.
func TestKAIPodGroupWatch(t *testing.T) {
	c, err := cluster.Load("tiresias-n2g4")
	if err != nil {
		t.Fatal(err)
	}
	jobs := trace.Synthetic(trace.SynthConfig{Jobs: 6, Seed: 3, Users: 2, Load: 8, GPUs: []int{1, 8}, MaxDuration: 600})
	plan, err := NewPlan(c, jobs)
	if err != nil {
		t.Fatal(err)
	}
	kai, err := ParseSchedulers("kai,kube-scheduler")
	if err != nil {
		t.Fatal(err)
	}
	cs := fake.NewClientset()
	dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{kaiPodGroupGVR: "PodGroupList"})
	var log bytes.Buffer
	e := &peerEnv{Sched: kai[0], Config: &Config{Plan: plan, Log: &log}, CS: cs}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stop, err := startKAIPodGroups(ctx, e, dyn)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	want := map[string]int{}
	for i, j := range plan.Jobs {
		s := kai[i%2] // every other Job is kube-scheduler's
		job := s.decorate(j, newPlayer(e.Config, nil, s).object(j))
		if s.Kind != "kai" { // named a PodGroup, but not KAI's
			job.Spec.Template.Annotations = map[string]string{kaiPodGroupAnn: j.Name}
		}
		if _, err := cs.BatchV1().Jobs(j.Namespace).Create(ctx, job, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if s.Kind == "kai" {
			want[j.Key()] = j.Pods
		}
	}
	got := map[string]int{}
	for len(got) < len(want) && ctx.Err() == nil {
		l, err := dyn.Resource(kaiPodGroupGVR).Namespace("").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got = map[string]int{}
		for _, pg := range l.Items {
			m, _, _ := unstructured.NestedInt64(pg.Object, "spec", "minMember")
			got[pg.GetNamespace()+"/"+pg.GetName()] = int(m)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // (any PodGroup for the other Jobs would be written by now)
	if l, err := dyn.Resource(kaiPodGroupGVR).Namespace("").List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != len(want) {
		t.Fatalf("%d PodGroups (%v), want %d", len(l.Items), err, len(want))
	}
	if len(got) != len(want) {
		t.Fatalf("PodGroups %v, want %v (log: %s)", got, want, log.String())
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("PodGroup %s: minMember %d, want %d", k, got[k], n)
		}
	}
	stop()
	// Stopped: a new Job gets no PodGroup.
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "u-x", Name: "late"}}
	j.Spec.Template.Spec.SchedulerName = kaiSchedulerName
	j.Spec.Template.Annotations = map[string]string{kaiPodGroupAnn: "late"}
	if _, err := cs.BatchV1().Jobs("u-x").Create(context.Background(), j, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // (nothing to wait for: the check is that nothing happens)
	if _, err := dyn.Resource(kaiPodGroupGVR).Namespace("u-x").Get(context.Background(), "late", metav1.GetOptions{}); err == nil {
		t.Errorf("a PodGroup was written after the watch stopped")
	}
}

// The queues: a parent with the cluster's GPUs, and under it one leaf per
// namespace with an equal share that adds up to them, over-quota weight 1.
func TestKAIQueues(t *testing.T) {
	qs := kaiQueueObjects(8, []string{"u-a", "u-b", "u-c"})
	if len(qs) != 4 || qs[0].GetName() != kaiParentQueue {
		t.Fatalf("queues %v", qs)
	}
	if p, _, _ := unstructured.NestedString(qs[0].Object, "spec", "parentQueue"); p != "" {
		t.Errorf("the parent queue has a parent %q", p)
	}
	sum := 0.0
	for i, q := range qs[1:] {
		if q.GetName() != []string{"u-a", "u-b", "u-c"}[i] {
			t.Errorf("queue %d is %s", i, q.GetName())
		}
		p, _, _ := unstructured.NestedString(q.Object, "spec", "parentQueue")
		quota, _, _ := unstructured.NestedFloat64(q.Object, "spec", "resources", "gpu", "quota")
		w, _, _ := unstructured.NestedInt64(q.Object, "spec", "resources", "gpu", "overQuotaWeight")
		lim, _, _ := unstructured.NestedInt64(q.Object, "spec", "resources", "gpu", "limit")
		if p != kaiParentQueue || math.Abs(quota-8.0/3) > 1e-9 || w != 1 || lim != -1 {
			t.Errorf("queue %s: parent %q, quota %v, weight %d, limit %d", q.GetName(), p, quota, w, lim)
		}
		sum += quota
	}
	if math.Abs(sum-8) > 1e-9 {
		t.Errorf("leaf quotas add up to %v, want 8", sum)
	}
}

// Without its build, KAI's row says "not run" and why, and no plane is
// started.
func TestKAINotBuilt(t *testing.T) {
	checkNotBuilt(t, "kai", trace.SynthConfig{Jobs: 2, Seed: 1, Users: 1, Load: 8, GPUs: []int{1}, MaxDuration: 60})
}

// A small arena under KAI-Scheduler: 16 synthetic jobs of 1 to 4 GPUs from
// 3 users on 2 servers of 4 GPUs at 100× speed; every job completes, in
// order, no sooner than its work allows, and the figures are sane.
func TestKAIArena(t *testing.T) {
	needPeer(t, "kai", missingKAI)
	a := playArena(t, trace.SynthConfig{Jobs: 16, Seed: 2, Users: 3, Load: 8, GPUs: []int{1, 1, 2, 4}, MaxDuration: 900},
		"kai", Config{Speed: 100, Checkpoints: Checkpoints{Every: 300, OnTerm: true}, DeclareWork: true, Timeout: 5 * time.Minute}, 10*time.Minute)
	doc := a.report(t)
	a.checkRows(t, doc.Results, "kai")
	if doc.Results[0].Sim != nil {
		t.Errorf("kai's row has simulator figures")
	}
}
