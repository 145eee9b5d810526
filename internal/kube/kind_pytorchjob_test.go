package kube

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/utils/ptr"
)

// testPyTorchJob is a PyTorchJob of Gandiva's: a Master of 1 replica and
// a Worker of 2 replicas, 1 GPU each, as unstructured, running.
func testPyTorchJob(t *testing.T, mutate func(map[string]any)) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
		"metadata": map[string]any{"namespace": "team-a", "name": "pt", "uid": "pt-uid",
			"annotations": map[string]any{AnnIters: "1000", AnnIterTime: "0.5"}},
		"spec": map[string]any{
			"runPolicy": map[string]any{"backoffLimit": int64(3)},
			"pytorchReplicaSpecs": map[string]any{
				"Master": map[string]any{"replicas": int64(1), "restartPolicy": "OnFailure", "template": podTemplate(t, SchedulerName, "1")},
				"Worker": map[string]any{"replicas": int64(2), "restartPolicy": "OnFailure", "template": podTemplate(t, SchedulerName, "1")},
			}},
		"status": map[string]any{"conditions": []any{
			map[string]any{"type": "Created", "status": "True", "reason": "PyTorchJobCreated"},
			map[string]any{"type": "Running", "status": "True", "reason": "PyTorchJobRunning"},
		}},
	}}
	if mutate != nil {
		mutate(u.Object)
	}
	return u
}

func pytorchReplicas(u map[string]any) map[string]any {
	return u["spec"].(map[string]any)["pytorchReplicaSpecs"].(map[string]any)
}

// A PyTorchJob's gang is the replicas of its Master and Worker specs (one
// where unset, any case of the type's name); it is fixed-width, not
// preemptible unless its annotation says so, and refused when its pods
// differ in GPUs or its spec cannot be read.
func TestPyTorchJobGang(t *testing.T) {
	w := fromObject(pytorchJobKind{}, testPyTorchJob(t, nil))
	if w.bad != "" {
		t.Fatalf("refused: %s", w.bad)
	}
	if w.gang != 3 || w.podGPUs != 1 || w.spec.GPUs != 3 || w.key != "pytorchjob/team-a/pt" || w.spec.Name != "team-a/pytorchjob:pt" {
		t.Fatalf("gang %d × %d GPUs (spec %d), key %q, name %q; want 3 × 1 (3), pytorchjob/team-a/pt, team-a/pytorchjob:pt",
			w.gang, w.podGPUs, w.spec.GPUs, w.key, w.spec.Name)
	}
	if got := (pytorchJobKind{}).PodSets(testPyTorchJob(t, nil)); len(got) != 2 || got[0].Name != "Master" || got[0].Count != 1 || got[1].Name != "Worker" || got[1].Count != 2 {
		t.Fatalf("pod sets %+v, want Master 1 then Worker 2", got)
	}
	if w.preemptible || !managedObject(pytorchJobKind{}, testPyTorchJob(t, nil)) {
		t.Fatalf("preemptible %v by default, or not managed", w.preemptible)
	}
	yes := fromObject(pytorchJobKind{}, testPyTorchJob(t, func(u map[string]any) {
		u["metadata"].(map[string]any)["annotations"].(map[string]any)[AnnPreemptible] = "true"
	}))
	if !yes.preemptible || yes.bad != "" {
		t.Fatalf("gandiva.io/preemptible=true: preemptible %v, bad %q", yes.preemptible, yes.bad)
	}
	// lower-case types (the operator's defaulting takes them), replicas unset: one pod each
	lower := testPyTorchJob(t, func(u map[string]any) {
		u["spec"].(map[string]any)["pytorchReplicaSpecs"] = map[string]any{
			"master": map[string]any{"template": podTemplate(t, SchedulerName, "2")},
			"worker": map[string]any{"template": podTemplate(t, SchedulerName, "2")},
		}
	})
	if w := fromObject(pytorchJobKind{}, lower); w.bad != "" || w.gang != 2 || w.podGPUs != 2 || (pytorchJobKind{}).Width(lower) != 2 {
		t.Fatalf("lower-case types, replicas unset: gang %d × %d (bad %q), want 2 × 2", w.gang, w.podGPUs, w.bad)
	}
	if managedObject(pytorchJobKind{}, testPyTorchJob(t, func(u map[string]any) {
		for _, rt := range []string{"Master", "Worker"} {
			pytorchReplicas(u)[rt].(map[string]any)["template"] = podTemplate(t, "default-scheduler", "1")
		}
	})) {
		t.Error("a PyTorchJob of another scheduler is managed")
	}

	for _, c := range []struct {
		name   string
		mutate func(map[string]any)
		want   string
	}{
		{"master without GPUs", func(u map[string]any) {
			pytorchReplicas(u)["Master"].(map[string]any)["template"] = podTemplate(t, SchedulerName, "0")
		}, "different GPUs"},
		{"malformed", func(u map[string]any) { pytorchReplicas(u)["Worker"].(map[string]any)["replicas"] = "two" }, "no pod template"},
		{"too many pods", func(u map[string]any) { pytorchReplicas(u)["Worker"].(map[string]any)["replicas"] = int64(1 << 30) }, "no pod template"},
		{"negative", func(u map[string]any) { pytorchReplicas(u)["Worker"].(map[string]any)["replicas"] = int64(-1) }, "no pod template"},
		{"no template", func(u map[string]any) { delete(pytorchReplicas(u)["Worker"].(map[string]any), "template") }, "no pod template"},
		{"unknown type", func(u map[string]any) {
			pytorchReplicas(u)["Launcher"] = map[string]any{"template": podTemplate(t, SchedulerName, "1")}
		}, "no pod template"},
		{"type twice", func(u map[string]any) {
			pytorchReplicas(u)["worker"] = map[string]any{"template": podTemplate(t, SchedulerName, "1")}
		}, "no pod template"},
		{"no replica specs", func(u map[string]any) { delete(u["spec"].(map[string]any), "pytorchReplicaSpecs") }, "no pod template"},
		{"elastic", func(u map[string]any) {
			u["metadata"].(map[string]any)["annotations"].(map[string]any)[AnnMaxGPUs] = "4"
		}, "cannot grow or shrink"},
	} {
		w := fromObject(pytorchJobKind{}, testPyTorchJob(t, c.mutate))
		if !strings.Contains(w.bad, c.want) {
			t.Errorf("%s: refused for %q, want a reason with %q", c.name, w.bad, c.want)
		}
	}
}

