package conditions

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/gandiva-sched/gandiva/internal/kube"
	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
	"github.com/gandiva-sched/gandiva/internal/kube/kubetest"
)

type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Logf("%s", b)
	return len(b), nil
}

// startAsScheduler starts a control plane with kwok, the Job controller,
// the named workload controller (none: "") and the user sa; creates the namespaces
// gandiva-system and ns, deploy/base/rbac.yaml and 2 nodes of 1 GPU; and
// runs `gandiva kube` with policy as sa until the test ends, logging to the
// test (debug level when GANDIVA_KUBE_DEBUG is set). leader is the
// scheduler once it leads (nil before).
func startAsScheduler(t *testing.T, policy, controller string) (cs kubernetes.Interface, dc dynamic.Interface, leader func() *kube.Scheduler) {
	t.Helper()
	p := kubetest.Start(t, cplane.Options{Kwok: true, Controllers: true, Users: []cplane.User{
		{Name: sa, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:gandiva-system"}}}})
	if controller != "" {
		kubetest.StartControllers(t, p, controller)
	}
	cs = kubetest.Client(t, p)
	dc = kubetest.Dynamic(t, p)
	kubetest.Namespace(t, cs, "gandiva-system")
	kubetest.Namespace(t, cs, ns)
	create(t, dc, "deploy/base/rbac.yaml")
	kubetest.AddNodes(t, cs, kubetest.Nodes{Count: 2, GPUs: 1})

	var sched *kube.Scheduler
	var mu sync.Mutex
	runCtx, cancel := context.WithCancel(context.Background())
	lvl := slog.LevelInfo
	if os.Getenv("GANDIVA_KUBE_DEBUG") != "" {
		lvl = slog.LevelDebug
	}
	o := kube.Options{Policy: policy,
		Log:           slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: lvl})),
		LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 200 * time.Millisecond,
		OnLeading: func(s *kube.Scheduler) { mu.Lock(); sched = s; mu.Unlock() }}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); kube.Run(runCtx, p.UserConfig(sa), o) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return cs, dc, func() *kube.Scheduler { mu.Lock(); defer mu.Unlock(); return sched }
}

// noRefusedWrites fails the test unless the scheduler led and none of its
// API calls failed.
func noRefusedWrites(t *testing.T, leader func() *kube.Scheduler) {
	t.Helper()
	s := leader()
	if s == nil {
		t.Fatal("gandiva never led")
	}
	if st := s.Stats(); st.Errors > 0 {
		t.Errorf("%d API calls of the scheduler failed (refused by its policy?): see the log", st.Errors)
	}
}

// condition is an object's status condition of type typ (nil: none).
func condition(u *unstructured.Unstructured, typ string) map[string]any {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			return m
		}
	}
	return nil
}

// history watches an object from its creation and records, for every
// version after the first that showed Gandiva's scheduling condition,
// whether it still shows it: a controller that erased it on its next
// status write would leave a version without it.
type history struct {
	mu       sync.Mutex
	seen     bool     // a version showed the condition
	lost     []string // versions after that without it
	versions int
}

func watchHistory(t *testing.T, dc dynamic.Interface, r schema.GroupVersionResource, name string) *history {
	t.Helper()
	w, err := dc.Resource(r).Namespace(ns).Watch(context.Background(), metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	h := &history{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok || (ev.Type != watch.Added && ev.Type != watch.Modified) {
				continue
			}
			has := condition(u, kube.CondScheduling) != nil
			h.mu.Lock()
			h.versions++
			if h.seen && !has {
				h.lost = append(h.lost, u.GetResourceVersion())
			}
			h.seen = h.seen || has
			h.mu.Unlock()
		}
	}()
	t.Cleanup(func() { w.Stop(); <-done })
	return h
}

func (h *history) check(t *testing.T, what string) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	t.Logf("%s: %d versions watched", what, h.versions)
	if !h.seen || len(h.lost) > 0 {
		t.Errorf("%s: condition %s shown %v; versions without it after it was shown: %v (of %d)", what, kube.CondScheduling, h.seen, h.lost, h.versions)
	}
}

