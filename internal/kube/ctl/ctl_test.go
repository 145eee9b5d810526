package ctl

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestOrder(t *testing.T) {
	got, err := Order([]string{Trainer, JobSet, Trainer})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{JobSet, Trainer}; !reflect.DeepEqual(got, want) {
		t.Errorf("order = %v, want %v (each once, JobSet before Trainer, which needs it)", got, want)
	}
	got, err = Order([]string{Trainer})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{JobSet, Trainer}; !reflect.DeepEqual(got, want) {
		t.Errorf("order = %v, want %v (a needed controller is started too)", got, want)
	}
	got, err = Order([]string{KubeRay, LWS})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{KubeApps, KubeRay, LWS}; !reflect.DeepEqual(got, want) {
		t.Errorf("order = %v, want %v (kube-apps once, before both)", got, want)
	}
	if _, err := Order([]string{"nope"}); err == nil || !strings.Contains(err.Error(), `"nope" is unknown`) {
		t.Errorf("unknown controller: err = %v", err)
	}
}

// A missing binary is a *NotBuiltError naming the script that builds it.
func TestCheckNotBuilt(t *testing.T) {
	t.Setenv("GANDIVA_KUBE_BIN", t.TempDir())
	_, err := Check(Trainer)
	var nb *NotBuiltError
	if !errors.As(err, &nb) || nb.Name != JobSet || !strings.Contains(err.Error(), "scripts/kube-workloads") {
		t.Errorf("Check(trainer) with no binaries: %v, want the JobSet controller not built, naming scripts/kube-workloads", err)
	}
}

func TestWorkloads(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", []string{}},
		{"jobset", []string{JobSet}},
		{"ray, lws,ray", []string{KubeRay, LWS}},
		{"pytorch", []string{PyTorch}},
		{"all", []string{JobSet, KubeRay, LWS, PyTorch, Trainer}},
		{"trainer,all", []string{JobSet, KubeRay, LWS, PyTorch, Trainer}},
	} {
		got, err := Workloads(tc.in)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Workloads(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	if _, err := Workloads("jobset,kuberay"); err == nil || !strings.Contains(err.Error(), `"kuberay"`) {
		t.Errorf("Workloads(jobset,kuberay): err = %v, want one naming kuberay", err)
	}
}

func TestSplitYAML(t *testing.T) {
	docs := splitYAML([]byte("---\na: 1\n---\nb: 2\n--- \nc: 3\n"))
	var got []string
	for _, d := range docs {
		got = append(got, string(d))
	}
	if want := []string{"", "a: 1\n", "b: 2\n", "c: 3\n"}; !reflect.DeepEqual(got, want) {
		t.Errorf("splitYAML = %q, want %q", got, want)
	}
}

func TestLocalWebhooks(t *testing.T) {
	path := "/validate-x"
	cc := admissionv1.WebhookClientConfig{Service: &admissionv1.ServiceReference{Name: "s", Namespace: "system", Path: &path}}
	if err := localClient(&cc, 9443, []byte("CA")); err != nil {
		t.Fatal(err)
	}
	if cc.Service != nil || cc.URL == nil || *cc.URL != "https://127.0.0.1:9443/validate-x" || string(cc.CABundle) != "CA" {
		t.Errorf("client config = %+v", cc)
	}
	if err := localClient(&admissionv1.WebhookClientConfig{}, 1, nil); err == nil {
		t.Error("a webhook without a service path was pointed somewhere")
	}
	pods := []admissionv1.RuleWithOperations{{Rule: admissionv1.Rule{Resources: []string{"pods"}}}}
	sel := podSelector(JobSet, pods, nil)
	if sel == nil || len(sel.MatchExpressions) != 1 || sel.MatchExpressions[0].Key != "jobset.sigs.k8s.io/jobset-name" {
		t.Errorf("JobSet pod webhook selector = %+v", sel)
	}
	jobsets := []admissionv1.RuleWithOperations{{Rule: admissionv1.Rule{Resources: []string{"jobsets"}}}}
	if sel := podSelector(JobSet, jobsets, nil); sel != nil {
		t.Errorf("JobSet webhook on jobsets got selector %+v", sel)
	}
}

// The LeaderWorkerSet manager watches every kind of its API groups (but
// its file configuration's) and exits when one's CRD is not installed
// (after its cache-sync timeout): Start installs a CRD for each.
func TestLWSInstallsEveryCRD(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	files, err := filepath.Glob(filepath.Join(root, "third_party/lws/api/*/v1/*_types.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no API types under third_party/lws/api (%v)", err)
	}
	typ := regexp.MustCompile(`(?m)^// ?\+kubebuilder:object:root=true\n(?:(?://.*)?\n)*type (\w+) struct`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range typ.FindAllSubmatch(b, -1) {
			if k := string(m[1]); !strings.HasSuffix(k, "List") {
				want[k] = true
			}
		}
	}
	got := map[string]bool{}
	for _, f := range specs[LWS].crds {
		docs, err := YAMLDocs(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range docs {
			k, _, _ := unstructured.NestedString(d.Object, "spec", "names", "kind")
			got[k] = true
		}
	}
	if len(want) < 3 {
		t.Fatalf("found only the root kinds %v in third_party/lws/api: the pattern is out of date", want)
	}
	for k := range want {
		if !got[k] {
			t.Errorf("kind %s of the LWS manager has no CRD among those Start installs (%v)", k, specs[LWS].crds)
		}
	}
}
