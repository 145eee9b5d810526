package kubetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
)

// Names of the workload controllers StartControllers runs: the real
// upstream controllers, built from the sources under third_party/ by
// scripts/kube-workloads into the control plane's binary directory.
const (
	// JobSetController is the JobSet controller manager (sigs.k8s.io/jobset).
	JobSetController = "jobset"
	// TrainerController is the Kubeflow Trainer v2 controller manager
	// (TrainJob); it needs JobSetController, which StartControllers then
	// starts first.
	TrainerController = "trainer"
)

// controllerSpec says how to run one workload controller here.
type controllerSpec struct {
	// bin is the executable's name in cplane.BinDir().
	bin string
	// needs are controllers that must run before this one.
	needs []string
	// crds and webhooks are YAML files relative to the repository root:
	// the CustomResourceDefinitions to install, and the upstream webhook
	// configurations (clientConfig.service), installed pointing at the
	// controller's webhook server on 127.0.0.1 instead.
	crds     []string
	webhooks string
	// args returns the controller's arguments; dir is its private
	// directory (the webhook server's tls.crt and tls.key are there).
	args func(dir string, webhookPort, probePort int) ([]string, error)
	// probe returns an object that the controller's validating webhook
	// denies; a server-side dry run of it that is denied by that webhook
	// proves the API server calls the webhooks.
	probe func() *unstructured.Unstructured
	// ready runs once the controller and its webhooks are serving: the
	// objects a test needs beside the controller (runtimes).
	ready func(t testing.TB, dc dynamic.Interface, root string)
}

// controllers are the workload controllers StartControllers knows, by name.
var controllers = map[string]controllerSpec{}

// Controller is a workload controller process that StartControllers started.
type Controller struct {
	Name string
	// Log is the file with the controller's output.
	Log  string
	cmd  *exec.Cmd
	done chan struct{}
}

// Exited reports whether the controller's process has ended.
func (c *Controller) Exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// StartControllers installs the CRDs of the named workload controllers
// (JobSetController, TrainerController, ...) on p, starts each controller
// (those it needs first) against p's admin kubeconfig, waits until each is
// ready and the API server calls its webhooks, and returns them by name. At
// the end of the test it stops them (SIGTERM, then SIGKILL) and removes
// their webhook configurations; a failed test logs the tail of each one's
// log. When a controller's binary is missing it skips the test saying how to
// build it, except under CI=true, where it fails.
//
// Each controller's webhooks are served over TLS on 127.0.0.1 with a
// certificate this function makes, and registered with url: clientConfig
// (the local control plane has no Service networking); the controllers'
// own certificate management is off. Everything else is upstream's.
func StartControllers(t testing.TB, p *cplane.Plane, names ...string) map[string]*Controller {
	t.Helper()
	order, err := controllerOrder(names)
	if err != nil {
		t.Fatal(err)
	}
	bindir := cplane.BinDir()
	for _, n := range order {
		if _, err := os.Stat(filepath.Join(bindir, controllers[n].bin)); err != nil {
			msg := fmt.Sprintf("the %s controller is not built (%v): run scripts/kube-workloads", n, err)
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s\n(CI=true: the workload controller tests must run; .ci/run builds them first)", msg)
			}
			t.Skip(msg)
		}
	}
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dc, err := dynamic.NewForConfig(p.Config())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*Controller{}
	for _, n := range order {
		out[n] = startController(t, p, dc, root, n, controllers[n])
	}
	return out
}

// controllerOrder returns names and the controllers they need, each once,
// every one after those it needs; ties in name order.
func controllerOrder(names []string) ([]string, error) {
	var order []string
	seen := map[string]int{} // 1: visiting, 2: done
	var visit func(n string, from string) error
	visit = func(n, from string) error {
		spec, ok := controllers[n]
		if !ok {
			known := make([]string, 0, len(controllers))
			for k := range controllers {
				known = append(known, k)
			}
			sort.Strings(known)
			if from != "" {
				return fmt.Errorf("kubetest: controller %q (needed by %q) is unknown; known: %s", n, from, strings.Join(known, ", "))
			}
			return fmt.Errorf("kubetest: controller %q is unknown; known: %s", n, strings.Join(known, ", "))
		}
		switch seen[n] {
		case 1:
			return fmt.Errorf("kubetest: controller %q needs itself", n)
		case 2:
			return nil
		}
		seen[n] = 1
		needs := append([]string(nil), spec.needs...)
		sort.Strings(needs)
		for _, m := range needs {
			if err := visit(m, n); err != nil {
				return err
			}
		}
		seen[n] = 2
		order = append(order, n)
		return nil
	}
	sorted := append([]string(nil), names...)
	sort.Strings(sorted)
	for _, n := range sorted {
		if err := visit(n, ""); err != nil {
			return nil, err
		}
	}
	return order, nil
}

