package kube

import (
	"context"
	"math"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynfake "k8s.io/client-go/dynamic/fake"

	"github.com/gandiva-sched/gandiva/internal/cluster"
)

// A JobSet of a Kubeflow TrainJob is suspended and resumed through the
// TrainJob (whose controller would undo a suspension of the JobSet alone)
// and the JobSet; a JobSet of no TrainJob only through itself.
func TestTrainJobSuspendsThroughOwner(t *testing.T) {
	owned := testJobSet(t, func(u map[string]any) {
		u["metadata"].(map[string]any)["name"] = "tj"
		u["metadata"].(map[string]any)["ownerReferences"] = []any{map[string]any{"apiVersion": "trainer.kubeflow.org/v1alpha1",
			"kind": "TrainJob", "name": "tj", "uid": "tj-uid", "controller": true}}
	})
	plain := testJobSet(t, nil) // team-a/js
	tj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
		"metadata": map[string]any{"namespace": "team-a", "name": "tj", "uid": "tj-uid"},
		"spec":     map[string]any{"runtimeRef": map[string]any{"name": "torch-distributed"}, "suspend": false}}}
	dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		jobSetGVR: "JobSetList", trainJobGVR: "TrainJobList"}, owned, plain, tj)
	c := &Clients{Dynamic: dyn}
	ctx := context.Background()
	body := []byte(`{"metadata":{"annotations":{"gandiva.io/state":"suspended"}},"spec":{"suspend":true}}`)

	out, err := (jobSetKind{}).Patch(ctx, c, "team-a", "tj", body)
	if err != nil {
		t.Fatal(err)
	}
	if !(jobSetKind{}).Suspended(out) || out.GetAnnotations()[AnnState] != "suspended" {
		t.Fatalf("JobSet after the patch: suspended %v, annotations %v", (jobSetKind{}).Suspended(out), out.GetAnnotations())
	}
	got, err := dyn.Resource(trainJobGVR).Namespace("team-a").Get(ctx, "tj", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s, _, _ := unstructured.NestedBool(got.Object, "spec", "suspend"); !s {
		t.Fatal("the TrainJob was not suspended")
	}

	// a plain JobSet: no TrainJob of its name is touched (none exists)
	if _, err := (jobSetKind{}).Patch(ctx, c, "team-a", "js", body); err != nil {
		t.Fatalf("plain JobSet: %v", err)
	}
	// annotations alone: the TrainJob is left as it is
	if _, err := (jobSetKind{}).Patch(ctx, c, "team-a", "tj", []byte(`{"metadata":{"annotations":{"gandiva.io/state":"running"}}}`)); err != nil {
		t.Fatal(err)
	}
	patches := 0
	for _, a := range dyn.Actions() {
		if a.GetVerb() == "patch" && a.GetResource() == trainJobGVR {
			patches++
		}
	}
	if patches != 1 {
		t.Fatalf("%d patches of TrainJobs, want 1 (the suspension; none for a plain JobSet or an annotations-only patch)", patches)
	}
	if p, err := ownerSuspend([]byte(`{"spec":{"parallelism":2}}`)); p != nil || err != nil {
		t.Fatalf("a patch without suspend gives a TrainJob patch %s (%v)", p, err)
	}
	if _, ok := trainJobOwner(plain); ok {
		t.Fatal("a plain JobSet has a TrainJob owner")
	}
}

// trainJobWith is a TrainJob whose status.trainerStatus is ts (absent: nil).
func trainJobWith(ts any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
		"metadata": map[string]any{"namespace": "team-a", "name": "tj", "uid": "tj-uid"}}}
	if ts != nil {
		u.Object["status"] = map[string]any{"trainerStatus": ts}
	}
	return u
}

