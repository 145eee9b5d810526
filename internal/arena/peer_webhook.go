package arena

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
)

// newWebhookTLS makes what a peer's webhook server on 127.0.0.1 needs: a
// CA named caName (also its one DNS name, as cert-controller checks) and a
// serving certificate it signed for 127.0.0.1, localhost and dnsNames. The
// CA's key is RSA in PKCS#1, the form controllers that keep their CA in a
// Secret (open-policy-agent's cert-controller) read back. The CA is valid
// for two years and the certificate for one (cert-controller replaces
// certificates that expire within 90 days; the plane they serve lives
// minutes).
func newWebhookTLS(caName string, dnsNames ...string) (*cplane.Certs, error) {
	return cplane.MakeCerts(cplane.CertSpec{
		CAName: caName, CADNSNames: []string{caName}, RSACA: true, CAFor: 2 * 365 * 24 * time.Hour,
		Name: "127.0.0.1", DNSNames: append([]string{"localhost"}, dnsNames...), For: 365 * 24 * time.Hour,
	}, time.Now())
}

// freePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// localWebhookURL is https://127.0.0.1:PORT/PATH of a webhook's service
// reference, for a server on this machine.
func localWebhookURL(cc *admissionv1.WebhookClientConfig, port int, caPEM []byte) error {
	if cc.Service == nil || cc.Service.Path == nil {
		return fmt.Errorf("no service path to point at the local server")
	}
	url := fmt.Sprintf("https://127.0.0.1:%d%s", port, *cc.Service.Path)
	cc.Service, cc.URL, cc.CABundle = nil, &url, caPEM
	return nil
}

// installWebhooks creates the webhook configurations of an upstream
// manifest file with each webhook's service reference pointed at
// https://127.0.0.1:port (CA caPEM), keeping only the webhooks keep
// accepts (a configuration left with none is not created). name maps a
// configuration's name in the file to the name it is created under.
func installWebhooks(ctx context.Context, cs kubernetes.Interface, file string, name func(string) string,
	keep func(rules []admissionv1.RuleWithOperations) bool, port int, caPEM []byte) error {
	objs, err := readObjects(file)
	if err != nil {
		return err
	}
	conv := runtime.DefaultUnstructuredConverter
	admission := cs.AdmissionregistrationV1()
	for _, u := range objs {
		var err error
		switch u.GetKind() {
		case "MutatingWebhookConfiguration":
			var m admissionv1.MutatingWebhookConfiguration
			if err := conv.FromUnstructured(u.Object, &m); err != nil {
				return fmt.Errorf("%s: %s: %w", file, u.GetName(), err)
			}
			err = createLocal(file, m.Webhooks, func(h *admissionv1.MutatingWebhook) (string, []admissionv1.RuleWithOperations, *admissionv1.WebhookClientConfig) {
				return h.Name, h.Rules, &h.ClientConfig
			}, keep, port, caPEM, func(hooks []admissionv1.MutatingWebhook) error {
				obj := &admissionv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name(m.Name)}, Webhooks: hooks}
				_, err := admission.MutatingWebhookConfigurations().Create(ctx, obj, metav1.CreateOptions{})
				return wrapf(err, "creating MutatingWebhookConfiguration %s", obj.Name)
			})
		case "ValidatingWebhookConfiguration":
			var v admissionv1.ValidatingWebhookConfiguration
			if err := conv.FromUnstructured(u.Object, &v); err != nil {
				return fmt.Errorf("%s: %s: %w", file, u.GetName(), err)
			}
			err = createLocal(file, v.Webhooks, func(h *admissionv1.ValidatingWebhook) (string, []admissionv1.RuleWithOperations, *admissionv1.WebhookClientConfig) {
				return h.Name, h.Rules, &h.ClientConfig
			}, keep, port, caPEM, func(hooks []admissionv1.ValidatingWebhook) error {
				obj := &admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name(v.Name)}, Webhooks: hooks}
				_, err := admission.ValidatingWebhookConfigurations().Create(ctx, obj, metav1.CreateOptions{})
				return wrapf(err, "creating ValidatingWebhookConfiguration %s", obj.Name)
			})
		default:
			return fmt.Errorf("%s: a %s (%s) where only webhook configurations were expected", file, u.GetKind(), u.GetName())
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// createLocal calls create with the hooks of file whose rules keep
// accepts, each pointed at https://127.0.0.1:port (CA caPEM), unless none
// is kept; parts gives a hook's name, rules and client configuration.
func createLocal[H any](file string, hooks []H, parts func(*H) (string, []admissionv1.RuleWithOperations, *admissionv1.WebhookClientConfig),
	keep func(rules []admissionv1.RuleWithOperations) bool, port int, caPEM []byte, create func([]H) error) error {
	var out []H
	for i := range hooks {
		h := hooks[i]
		name, rules, cc := parts(&h)
		if !keep(rules) {
			continue
		}
		if err := localWebhookURL(cc, port, caPEM); err != nil {
			return fmt.Errorf("%s: webhook %s: %w", file, name, err)
		}
		out = append(out, h)
	}
	if len(out) == 0 {
		return nil
	}
	return create(out)
}

// wrapf is err with what was being done (format, args) before it; nil
// for nil.
func wrapf(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf(format+": %w", append(args, err)...)
}

// rulesOnGroups accepts webhooks whose every rule is on API groups of
// groups only.
func rulesOnGroups(groups ...string) func([]admissionv1.RuleWithOperations) bool {
	ok := map[string]bool{}
	for _, g := range groups {
		ok[g] = true
	}
	return func(rules []admissionv1.RuleWithOperations) bool {
		for _, r := range rules {
			for _, g := range r.APIGroups {
				if !ok[g] {
					return false
				}
			}
		}
		return len(rules) > 0
	}
}

// waitReady polls url (http) until it answers 200, g's processes exit, or
// timeout passes.
func waitReady(ctx context.Context, g *group, url string, timeout time.Duration) error {
	hc := &http.Client{Timeout: 5 * time.Second}
	return waitFor(ctx, timeout, func() (bool, error) {
		if g.exited() {
			return false, fmt.Errorf("exited before it was ready")
		}
		resp, err := hc.Get(url)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	}, "waiting for "+url)
}

// waitFor polls cond every 200 ms until it is true, returns an error, or
// timeout passes (then the error says what was awaited).
func waitFor(ctx context.Context, timeout time.Duration, cond func() (bool, error), what string) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not done after %s", what, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
