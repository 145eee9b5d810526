package kube

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/visible"
)

// decideStatus: the scheduling condition's status and reason follow the
// engine's state; a waiting job shows nothing until it is told why (then
// the same text explain shows); the checkpoint annotations give the
// checkpoint condition, a malformed one a False condition saying what is
// wrong.
func TestDecideStatus(t *testing.T) {
	ckpt := map[string]string{AnnCheckpointTime: "2026-01-02T03:04:05Z", AnnCheckpointStep: "1200", AnnCheckpointCost: "4"}
	for _, c := range []struct {
		name     string
		in       statusInput
		ok       bool
		status   metav1.ConditionStatus
		reason   string
		msg      string // a part of the message
		ckptCond string // the checkpoint condition's status ("": none)
	}{
		{name: "not submitted", in: statusInput{}},
		{name: "queued, not told yet", in: statusInput{job: &cluster.Job{State: cluster.Queued}}},
		{name: "queued", in: statusInput{job: &cluster.Job{State: cluster.Queued}, waitMsg: "queued: needs 4 GPUs, 2 free"},
			ok: true, status: metav1.ConditionFalse, reason: ReasonWaiting, msg: "queued: needs 4 GPUs, 2 free"},
		{name: "just suspended", in: statusInput{job: &cluster.Job{State: cluster.Suspended, Suspends: 1}, policy: "p"},
			ok: true, status: metav1.ConditionFalse, reason: ReasonPreempted, msg: "suspended by policy p; it resumes from its checkpoint"},
		{name: "suspended", in: statusInput{job: &cluster.Job{State: cluster.Suspended, Suspends: 1}, waitMsg: "suspended: 0 GPUs free", ann: ckpt},
			ok: true, status: metav1.ConditionFalse, reason: ReasonPreempted, msg: "suspended: 0 GPUs free", ckptCond: "True"},
		{name: "running", in: statusInput{job: &cluster.Job{State: cluster.Running}, policy: "tiresias-l",
			ann: map[string]string{AnnState: StateRunning, AnnPlacement: "a=2,b=2"}},
			ok: true, status: metav1.ConditionTrue, reason: ReasonRunning, msg: "running on a=2,b=2 (policy tiresias-l)"},
		{name: "moving", in: statusInput{job: &cluster.Job{State: cluster.Migrating}, policy: "gandiva",
			ann: map[string]string{AnnState: StateMoving, AnnPlacement: "c=4"}},
			ok: true, status: metav1.ConditionTrue, reason: ReasonMoving, msg: "moving to c=4 by policy gandiva"},
		{name: "killed", in: statusInput{job: &cluster.Job{State: cluster.Cancelled}, policy: "p", ann: map[string]string{AnnState: StateKilled}},
			ok: true, status: metav1.ConditionFalse, reason: ReasonStopped, msg: "stopped for good by policy p"},
		{name: "over", in: statusInput{job: &cluster.Job{State: cluster.Running}, over: true},
			ok: true, status: metav1.ConditionFalse, reason: ReasonEnded, msg: "over"},
		{name: "bad checkpoint", in: statusInput{job: &cluster.Job{State: cluster.Running}, ann: map[string]string{AnnCheckpointTime: "yesterday"}},
			ok: true, status: metav1.ConditionTrue, reason: ReasonRunning, msg: "running", ckptCond: "False"},
	} {
		st, ok := decideStatus(c.in)
		if ok != c.ok {
			t.Errorf("%s: ok %v, want %v", c.name, ok, c.ok)
			continue
		}
		if !ok {
			continue
		}
		sc := st.Conditions[0]
		if sc.Type != CondScheduling || sc.Status != c.status || sc.Reason != c.reason || !strings.Contains(sc.Message, c.msg) {
			t.Errorf("%s: condition %+v, want %s/%s containing %q", c.name, sc, c.status, c.reason, c.msg)
		}
		if st.Reason != c.reason+": "+sc.Message {
			t.Errorf("%s: annotation %q, want the reason and message", c.name, st.Reason)
		}
		got := ""
		if len(st.Conditions) == 2 {
			got = string(st.Conditions[1].Status)
			if st.Conditions[1].Type != CondCheckpoint {
				t.Errorf("%s: second condition %s", c.name, st.Conditions[1].Type)
			}
		}
		if got != c.ckptCond || len(st.Conditions) > 2 {
			t.Errorf("%s: checkpoint condition %q (%d conditions), want %q", c.name, got, len(st.Conditions), c.ckptCond)
		}
	}
	st, _ := decideStatus(statusInput{job: &cluster.Job{State: cluster.Running}, ann: ckpt})
	cc := st.Conditions[1]
	if cc.Reason != "Saved" || cc.Message != "last checkpoint at 2026-01-02T03:04:05Z, step 1200, written in 4s" ||
		!cc.LastTransitionTime.Time.Equal(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) {
		t.Errorf("checkpoint condition %+v", cc)
	}
}

