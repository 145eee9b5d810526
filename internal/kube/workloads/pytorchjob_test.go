package workloads

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/gandiva-sched/gandiva/internal/kube"
	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
	"github.com/gandiva-sched/gandiva/internal/kube/kubetest"
)

var pytorchJobGVR = schema.GroupVersionResource{Group: "kubeflow.org", Version: "v1", Resource: "pytorchjobs"}

// trainingOperator is the Kubeflow Training Operator v1's binary:
// $GANDIVA_TRAINING_OPERATOR, else training-operator.v1 in the control
// plane's binary directory; "" when there is none.
func trainingOperator() string {
	for _, f := range []string{os.Getenv("GANDIVA_TRAINING_OPERATOR"), filepath.Join(cplane.BinDir(), "training-operator.v1")} {
		if f == "" {
			continue
		}
		if st, err := os.Stat(f); err == nil && st.Mode().IsRegular() {
			return f
		}
	}
	return ""
}

// startTrainingOperator runs the Training Operator (PyTorchJobs only, no
// leader election, no metrics or probes) against p until the test ends.
// Its webhooks' certificates are made by its rotator into the Secret it
// needs in its namespace (gandiva-system); its webhooks are not called
// (the configuration below matches no object of this test).
func startTrainingOperator(t *testing.T, p *cplane.Plane, bin string) {
	t.Helper()
	cs := kubetest.Client(t, p)
	if _, err := cs.CoreV1().Secrets("gandiva-system").Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "gandiva-system", Name: "training-operator-webhook-cert"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// the rotator's certificates are ready only once it has put its CA
	// into this configuration's webhooks: one that matches only a
	// resource served here by nothing (TFJobs), failing open
	if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(context.Background(), &admissionv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "validator.training-operator.kubeflow.org"},
		Webhooks: []admissionv1.ValidatingWebhook{{
			Name:                    "validator.tfjob.training-operator.kubeflow.org",
			ClientConfig:            admissionv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:1/validate-kubeflow-org-v1-tfjob")},
			Rules:                   []admissionv1.RuleWithOperations{{Operations: []admissionv1.OperationType{admissionv1.Create}, Rule: admissionv1.Rule{APIGroups: []string{"kubeflow.org"}, APIVersions: []string{"v1"}, Resources: []string{"tfjobs"}}}},
			FailurePolicy:           ptr.To(admissionv1.Ignore),
			SideEffects:             ptr.To(admissionv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
		}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "--enable-scheme=pytorchjob", "--leader-elect=false",
		"--metrics-bind-address=0", "--health-probe-bind-address=0", fmt.Sprintf("--webhook-server-port=%d", port))
	cmd.Env = append(os.Environ(), "KUBECONFIG="+p.Kubeconfig, "MY_POD_NAMESPACE=gandiva-system")
	cmd.Stdout, cmd.Stderr = testWriter{t}, testWriter{t}
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	// the operator starts its controllers once its rotator sees the
	// certificates of its Secret in its fixed directory, where a kubelet
	// would mount the Secret: the test plays that kubelet
	var data map[string][]byte
	kubetest.Eventually(t, 60*time.Second, "the operator's webhook certificates in its Secret", func() (bool, error) {
		sec, err := cs.CoreV1().Secrets("gandiva-system").Get(context.Background(), "training-operator-webhook-cert", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		data = sec.Data
		return len(data["tls.crt"]) > 0 && len(data["tls.key"]) > 0 && len(data["ca.crt"]) > 0, nil
	})
	if err := os.MkdirAll(operatorCertDir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"tls.crt", "tls.key", "ca.crt"} {
		if err := os.WriteFile(filepath.Join(operatorCertDir, f), data[f], 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// operatorCertDir is where the Training Operator v1.8.1 reads its webhook
// certificates (fixed in its source).
const operatorCertDir = "/tmp/k8s-webhook-server/serving-certs"

// pytorchJob is a PyTorchJob of a Master and a Worker of PodTemplate,
// preemptible by its annotation (its script, here none, would resume from
// a checkpoint).
func pytorchJob(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	pt := PodTemplate()
	pt.Spec.Containers[0].Name = "pytorch" // the operator's container: it adds its port to it
	tmpl, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&pt)
	if err != nil {
		t.Fatal(err)
	}
	spec := func() map[string]any {
		return map[string]any{"replicas": int64(1), "restartPolicy": "Never", "template": runtime.DeepCopyJSON(tmpl)}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
		"metadata": map[string]any{"namespace": NS, "name": name,
			"annotations": map[string]any{kube.AnnPreemptible: "true"}},
		"spec": map[string]any{"pytorchReplicaSpecs": map[string]any{"Master": spec(), "Worker": spec()}},
	}}
}

// A PyTorchJob of a Master and a Worker naming Gandiva, under the real
// Training Operator v1.8.1 (its CRD from third_party): bound whole,
// suspended through spec.runPolicy.suspend when a job of a higher Tiresias
// queue arrives (the operator deletes its pods), resumed on other nodes
// (its old ones cordoned) with new pods the operator makes; its status
// shows Gandiva's condition beside the operator's.
func TestPyTorchJobOperatorBoundWholeSuspendedResumedElsewhere(t *testing.T) {
	bin := trainingOperator()
	if bin == "" {
		why := "no Training Operator binary: run scripts/kube-workloads (or set GANDIVA_TRAINING_OPERATOR to one built by " +
			"CGO_ENABLED=0 go install github.com/kubeflow/training-operator/cmd/training-operator.v1@v1.8.1)"
		if os.Getenv("CI") == "true" {
			t.Fatal(why + "\n(CI=true: the tests that need it must run; .ci/run builds it first)")
		}
		t.Skip(why)
	}
	p, cs, dc := Plane(t)
	ctx := context.Background()
	InstallCRD(t, dc, "third_party/training-operator/manifests/base/crds/kubeflow.org_pytorchjobs.yaml")
	first := kubetest.AddNodes(t, cs, kubetest.Nodes{Count: 2, GPUs: 1})
	kubetest.Namespace(t, cs, NS)
	kubetest.Namespace(t, cs, "gandiva-system")
	startTrainingOperator(t, p, bin)
	RunGandiva(t, p, kube.Options{Policy: "tiresias-l:limits=1/100000"})
	if _, err := dc.Resource(pytorchJobGVR).Namespace(NS).Create(ctx, pytorchJob(t, "pt"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const sel = "training.kubeflow.org/job-name=pt"
	get := func() (string, string, bool, error) {
		u, err := dc.Resource(pytorchJobGVR).Namespace(NS).Get(ctx, "pt", metav1.GetOptions{})
		if err != nil {
			return "", "", false, err
		}
		s, _, _ := unstructured.NestedBool(u.Object, "spec", "runPolicy", "suspend")
		return u.GetAnnotations()[kube.AnnState], u.GetAnnotations()[kube.AnnPlacement], s, nil
	}
	var pods []corev1.Pod
	var err error
	kubetest.Eventually(t, 120*time.Second, "PyTorchJob pt's 2 pods made by the operator, bound to the 2 nodes", func() (bool, error) {
		pods, err = LivePods(cs, sel)
		return err == nil && len(pods) == 2 && slices.Equal(NodesOf(pods), first), err
	})
	if st, pl, susp, err := get(); err != nil || st != kube.StateRunning || pl != "gpu-0=1,gpu-1=1" || susp {
		t.Fatalf("PyTorchJob pt: state %q, placement %q, suspend %v (%v); want running on gpu-0=1,gpu-1=1", st, pl, susp, err)
	}

	time.Sleep(1500 * time.Millisecond) // pt passes 1 GPU-second: the lower queue
	if _, err := cs.BatchV1().Jobs(NS).Create(ctx, GangJob("hi", 2, false), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 120*time.Second, "pt suspended, its pods gone, hi's 2 pods bound", func() (bool, error) {
		st, _, susp, err := get()
		if err != nil {
			return false, err
		}
		ptPods, err := LivePods(cs, sel)
		if err != nil {
			return false, err
		}
		hiPods, err := LivePods(cs, "batch.kubernetes.io/job-name=hi")
		if err != nil {
			return false, err
		}
		return st == kube.StateSuspended && susp && len(ptPods) == 0 && len(hiPods) == 2, nil
	})

	for _, n := range first {
		if _, err := cs.CoreV1().Nodes().Patch(ctx, n, "application/merge-patch+json", []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	second := kubetest.AddNodes(t, cs, kubetest.Nodes{First: 2, Count: 2, GPUs: 1})
	if err := cs.BatchV1().Jobs(NS).Delete(ctx, "hi", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationOrphan)}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Pods(NS).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)},
		metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=hi"}); err != nil {
		t.Fatal(err)
	}
	var seen string // what the last look saw, for a failure
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("pt at the last look: %s", seen)
		}
	})
	kubetest.Eventually(t, 120*time.Second, "pt resumed on gpu-2 and gpu-3, its 2 new pods bound there", func() (bool, error) {
		st, pl, susp, err := get()
		if err != nil {
			return false, err
		}
		ptPods, err := LivePods(cs, sel)
		if err != nil {
			return false, err
		}
		seen = fmt.Sprintf("state %q placement %q suspend %v, live pods on %v", st, pl, susp, NodesOf(ptPods))
		return st == kube.StateRunning && pl == "gpu-2=1,gpu-3=1" && !susp && len(ptPods) == 2 && slices.Equal(NodesOf(ptPods), second), nil
	})
	// Gandiva's status condition beside the operator's, which keeps it
	kubetest.Eventually(t, 90*time.Second, "pt's status showing GandivaScheduling beside the operator's Running", func() (bool, error) {
		u, err := dc.Resource(pytorchJobGVR).Namespace(NS).Get(ctx, "pt", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		seen = fmt.Sprintf("status %v, annotation %q", u.Object["status"], u.GetAnnotations()[kube.AnnReason])
		return HasCondition(u, kube.CondScheduling) && HasCondition(u, "Running"), nil
	})
	now, err := LivePods(cs, sel)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range now {
		for _, o := range pods {
			if p.UID == o.UID {
				t.Errorf("pod %s ran through the suspension", p.Name)
			}
		}
	}
}
