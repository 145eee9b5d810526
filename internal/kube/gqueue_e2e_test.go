package kube

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
	"github.com/gandiva-sched/gandiva/internal/kube/kubetest"
)

// installCRD creates the CustomResourceDefinition of the manifest at path
// and waits until the API server serves it.
func installCRD(t testing.TB, dyn dynamic.Interface, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := yaml.Unmarshal(data, &obj); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	crd := &unstructured.Unstructured{Object: obj}
	if crd.GetKind() != "CustomResourceDefinition" {
		t.Fatalf("%s: a %s, not a CustomResourceDefinition", path, crd.GetKind())
	}
	gvr := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	ctx := context.Background()
	if _, err := dyn.Resource(gvr).Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	kubetest.WaitCRDEstablished(t, dyn, crd.GetName(), 30*time.Second)
}

// syncBuf is a buffer safe for concurrent writes (a log's).
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestQueues: GandivaQueues org → team-a (3 tickets, a quota of 2 V100
// GPUs), team-b (1 ticket) under gandiva-fair on one four-GPU node. The
// tree's tickets reach the policy (team-a 75, team-b 25; the ConfigMap's
// tickets of team-a ignored with a warning); team-a's third Job waits,
// its pod's PodScheduled condition naming the queue and its quota, while
// team-b's Job runs on a free GPU; the queues' status shows their usage,
// share, entitlement and validity (a queue on a cycle is not valid); when
// a Job of team-a is deleted, its third one starts.
func TestQueues(t *testing.T) {
	t.Parallel()
	p := kubetest.Start(t, cplane.Options{Kwok: true, Controllers: true})
	cs := kubetest.Client(t, p)
	ctx := context.Background()
	dyn := kubetest.Dynamic(t, p)
	installCRD(t, dyn, "../../deploy/base/crds/gandivaqueues.yaml")
	kubetest.AddNodes(t, cs, kubetest.Nodes{Count: 1, GPUs: 4})
	for _, ns := range []string{"team-a", "team-b", "gandiva-system"} {
		kubetest.Namespace(t, cs, ns)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "gandiva-system", Name: "gandiva-settings"},
		Data: map[string]string{"tickets.team-a": "9"}}
	if _, err := cs.CoreV1().ConfigMaps("gandiva-system").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	queue := func(name string, spec map[string]any) {
		t.Helper()
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "gandiva.io/v1alpha1", "kind": "GandivaQueue",
			"metadata": map[string]any{"name": name}, "spec": spec}}
		if _, err := dyn.Resource(QueueGVR).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating GandivaQueue %s: %v", name, err)
		}
	}
	queue("org", map[string]any{"tickets": int64(1)})
	queue("team-a", map[string]any{"parent": "org", "tickets": int64(3), "quota": map[string]any{"V100": int64(2)}, "namespaces": []any{"team-a"}})
	queue("team-b", map[string]any{"parent": "org", "tickets": int64(1), "namespaces": []any{"team-b"}})
	queue("loop", map[string]any{"parent": "loop"})
	// the CRD's own checks
	bad := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "gandiva.io/v1alpha1", "kind": "GandivaQueue",
		"metadata": map[string]any{"name": "bad"}, "spec": map[string]any{"tickets": int64(-1)}}}
	if _, err := dyn.Resource(QueueGVR).Create(ctx, bad, metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), "tickets") {
		t.Fatalf("a queue with -1 tickets: %v", err)
	}

	logs := &syncBuf{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	d := NewDashboard()
	runGandiva(t, p, Options{Policy: "gandiva-fair:quantum=2", Log: log, Dashboard: d})
	for _, name := range []string{"a1", "a2", "a3"} {
		createJob(t, cs, jobSpec{ns: "team-a", name: name, pods: 1, gpus: 1})
		if name == "a1" { // (a1 and a2 first: they take the quota)
			kubetest.Eventually(t, 60*time.Second, "a1 bound", func() (bool, error) {
				b, _, err := jobPods(cs, "team-a", "a1")
				return len(b) == 1, err
			})
		}
	}
	kubetest.Eventually(t, 60*time.Second, "a2 bound", func() (bool, error) {
		b, _, err := jobPods(cs, "team-a", "a2")
		return len(b) == 1, err
	})
	createJob(t, cs, jobSpec{ns: "team-b", name: "b1", pods: 1, gpus: 1})
	kubetest.Eventually(t, 60*time.Second, "b1 bound", func() (bool, error) {
		b, _, err := jobPods(cs, "team-b", "b1")
		return len(b) == 1, err
	})
	want := "queue team-a allows 2 V100 GPUs and its workloads hold 2"
	var msg string
	kubetest.Eventually(t, 60*time.Second, "a3's pod told it waits for its queue's quota", func() (bool, error) {
		b, all, err := jobPods(cs, "team-a", "a3")
		if len(b) > 0 {
			t.Fatalf("a3 bound over its queue's quota: %v", b[0].Spec.NodeName)
		}
		if err != nil {
			return false, err
		}
		for _, p := range all {
			if c := podCondition(&p, corev1.PodScheduled); c != nil {
				msg = c.Message
			}
		}
		return strings.Contains(msg, want), nil
	})
	t.Logf("a3 waits: %s", msg)

	for _, line := range []string{"key=tickets/team-a value=75", "key=tickets/team-b value=25",
		"the ConfigMap's tickets of a namespace that a GandivaQueue holds are ignored"} {
		if !strings.Contains(logs.String(), line) {
			t.Errorf("log without %q:\n%s", line, logs.String())
		}
	}

	status := func(name string) map[string]any {
		u, err := dyn.Resource(QueueGVR).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		st, _, _ := unstructured.NestedMap(u.Object, "status")
		return st
	}
	valid := func(st map[string]any) (string, string) {
		conds, _ := st["conditions"].([]any)
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == "Valid" {
				return fmt.Sprint(m["status"]), fmt.Sprint(m["reason"])
			}
		}
		return "", ""
	}
	kubetest.Eventually(t, 60*time.Second, "the queues' status", func() (bool, error) {
		a, b, org, loop := status("team-a"), status("team-b"), status("org"), status("loop")
		va, _ := valid(a)
		vl, why := valid(loop)
		ok := fmt.Sprint(a["gpus"]) == "2" && fmt.Sprint(b["gpus"]) == "1" && fmt.Sprint(org["gpus"]) == "3" &&
			fmt.Sprint(a["share"]) == "0.75" && fmt.Sprint(b["entitlement"]) == "1" && fmt.Sprint(org["share"]) == "1" &&
			va == "True" && vl == "False" && why == "Cycle"
		if !ok {
			return false, fmt.Errorf("team-a %v, team-b %v, org %v, loop %v", a, b, org, loop)
		}
		return true, nil
	})
	if u, _ := status("team-a")["usage"].(map[string]any); fmt.Sprint(u["V100"]) != "2" {
		t.Errorf("team-a usage %v, want V100: 2", u)
	}
	// the dashboard: the tree depth first, then the queue that is not valid
	kubetest.Eventually(t, 30*time.Second, "the dashboard's queues", func() (bool, error) {
		sum, err := d.Summary(ctx, api.Principal{User: "admin", Admin: true})
		if err != nil {
			return false, err
		}
		var rows []string
		for _, q := range sum.Queues {
			rows = append(rows, fmt.Sprintf("%s/%d/%d/%g/%s/%v", q.Name, q.Depth, q.GPUs, q.Share, q.Quota, q.Valid))
		}
		got := strings.Join(rows, " ")
		return got == "org/0/3/1//true team-a/1/2/0.75/V100: 2/true team-b/1/1/0.25//true loop/0/0/0//false", fmt.Errorf("rows %s", got)
	})

	// a1 deleted: team-a holds 1 of its 2; a3 starts
	bg := metav1.DeletePropagationBackground
	if err := cs.BatchV1().Jobs("team-a").Delete(ctx, "a1", metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 60*time.Second, "a3 bound once a1 is gone", func() (bool, error) {
		b, _, err := jobPods(cs, "team-a", "a3")
		return len(b) == 1, err
	})
	kubetest.Eventually(t, 60*time.Second, "team-a's GPU-seconds written", func() (bool, error) {
		st := status("team-a")
		s, _ := st["gpuSeconds"].(float64)
		if n, ok := st["gpuSeconds"].(int64); ok {
			s = float64(n)
		}
		return s > 0, fmt.Errorf("team-a status %v", st)
	})
}
