// Package helm holds the tests of the Helm chart in gandiva/: rendered with
// its default values it installs the same objects as deploy/base
// (kustomize), object by object; `helm lint` passes; its values are checked
// by values.schema.json; and, on a local control plane, the chart installed
// by Helm's install action is enough for gandiva kube to schedule a Job
// (install_test.go). Helm runs as a Go library: no helm binary is needed.
package helm

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint/support"
	"helm.sh/helm/v3/pkg/releaseutil"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/gandiva-sched/gandiva/internal/policy/registry"
)

const (
	chartDir = "gandiva"
	baseDir  = "../base"
	// baseNS is deploy/base's namespace (its kustomization's namespace).
	baseNS = "gandiva-system"
)

// helmLabels are the labels the chart adds to objects' metadata, following
// Helm's conventions; the kustomize bases do not have them.
var helmLabels = []string{"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "app.kubernetes.io/part-of"}

// object is a decoded manifest.
type object = map[string]any

func loadChart(t testing.TB) *chart.Chart {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("loading the chart %s: %v", chartDir, err)
	}
	return ch
}

// render renders the chart as `helm template` does, with vals over the
// chart's values, into namespace ns; it returns the objects of its
// templates (the crds/ directory is not rendered: see crds).
func render(t testing.TB, vals map[string]any, ns string) ([]object, error) {
	t.Helper()
	ch := loadChart(t)
	opts := chartutil.ReleaseOptions{Name: "gandiva", Namespace: ns, Revision: 1, IsInstall: true}
	rv, err := chartutil.ToRenderValues(ch, vals, opts, chartutil.DefaultCapabilities.Copy())
	if err != nil {
		return nil, err
	}
	files, err := engine.Render(ch, rv)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	var out []object
	for _, name := range names {
		if !strings.HasSuffix(name, ".yaml") {
			continue // NOTES.txt, _helpers.tpl
		}
		objs, err := decodeAll(files[name])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out = append(out, objs...)
	}
	return out, nil
}

// decodeAll decodes a stream of YAML documents, skipping empty ones, in
// the order Helm splits them.
func decodeAll(stream string) ([]object, error) {
	docs := releaseutil.SplitManifests(stream)
	keys := make([]string, 0, len(docs))
	for k := range docs {
		keys = append(keys, k)
	}
	sort.Sort(releaseutil.BySplitManifestsOrder(keys))
	var out []object
	for _, k := range keys {
		var o object
		if err := yaml.Unmarshal([]byte(docs[k]), &o); err != nil {
			return nil, fmt.Errorf("document %s: %w", k, err)
		}
		if len(o) != 0 {
			out = append(out, o)
		}
	}
	return out, nil
}

// crds decodes the chart's crds/ directory.
func crds(t testing.TB, ch *chart.Chart) []object {
	t.Helper()
	var out []object
	for _, c := range ch.CRDObjects() {
		objs, err := decodeAll(string(c.File.Data))
		if err != nil {
			t.Fatalf("%s: %v", c.Filename, err)
		}
		out = append(out, objs...)
	}
	return out
}

// clusterScoped are the kinds of deploy/base without a namespace; its
// CRDs of scope Cluster are added. (kustomize's namespace transformer sets
// metadata.namespace on kinds it does not know, such as
// ValidatingAdmissionPolicy; kubectl drops it for a cluster-scoped
// resource, and so does this test.)
var clusterScoped = []string{"Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition",
	"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "PriorityClass"}

// kustomize builds deploy/base as `kubectl apply -k` does.
func kustomize(t testing.TB) []object {
	t.Helper()
	rm, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), baseDir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", baseDir, err)
	}
	var out []object
	for _, r := range rm.Resources() {
		m, err := r.Map()
		if err != nil {
			t.Fatal(err)
		}
		// through JSON, as the chart's objects are (numbers as float64)
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		var o object
		if err := json.Unmarshal(b, &o); err != nil {
			t.Fatal(err)
		}
		out = append(out, o)
	}
	cluster := slices.Clone(clusterScoped)
	for _, o := range out {
		if str(o, "kind") == "CustomResourceDefinition" && str(o, "spec", "scope") == "Cluster" {
			cluster = append(cluster, str(o, "spec", "names", "kind"))
		}
	}
	for _, o := range out {
		if slices.Contains(cluster, str(o, "kind")) {
			delete(o["metadata"].(map[string]any), "namespace")
		}
	}
	return out
}