// Kubeflow Trainer's status.trainerStatus read as the API gives it, and
// hostile ones (NaN, negative, huge, fractions, wrong types, no time)
// refused with an error naming the field, never a panic.
func TestReadTrainerStatus(t *testing.T) {
	const at = "2026-01-02T03:04:05Z"
	ok := []struct {
		ts   any
		want trainerReport
	}{
		{map[string]any{"progressPercentage": int64(40), "estimatedRemainingSeconds": int64(1200), "lastUpdatedTime": at,
			"metrics": []any{map[string]any{"name": "loss", "value": "0.5"}}}, trainerReport{at: 1767323045, progress: 40, remaining: 1200}},
		{map[string]any{"lastUpdatedTime": at}, trainerReport{at: 1767323045, progress: -1, remaining: -1}},
		{map[string]any{"progressPercentage": float64(100), "estimatedRemainingSeconds": float64(0), "lastUpdatedTime": at}, trainerReport{at: 1767323045, progress: 100, remaining: 0}},
		{map[string]any{"progressPercentage": int64(0), "estimatedRemainingSeconds": int64(math.MaxInt32), "lastUpdatedTime": at}, trainerReport{at: 1767323045, progress: 0, remaining: math.MaxInt32}},
	}
	for _, c := range ok {
		got, has, err := readTrainerStatus(trainJobWith(c.ts))
		if err != nil || !has || got != c.want {
			t.Errorf("%v: %+v %v %v, want %+v", c.ts, got, has, err, c.want)
		}
	}
	if _, has, err := readTrainerStatus(trainJobWith(nil)); has || err != nil {
		t.Errorf("no status: %v %v", has, err)
	}
	bad := []struct {
		ts    any
		field string
	}{
		{map[string]any{"progressPercentage": math.NaN(), "lastUpdatedTime": at}, "progressPercentage"},
		{map[string]any{"progressPercentage": int64(-1), "lastUpdatedTime": at}, "progressPercentage"},
		{map[string]any{"progressPercentage": int64(101), "lastUpdatedTime": at}, "progressPercentage"},
		{map[string]any{"progressPercentage": 12.5, "lastUpdatedTime": at}, "progressPercentage"},
		{map[string]any{"progressPercentage": "40", "lastUpdatedTime": at}, "progressPercentage"},
		{map[string]any{"progressPercentage": true, "lastUpdatedTime": at}, "progressPercentage"},
		{map[string]any{"estimatedRemainingSeconds": math.Inf(1), "lastUpdatedTime": at}, "estimatedRemainingSeconds"},
		{map[string]any{"estimatedRemainingSeconds": int64(-5), "lastUpdatedTime": at}, "estimatedRemainingSeconds"},
		{map[string]any{"estimatedRemainingSeconds": int64(math.MaxInt32) + 1, "lastUpdatedTime": at}, "estimatedRemainingSeconds"},
		{map[string]any{"estimatedRemainingSeconds": 1e300, "lastUpdatedTime": at}, "estimatedRemainingSeconds"},
		{map[string]any{"estimatedRemainingSeconds": []any{int64(1)}, "lastUpdatedTime": at}, "estimatedRemainingSeconds"},
		{map[string]any{"progressPercentage": int64(40)}, "lastUpdatedTime"},
		{map[string]any{"progressPercentage": int64(40), "lastUpdatedTime": "yesterday"}, "lastUpdatedTime"},
		{map[string]any{"progressPercentage": int64(40), "lastUpdatedTime": int64(7)}, "lastUpdatedTime"},
		{"done", "trainerStatus"},
	}
	for _, c := range bad {
		_, has, err := readTrainerStatus(trainJobWith(c.ts))
		if err == nil || has || !strings.Contains(err.Error(), c.field) || !strings.Contains(err.Error(), "team-a/tj") {
			t.Errorf("%v: ok %v, error %v; want an error naming the TrainJob and %s", c.ts, has, err, c.field)
		}
	}
	u := trainJobWith(nil)
	u.Object["status"] = "x"
	if _, _, err := readTrainerStatus(u); err == nil {
		t.Error("a status that is a string was accepted")
	}
}

// A report becomes the job's attained work (its percentage of the declared
// iters, never backwards) and its speed (remaining seconds over remaining
// mini-batches, while it holds GPUs, bounded); a job of no declared length,
// or over, gets nothing.
func TestTrainerEvent(t *testing.T) {
	j := &cluster.Job{ID: 3, Spec: &cluster.JobSpec{Iters: 1000}, State: cluster.Running, GPUs: []cluster.GPUID{0, 1}, Done: 100}
	ev, ok := trainerEvent(j, trainerReport{at: 5, progress: 40, remaining: 1200}, 10)
	if !ok || ev.Kind != cluster.EvProfile || ev.Job != 3 || ev.Time != 10 || ev.Done != 400 || ev.IterTime != 2 {
		t.Fatalf("40%%, 1200 s left: %+v %v; want done 400, 2 s per mini-batch", ev, ok)
	}
	if ev, ok := trainerEvent(j, trainerReport{progress: 5, remaining: -1}, 10); ok {
		t.Errorf("a progress behind the job's and no remaining time: %+v", ev)
	}
	if ev, ok := trainerEvent(j, trainerReport{progress: 5, remaining: 900}, 10); !ok || ev.Done != 100 || ev.IterTime != 1 {
		t.Errorf("progress behind, 900 s left: %+v %v; want done kept at 100, 1 s per mini-batch", ev, ok)
	}
	if ev, ok := trainerEvent(j, trainerReport{progress: 0, remaining: math.MaxInt32}, 10); !ok || ev.IterTime != maxTrainerIterTime {
		t.Errorf("a huge remaining time: %+v %v; want the bound %v", ev, ok, maxTrainerIterTime)
	}
	if ev, ok := trainerEvent(j, trainerReport{progress: 100, remaining: 50}, 10); !ok || ev.Done != 1000 || ev.IterTime != 0 {
		t.Errorf("100%%: %+v %v; want done 1000, no speed", ev, ok)
	}
	susp := *j
	susp.State, susp.GPUs = cluster.Suspended, nil
	if ev, ok := trainerEvent(&susp, trainerReport{progress: 50, remaining: 60}, 10); !ok || ev.Done != 500 || ev.IterTime != 0 {
		t.Errorf("suspended: %+v %v; want the progress only", ev, ok)
	}
	noLen := *j
	noLen.Spec = &cluster.JobSpec{}
	if _, ok := trainerEvent(&noLen, trainerReport{progress: 50, remaining: 60}, 10); ok {
		t.Error("a job of no declared length got an event")
	}
	over := *j
	over.State = cluster.Finished
	if _, ok := trainerEvent(&over, trainerReport{progress: 50, remaining: 60}, 10); ok {
		t.Error("a finished job got an event")
	}
	if _, ok := trainerEvent(nil, trainerReport{progress: 50}, 10); ok {
		t.Error("no job got an event")
	}
}

