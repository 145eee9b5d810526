// Package ctl runs the real workload controllers (JobSet, Kubeflow
// Trainer, LeaderWorkerSet, KubeRay, the Kubeflow Training Operator v1,
// and Kubernetes' StatefulSet controller they need) beside a local
// control plane (package cplane): it installs their
// CustomResourceDefinitions and webhooks, starts each controller's process
// from the binaries scripts/kube-workloads builds into cplane.BinDir(),
// waits until each is ready, and stops them. The
// tests start them through kubetest.StartControllers and `gandiva kube
// dev --workloads` through Start.
package ctl

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
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
)

// Names of the workload controllers Start runs: the real upstream
// controllers, built from the sources under third_party/ by
// scripts/kube-workloads into the control plane's binary directory.
const (
	// JobSet is the JobSet controller manager (sigs.k8s.io/jobset).
	JobSet = "jobset"
	// Trainer is the Kubeflow Trainer v2 controller manager (TrainJob);
	// it needs JobSet, which Start then starts first.
	Trainer = "trainer"
)

// spec says how to run one workload controller here.
type spec struct {
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
	// objects its users need beside the controller (runtimes).
	ready func(ctx context.Context, dc dynamic.Interface, root string) error
	// env is added to the controller's environment.
	env []string
	// before runs before the controller's process starts: objects it
	// needs on the plane; it returns the webhook configurations it made
	// ("validating/NAME"), which Stop removes.
	before func(ctx context.Context, p *cplane.Plane) ([]string, error)
	// started runs once the process started, before the wait for it to
	// be ready: what a kubelet would do for it (mount its Secret).
	started func(ctx context.Context, p *cplane.Plane, c *Controller, timeout time.Duration) error
}

// specs are the workload controllers Start knows, by name.
var specs = map[string]spec{}

// Options configure Start.
type Options struct {
	// Root is the repository's checkout, whose third_party/ has the
	// controllers' CRDs and webhook configurations; empty: the directory
	// of the repository's go.mod found upward from the working directory.
	Root string
	// Dir is where each controller gets a directory of its own (its
	// configuration, webhook certificate and log, DIR/NAME/controller.log);
	// it must exist. Start removes nothing.
	Dir string
	// ReadyTimeout bounds the wait for each controller to be ready and for
	// the API server to call its webhooks (0: 2 minutes).
	ReadyTimeout time.Duration
}