func str(o object, path ...string) string {
	var cur any = o
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return ""
		}
		cur = m[p]
	}
	s, _ := cur.(string)
	return s
}

// key names an object: kind, namespace (if any) and name.
func key(o object) string {
	return str(o, "kind") + " " + strings.TrimPrefix(str(o, "metadata", "namespace")+"/", "/") + str(o, "metadata", "name")
}

// normalise removes the labels Helm's conventions add to metadata (and
// metadata.labels when nothing is left).
func normalise(o object) object {
	b, _ := json.Marshal(o)
	var c object
	_ = json.Unmarshal(b, &c)
	md, _ := c["metadata"].(map[string]any)
	if labels, ok := md["labels"].(map[string]any); ok {
		for _, l := range helmLabels {
			delete(labels, l)
		}
		if len(labels) == 0 {
			delete(md, "labels")
		}
	}
	return c
}

func byKey(t testing.TB, objs []object, what string) map[string]object {
	t.Helper()
	m := map[string]object{}
	for _, o := range objs {
		k := key(o)
		if _, dup := m[k]; dup {
			t.Fatalf("%s: %s twice", what, k)
		}
		m[k] = normalise(o)
	}
	return m
}

// diff lists the paths where a and b differ.
func diff(path string, a, b any) []string {
	if reflect.DeepEqual(a, b) {
		return nil
	}
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		var ks []string
		for k := range am {
			ks = append(ks, k)
		}
		for k := range bm {
			if _, ok := am[k]; !ok {
				ks = append(ks, k)
			}
		}
		sort.Strings(ks)
		var out []string
		for _, k := range ks {
			out = append(out, diff(path+"."+k, am[k], bm[k])...)
		}
		return out
	}
	as, aok := a.([]any)
	bs, bok := b.([]any)
	if aok && bok && len(as) == len(bs) {
		var out []string
		for i := range as {
			out = append(out, diff(fmt.Sprintf("%s[%d]", path, i), as[i], bs[i])...)
		}
		return out
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return []string{fmt.Sprintf("%s: kustomize %s, helm %s", path, ja, jb)}
}

func keys(m map[string]object) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// compare reports every object missing on one side and every field that
// differs.
func compare(base, chart map[string]object) []string {
	var out []string
	for _, k := range keys(base) {
		c, ok := chart[k]
		if !ok {
			out = append(out, k+": in deploy/base, not in the chart")
			continue
		}
		for _, d := range diff("", base[k], c) {
			out = append(out, k+": "+d)
		}
	}
	for _, k := range keys(chart) {
		if _, ok := base[k]; !ok {
			out = append(out, k+": in the chart, not in deploy/base")
		}
	}
	return out
}