func startController(t testing.TB, p *cplane.Plane, dc dynamic.Interface, root, name string, spec controllerSpec) *Controller {
	t.Helper()
	ctx := context.Background()
	for _, f := range spec.crds {
		installCRDs(t, dc, filepath.Join(root, f))
	}
	dir := t.TempDir()
	caPEM, err := webhookCerts(dir)
	if err != nil {
		t.Fatalf("%s: webhook certificate: %v", name, err)
	}
	webhookPort, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	probePort, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	args, err := spec.args(dir, webhookPort, probePort)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	args = append(args, "--kubeconfig="+p.Kubeconfig)
	c := &Controller{Name: name, Log: filepath.Join(dir, "controller.log"), done: make(chan struct{})}
	logf, err := os.Create(c.Log)
	if err != nil {
		t.Fatal(err)
	}
	c.cmd = exec.Command(filepath.Join(cplane.BinDir(), spec.bin), args...)
	c.cmd.Dir = dir
	c.cmd.Stdout, c.cmd.Stderr = logf, logf
	c.cmd.Env = append(os.Environ(), "KUBECONFIG="+p.Kubeconfig)
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := c.cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("starting the %s controller: %v", name, err)
	}
	go func() {
		c.cmd.Wait()
		logf.Close()
		close(c.done)
	}()
	var hooks []string
	t.Cleanup(func() {
		for _, h := range hooks {
			deleteWebhookConfig(dc, h)
		}
		c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			c.cmd.Process.Kill()
			<-c.done
		}
		if t.Failed() {
			t.Logf("%s controller log (%s):\n%s", name, c.Log, tail(c.Log, 60))
		}
	})
	t0 := time.Now()
	readyz := fmt.Sprintf("http://127.0.0.1:%d/readyz", probePort)
	hc := &http.Client{Timeout: 5 * time.Second}
	err = Wait(2*time.Minute, func() (bool, error) {
		if c.Exited() {
			return false, fmt.Errorf("the %s controller exited: %v", name, c.cmd.ProcessState)
		}
		resp, err := hc.Get(readyz)
		if err != nil {
			return false, err
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, fmt.Errorf("%s: %s", readyz, resp.Status)
	})
	if err != nil {
		t.Fatalf("waiting for the %s controller to be ready: %v\nits log:\n%s", name, err, tail(c.Log, 60))
	}
	if spec.webhooks != "" {
		hooks, err = installWebhooks(ctx, dc, filepath.Join(root, spec.webhooks), name, webhookPort, caPEM)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if spec.probe != nil {
			waitWebhooks(t, dc, name, spec.probe())
		}
	}
	t.Logf("%s controller ready in %.1f s (log %s)", name, time.Since(t0).Seconds(), c.Log)
	if spec.ready != nil {
		spec.ready(t, dc, root)
	}
	return c
}