// Controller is a workload controller process that Start started.
type Controller struct {
	Name string
	// Log is the file with the controller's output.
	Log  string
	cmd  *exec.Cmd
	done chan struct{}
	// hooks are its webhook configurations, "mutating/NAME" or
	// "validating/NAME".
	hooks []string
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

// Set is the controllers one Start started.
type Set struct {
	// Order is their names, each after those it needs.
	Order []string
	// ByName are the controllers, by name.
	ByName map[string]*Controller
	dc     dynamic.Interface
}

// NotBuiltError says that a controller's binary is not in cplane.BinDir().
type NotBuiltError struct {
	Name, Path string
	Err        error
}

func (e *NotBuiltError) Error() string {
	return fmt.Sprintf("the %s controller is not built (%v): run scripts/kube-workloads (after scripts/kube-tools)", e.Name, e.Err)
}

func (e *NotBuiltError) Unwrap() error { return e.Err }

// Check returns the names and the controllers they need in the order
// Start starts them, or an error: an unknown name, or a *NotBuiltError for
// the first whose binary is missing.
func Check(names ...string) ([]string, error) {
	order, err := Order(names)
	if err != nil {
		return nil, err
	}
	for _, n := range order {
		path := filepath.Join(cplane.BinDir(), specs[n].bin)
		if _, err := os.Stat(path); err != nil {
			return nil, &NotBuiltError{Name: n, Path: path, Err: err}
		}
	}
	return order, nil
}

// Start installs the CRDs of the named workload controllers (JobSet,
// Trainer, LWS, KubeRay, KubeApps, PyTorch) on p, starts each controller
// (those it needs first) against p's admin kubeconfig, waits until each is ready and
// the API server calls its webhooks, and returns them. On an error it
// stops those it started; the error of a controller that did not become
// ready carries the tail of its log. Stop stops them.
//
// Each controller's webhooks are served over TLS on 127.0.0.1 with a
// certificate Start makes, and registered with url: clientConfig (the
// local control plane has no Service networking); the controllers' own
// certificate management is off. Everything else is upstream's. The
// Training Operator (PyTorch) is the exception: its certificates come from
// its own rotator, which Start lets run (the operator reads them from a
// fixed directory, /tmp/k8s-webhook-server/serving-certs, shared by the
// operators of this machine), and its webhooks are not registered.
func Start(ctx context.Context, p *cplane.Plane, o Options, names ...string) (*Set, error) {
	order, err := Check(names...)
	if err != nil {
		return nil, err
	}
	root := o.Root
	if root == "" {
		if root, err = RepoRoot(); err != nil {
			return nil, err
		}
	}
	if o.Dir == "" {
		return nil, errors.New("ctl: no directory for the controllers (Options.Dir)")
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = 2 * time.Minute
	}
	dc, err := dynamic.NewForConfig(p.Config())
	if err != nil {
		return nil, err
	}
	s := &Set{ByName: map[string]*Controller{}, dc: dc}
	for _, n := range order {
		c, err := start(ctx, p, dc, root, o, n, specs[n])
		if c != nil {
			s.Order = append(s.Order, n)
			s.ByName[n] = c
		}
		if err != nil {
			s.Stop()
			return nil, err
		}
	}
	return s, nil
}

// Stop removes the controllers' webhook configurations and stops their
// processes (SIGTERM, then SIGKILL after 10 s), the last started first.
// It leaves their directories.
func (s *Set) Stop() {
	for i := len(s.Order) - 1; i >= 0; i-- {
		c := s.ByName[s.Order[i]]
		for _, h := range c.hooks {
			deleteWebhookConfig(s.dc, h)
		}
		c.stop()
	}
}

func (c *Controller) stop() {
	c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		c.cmd.Process.Kill()
		<-c.done
	}
}