// boundLine: one line, valid UTF-8, at most MaxReasonBytes, whatever a
// hostile message holds.
func TestBoundLine(t *testing.T) {
	long := strings.Repeat("é", MaxReasonBytes) // 2 bytes each
	for _, in := range []string{"plain", "two\nlines\r\tand\x00nul", "bad \xff utf8", long, "a\u2028b",
		"job \u202eexe.txt", "c1 \u009b31m", "zero\u200bwidth \u2066isolate\u2069", "esc \x1b[2J"} {
		out := boundLine(in)
		if len(out) > MaxReasonBytes || !utf8.ValidString(out) || strings.IndexFunc(out, visible.Hidden) >= 0 {
			t.Errorf("boundLine(%.20q) = %.40q (%d bytes)", in, out, len(out))
		}
	}
	if out := boundLine(long); !strings.HasSuffix(out, "…") {
		t.Errorf("a cut line does not end in …")
	}
	if boundLine("plain") != "plain" {
		t.Error("a short line changed")
	}
}

// statusDue: nothing when the object shows the status; a new status at
// once, then at most every statusEvery; the same status again (the object
// lost it) at most every statusReassert.
func TestStatusDue(t *testing.T) {
	t0 := time.Unix(1000, 0)
	if w, _ := statusDue("a", "a", statusShown{}, t0); w {
		t.Error("written though shown")
	}
	if w, _ := statusDue("a", "", statusShown{}, t0); !w {
		t.Error("a first status held back")
	}
	last := statusShown{key: "a", at: t0}
	if w, wait := statusDue("b", "a", last, t0.Add(time.Second)); w || wait != statusEvery-time.Second {
		t.Errorf("a new status 1 s after the last write: write %v, wait %v", w, wait)
	}
	if w, _ := statusDue("b", "a", last, t0.Add(statusEvery)); !w {
		t.Error("a new status held back statusEvery after the last write")
	}
	if w, _ := statusDue("a", "", last, t0.Add(statusEvery)); w {
		t.Error("the same status written again within statusReassert")
	}
	if w, _ := statusDue("a", "", last, t0.Add(statusReassert)); !w {
		t.Error("the same status not written again after statusReassert")
	}
}

// mergeConditions keeps the controller's conditions as they are, in their
// order, and replaces or adds Gandiva's (a duplicate of ours dropped).
func TestMergeConditions(t *testing.T) {
	theirs := map[string]any{"type": "StartupPolicyCompleted", "status": "True", "reason": "X", "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"}
	oldOurs := map[string]any{"type": CondScheduling, "status": "False", "reason": "Waiting", "message": "old"}
	ours := []metav1.Condition{
		{Type: CondScheduling, Status: metav1.ConditionTrue, Reason: "Running", Message: "running", LastTransitionTime: metav1.Unix(5, 0)},
		{Type: CondCheckpoint, Status: metav1.ConditionTrue, Reason: "Saved", Message: "c", LastTransitionTime: metav1.Unix(4, 0)},
	}
	out, err := mergeConditions([]any{oldOurs, theirs, oldOurs}, ours)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 3 {
		t.Fatalf("%d conditions, want 3: %v", len(out), out)
	}
	if out[0].(map[string]any)["reason"] != "Running" || out[1].(map[string]any)["type"] != "StartupPolicyCompleted" ||
		out[2].(map[string]any)["type"] != CondCheckpoint {
		t.Fatalf("merged %v", out)
	}
	if m := out[1].(map[string]any); m["message"] != "m" || m["lastTransitionTime"] != "2026-01-01T00:00:00Z" {
		t.Fatalf("the controller's condition changed: %v", m)
	}
}

