package kube

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
	"github.com/gandiva-sched/gandiva/internal/kube/kubetest"
)

// A binding the API server refuses for good (here an admission policy
// that refuses every binding of the pods named bad-...) is given up and
// reported back, not retried for ever with the job's GPUs held: the job
// goes back to the queue (its Job suspended, its GPUs released), the
// policy is told once for the gang (Stats.GaveUp counts the refusals
// reported to the engine), and the Job gets a Warning Event saying why.
func TestBindRefusedForGoodRequeues(t *testing.T) {
	t.Parallel() // each has a control plane of its own; they mostly wait
	p := kubetest.Start(t, cplane.Options{Kwok: true, Controllers: true})
	cs := kubetest.Client(t, p)
	ctx := context.Background()
	kubetest.AddNodes(t, cs, kubetest.Nodes{Count: 1, GPUs: 2})
	kubetest.Namespace(t, cs, "team-a")
	kubetest.Namespace(t, cs, "gandiva-system")
	const name = "refuse-bad-bindings"
	if _, err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{Operations: []admissionv1.OperationType{admissionv1.Create},
					Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods/binding"}}},
			}}},
			Validations: []admissionv1.Validation{{Expression: "object.kind != 'Binding' || !object.metadata.name.startsWith('bad-')", Message: "bindings of bad pods are refused"}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name, ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// the policy in force: a probe pod (of no scheduler, asking for no
	// GPU) cannot be bound; each try a new one (one bound before the
	// policy took effect stays bound)
	tries := 0
	kubetest.Eventually(t, 60*time.Second, "bindings of bad pods refused", func() (bool, error) {
		tries++
		probe := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: fmt.Sprintf("bad-probe-%d", tries)},
			Spec: corev1.PodSpec{SchedulerName: "nobody", Containers: []corev1.Container{{Name: "main", Image: "x"}}}}
		if _, err := cs.CoreV1().Pods("team-a").Create(ctx, probe, metav1.CreateOptions{}); err != nil {
			return false, fmt.Errorf("creating the probe: %w", err)
		}
		err := cs.CoreV1().Pods("team-a").Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: probe.Name},
			Target: corev1.ObjectReference{Kind: "Node", Name: "gpu-0"}}, metav1.CreateOptions{})
		// (a policy's denial is Invalid unless its validation names a reason)
		refused := apierrors.IsInvalid(err) || apierrors.IsForbidden(err)
		if err != nil && !refused {
			return false, err
		}
		return refused, nil
	})
	g := runGandiva(t, p, Options{Policy: "fifo"})
	createJob(t, cs, jobSpec{ns: "team-a", name: "bad", pods: 2, gpus: 1})
	kubetest.Eventually(t, 90*time.Second, "a BindRefused Event on Job bad", func() (bool, error) {
		evs, err := cs.CoreV1().Events("team-a").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, ev := range evs.Items {
			if ev.Reason == "BindRefused" && ev.InvolvedObject.Kind == "Job" && ev.InvolvedObject.Name == "bad" &&
				ev.Type == corev1.EventTypeWarning && strings.Contains(ev.Message, "bindings of bad pods are refused") {
				return true, nil
			}
		}
		return false, nil
	})
	// once for the gang (both its pods' bindings were refused); the next
	// try is a back-off (a minute) away
	if st := g.stats(); st.GaveUp != 1 {
		t.Errorf("Stats.GaveUp %d, want 1: the refusal was not reported to the engine once", st.GaveUp)
	}
	// its GPUs released: the Job is suspended (until the policy tries again)
	kubetest.Eventually(t, 60*time.Second, "Job bad suspended", func() (bool, error) {
		j, err := cs.BatchV1().Jobs("team-a").Get(ctx, "bad", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return j.Spec.Suspend != nil && *j.Spec.Suspend, nil
	})
}
