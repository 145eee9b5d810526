package workloads

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
	"github.com/gandiva-sched/gandiva/internal/kube/kubetest"
)

// PyTorchJobGVR is the resource of the Kubeflow Training Operator v1's
// PyTorchJobs; PyTorchJobCRD its CRD's file (relative to the repository
// root).
var PyTorchJobGVR = schema.GroupVersionResource{Group: "kubeflow.org", Version: "v1", Resource: "pytorchjobs"}

const PyTorchJobCRD = "third_party/training-operator/manifests/base/crds/kubeflow.org_pytorchjobs.yaml"

// TrainingOperator returns the Kubeflow Training Operator v1's binary:
// $GANDIVA_TRAINING_OPERATOR, else training-operator.v1 in the control
// plane's binary directory. Without one it skips the test, or fails it
// under CI=true (where the tests that need it must run).
func TrainingOperator(t testing.TB) string {
	t.Helper()
	for _, f := range []string{os.Getenv("GANDIVA_TRAINING_OPERATOR"), filepath.Join(cplane.BinDir(), "training-operator.v1")} {
		if f == "" {
			continue
		}
		if st, err := os.Stat(f); err == nil && st.Mode().IsRegular() {
			return f
		}
	}
	why := "no Training Operator binary: run scripts/kube-workloads (or set GANDIVA_TRAINING_OPERATOR to one built by " +
		"CGO_ENABLED=0 go install github.com/kubeflow/training-operator/cmd/training-operator.v1@v1.8.1)"
	if os.Getenv("CI") == "true" {
		t.Fatal(why + "\n(CI=true: the tests that need it must run; .ci/run builds it first)")
	}
	t.Skip(why)
	return ""
}

// StartTrainingOperator runs the Training Operator (PyTorchJobs only, no
// leader election, no metrics or probes) against p until the test ends.
// Its webhooks' certificates are made by its rotator into the Secret it
// needs in its namespace (gandiva-system); its webhooks are not called
// (the configuration below matches no object of this test).
func StartTrainingOperator(t testing.TB, p *cplane.Plane, bin string) {
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
	if err := mountOperatorCerts(data); err != nil {
		t.Fatal(err)
	}
}

// mountOperatorCerts puts a webhook certificate pair in operatorCertDir,
// which every operator on this machine reads (two test packages run one
// at once): the operator only waits for the files to exist, and its
// webhooks are never called, so any valid pair serves; a valid pair there
// already is left as it is (another test's operator may be reading it),
// and a new one is written under a lock, each file renamed into place.
// The directories must be this user's own, not links: /tmp is everyone's.
func mountOperatorCerts(data map[string][]byte) error {
	for _, d := range []string{filepath.Dir(operatorCertDir), operatorCertDir} {
		if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		st, err := os.Lstat(d)
		if err != nil {
			return err
		}
		if sys, ok := st.Sys().(*syscall.Stat_t); !st.IsDir() || !ok || int(sys.Uid) != os.Getuid() {
			return fmt.Errorf("%s is not a directory of this user's own (a link, or another user's): remove it", d)
		}
	}
	lock, err := os.OpenFile(filepath.Join(operatorCertDir, ".lock"), os.O_CREATE|os.O_RDWR|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	crt, _ := os.ReadFile(filepath.Join(operatorCertDir, "tls.crt"))
	key, _ := os.ReadFile(filepath.Join(operatorCertDir, "tls.key"))
	if _, err := tls.X509KeyPair(crt, key); err == nil {
		if _, err := os.Stat(filepath.Join(operatorCertDir, "ca.crt")); err == nil {
			return nil
		}
	}
	for _, f := range []string{"ca.crt", "tls.key", "tls.crt"} { // tls.crt last: what the operator waits for
		tmp := filepath.Join(operatorCertDir, "."+f+".tmp")
		if err := os.WriteFile(tmp, data[f], 0o600); err != nil {
			return err
		}
		if err := os.Rename(tmp, filepath.Join(operatorCertDir, f)); err != nil {
			return err
		}
	}
	return nil
}

// operatorCertDir is where the Training Operator v1.8.1 reads its webhook
// certificates (fixed in its source).
const operatorCertDir = "/tmp/k8s-webhook-server/serving-certs"
