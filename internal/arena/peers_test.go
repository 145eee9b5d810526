package arena

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// The releases the arena expects are the ones scripts/arena-peers builds.
func TestTagMatchesScript(t *testing.T) {
	for _, c := range []struct{ name, title, tag string }{{"KAI", "KAI-Scheduler", kaiTag}, {"VOLCANO", "Volcano", volcanoTag}} {
		if tag := scriptTag(t, c.name); tag != c.tag {
			t.Errorf("scripts/arena-peers builds %s %s, the arena runs %s", c.title, tag, c.tag)
		}
	}
}

// missingPeer accepts a build with its tag's stamp and every binary, and
// otherwise says what is missing and how to build it.
func TestMissingPeer(t *testing.T) {
	t.Setenv("GANDIVA_ARENA_PEERS", t.TempDir())
	d := peerDir("demo", "v1.2.3")
	if why := missingPeer("Demo", "demo", "v1.2.3", "a"); !strings.Contains(why, "Demo v1.2.3 is not built in "+d+" (run scripts/arena-peers demo)") {
		t.Errorf("no build: %q", why)
	}
	os.MkdirAll(filepath.Join(d, "bin"), 0o700)
	os.WriteFile(filepath.Join(d, ".stamp"), []byte("v1.2.2 abc\n"), 0o600)
	if why := missingPeer("Demo", "demo", "v1.2.3", "a"); !strings.Contains(why, "is not built") {
		t.Errorf("an older build: %q", why)
	}
	os.WriteFile(filepath.Join(d, ".stamp"), []byte("v1.2.3 abc\n"), 0o600)
	os.WriteFile(filepath.Join(d, "bin", "a"), nil, 0o700)
	if why := missingPeer("Demo", "demo", "v1.2.3", "a", "b"); !strings.HasPrefix(why, "Demo v1.2.3: ") ||
		!strings.Contains(why, filepath.Join(d, "bin", "b")) || !strings.HasSuffix(why, "(run scripts/arena-peers demo)") {
		t.Errorf("a binary missing: %q", why)
	}
	if why := missingPeer("Demo", "demo", "v1.2.3", "a"); why != "" {
		t.Errorf("a complete build: %q", why)
	}
}

// installWebhooks creates each configuration with only the webhooks keep
// accepts, pointed at 127.0.0.1, skips a configuration left with none, and
// refuses a webhook with no service path and an object of another kind;
// an error creating a configuration names it.
func TestInstallWebhooks(t *testing.T) {
	dir := t.TempDir()
	hook := func(name, group, path string) string {
		svc := "    service: {name: svc, namespace: ns}\n"
		if path != "" {
			svc = "    service: {name: svc, namespace: ns, path: " + path + "}\n"
		}
		return "- name: " + name + "\n  admissionReviewVersions: [v1]\n  sideEffects: None\n  clientConfig:\n" + svc +
			"  rules:\n  - apiGroups: [\"" + group + "\"]\n    apiVersions: [v1]\n    operations: [CREATE]\n    resources: [jobs]\n"
	}
	file := filepath.Join(dir, "hooks.yaml")
	os.WriteFile(file, []byte("apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingWebhookConfiguration\nmetadata: {name: m}\nwebhooks:\n"+
		hook("m1.x", "batch", "/m1")+hook("m2.x", "apps", "/m2")+
		"---\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata: {name: none}\nwebhooks:\n"+
		hook("n1.x", "apps", "/n1")+
		"---\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata: {name: v}\nwebhooks:\n"+
		hook("v1.x", "batch", "/v1")), 0o600)
	cs := fake.NewClientset()
	ctx := context.Background()
	prefix := func(s string) string { return "p-" + s }
	if err := installWebhooks(ctx, cs, file, prefix, rulesOnGroups("batch"), 4321, []byte("CA")); err != nil {
		t.Fatal(err)
	}
	ms, _ := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	vs, _ := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	local := func(cc admissionv1.WebhookClientConfig, path string) bool {
		return cc.Service == nil && cc.URL != nil && *cc.URL == "https://127.0.0.1:4321"+path && string(cc.CABundle) == "CA"
	}
	if len(ms.Items) != 1 || ms.Items[0].Name != "p-m" || len(ms.Items[0].Webhooks) != 1 || ms.Items[0].Webhooks[0].Name != "m1.x" ||
		!local(ms.Items[0].Webhooks[0].ClientConfig, "/m1") {
		t.Errorf("mutating: %+v", ms.Items)
	}
	if len(vs.Items) != 1 || vs.Items[0].Name != "p-v" || len(vs.Items[0].Webhooks) != 1 || vs.Items[0].Webhooks[0].Name != "v1.x" ||
		!local(vs.Items[0].Webhooks[0].ClientConfig, "/v1") {
		t.Errorf("validating: %+v", vs.Items)
	}
	if err := installWebhooks(ctx, cs, file, prefix, rulesOnGroups("batch"), 4321, []byte("CA")); err == nil ||
		!strings.Contains(err.Error(), "creating MutatingWebhookConfiguration p-m: ") {
		t.Errorf("creating again: %v", err)
	}

	for what, doc := range map[string]string{
		"webhook v2.x": "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata: {name: w}\nwebhooks:\n" + hook("v2.x", "batch", ""),
		"a ConfigMap":  "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
	} {
		os.WriteFile(file, []byte(doc), 0o600)
		if err := installWebhooks(ctx, fake.NewClientset(), file, prefix, rulesOnGroups("batch"), 4321, []byte("CA")); err == nil || !strings.Contains(err.Error(), what) {
			t.Errorf("%s: %v", what, err)
		}
	}
}