// Gandiva, run under the service account of deploy/base/rbac.yaml (its
// ClusterRole and its admission policy), with the Job controller and the
// real JobSet controller: a JobSet that runs shows GandivaScheduling
// Running and gandiva.io/reason; when a job of a higher Tiresias queue
// preempts it, Preempted, with the wait reason `kubectl gandiva explain`
// gives, beside the controller's own Suspended condition; a checkpoint
// its trainer annotates shows as GandivaCheckpoint; the Job that runs
// shows Running beside the Job controller's status. Neither controller
// drops Gandiva's condition on its later status writes (every version
// watched after the first that showed it still shows it), and no write
// of the scheduler's is refused by the policy.
func TestConditionsBesideControllers(t *testing.T) {
	t.Parallel()
	_, dc, leader := startAsScheduler(t, "tiresias-l:limits=10/100000", kubetest.JobSetController)
	ctx := context.Background()

	jsHist := watchHistory(t, dc, jobSetGVR, "js")
	js := workloads(t)["jobset"]
	unstructured.RemoveNestedField(js.Object, "spec", "suspend")
	rjs, _, _ := unstructured.NestedSlice(js.Object, "spec", "replicatedJobs")
	job := rjs[0].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	job["parallelism"], job["completions"], job["backoffLimit"] = int64(1), int64(1), int64(0)
	job["podFailurePolicy"] = map[string]any{"rules": []any{map[string]any{"action": "Ignore",
		"onPodConditions": []any{map[string]any{"type": "DisruptionTarget", "status": "True"}}}}}
	pod := job["template"].(map[string]any)["spec"].(map[string]any)
	pod["containers"] = []any{map[string]any{"name": "main", "image": "trainer:1",
		"resources": map[string]any{"limits": map[string]any{string(kube.GPU): "1"}}}}
	if err := unstructured.SetNestedSlice(js.Object, rjs, "spec", "replicatedJobs"); err != nil {
		t.Fatal(err)
	}
	if _, err := dc.Resource(jobSetGVR).Namespace(ns).Create(ctx, js, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	getJS := func() (*unstructured.Unstructured, error) {
		return dc.Resource(jobSetGVR).Namespace(ns).Get(ctx, "js", metav1.GetOptions{})
	}
	kubetest.Eventually(t, 90*time.Second, "JobSet js shows GandivaScheduling Running and its reason", func() (bool, error) {
		u, err := getJS()
		if err != nil {
			return false, err
		}
		c := condition(u, kube.CondScheduling)
		r := u.GetAnnotations()[kube.AnnReason]
		return c != nil && c["status"] == "True" && c["reason"] == kube.ReasonRunning && strings.HasPrefix(r, "Running: running on gpu-"),
			fmt.Errorf("condition %v, %s %q", c, kube.AnnReason, r)
	})
	// its trainer reports a checkpoint (as the user: the annotation is theirs)
	ck := `{"metadata":{"annotations":{"gandiva.io/checkpoint-time":"2026-01-02T03:04:05Z","gandiva.io/checkpoint-step":"300"}}}`
	if _, err := dc.Resource(jobSetGVR).Namespace(ns).Patch(ctx, "js", types.MergePatchType, []byte(ck), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 60*time.Second, "JobSet js shows GandivaCheckpoint", func() (bool, error) {
		u, err := getJS()
		if err != nil {
			return false, err
		}
		c := condition(u, kube.CondCheckpoint)
		return c != nil && c["status"] == "True" && c["lastTransitionTime"] == "2026-01-02T03:04:05Z" &&
			c["message"] == "last checkpoint at 2026-01-02T03:04:05Z, step 300", fmt.Errorf("condition %v", c)
	})

	// js passes 10 GPU-seconds of service: the lower queue; hi needs one of its GPUs
	time.Sleep(6 * time.Second)
	hiHist := watchHistory(t, dc, jobGVR, "hi")
	hi := workloads(t)["job"]
	hi.SetName("hi")
	unstructured.RemoveNestedField(hi.Object, "spec", "suspend")
	for k, v := range map[string]int64{"parallelism": 1, "completions": 1, "backoffLimit": 0} {
		if err := unstructured.SetNestedField(hi.Object, v, "spec", k); err != nil {
			t.Fatal(err)
		}
	}
	if err := unstructured.SetNestedSlice(hi.Object, []any{map[string]any{"name": "main", "image": "trainer:1",
		"resources": map[string]any{"limits": map[string]any{string(kube.GPU): "1"}}}}, "spec", "template", "spec", "containers"); err != nil {
		t.Fatal(err)
	}
	if _, err := dc.Resource(jobGVR).Namespace(ns).Create(ctx, hi, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 120*time.Second, "js Preempted beside the JobSet controller's Suspended condition; hi Running", func() (bool, error) {
		u, err := getJS()
		if err != nil {
			return false, err
		}
		c, susp := condition(u, kube.CondScheduling), condition(u, "Suspended")
		j, err := dc.Resource(jobGVR).Namespace(ns).Get(ctx, "hi", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		hc := condition(j, kube.CondScheduling)
		active, _, _ := unstructured.NestedInt64(j.Object, "status", "active")
		ok := c != nil && c["status"] == "False" && c["reason"] == kube.ReasonPreempted && strings.HasPrefix(c["message"].(string), "suspended") &&
			u.GetAnnotations()[kube.AnnReason] == "Preempted: "+c["message"].(string) &&
			susp != nil && susp["status"] == "True" && condition(u, kube.CondCheckpoint) != nil &&
			hc != nil && hc["reason"] == kube.ReasonRunning && active == 1
		return ok, fmt.Errorf("js: %v, Suspended %v; hi: %v, active %d", c, susp, hc, active)
	})
	// the controllers write on: js's and hi's status keep Gandiva's
	// conditions through them
	time.Sleep(5 * time.Second)
	jsHist.check(t, "JobSet js")
	hiHist.check(t, "Job hi")
	noRefusedWrites(t, leader)
}
