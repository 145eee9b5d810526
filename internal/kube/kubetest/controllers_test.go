package kubetest

import (
	"reflect"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
)

func TestControllerOrder(t *testing.T) {
	got, err := controllerOrder([]string{TrainerController, JobSetController, TrainerController})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{JobSetController, TrainerController}; !reflect.DeepEqual(got, want) {
		t.Errorf("order = %v, want %v (each once, JobSet before Trainer, which needs it)", got, want)
	}
	got, err = controllerOrder([]string{TrainerController})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{JobSetController, TrainerController}; !reflect.DeepEqual(got, want) {
		t.Errorf("order = %v, want %v (a needed controller is started too)", got, want)
	}
	if _, err := controllerOrder([]string{"nope"}); err == nil || !strings.Contains(err.Error(), `"nope" is unknown`) {
		t.Errorf("unknown controller: err = %v", err)
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
	sel := podSelector(JobSetController, pods, nil)
	if sel == nil || len(sel.MatchExpressions) != 1 || sel.MatchExpressions[0].Key != "jobset.sigs.k8s.io/jobset-name" {
		t.Errorf("JobSet pod webhook selector = %+v", sel)
	}
	jobsets := []admissionv1.RuleWithOperations{{Rule: admissionv1.Rule{Resources: []string{"jobsets"}}}}
	if sel := podSelector(JobSetController, jobsets, nil); sel != nil {
		t.Errorf("JobSet webhook on jobsets got selector %+v", sel)
	}
}