// The pods the operator makes (controller PyTorchJob of kubeflow.org, the
// job-name label its name) are the PyTorchJob's workload; Owns tells them
// from a deleted namesake's by UID.
func TestPyTorchJobPods(t *testing.T) {
	pod := func(apiVersion, kind, owner, uid, label string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p",
			Labels: map[string]string{labelKubeflowJobName: label, "training.kubeflow.org/replica-type": "worker"}},
			Spec: corev1.PodSpec{SchedulerName: SchedulerName}}
		if kind != "" {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: owner, UID: types.UID(uid), Controller: ptr.To(true)}}
		}
		return p
	}
	for _, c := range []struct {
		name string
		p    *corev1.Pod
		want string
	}{
		{"PyTorchJob's", pod("kubeflow.org/v1", "PyTorchJob", "pt", "pt-uid", "pt"), "pytorchjob/ns/pt"},
		{"label not its owner", pod("kubeflow.org/v1", "PyTorchJob", "pt", "pt-uid", "other"), "pods/ns/p"},
		{"no label", pod("kubeflow.org/v1", "PyTorchJob", "pt", "pt-uid", ""), "pods/ns/p"},
		{"another group's PyTorchJob", pod("example.com/v1", "PyTorchJob", "pt", "pt-uid", "pt"), "pods/ns/p"},
		{"not a PyTorchJob's", pod("kubeflow.org/v1", "TFJob", "pt", "pt-uid", "pt"), "pods/ns/p"},
		{"no owner", pod("", "", "", "", "pt"), "pods/ns/p"},
	} {
		if got := workloadKey(c.p); got != c.want {
			t.Errorf("%s: key %q, want %q", c.name, got, c.want)
		}
	}
	pj := testPyTorchJob(t, nil)
	if !(pytorchJobKind{}).Owns(pj, pod("kubeflow.org/v1", "PyTorchJob", "pt", "pt-uid", "pt")) ||
		(pytorchJobKind{}).Owns(pj, pod("kubeflow.org/v1", "PyTorchJob", "pt", "old-uid", "pt")) {
		t.Error("Owns does not tell its pods from a deleted namesake's")
	}
}