// A Job's status is one strategic merge patch of its status subresource:
// the Job controller's conditions kept, Gandiva's merged by type, the
// annotation with them; shownKey then equals the status written.
func TestWriteJobStatus(t *testing.T) {
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "j", Annotations: map[string]string{"user": "x"}},
		Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobSuspended, Status: corev1.ConditionTrue, Reason: "JobSuspended"},
			{Type: CondScheduling, Status: corev1.ConditionFalse, Reason: ReasonWaiting, Message: "queued"},
		}}}
	cs := fake.NewSimpleClientset(j)
	st, _ := decideStatus(statusInput{job: &cluster.Job{State: cluster.Running}, policy: "p",
		ann: map[string]string{AnnPlacement: "a=1", AnnCheckpointTime: "2026-01-02T03:04:05Z"}})
	stamp(st, nil, time.Unix(100, 0))
	if err := (jobKind{}).WriteStatus(context.Background(), &Clients{Typed: cs}, j, st); err != nil {
		t.Fatal(err)
	}
	got, err := cs.BatchV1().Jobs("team-a").Get(context.Background(), "j", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Conditions) != 3 || got.Status.Conditions[0].Type != batchv1.JobSuspended {
		t.Fatalf("conditions %+v", got.Status.Conditions)
	}
	if got.Annotations["user"] != "x" || got.Annotations[AnnReason] != st.Reason {
		t.Fatalf("annotations %v", got.Annotations)
	}
	if shownKey(got, st) != wantedKey(st) {
		t.Fatalf("shown %s\nwant  %s", shownKey(got, st), wantedKey(st))
	}
	// stamp keeps a shown condition's transition time while its status stays
	st2, _ := decideStatus(statusInput{job: &cluster.Job{State: cluster.Running}, policy: "p", ann: map[string]string{AnnPlacement: "b=1"}})
	_, shown := shownStatus(got)
	stamp(st2, shown, time.Unix(500, 0))
	if !st2.Conditions[0].LastTransitionTime.Time.Equal(time.Unix(100, 0)) {
		t.Fatalf("transition time %v, want the shown one", st2.Conditions[0].LastTransitionTime)
	}
}