// Order returns names and the controllers they need, each once, every one
// after those it needs; ties in name order.
func Order(names []string) ([]string, error) {
	var order []string
	seen := map[string]int{} // 1: visiting, 2: done
	var visit func(n string, from string) error
	visit = func(n, from string) error {
		sp, ok := specs[n]
		if !ok {
			if from != "" {
				return fmt.Errorf("ctl: controller %q (needed by %q) is unknown; known: %s", n, from, strings.Join(Known(), ", "))
			}
			return fmt.Errorf("ctl: controller %q is unknown; known: %s", n, strings.Join(Known(), ", "))
		}
		switch seen[n] {
		case 1:
			return fmt.Errorf("ctl: controller %q needs itself", n)
		case 2:
			return nil
		}
		seen[n] = 1
		needs := append([]string(nil), sp.needs...)
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

// Known returns the names of the controllers Start knows, sorted.
func Known() []string {
	known := make([]string, 0, len(specs))
	for k := range specs {
		known = append(known, k)
	}
	sort.Strings(known)
	return known
}

// start runs one controller. It returns the controller whenever its
// process started (so that the caller stops it), with an error if it did
// not become ready.
func start(ctx context.Context, p *cplane.Plane, dc dynamic.Interface, root string, o Options, name string, sp spec) (*Controller, error) {
	for _, f := range sp.crds {
		if err := InstallCRDs(ctx, dc, filepath.Join(root, f), o.ReadyTimeout); err != nil {
			return nil, err
		}
	}
	dir := filepath.Join(o.Dir, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	caPEM, err := webhookCerts(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: webhook certificate: %w", name, err)
	}
	webhookPort, err := freePort()
	if err != nil {
		return nil, err
	}
	probePort, err := freePort()
	if err != nil {
		return nil, err
	}
	args, err := sp.args(dir, webhookPort, probePort)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	args = append(args, "--kubeconfig="+p.Kubeconfig)
	var hooks []string
	if sp.before != nil {
		if hooks, err = sp.before(ctx, p); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	c := &Controller{Name: name, Log: filepath.Join(dir, "controller.log"), done: make(chan struct{}), hooks: hooks}
	logf, err := os.Create(c.Log)
	if err != nil {
		return nil, err
	}
	c.cmd = exec.Command(filepath.Join(cplane.BinDir(), sp.bin), args...)
	c.cmd.Dir = dir
	c.cmd.Stdout, c.cmd.Stderr = logf, logf
	c.cmd.Env = append(append(os.Environ(), sp.env...), "KUBECONFIG="+p.Kubeconfig)
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := c.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("starting the %s controller: %w", name, err)
	}
	go func() {
		c.cmd.Wait()
		logf.Close()
		close(c.done)
	}()
	if sp.started != nil {
		if err := sp.started(ctx, p, c, o.ReadyTimeout); err != nil {
			return c, fmt.Errorf("%s: %w\nits log (%s):\n%s", name, err, c.Log, cplane.Tail(c.Log, 60))
		}
	}
	readyz := fmt.Sprintf("http://127.0.0.1:%d/readyz", probePort)
	hc := &http.Client{Timeout: 5 * time.Second}
	err = poll(ctx, o.ReadyTimeout, func() (bool, error) {
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
		return c, fmt.Errorf("waiting for the %s controller to be ready: %w\nits log (%s):\n%s", name, err, c.Log, cplane.Tail(c.Log, 60))
	}
	if sp.webhooks != "" {
		made, err := installWebhooks(ctx, dc, filepath.Join(root, sp.webhooks), name, webhookPort, caPEM)
		c.hooks = append(c.hooks, made...)
		if err != nil {
			return c, fmt.Errorf("%s: %w", name, err)
		}
		if sp.probe != nil {
			if err := waitWebhooks(ctx, dc, sp.probe(), o.ReadyTimeout); err != nil {
				return c, fmt.Errorf("waiting for the API server to call the %s webhooks: %w\nits log (%s):\n%s", name, err, c.Log, cplane.Tail(c.Log, 60))
			}
		}
	}
	if sp.ready != nil {
		if err := sp.ready(ctx, dc, root); err != nil {
			return c, fmt.Errorf("%s: %w", name, err)
		}
	}
	return c, nil
}

// poll calls cond every 20 ms until it returns true, ctx ends or timeout
// passes; the error then carries cond's last error.
func poll(ctx context.Context, timeout time.Duration, cond func() (bool, error)) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		ok, err := cond()
		if err != nil {
			last = err
		}
		return ok, nil
	})
	if err != nil && last != nil {
		return fmt.Errorf("%w: %w", err, last)
	}
	return err
}

// waitWebhooks waits until a server-side dry run of probe is denied by an
// admission webhook: the API server then calls the controller's webhooks
// (it picks new webhook configurations up asynchronously).
func waitWebhooks(ctx context.Context, dc dynamic.Interface, probe *unstructured.Unstructured, timeout time.Duration) error {
	gvr, err := resourceOf(probe)
	if err != nil {
		return err
	}
	return poll(ctx, timeout, func() (bool, error) {
		_, err := dc.Resource(gvr).Namespace(probe.GetNamespace()).Create(ctx, probe,
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

// resourceOf maps the kinds Start probes to their resources.
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
	return schema.GroupVersionResource{}, fmt.Errorf("ctl: no resource known for kind %s", gvk)
}

// CRDs is the resource of CustomResourceDefinitions.
var CRDs = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// InstallCRDs creates the CustomResourceDefinitions in the YAML file (an
// existing one is left as it is) and waits up to timeout until each is
// Established.
func InstallCRDs(ctx context.Context, dc dynamic.Interface, file string, timeout time.Duration) error {
	docs, err := YAMLDocs(file)
	if err != nil {
		return err
	}
	for _, u := range docs {
		if u.GetKind() != "CustomResourceDefinition" {
			return fmt.Errorf("%s: a %s where a CustomResourceDefinition was expected", file, u.GetKind())
		}
		if _, err := dc.Resource(CRDs).Create(ctx, u, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("%s: creating CRD %s: %w", file, u.GetName(), err)
		}
		if err := WaitEstablished(ctx, dc, u.GetName(), timeout); err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
	}
	return nil
}

// WaitEstablished waits up to timeout until the CustomResourceDefinition
// name has the condition Established True.
func WaitEstablished(ctx context.Context, dc dynamic.Interface, name string, timeout time.Duration) error {
	err := poll(ctx, timeout, func() (bool, error) {
		got, err := dc.Resource(CRDs).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("CRD %s Established: %w", name, err)
	}
	return nil
}

// applyFile creates the objects of a YAML file (an existing one is left as
// it is); kinds maps each kind to its resource.
func applyFile(ctx context.Context, dc dynamic.Interface, file string, kinds map[string]string) error {
	docs, err := YAMLDocs(file)
	if err != nil {
		return err
	}
	for _, u := range docs {
		res, ok := kinds[u.GetKind()]
		if !ok {
			return fmt.Errorf("%s: kind %s is not one of those expected", file, u.GetKind())
		}
		gvr := u.GroupVersionKind().GroupVersion().WithResource(res)
		if _, err := dc.Resource(gvr).Namespace(u.GetNamespace()).Create(ctx, u, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("%s: creating %s %s: %w", file, u.GetKind(), u.GetName(), err)
		}
	}
	return nil
}

// YAMLDocs reads the objects of a multi-document YAML file (empty
// documents left out).
func YAMLDocs(file string) ([]*unstructured.Unstructured, error) {
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
	docs, err := YAMLDocs(file)
	if err != nil {
		return nil, err
	}
	var made []string
	for _, u := range docs {
		raw, err := yaml.Marshal(u.Object)
		if err != nil {
			return made, err
		}
		var gvr schema.GroupVersionResource
		var obj any
		cfgName := name + "-" + u.GetName()
		switch u.GetKind() {
		case "MutatingWebhookConfiguration":
			var m admissionv1.MutatingWebhookConfiguration
			if err := yaml.UnmarshalStrict(raw, &m); err != nil {
				return made, fmt.Errorf("%s: %w", file, err)
			}
			m.Name = cfgName
			for i := range m.Webhooks {
				if err := localClient(&m.Webhooks[i].ClientConfig, port, caPEM); err != nil {
					return made, fmt.Errorf("%s: webhook %s: %w", file, m.Webhooks[i].Name, err)
				}
				m.Webhooks[i].ObjectSelector = podSelector(name, m.Webhooks[i].Rules, m.Webhooks[i].ObjectSelector)
			}
			gvr, obj = mutatingGVR, &m
		case "ValidatingWebhookConfiguration":
			var v admissionv1.ValidatingWebhookConfiguration
			if err := yaml.UnmarshalStrict(raw, &v); err != nil {
				return made, fmt.Errorf("%s: %w", file, err)
			}
			v.Name = cfgName
			for i := range v.Webhooks {
				if err := localClient(&v.Webhooks[i].ClientConfig, port, caPEM); err != nil {
					return made, fmt.Errorf("%s: webhook %s: %w", file, v.Webhooks[i].Name, err)
				}
				v.Webhooks[i].ObjectSelector = podSelector(name, v.Webhooks[i].Rules, v.Webhooks[i].ObjectSelector)
			}
			gvr, obj = validatingGVR, &v
		default:
			return made, fmt.Errorf("%s: kind %s is not a webhook configuration", file, u.GetKind())
		}
		b, err := yaml.Marshal(obj)
		if err != nil {
			return made, err
		}
		m := map[string]any{}
		if err := yaml.Unmarshal(b, &m); err != nil {
			return made, err
		}
		out := &unstructured.Unstructured{Object: m}
		out.SetAPIVersion(admissionv1.SchemeGroupVersion.String())
		out.SetKind(u.GetKind())
		if _, err := dc.Resource(gvr).Create(ctx, out, metav1.CreateOptions{}); err != nil {
			return made, fmt.Errorf("creating %s %s: %w", u.GetKind(), cfgName, err)
		}
		if gvr == mutatingGVR {
			made = append(made, "mutating/"+cfgName)
		} else {
			made = append(made, "validating/"+cfgName)
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

// RepoRoot is the directory of the repository's go.mod, found upward from
// the working directory (a test's is its package's directory).
func RepoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			bytes.HasPrefix(b, []byte("module github.com/gandiva-sched/gandiva\n")) {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", fmt.Errorf("the workload controllers' CRDs and webhooks are read from the repository's third_party/, but no go.mod of github.com/gandiva-sched/gandiva is above %s: run from the repository's checkout", wd)
		}
		dir = up
	}
}