// Suspension is spec.runPolicy.suspend (a merge patch that keeps the run
// policy's other fields); it is over when a Succeeded or Failed condition
// is true; its succeeded pods are its replica statuses'.
func TestPyTorchJobSuspendFinish(t *testing.T) {
	pj := testPyTorchJob(t, nil)
	if got := (pytorchJobKind{}).SpecPatch(pj, true, 9); !reflect.DeepEqual(got, map[string]any{"runPolicy": map[string]any{"suspend": true}}) {
		t.Errorf("suspend patch %v", got)
	}
	if got := (pytorchJobKind{}).SpecPatch(pj, false, 0); !reflect.DeepEqual(got, map[string]any{"runPolicy": map[string]any{"suspend": false}}) {
		t.Errorf("resume patch %v", got)
	}
	if (pytorchJobKind{}).Suspended(pj) {
		t.Error("suspended without runPolicy.suspend")
	}
	pj.Object["spec"].(map[string]any)["runPolicy"].(map[string]any)["suspend"] = true
	if !(pytorchJobKind{}).Suspended(pj) {
		t.Error("not suspended with runPolicy.suspend true")
	}
	if done, _, _ := (pytorchJobKind{}).Finished(pj); done {
		t.Error("a running PyTorchJob is over")
	}
	for typ, failed := range map[string]bool{"Succeeded": false, "Failed": true} {
		pj := testPyTorchJob(t, nil)
		st := pj.Object["status"].(map[string]any)
		st["conditions"] = append(st["conditions"].([]any), map[string]any{"type": typ, "status": "False"})
		if done, _, _ := (pytorchJobKind{}).Finished(pj); done {
			t.Errorf("condition %s False: over", typ)
		}
		st["conditions"] = append(st["conditions"].([]any), map[string]any{"type": typ, "status": "True", "reason": "R"})
		if done, f, _ := (pytorchJobKind{}).Finished(pj); !done || f != failed {
			t.Errorf("condition %s True: over %v, failed %v", typ, done, f)
		}
	}
	pj.Object["status"].(map[string]any)["replicaStatuses"] = map[string]any{
		"Master": map[string]any{"succeeded": int64(1)}, "Worker": map[string]any{"succeeded": int64(2), "active": int64(0)}}
	if n := (pytorchJobKind{}).Succeeded(pj); n != 3 {
		t.Errorf("succeeded %d, want 3", n)
	}
}

// Gandiva's conditions are merged into a PyTorchJob's status beside the
// operator's (its schema has conditions), with the annotation.
func TestPyTorchJobWriteStatus(t *testing.T) {
	pj := testPyTorchJob(t, nil)
	dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		pytorchJobGVR: "PyTorchJobList"}, pj.DeepCopy())
	c := &Clients{Dynamic: dyn}
	ctx := context.Background()
	st, _ := decideStatus(statusInput{job: &cluster.Job{State: cluster.Running}, policy: "p", ann: map[string]string{AnnPlacement: "a=1"}})
	stamp(st, nil, time.Unix(100, 0))
	if err := (pytorchJobKind{}).WriteStatus(ctx, c, pj, st); err != nil {
		t.Fatal(err)
	}
	got, err := dyn.Resource(pytorchJobGVR).Namespace("team-a").Get(ctx, "pt", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if shownKey(got, st) != wantedKey(st) {
		t.Errorf("shows %s, want %s", shownKey(got, st), wantedKey(st))
	}
	conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
	if len(conds) != 2+len(st.Conditions) || conds[0].(map[string]any)["type"] != "Created" || conds[1].(map[string]any)["type"] != "Running" {
		t.Errorf("conditions %v: the operator's not kept before ours", conds)
	}
	var k Kind = pytorchJobKind{}
	if c, ok := k.(conditionless); ok && c.Conditionless() {
		t.Error("a PyTorchJob's status is taken to have no conditions")
	}
}