// The chart with its default values, released into gandiva-system,
// installs what deploy/base installs: the same objects (kind, namespace,
// name) with the same fields, but for the labels Helm's conventions add;
// and its crds/ directory holds deploy/base's CustomResourceDefinitions.
// The one exception is the Namespace: Helm installs into a release
// namespace that exists (or that --create-namespace makes, unlabelled), so
// the chart does not make it; the operator labels it as deploy/base's
// Namespace is labelled, which the chart checks at install time.
func TestChartEqualsKustomizeBase(t *testing.T) {
	ch := loadChart(t)
	rendered, err := render(t, nil, baseNS)
	if err != nil {
		t.Fatalf("rendering the chart with its default values: %v", err)
	}
	var baseObjs, baseCRDs []object
	var namespaces []object
	for _, o := range kustomize(t) {
		switch str(o, "kind") {
		case "Namespace":
			namespaces = append(namespaces, o)
		case "CustomResourceDefinition":
			baseCRDs = append(baseCRDs, o)
		default:
			baseObjs = append(baseObjs, o)
		}
	}
	for _, o := range rendered {
		if k := str(o, "kind"); k == "Namespace" || k == "CustomResourceDefinition" {
			t.Errorf("the chart's templates render %s: namespaces are Helm's release namespace, CRDs belong in crds/", key(o))
		}
	}
	if len(baseObjs) < 10 {
		t.Fatalf("kustomize built only %d objects from %s", len(baseObjs), baseDir)
	}
	for _, d := range compare(byKey(t, baseObjs, "deploy/base"), byKey(t, rendered, "the chart")) {
		t.Error(d)
	}
	for _, d := range compare(byKey(t, baseCRDs, "deploy/base's CRDs"), byKey(t, crds(t, ch), "the chart's crds/")) {
		t.Error("CRD " + d)
	}

	// the namespace: deploy/base's, labelled as the chart's install-time
	// check requires
	if len(namespaces) != 1 || str(namespaces[0], "metadata", "name") != baseNS {
		t.Fatalf("deploy/base has namespaces %v, want just %s", namespaces, baseNS)
	}
	labels, _ := namespaces[0]["metadata"].(map[string]any)["labels"].(map[string]any)
	if !reflect.DeepEqual(labels, map[string]any{"gandiva.io/system": "true"}) {
		t.Errorf("deploy/base's namespace has labels %v; the chart requires the release namespace to have gandiva.io/system=true (templates/_helpers.tpl, docs/KUBERNETES.md): update both", labels)
	}
	helpers, err := os.ReadFile(filepath.Join(chartDir, "templates", "_helpers.tpl"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(helpers), `ne (get $labels "gandiva.io/system") "true"`) {
		t.Error("templates/_helpers.tpl no longer checks the release namespace's label gandiva.io/system=true")
	}
}

// The comparison fails when the chart and deploy/base differ: a changed
// field, a missing object, an extra one.
func TestCompareSeesDifferences(t *testing.T) {
	rendered, err := render(t, nil, baseNS)
	if err != nil {
		t.Fatal(err)
	}
	base := byKey(t, rendered, "base")
	if d := compare(base, byKey(t, rendered, "chart")); len(d) != 0 {
		t.Fatalf("the chart differs from itself: %v", d)
	}
	changed, err := render(t, map[string]any{"scheduler": map[string]any{"replicas": 3}}, baseNS)
	if err != nil {
		t.Fatal(err)
	}
	d := compare(base, byKey(t, changed, "chart"))
	if len(d) != 1 || !strings.Contains(d[0], "Deployment gandiva-system/gandiva-scheduler: .spec.replicas: kustomize 2, helm 3") {
		t.Errorf("replicas 3 against 2: %v", d)
	}
	noAgent, err := render(t, map[string]any{"agent": map[string]any{"enabled": false}}, baseNS)
	if err != nil {
		t.Fatal(err)
	}
	d = compare(base, byKey(t, noAgent, "chart"))
	if len(d) != 4 || !strings.Contains(strings.Join(d, "\n"), "DaemonSet gandiva-system/gandiva-agent: in deploy/base, not in the chart") {
		t.Errorf("without the agent: %v", d)
	}
	d = compare(byKey(t, noAgent, "base"), byKey(t, rendered, "chart"))
	if len(d) != 4 || !strings.Contains(d[0], "in the chart, not in deploy/base") {
		t.Errorf("an agent more: %v", d)
	}
	if d := compare(byKey(t, []object{{"kind": "X", "metadata": map[string]any{"name": "x", "labels": map[string]any{"a": "b"}}}}, "base"),
		byKey(t, []object{{"kind": "X", "metadata": map[string]any{"name": "x", "labels": map[string]any{"a": "c", "helm.sh/chart": "g"}}}}, "chart")); len(d) != 1 {
		t.Errorf("a label changed: %v", d)
	}
}

func find(objs []object, kind, name string) object {
	for _, o := range objs {
		if str(o, "kind") == kind && str(o, "metadata", "name") == name {
			return o
		}
	}
	return nil
}

func container(t testing.TB, o object) map[string]any {
	t.Helper()
	if o == nil {
		t.Fatal("no such object")
	}
	cs := o["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)
	return cs[0].(map[string]any)
}

func args(t testing.TB, o object) []string {
	var out []string
	for _, a := range container(t, o)["args"].([]any) {
		out = append(out, a.(string))
	}
	return out
}

// `helm template` with other values: what each value changes.
func TestTemplateValues(t *testing.T) {
	t.Run("agent off", func(t *testing.T) {
		objs, err := render(t, map[string]any{"agent": map[string]any{"enabled": false}}, baseNS)
		if err != nil {
			t.Fatal(err)
		}
		for _, kind := range []string{"DaemonSet", "ServiceAccount", "ClusterRole", "ClusterRoleBinding"} {
			if find(objs, kind, "gandiva-agent") != nil {
				t.Errorf("agent.enabled=false renders the %s gandiva-agent", kind)
			}
		}
		// the policies that hold the agent's account stay (an account of
		// that name made later is held)
		if find(objs, "ValidatingAdmissionPolicy", "gandiva-agent") == nil || find(objs, "Deployment", "gandiva-scheduler") == nil {
			t.Error("agent.enabled=false dropped the scheduler or the agent's admission policy")
		}
	})
	t.Run("metrics and ServiceMonitor", func(t *testing.T) {
		def, err := render(t, nil, baseNS)
		if err != nil {
			t.Fatal(err)
		}
		if find(def, "ServiceMonitor", "gandiva-scheduler") != nil || find(def, "Service", "gandiva-scheduler-metrics") != nil ||
			slices.ContainsFunc(args(t, find(def, "Deployment", "gandiva-scheduler")), func(a string) bool { return strings.HasPrefix(a, "--metrics-addr") }) {
			t.Error("metrics on by default")
		}
		objs, err := render(t, map[string]any{"serviceMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "prom"}}}, baseNS)
		if err != nil {
			t.Fatal(err)
		}
		sm := find(objs, "ServiceMonitor", "gandiva-scheduler")
		svc := find(objs, "Service", "gandiva-scheduler-metrics")
		if sm == nil || svc == nil {
			t.Fatal("serviceMonitor.enabled=true renders no ServiceMonitor or no Service")
		}
		if str(sm, "metadata", "labels", "release") != "prom" || str(sm, "metadata", "namespace") != baseNS {
			t.Errorf("ServiceMonitor metadata %v", sm["metadata"])
		}
		// its selector picks the Service
		sel := sm["spec"].(map[string]any)["selector"].(map[string]any)["matchLabels"].(map[string]any)
		for k, v := range sel {
			if str(svc, "metadata", "labels", k) != v {
				t.Errorf("the ServiceMonitor selects %s=%v; the Service has %q", k, v, str(svc, "metadata", "labels", k))
			}
		}
		d := find(objs, "Deployment", "gandiva-scheduler")
		if !slices.Contains(args(t, d), "--metrics-addr=:9090") {
			t.Errorf("args %v lack --metrics-addr=:9090", args(t, d))
		}
		ports, _ := container(t, d)["ports"].([]any)
		if len(ports) != 1 || ports[0].(map[string]any)["name"] != "metrics" || ports[0].(map[string]any)["containerPort"] != float64(9090) {
			t.Errorf("container ports %v", ports)
		}
		objs, err = render(t, map[string]any{"metrics": map[string]any{"enabled": true, "port": 9100}}, baseNS)
		if err != nil {
			t.Fatal(err)
		}
		if find(objs, "ServiceMonitor", "gandiva-scheduler") != nil || find(objs, "Service", "gandiva-scheduler-metrics") == nil ||
			!slices.Contains(args(t, find(objs, "Deployment", "gandiva-scheduler")), "--metrics-addr=:9100") {
			t.Error("metrics.enabled without serviceMonitor: want the Service and --metrics-addr=:9100, no ServiceMonitor")
		}
	})
	t.Run("image, policy, namespace, settings, placement", func(t *testing.T) {
		objs, err := render(t, map[string]any{
			"image":     map[string]any{"repository": "registry.example/gandiva", "tag": "v1.2.3", "pullPolicy": "IfNotPresent"},
			"scheduler": map[string]any{"policy": "gandiva-fair:tickets=team-a:4/team-b:1", "replicas": 1, "uiListen": "", "reservationImage": "registry.example/pause:3.10", "nodeSelector": map[string]any{"pool": "system"}},
			"agent":     map[string]any{"nodeSelector": map[string]any{"gandiva.io/shared": nil, "gpu": "shared"}, "tolerations": []any{}},
			"settings":  map[string]any{"tickets.team-a": "4"},
		}, "ml-sched")
		if err != nil {
			t.Fatal(err)
		}
		d := find(objs, "Deployment", "gandiva-scheduler")
		if want := []string{"kube", "--policy=gandiva-fair:tickets=team-a:4/team-b:1", "--namespace=ml-sched", "--reservation-image=registry.example/pause:3.10"}; !slices.Equal(args(t, d), want) {
			t.Errorf("scheduler args %v, want %v", args(t, d), want)
		}
		ds := find(objs, "DaemonSet", "gandiva-agent")
		for _, o := range []object{d, ds} {
			c := container(t, o)
			if c["image"] != "registry.example/gandiva:v1.2.3" || c["imagePullPolicy"] != "IfNotPresent" {
				t.Errorf("%s: image %v, pull policy %v", key(o), c["image"], c["imagePullPolicy"])
			}
		}
		if got := d["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["nodeSelector"]; !reflect.DeepEqual(got, map[string]any{"pool": "system"}) {
			t.Errorf("scheduler nodeSelector %v", got)
		}
		dspec := ds["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
		if !reflect.DeepEqual(dspec["nodeSelector"], map[string]any{"gpu": "shared"}) || dspec["tolerations"] != nil {
			t.Errorf("agent nodeSelector %v tolerations %v", dspec["nodeSelector"], dspec["tolerations"])
		}
		if cm := find(objs, "ConfigMap", "gandiva-settings"); str(cm, "data", "tickets.team-a") != "4" {
			t.Errorf("settings: %v", cm["data"])
		}
		for _, o := range objs {
			switch str(o, "kind") {
			case "ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
				if ns := str(o, "metadata", "namespace"); ns != "" {
					t.Errorf("%s is cluster-scoped but has namespace %s", key(o), ns)
				}
			default:
				if ns := str(o, "metadata", "namespace"); ns != "ml-sched" {
					t.Errorf("%s not in the release namespace ml-sched", key(o))
				}
			}
			if subj, ok := o["subjects"].([]any); ok {
				for _, s := range subj {
					if ns := s.(map[string]any)["namespace"]; ns != "ml-sched" {
						t.Errorf("%s binds a service account of namespace %v", key(o), ns)
					}
				}
			}
		}
	})
}

// Bad values are refused with an error naming the value.
func TestBadValues(t *testing.T) {
	for _, c := range []struct {
		vals map[string]any
		want string
	}{
		{map[string]any{"scheduler": map[string]any{"policy": "nope"}}, "/scheduler/policy"},
		{map[string]any{"scheduler": map[string]any{"policy": "fifo,philly"}}, "/scheduler/policy"},
		{map[string]any{"scheduler": map[string]any{"policy": "fifo --verbose"}}, "/scheduler/policy"},
		{map[string]any{"scheduler": map[string]any{"replicas": "two"}}, "/scheduler/replicas"},
		{map[string]any{"scheduler": map[string]any{"replicas": -1}}, "/scheduler/replicas"},
		{map[string]any{"image": map[string]any{"pullPolicy": "Sometimes"}}, "/image/pullPolicy"},
		{map[string]any{"image": map[string]any{"tag": "a b"}}, "/image/tag"},
		{map[string]any{"serviceMonitor": map[string]any{"enable": true}}, "enable"},
		{map[string]any{"serviceMonitor": map[string]any{"interval": "often"}}, "/serviceMonitor/interval"},
		{map[string]any{"metrics": map[string]any{"port": 70000}}, "/metrics/port"},
		{map[string]any{"settings": map[string]any{"tickets.team-a": 4}}, "/settings/tickets.team-a"},
		{map[string]any{"agent": map[string]any{"enabled": "yes"}}, "/agent/enabled"},
		{map[string]any{"replicas": 3}, "replicas"},
	} {
		_, err := render(t, c.vals, baseNS)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("values %v: %v, want an error naming %s", c.vals, err, c.want)
		}
	}
	_, err := render(t, map[string]any{"scheduler": map[string]any{"policy": "nope"}}, baseNS)
	t.Logf("an unknown policy: %v", err)
}

// The schema's policies are the registry's, and each renders.
func TestSchemaPoliciesAreRegistered(t *testing.T) {
	var schema struct {
		Properties struct {
			Scheduler struct {
				Properties struct {
					Policy struct{ Pattern, Description string }
				}
			}
		}
	}
	b, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &schema); err != nil {
		t.Fatal(err)
	}
	p := schema.Properties.Scheduler.Properties.Policy
	m := regexp.MustCompile(`^\^\(([a-z0-9|-]+)\)`).FindStringSubmatch(p.Pattern)
	if m == nil {
		t.Fatalf("pattern %q does not start with ^(name|name...)", p.Pattern)
	}
	got := strings.Split(m[1], "|")
	want := registry.Names()
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Errorf("values.schema.json's policies %v, the registry's %v", got, want)
	}
	for _, name := range want {
		if !strings.Contains(p.Description, name) {
			t.Errorf("the schema's description of scheduler.policy does not name %s", name)
		}
		objs, err := render(t, map[string]any{"scheduler": map[string]any{"policy": name}}, baseNS)
		if err != nil {
			t.Errorf("policy %s: %v", name, err)
			continue
		}
		if !slices.Contains(args(t, find(objs, "Deployment", "gandiva-scheduler")), "--policy="+name) {
			t.Errorf("policy %s not passed to gandiva kube", name)
		}
	}
}

// `helm lint` passes (no error, no warning) with the default values and
// with the metrics, the ServiceMonitor and no agent.
func TestLint(t *testing.T) {
	for _, vals := range []map[string]any{
		nil,
		{"serviceMonitor": map[string]any{"enabled": true}},
		{"metrics": map[string]any{"enabled": true}, "agent": map[string]any{"enabled": false}},
	} {
		l := action.NewLint()
		l.Strict = true
		l.Namespace = baseNS
		res := l.Run([]string{chartDir}, vals)
		for _, m := range res.Messages {
			t.Logf("lint %v: %s", vals, m)
		}
		if res.TotalChartsLinted != 1 || len(res.Errors) != 0 {
			t.Errorf("helm lint --strict with %v: %d charts linted, errors %v", vals, res.TotalChartsLinted, res.Errors)
		}
		for _, m := range res.Messages {
			if m.Severity >= support.WarningSev {
				t.Errorf("helm lint with %v: %s", vals, m)
			}
		}
	}
	// lint sees bad values too
	res := action.NewLint().Run([]string{chartDir}, map[string]any{"scheduler": map[string]any{"policy": "nope"}})
	if len(res.Errors) == 0 {
		t.Error("helm lint passes an unknown policy")
	}
}