// A JobSet's conditions are written as one list guarded by its
// resourceVersion (the controller's kept); a RayJob's status gets none
// (its schema has no conditions), the annotation alone; a JobSet of a
// TrainJob shows the same on the TrainJob.
func TestWriteCRDStatus(t *testing.T) {
	owned := testJobSet(t, func(u map[string]any) {
		u["metadata"].(map[string]any)["name"] = "tj"
		u["metadata"].(map[string]any)["ownerReferences"] = []any{map[string]any{"apiVersion": "trainer.kubeflow.org/v1alpha1",
			"kind": "TrainJob", "name": "tj", "uid": "tj-uid", "controller": true}}
		u["status"] = map[string]any{"conditions": []any{map[string]any{"type": "Suspended", "status": "False", "reason": "R", "message": "m",
			"lastTransitionTime": "2026-01-01T00:00:00Z"}}}
	})
	tj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
		"metadata": map[string]any{"namespace": "team-a", "name": "tj", "uid": "tj-uid"}}}
	ray := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "ray.io/v1", "kind": "RayJob",
		"metadata": map[string]any{"namespace": "team-a", "name": "r"}}}
	dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		jobSetGVR: "JobSetList", trainJobGVR: "TrainJobList", rayJobGVR: "RayJobList"}, owned, tj, ray)
	c := &Clients{Dynamic: dyn}
	ctx := context.Background()
	st, _ := decideStatus(statusInput{job: &cluster.Job{State: cluster.Running}, policy: "p", ann: map[string]string{AnnPlacement: "a=1"}})
	stamp(st, nil, time.Unix(100, 0))
	if err := (jobSetKind{}).WriteStatus(ctx, c, owned, st); err != nil {
		t.Fatal(err)
	}
	for _, r := range []schema.GroupVersionResource{jobSetGVR, trainJobGVR} {
		got, err := dyn.Resource(r).Namespace("team-a").Get(ctx, "tj", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if shownKey(got, st) != wantedKey(st) {
			t.Errorf("%s shows %s, want %s", r.Resource, shownKey(got, st), wantedKey(st))
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		if r == jobSetGVR && (len(conds) != 2 || conds[0].(map[string]any)["type"] != "Suspended") {
			t.Errorf("JobSet conditions %v: the controller's not kept", conds)
		}
	}
	if err := (rayJobKind{}).WriteStatus(ctx, c, ray, st); err != nil {
		t.Fatal(err)
	}
	got, err := dyn.Resource(rayJobGVR).Namespace("team-a").Get(ctx, "r", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, has, _ := unstructured.NestedFieldNoCopy(got.Object, "status"); has || got.GetAnnotations()[AnnReason] != st.Reason {
		t.Fatalf("RayJob: %v", got.Object)
	}
	// once written, a RayJob shows all it can: nothing more is due
	var k Kind = rayJobKind{}
	if c, ok := k.(conditionless); !ok || !c.Conditionless() {
		t.Fatal("a RayJob's status is taken to have conditions")
	}
	st.Conditions = nil
	if shownKey(got, st) != wantedKey(st) {
		t.Fatalf("RayJob shows %s, want %s", shownKey(got, st), wantedKey(st))
	}
}

// FuzzShownStatus: a hostile status (any JSON) never panics shownStatus
// or mergeConditions; the merge keeps every entry that is not Gandiva's,
// in order, and holds each of Gandiva's types once.
func FuzzShownStatus(f *testing.F) {
	f.Add(`{"conditions":[{"type":"GandivaScheduling","status":"True","lastTransitionTime":"x"},{"type":"A"},3,null]}`)
	f.Add(`{"conditions":{"type":"GandivaScheduling"}}`)
	f.Add(`{"conditions":[{"type":"GandivaCheckpoint"},{"type":"GandivaCheckpoint","message":7}]}`)
	f.Fuzz(func(t *testing.T, status string) {
		var st any
		if err := json.Unmarshal([]byte(status), &st); err != nil {
			return
		}
		u := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "x"}, "status": st}}
		shownStatus(u)
		ours := []metav1.Condition{{Type: CondScheduling, Status: metav1.ConditionTrue, Reason: "Running", Message: "m"},
			{Type: CondCheckpoint, Status: metav1.ConditionTrue, Reason: "Saved", Message: "c"}}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		out, err := mergeConditions(conds, ours)
		if err != nil {
			t.Fatal(err)
		}
		var theirs, kept []any
		isOurs := func(x any) bool {
			m, ok := x.(map[string]any)
			return ok && (m["type"] == CondScheduling || m["type"] == CondCheckpoint)
		}
		count := map[any]int{}
		for _, x := range conds {
			if !isOurs(x) {
				theirs = append(theirs, x)
			}
		}
		for _, x := range out {
			if isOurs(x) {
				count[x.(map[string]any)["type"]]++
			} else {
				kept = append(kept, x)
			}
		}
		if !reflect.DeepEqual(theirs, kept) || count[CondScheduling] != 1 || count[CondCheckpoint] != 1 {
			t.Fatalf("merged %v into %v: kept %v of %v, ours %v", ours, conds, kept, theirs, count)
		}
	})
}