// waitWebhooks waits until a server-side dry run of probe is denied by an
// admission webhook: the API server then calls the controller's webhooks
// (it picks new webhook configurations up asynchronously).
func waitWebhooks(t testing.TB, dc dynamic.Interface, name string, probe *unstructured.Unstructured) {
	t.Helper()
	gvr, err := resourceOf(probe)
	if err != nil {
		t.Fatal(err)
	}
	Eventually(t, time.Minute, "the API server to call the "+name+" webhooks", func() (bool, error) {
		_, err := dc.Resource(gvr).Namespace(probe.GetNamespace()).Create(context.Background(), probe,
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil {
			return false, errors.New("the probe object was admitted")
		}
		if strings.Contains(err.Error(), "admission webhook") && strings.Contains(err.Error(), "denied the request") {
			return true, nil
		}
		return false, err
	})
}

// resourceOf maps the kinds StartControllers probes to their resources.
func resourceOf(u *unstructured.Unstructured) (schema.GroupVersionResource, error) {
	gvk := u.GroupVersionKind()
	switch gvk.Kind {
	case "JobSet":
		return gvk.GroupVersion().WithResource("jobsets"), nil
	case "TrainJob":
		return gvk.GroupVersion().WithResource("trainjobs"), nil
	case "LeaderWorkerSet":
		return gvk.GroupVersion().WithResource("leaderworkersets"), nil
	}
	return schema.GroupVersionResource{}, fmt.Errorf("kubetest: no resource known for kind %s", gvk)
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// installCRDs creates the CustomResourceDefinitions in the YAML file (an
// existing one is left as it is) and waits until they are Established.
func installCRDs(t testing.TB, dc dynamic.Interface, file string) {
	t.Helper()
	docs, err := yamlDocs(file)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, u := range docs {
		if u.GetKind() != "CustomResourceDefinition" {
			t.Fatalf("%s: a %s where a CustomResourceDefinition was expected", file, u.GetKind())
		}
		if _, err := dc.Resource(crdGVR).Create(ctx, u, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("%s: creating CRD %s: %v", file, u.GetName(), err)
		}
		name := u.GetName()
		Eventually(t, time.Minute, "CRD "+name+" Established", func() (bool, error) {
			got, err := dc.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			for _, c := range conds {
				m, _ := c.(map[string]any)
				if m["type"] == "Established" && m["status"] == "True" {
					return true, nil
				}
			}
			return false, nil
		})
	}
}

// applyFile creates the objects of a YAML file (cluster-scoped kinds only
// need no namespace); kinds maps each kind to its resource.
func applyFile(t testing.TB, dc dynamic.Interface, file string, kinds map[string]string) {
	t.Helper()
	docs, err := yamlDocs(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range docs {
		res, ok := kinds[u.GetKind()]
		if !ok {
			t.Fatalf("%s: kind %s is not one of those expected", file, u.GetKind())
		}
		gvr := u.GroupVersionKind().GroupVersion().WithResource(res)
		if _, err := dc.Resource(gvr).Namespace(u.GetNamespace()).Create(context.Background(), u, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("%s: creating %s %s: %v", file, u.GetKind(), u.GetName(), err)
		}
	}
}

// yamlDocs reads the objects of a multi-document YAML file.
func yamlDocs(file string) ([]*unstructured.Unstructured, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for i, doc := range splitYAML(b) {
		m := map[string]any{}
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", file, i+1, err)
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
	return out, nil
}

// splitYAML splits a YAML stream at its "---" lines.
func splitYAML(b []byte) [][]byte {
	var docs [][]byte
	var cur bytes.Buffer
	for _, line := range bytes.SplitAfter(b, []byte("\n")) {
		if s := strings.TrimRight(string(line), " \t\r\n"); s == "---" || strings.HasPrefix(s, "--- ") {
			docs = append(docs, append([]byte(nil), cur.Bytes()...))
			cur.Reset()
			continue
		}
		cur.Write(line)
	}
	return append(docs, cur.Bytes())
}

var (
	mutatingGVR   = admissionv1.SchemeGroupVersion.WithResource("mutatingwebhookconfigurations")
	validatingGVR = admissionv1.SchemeGroupVersion.WithResource("validatingwebhookconfigurations")
)

// installWebhooks creates the webhook configurations of an upstream
// manifest, renamed NAME-KIND, each webhook's service reference replaced by
// url https://127.0.0.1:PORT/PATH and caBundle caPEM. Webhooks on pods get an
// object selector from podSelectors (the controllers mutate only their own
// pods; without one a webhook would see every pod of the plane). It returns
// "mutating/NAME" or "validating/NAME" of each, for deleteWebhookConfig.
func installWebhooks(ctx context.Context, dc dynamic.Interface, file, name string, port int, caPEM []byte) ([]string, error) {
	docs, err := yamlDocs(file)
	if err != nil {
		return nil, err
	}
	var made []string
	for _, u := range docs {
		raw, err := yaml.Marshal(u.Object)
		if err != nil {
			return nil, err
		}
		var gvr schema.GroupVersionResource
		var obj any
		cfgName := name + "-" + u.GetName()
		switch u.GetKind() {
		case "MutatingWebhookConfiguration":
			var m admissionv1.MutatingWebhookConfiguration
			if err := yaml.UnmarshalStrict(raw, &m); err != nil {
				return nil, fmt.Errorf("%s: %w", file, err)
			}
			m.Name = cfgName
			for i := range m.Webhooks {
				if err := localClient(&m.Webhooks[i].ClientConfig, port, caPEM); err != nil {
					return nil, fmt.Errorf("%s: webhook %s: %w", file, m.Webhooks[i].Name, err)
				}
				m.Webhooks[i].ObjectSelector = podSelector(name, m.Webhooks[i].Rules, m.Webhooks[i].ObjectSelector)
			}
			gvr, obj, made = mutatingGVR, &m, append(made, "mutating/"+cfgName)
		case "ValidatingWebhookConfiguration":
			var v admissionv1.ValidatingWebhookConfiguration
			if err := yaml.UnmarshalStrict(raw, &v); err != nil {
				return nil, fmt.Errorf("%s: %w", file, err)
			}
			v.Name = cfgName
			for i := range v.Webhooks {
				if err := localClient(&v.Webhooks[i].ClientConfig, port, caPEM); err != nil {
					return nil, fmt.Errorf("%s: webhook %s: %w", file, v.Webhooks[i].Name, err)
				}
				v.Webhooks[i].ObjectSelector = podSelector(name, v.Webhooks[i].Rules, v.Webhooks[i].ObjectSelector)
			}
			gvr, obj, made = validatingGVR, &v, append(made, "validating/"+cfgName)
		default:
			return nil, fmt.Errorf("%s: kind %s is not a webhook configuration", file, u.GetKind())
		}
		b, err := yaml.Marshal(obj)
		if err != nil {
			return nil, err
		}
		m := map[string]any{}
		if err := yaml.Unmarshal(b, &m); err != nil {
			return nil, err
		}
		out := &unstructured.Unstructured{Object: m}
		out.SetAPIVersion(admissionv1.SchemeGroupVersion.String())
		out.SetKind(u.GetKind())
		if _, err := dc.Resource(gvr).Create(ctx, out, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("creating %s %s: %w", u.GetKind(), cfgName, err)
		}
	}
	return made, nil
}

// podSelectors narrow a controller's webhooks on pods to the pods it made:
// the label its pods carry.
var podSelectors = map[string]string{}

// podSelector returns the object selector for a webhook with rules: sel
// unchanged unless the webhook is on pods and the controller has a pod label.
func podSelector(name string, rules []admissionv1.RuleWithOperations, sel *metav1.LabelSelector) *metav1.LabelSelector {
	label, ok := podSelectors[name]
	if !ok || sel != nil {
		return sel
	}
	for _, r := range rules {
		for _, res := range r.Resources {
			if res == "pods" {
				return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
					Key: label, Operator: metav1.LabelSelectorOpExists,
				}}}
			}
		}
	}
	return sel
}

// localClient points a webhook's client config at 127.0.0.1:port.
func localClient(cc *admissionv1.WebhookClientConfig, port int, caPEM []byte) error {
	if cc.Service == nil || cc.Service.Path == nil {
		return errors.New("no service path to point at the local server")
	}
	url := fmt.Sprintf("https://127.0.0.1:%d%s", port, *cc.Service.Path)
	cc.Service = nil
	cc.URL = &url
	cc.CABundle = caPEM
	return nil
}

// deleteWebhookConfig deletes "mutating/NAME" or "validating/NAME".
func deleteWebhookConfig(dc dynamic.Interface, h string) {
	kind, name, _ := strings.Cut(h, "/")
	gvr := validatingGVR
	if kind == "mutating" {
		gvr = mutatingGVR
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dc.Resource(gvr).Delete(ctx, name, metav1.DeleteOptions{})
}

// webhookCerts makes a CA and a serving certificate for 127.0.0.1 signed by
// it, writes the certificate and key to dir/tls.crt and dir/tls.key (the
// names controller-runtime's webhook server reads), and returns the CA, PEM.
func webhookCerts(dir string) ([]byte, error) {
	c, err := cplane.MakeCerts(cplane.CertSpec{
		CAName: "gandiva-kubetest-webhook-ca", CAFor: 7 * 24 * time.Hour,
		Name: "127.0.0.1", DNSNames: []string{"localhost"}, For: 7 * 24 * time.Hour,
	}, time.Now())
	if err != nil {
		return nil, err
	}
	if err := c.WriteServing(dir); err != nil {
		return nil, err
	}
	return c.CA, nil
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

// repoRoot is the directory of the repository's go.mod, found upward from
// the working directory (a test's is its package's directory).
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			bytes.HasPrefix(b, []byte("module github.com/gandiva-sched/gandiva\n")) {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("kubetest: the repository's go.mod is not above the working directory")
		}
		dir = up
	}
}

// tail returns the last n lines of a file.
func tail(file string, n int) string {
	b, err := os.ReadFile(file)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