// The JobSet of a TrainJob reports the TrainJob's status, found by its
// owner reference's name and UID; a plain JobSet, a TrainJob not cached
// or of another UID (a new one of the same name) report none.
func TestJobSetProgressFromTrainJob(t *testing.T) {
	owned := testJobSet(t, func(u map[string]any) {
		u["metadata"].(map[string]any)["name"] = "tj"
		u["metadata"].(map[string]any)["ownerReferences"] = []any{map[string]any{"apiVersion": "trainer.kubeflow.org/v1alpha1",
			"kind": "TrainJob", "name": "tj", "uid": "tj-uid", "controller": true}}
	})
	tj := trainJobWith(map[string]any{"progressPercentage": int64(40), "lastUpdatedTime": "2026-01-02T03:04:05Z"})
	var asked []string
	lookup := func(gvr schema.GroupVersionResource, ns, name string) (Object, bool) {
		asked = append(asked, gvr.Resource+"/"+ns+"/"+name)
		if gvr == trainJobGVR && ns == "team-a" && name == "tj" && tj != nil {
			return tj, true
		}
		return nil, false
	}
	r, ok, err := (jobSetKind{}).progress(owned, lookup)
	if err != nil || !ok || r.progress != 40 || len(asked) != 1 || asked[0] != "trainjobs/team-a/tj" {
		t.Fatalf("JobSet of TrainJob tj: %+v %v %v (asked %v)", r, ok, err, asked)
	}
	if _, ok, _ := (jobSetKind{}).progress(testJobSet(t, nil), lookup); ok {
		t.Error("a plain JobSet reports progress")
	}
	tj.SetUID("other")
	if _, ok, _ := (jobSetKind{}).progress(owned, lookup); ok {
		t.Error("a TrainJob of another UID reports the JobSet's progress")
	}
	tj = nil
	if _, ok, _ := (jobSetKind{}).progress(owned, lookup); ok {
		t.Error("a TrainJob not cached reports progress")
	}
	var _ progressReporter = jobSetKind{}
	for _, k := range []Kind{jobKind{}, rayJobKind{}, lwsKind{}, pytorchJobKind{}} {
		if _, ok := k.(progressReporter); ok {
			t.Errorf("kind %s reports progress", k.Prefix())
		}
	}
}

// checkTrainerStatus reads u as a TrainJob's status (FuzzKindsHostile):
// no panic, and a report within its bounds whose event stays in the job's.
func checkTrainerStatus(t *testing.T, u *unstructured.Unstructured) {
	t.Helper()
	r, ok, err := readTrainerStatus(u)
	if !ok {
		if r != (trainerReport{}) {
			t.Fatalf("no report, but %+v (%v)", r, err)
		}
		return
	}
	if r.progress < -1 || r.progress > 100 || r.remaining < -1 || r.remaining > maxTrainerRemaining || math.IsNaN(r.at) {
		t.Fatalf("report out of bounds: %+v", r)
	}
	j := &cluster.Job{Spec: &cluster.JobSpec{Iters: 1e6}, State: cluster.Running, GPUs: []cluster.GPUID{0}, Done: 10}
	if ev, ok := trainerEvent(j, r, 1); ok && (ev.Done < 10 || ev.Done > 1e6 || ev.IterTime < 0 || ev.IterTime > maxTrainerIterTime) {
		t.Fatalf("report %+v: event %+v out of the job's bounds", r, ev)
	}
}
