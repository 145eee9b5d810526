package ctl

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
)

// PyTorch is the Kubeflow Training Operator v1 (PyTorchJob only), built by
// scripts/kube-workloads from the module proxy
// (github.com/kubeflow/training-operator v1.8.1, cmd/training-operator.v1).
const PyTorch = "pytorch"

// PyTorchJobCRD is the file, relative to the repository root, of the
// PyTorchJob CustomResourceDefinition Start installs with PyTorch.
const PyTorchJobCRD = "third_party/training-operator/manifests/base/crds/kubeflow.org_pytorchjobs.yaml"

// The Training Operator's own objects: its namespace (MY_POD_NAMESPACE),
// the Secret its certificate rotator fills, and the validating webhook
// configuration whose CA bundle the rotator must update before it calls
// its certificates ready (names fixed by the operator but the namespace).
const (
	operatorNS     = "gandiva-system"
	operatorSecret = "training-operator-webhook-cert"
	operatorVWC    = "validator.training-operator.kubeflow.org"
)

// OperatorCertDir is where the Training Operator v1.8.1 reads its webhook
// certificates (fixed in its source: pkg/cert). Start leaves it when it
// stops: the operators of other planes may be reading it.
const OperatorCertDir = "/tmp/k8s-webhook-server/serving-certs"

func init() {
	specs[PyTorch] = spec{
		bin:  "training-operator.v1",
		crds: []string{PyTorchJobCRD},
		env:  []string{"MY_POD_NAMESPACE=" + operatorNS},
		args: func(_ string, webhookPort, probePort int) ([]string, error) {
			return []string{
				"--enable-scheme=pytorchjob",
				"--leader-elect=false",
				"--metrics-bind-address=0",
				fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", probePort),
				fmt.Sprintf("--webhook-server-port=%d", webhookPort),
			}, nil
		},
		before:  operatorObjects,
		started: operatorCerts,
	}
}

// operatorObjects makes what the Training Operator's certificate rotator
// needs before it starts: its namespace, its (empty) Secret, and its
// validating webhook configuration. That configuration has one webhook, on
// a resource served here by nothing (TFJobs), failing open: the rotator
// puts its CA there, and no request is ever sent to it. The operator's
// own webhooks (which only validate PyTorchJobs) are served but not
// registered: its certificate names its in-cluster Service, which a
// local plane does not have. It returns the configuration, for Stop.
func operatorObjects(ctx context.Context, p *cplane.Plane) ([]string, error) {
	cs, err := kubernetes.NewForConfig(p.Config())
	if err != nil {
		return nil, err
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNS}},
		metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating namespace %s: %w", operatorNS, err)
	}
	if _, err := cs.CoreV1().Secrets(operatorNS).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: operatorSecret}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating Secret %s/%s: %w", operatorNS, operatorSecret, err)
	}
	vwc := &admissionv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: operatorVWC},
		Webhooks: []admissionv1.ValidatingWebhook{{
			Name:         "validator.tfjob.training-operator.kubeflow.org",
			ClientConfig: admissionv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:1/validate-kubeflow-org-v1-tfjob")},
			Rules: []admissionv1.RuleWithOperations{{Operations: []admissionv1.OperationType{admissionv1.Create},
				Rule: admissionv1.Rule{APIGroups: []string{"kubeflow.org"}, APIVersions: []string{"v1"}, Resources: []string{"tfjobs"}}}},
			FailurePolicy:           ptr.To(admissionv1.Ignore),
			SideEffects:             ptr.To(admissionv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating ValidatingWebhookConfiguration %s: %w", operatorVWC, err)
	}
	return []string{"validating/" + operatorVWC}, nil
}

// operatorCerts plays the kubelet that would mount the operator's Secret:
// the operator starts its controllers (and is ready) once its rotator sees
// the Secret's certificates in OperatorCertDir. It waits until the
// rotator has filled the Secret, then puts a pair there (mountCerts).
func operatorCerts(ctx context.Context, p *cplane.Plane, c *Controller, timeout time.Duration) error {
	cs, err := kubernetes.NewForConfig(p.Config())
	if err != nil {
		return err
	}
	var data map[string][]byte
	err = poll(ctx, timeout, func() (bool, error) {
		if c.Exited() {
			return false, fmt.Errorf("the %s controller exited: %v", c.Name, c.cmd.ProcessState)
		}
		sec, err := cs.CoreV1().Secrets(operatorNS).Get(ctx, operatorSecret, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		data = sec.Data
		return len(data["tls.crt"]) > 0 && len(data["tls.key"]) > 0 && len(data["ca.crt"]) > 0,
			errors.New("no tls.crt, tls.key and ca.crt in it yet")
	})
	if err != nil {
		return fmt.Errorf("waiting for the operator's certificates in Secret %s/%s: %w", operatorNS, operatorSecret, err)
	}
	if err := mountCerts(OperatorCertDir, data); err != nil {
		return fmt.Errorf("the operator's certificate directory: %w", err)
	}
	return nil
}

// mountCerts puts the certificate pair of data (tls.crt, tls.key, ca.crt)
// in dir, which every Training Operator on this machine reads (two planes
// may run one each at once): the operator only waits for the files to
// exist, and its webhooks are never called, so any valid pair serves; a
// valid pair there already is left as it is (another operator may be
// reading it), and a new one is written under a lock, each file renamed
// into place. dir and its parent are made if missing; each must be this
// user's own directory, not a link, and not writable by others (/tmp is
// everyone's).
func mountCerts(dir string, data map[string][]byte) error {
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		st, err := os.Lstat(d)
		if err != nil {
			return err
		}
		sys, ok := st.Sys().(*syscall.Stat_t)
		if !st.IsDir() || !ok || int(sys.Uid) != os.Getuid() || st.Mode().Perm()&0o022 != 0 {
			return fmt.Errorf("%s is not a directory of this user's own that only it may write (a link, another user's, or writable by others): remove it", d)
		}
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	crt, _ := os.ReadFile(filepath.Join(dir, "tls.crt"))
	key, _ := os.ReadFile(filepath.Join(dir, "tls.key"))
	if _, err := tls.X509KeyPair(crt, key); err == nil {
		if _, err := os.Stat(filepath.Join(dir, "ca.crt")); err == nil {
			return nil
		}
	}
	if _, err := tls.X509KeyPair(data["tls.crt"], data["tls.key"]); err != nil {
		return fmt.Errorf("the pair to write: %w", err)
	}
	for _, f := range []string{"ca.crt", "tls.key", "tls.crt"} { // tls.crt last: what the operator waits for
		tmp := filepath.Join(dir, "."+f+".tmp")
		os.Remove(tmp) // a leftover of a run that died here
		t, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY|syscall.O_NOFOLLOW, 0o600)
		if err != nil {
			return err
		}
		_, err = t.Write(data[f])
		if cerr := t.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		if err := os.Rename(tmp, filepath.Join(dir, f)); err != nil {
			return err
		}
	}
	return nil
}
