package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
	"github.com/gandiva-sched/gandiva/internal/kube/kubetest"
	"github.com/gandiva-sched/gandiva/internal/kube/shared"
)

// deploy/base/pods-vap.yaml against a namespace user (RBAC: pods and
// pods/status create, update and patch in team-a, as a team's own role
// would give): the user cannot create a pod with gandiva.io/assign or
// gandiva.io/agent-status, nor add, change or remove them later (through
// the pod or its status), nor change gandiva.io/gpus; a shared pod that
// names a node or another scheduler is refused; the user's ordinary pods,
// and other changes of a shared pod, are not. The scheduler's account
// (rbac.yaml's rights and policy) still writes gandiva.io/assign on the
// user's pod, which the user then cannot undo. The user cannot create a
// service account named as gandiva's (which the policies exempt).
func TestAdmissionHoldsUsers(t *testing.T) {
	t.Parallel()
	user := "alice"
	sa := "system:serviceaccount:gandiva-system:gandiva"
	p := kubetest.Start(t, cplane.Options{Users: []cplane.User{{Name: user},
		{Name: sa, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:gandiva-system"}}}})
	cs := kubetest.Client(t, p)
	ctx := context.Background()
	base := "../../deploy/base"
	for _, f := range []string{"namespace.yaml", "rbac.yaml", "pods-vap.yaml"} {
		apply(t, cs, objects(t, filepath.Join(base, f)), false)
	}
	kubetest.Namespace(t, cs, "team-a")
	if _, err := cs.RbacV1().Roles("team-a").Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "pods"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods", "pods/status", "serviceaccounts"},
			Verbs: []string{"get", "list", "create", "update", "patch", "delete"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().RoleBindings("team-a").Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "alice"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "pods"},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: user}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ucs, err := kubernetes.NewForConfig(p.UserConfig(user))
	if err != nil {
		t.Fatal(err)
	}
	sacs, err := kubernetes.NewForConfig(p.UserConfig(sa))
	if err != nil {
		t.Fatal(err)
	}

	pod := func(name string, ann map[string]string, mod func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, Annotations: ann},
			Spec: corev1.PodSpec{SchedulerName: SchedulerName, RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
		if mod != nil {
			mod(p)
		}
		return p
	}
	assign := shared.Assign{Gen: 1, State: shared.Running, GPUs: []int{0, 1}}.String()
	status := shared.Status{Gen: 1, State: shared.StatusSuspended}.String()
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	// (a new policy reaches the API server's admission after a while, and
	// so does the Role: until then a request may be allowed or forbidden
	// by RBAC; dry runs change nothing, so they are retried)
	refused := func(what, want string, call func() error) {
		t.Helper()
		kubetest.Eventually(t, 30*time.Second, what+" refused saying "+want, func() (bool, error) {
			err := call()
			if err == nil {
				return false, fmt.Errorf("%s was allowed", what)
			}
			return strings.Contains(err.Error(), want), err
		})
	}
	const annMsg = "only gandiva (its scheduler and node agent) may write the annotations"
	const gpusMsg = "must be scheduled by gandiva"
	for _, c := range []struct {
		what, want string
		pod        *corev1.Pod
	}{
		{"a pod created with gandiva.io/assign", annMsg, pod("x", map[string]string{shared.AnnGPUs: "2", shared.AnnAssign: assign}, nil)},
		{"a pod created with gandiva.io/agent-status", annMsg, pod("x", map[string]string{shared.AnnGPUs: "2", shared.AnnStatus: status}, nil)},
		{"a plain pod created with gandiva.io/assign", annMsg, pod("x", map[string]string{shared.AnnAssign: assign},
			func(p *corev1.Pod) { p.Spec.SchedulerName = "" })},
		{"a shared pod naming its node", gpusMsg, pod("x", map[string]string{shared.AnnGPUs: "1"},
			func(p *corev1.Pod) { p.Spec.NodeName = "shared-0" })},
		{"a shared pod of the default scheduler", gpusMsg, pod("x", map[string]string{shared.AnnGPUs: "1"},
			func(p *corev1.Pod) { p.Spec.SchedulerName = "" })},
		{"a shared pod of another scheduler", gpusMsg, pod("x", map[string]string{shared.AnnGPUs: "1"},
			func(p *corev1.Pod) { p.Spec.SchedulerName = "volcano" })},
	} {
		refused(c.what, c.want, func() error {
			_, err := ucs.CoreV1().Pods("team-a").Create(ctx, c.pod, dry)
			return err
		})
	}

	// what the user may do: a shared pod for gandiva, a pod of another
	// scheduler or one naming a node that asks for no shared GPUs
	for _, q := range []*corev1.Pod{
		pod("s", map[string]string{shared.AnnGPUs: "2"}, nil),
		pod("plain", nil, func(p *corev1.Pod) { p.Spec.SchedulerName = "" }),
		pod("pinned", map[string]string{"other": "x"}, func(p *corev1.Pod) { p.Spec.NodeName = "gpu-0" }),
	} {
		kubetest.Eventually(t, 30*time.Second, "the user creating pod "+q.Name, func() (bool, error) {
			_, err := ucs.CoreV1().Pods("team-a").Create(ctx, q, metav1.CreateOptions{})
			return err == nil, err
		})
	}

	patch := func(cs kubernetes.Interface, name string, ann map[string]any, sub ...string) error {
		body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
		_, err := cs.CoreV1().Pods("team-a").Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}, sub...)
		return err
	}
	userPatches := func(name string) []struct {
		what string
		ann  map[string]any
		sub  []string
	} {
		return []struct {
			what string
			ann  map[string]any
			sub  []string
		}{
			{"adding gandiva.io/assign to pod " + name, map[string]any{shared.AnnAssign: assign}, nil},
			{"adding gandiva.io/agent-status to pod " + name, map[string]any{shared.AnnStatus: status}, nil},
			{"adding gandiva.io/assign to pod " + name + " through its status", map[string]any{shared.AnnAssign: assign}, []string{"status"}},
			{"changing gandiva.io/gpus of pod " + name, map[string]any{shared.AnnGPUs: "8"}, nil},
			{"adding gandiva.io/gpus to pod pinned", map[string]any{shared.AnnGPUs: "1"}, nil},
		}
	}
	for _, c := range userPatches("s") {
		name := "s"
		if strings.HasSuffix(c.what, "pinned") {
			name = "pinned"
		}
		refused(c.what, annMsg, func() error { return patch(ucs, name, c.ann, c.sub...) })
	}
	// other changes of a shared pod are the user's
	if err := patch(ucs, "s", map[string]any{"note": "mine"}); err != nil {
		t.Fatalf("the user annotating their shared pod: %v", err)
	}

	// the scheduler's account writes the assignment (its rights take a
	// while to reach the authorizer too)...
	kubetest.Eventually(t, 30*time.Second, "the scheduler's account writing gandiva.io/assign", func() (bool, error) {
		body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{shared.AnnAssign: assign}}})
		_, err := sacs.CoreV1().Pods("team-a").Patch(ctx, "s", types.MergePatchType, body, metav1.PatchOptions{})
		return err == nil, err
	})
	// ...which the user can neither change nor remove, while their other
	// changes still go through
	other := shared.Assign{Gen: 2, State: shared.Running, GPUs: []int{2, 3}}.String()
	refused("changing the scheduler's gandiva.io/assign", annMsg, func() error { return patch(ucs, "s", map[string]any{shared.AnnAssign: other}) })
	refused("removing the scheduler's gandiva.io/assign", annMsg, func() error { return patch(ucs, "s", map[string]any{shared.AnnAssign: nil}) })
	if err := patch(ucs, "s", map[string]any{"note": "still mine"}); err != nil {
		t.Fatalf("the user annotating their assigned shared pod: %v", err)
	}
	// nor can the user make themselves an account of gandiva's name (the
	// policies exempt those names in any namespace); an install can, in
	// its namespace (labelled gandiva.io/system=true)
	for _, name := range []string{"gandiva", "gandiva-agent"} {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name}}
		refused("the user creating service account "+name, "may be created only in a namespace labelled gandiva.io/system=true", func() error {
			_, err := ucs.CoreV1().ServiceAccounts("team-a").Create(ctx, sa, dry)
			return err
		})
		sa.Namespace = "gandiva-system"
		// (rbac.yaml made "gandiva": AlreadyExists comes from storage, after admission)
		if _, err := cs.CoreV1().ServiceAccounts("gandiva-system").Create(ctx, sa, dry); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Errorf("creating service account %s in gandiva-system: %v", name, err)
		}
	}
	if _, err := ucs.CoreV1().ServiceAccounts("team-a").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "builder"}}, dry); err != nil {
		t.Errorf("the user creating service account builder: %v", err)
	}

	got, err := cs.CoreV1().Pods("team-a").Get(ctx, "s", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Annotations[shared.AnnAssign] != assign {
		t.Fatalf("pod s's assignment is %q, want the scheduler's %q", got.Annotations[shared.AnnAssign], assign)
	}
}
