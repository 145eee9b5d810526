package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/gandiva-sched/gandiva/internal/kube"
	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
	"github.com/gandiva-sched/gandiva/internal/kube/kubetest"
)

// TestPlugin builds kubectl-gandiva and runs it as kubectl would (a
// process with only its arguments and environment) against a local
// control plane that gandiva kube schedules: jobs, explain (with the
// waiting job's ETA), queues, nodes, and kubectl's flags --kubeconfig,
// --context, -n, -A and $KUBECONFIG. Where kubectl is installed, it also
// runs `kubectl gandiva jobs` through kubectl's plugin discovery on PATH.
// The same cluster's /metrics, served by the scheduler's Metrics, passes
// promlint and shows what the plugin shows.
func TestPlugin(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "kubectl-gandiva")
	built := make(chan error, 1)
	go func() {
		out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
		if err != nil {
			err = fmt.Errorf("go build: %w\n%s", err, out)
		}
		built <- err
	}()
	p := kubetest.Start(t, cplane.Options{Kwok: true, Controllers: true})
	cs := kubetest.Client(t, p)
	ctx := t.Context()
	kubetest.AddNodes(t, cs, kubetest.Nodes{Count: 2, GPUs: 4})
	for _, ns := range []string{"team-a", "team-b", "gandiva-system"} {
		kubetest.Namespace(t, cs, ns)
	}
	if _, err := cs.CoreV1().ConfigMaps("gandiva-system").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "gandiva-settings"},
		Data: map[string]string{"tickets.team-a": "3"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// another scheduler's pod holds 1 GPU of gpu-1
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "other"},
		Spec: corev1.PodSpec{NodeName: "gpu-1", Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{Name: "main", Image: "x", Resources: corev1.ResourceRequirements{
				Limits: corev1.ResourceList{kube.GPU: resource.MustParse("1")}}}}}}
	if _, err := cs.CoreV1().Pods("team-b").Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	if err := <-built; err != nil {
		t.Fatal(err)
	}
	run := func(env []string, args ...string) string {
		t.Helper()
		c := exec.Command(bin, args...)
		c.Env = append([]string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}, env...)
		var out bytes.Buffer
		c.Stdout, c.Stderr = &out, &out
		if err := c.Run(); err != nil {
			t.Fatalf("kubectl-gandiva %s: %v\n%s", strings.Join(args, " "), err, out.String())
		}
		t.Logf("kubectl gandiva %s\n%s", strings.Join(args, " "), out.String())
		return out.String()
	}
	// contains checks out for wants, with runs of white space as one space
	contains := func(what, out string, wants ...string) {
		t.Helper()
		norm := func(s string) string { return strings.Join(strings.Fields(s), " ") }
		for _, w := range wants {
			if !strings.Contains(norm(out), norm(w)) {
				t.Errorf("%s:\n%s\nwant %q", what, out, w)
			}
		}
	}
	kc := "--kubeconfig=" + p.Kubeconfig
	// queues without the GandivaQueue CRD: the namespaces, tickets from
	// the ConfigMap; then with it: the queues' tree
	contains("queues without the CRD", run(nil, "queues", kc), "no GandivaQueue CRD installed", "team-a     3            100%")
	dyn, err := dynamic.NewForConfig(p.Config())
	if err != nil {
		t.Fatal(err)
	}
	installCRD(t, dyn, "../../deploy/base/crds/gandivaqueues.yaml")
	for _, q := range []map[string]any{{"metadata": map[string]any{"name": "org"}, "spec": map[string]any{"tickets": int64(2)}},
		{"metadata": map[string]any{"name": "team-a"}, "spec": map[string]any{"parent": "org", "tickets": int64(3), "namespaces": []any{"team-a"},
			"quota": map[string]any{"V100": int64(6)}}}} {
		q["apiVersion"], q["kind"] = "gandiva.io/v1alpha1", "GandivaQueue"
		if _, err := dyn.Resource(kube.QueueGVR).Create(ctx, &unstructured.Unstructured{Object: q}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// gandiva kube, with its metrics served as --metrics-addr serves them
	m := kube.NewMetrics()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	served, ran := make(chan error, 1), make(chan error, 1)
	go func() { served <- m.Serve(runCtx, ln) }()
	go func() {
		ran <- kube.Run(runCtx, p.Config(), kube.Options{Policy: "fifo", Metrics: m, Log: slog.New(slog.DiscardHandler),
			LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 200 * time.Millisecond})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("gandiva kube: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("metrics: %v", err)
		}
	})
	createJob(t, cs, "team-a", "a", 4)
	kubetest.Eventually(t, 90*time.Second, "team-a/a bound", func() (bool, error) {
		v, err := kube.Describe(ctx, cs, "team-a", "a")
		return err == nil && v.State == kube.StateRunning, nil
	})
	createJob(t, cs, "team-b", "b", 4) // 3 GPUs free: it waits
	eta := regexp.MustCompile(`ETA: start ~[^;]*\(p10–p90 [^)]*\)`)
	kubetest.Eventually(t, 120*time.Second, "team-b/b's waiting reason with its ETA", func() (bool, error) {
		v, err := kube.Describe(ctx, cs, "team-b", "b")
		return err == nil && eta.MatchString(v.Reason), nil
	})

	// a kubeconfig whose current context is broken, with a good context
	// "b" whose namespace is team-b
	cfg, err := clientcmd.LoadFromFile(p.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	good := *cfg.Contexts[cfg.CurrentContext]
	good.Namespace = "team-b"
	cfg.Contexts["b"] = &good
	nowhere := clientcmdapiCluster(cfg, "https://127.0.0.1:1")
	cfg.Clusters["nowhere"] = &nowhere
	bad := good
	bad.Cluster, bad.Namespace = "nowhere", "team-a"
	cfg.Contexts["bad"] = &bad
	cfg.CurrentContext = "bad"
	twoCtx := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, twoCtx); err != nil {
		t.Fatal(err)
	}
	contains("jobs -A", run(nil, "jobs", kc, "-A"), "NAMESPACE", "team-a     a     Job   4     running  gpu-0=4", "team-b     b     Job   4     pending  -", "queued: needs 4 GPUs")
	if out := run(nil, "jobs", kc, "-n", "team-a"); strings.Contains(out, "team-b") {
		t.Errorf("jobs -n team-a shows team-b:\n%s", out)
	}
	out := run(nil, "explain", "b", "--kubeconfig", twoCtx, "--context", "b")
	contains("explain b --context b", out, "team-b/b: queued: needs 4 GPUs", "\n  eta:   start ~", "pods:  1 of 1 pending")
	if eta.MatchString(strings.SplitN(out, "\n", 2)[0]) {
		t.Errorf("explain: the ETA is on the reason's line, want its own:\n%s", out)
	}
	contains("explain team-a/a via $KUBECONFIG", run([]string{"KUBECONFIG=" + p.Kubeconfig}, "explain", "team-a/a"), "team-a/a: not waiting: running on gpu-0=4")
	contains("queues", run(nil, "queues", kc),
		"QUEUE     TICKETS  NAMESPACES  QUOTA   GPUS", "org       2        -           -", "  team-a  3        team-a      V100=6",
		"NAMESPACE  TICKETS      ENTITLED  GPUS HELD  SHARE  GPUS PENDING  RUNNING  WAITING",
		"team-a     3            75%       4          50%    0             1        0",
		"team-b     1 (default)  25%       0          0%     4             0        1")
	contains("nodes", run(nil, "nodes", kc),
		"gpu-0  up      V100  4     4        0       0     -       -",
		"gpu-1  up      V100  4     0        1       3     -       -",
		"TOTAL                8     4        1       3")
	c := exec.Command(bin, "jobs", "--kubeconfig", twoCtx) // the broken current context
	c.Env = []string{"HOME=" + t.TempDir()}
	if out, err := c.CombinedOutput(); err == nil || !strings.Contains(string(out), "127.0.0.1:1") {
		t.Errorf("jobs with a broken context: %v\n%s", err, out)
	}

	// through kubectl's plugin discovery
	if kubectl, err := exec.LookPath("kubectl"); err != nil {
		t.Log("kubectl is not installed: `kubectl gandiva` through kubectl's plugin discovery is not tried")
	} else {
		c := exec.Command(kubectl, "gandiva", "jobs", "-A")
		c.Env = []string{"HOME=" + t.TempDir(), "KUBECONFIG=" + p.Kubeconfig, "PATH=" + filepath.Dir(bin) + string(os.PathListSeparator) + os.Getenv("PATH")}
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl gandiva jobs -A: %v\n%s", err, out)
		}
		t.Logf("%s gandiva jobs -A (kubectl-gandiva found on PATH)\n%s", kubectl, out)
		contains("kubectl gandiva jobs -A", string(out), "team-a     a     Job   4     running  gpu-0=4")
	}

	// /metrics: promlint finds nothing; the numbers are the plugin's
	resp, err := http.Get("http://" + ln.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	probs, err := promlint.New(bytes.NewReader(body)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, pr := range probs {
		t.Errorf("promlint: %s: %s", pr.Metric, pr.Text)
	}
	for _, w := range []string{"\ngandiva_leader 1\n", "\ngandiva_pods_bound_total 1\n",
		`gandiva_namespace_gpus{namespace="team-a",state="bound"} 4`, `gandiva_namespace_gpus{namespace="team-b",state="pending"} 4`,
		`gandiva_workloads{namespace="team-a",state="running"} 1`, `gandiva_workloads{namespace="team-b",state="pending"} 1`,
		`gandiva_gpus{use="total"} 8`, `gandiva_gpus{use="gandiva"} 4`, `gandiva_gpus{use="other"} 1`, `gandiva_gpus{use="free"} 3`,
		`gandiva_nodes{status="up"} 2`, `gandiva_events_total{reason="Waiting",type="Normal"} 1`,
		"\ngandiva_pod_scheduling_duration_seconds_count 1\n", "\ngandiva_binding_duration_seconds_count 1\n"} {
		if !strings.Contains(string(body), w) {
			t.Errorf("/metrics lacks %q:\n%s", w, body)
		}
	}
}

// clientcmdapiCluster is a copy of cfg's current cluster at server.
func clientcmdapiCluster(cfg *clientcmdapi.Config, server string) clientcmdapi.Cluster {
	c := *cfg.Clusters[cfg.Contexts[cfg.CurrentContext].Cluster]
	c.Server = server
	return c
}

// createJob creates a one-pod Job of gpus GPUs that Gandiva schedules.
func createJob(t *testing.T, cs kubernetes.Interface, ns, name string, gpus int64) {
	t.Helper()
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: batchv1.JobSpec{Parallelism: ptr.To(int32(1)), Completions: ptr.To(int32(1)), BackoffLimit: ptr.To(int32(0)),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{SchedulerName: kube.SchedulerName, RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "main", Image: "x", Command: []string{"sleep"},
					Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{kube.GPU: *resource.NewQuantity(gpus, resource.DecimalSI)}}}}}}}}
	if _, err := cs.BatchV1().Jobs(ns).Create(t.Context(), j, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating Job %s/%s: %v", ns, name, err)
	}
}

// installCRD creates the CustomResourceDefinition of the manifest at path
// and waits until the API server serves it.
func installCRD(t *testing.T, dyn dynamic.Interface, path string) {
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
	gvr := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	if _, err := dyn.Resource(gvr).Create(t.Context(), crd, metav1.CreateOptions{}); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	kubetest.Eventually(t, 30*time.Second, "CRD "+crd.GetName()+" served", func() (bool, error) {
		_, err := dyn.Resource(kube.QueueGVR).List(t.Context(), metav1.ListOptions{})
		return err == nil, nil
	})
}
