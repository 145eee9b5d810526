package kube

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
	"github.com/gandiva-sched/gandiva/internal/kube/kubetest"
)

// gandiva kube on a cluster without its Lease namespace: an account that
// may create namespaces creates it and leads; one that may not (though it
// may write Leases anywhere) gets, within seconds, an error saying what to
// do, instead of leader election retrying a missing namespace forever; one
// that may not even write Leases there is told so as fast.
func TestLeaseNamespaceMissing(t *testing.T) {
	t.Parallel()
	lessee, nobody := "lessee", "nobody"
	p := kubetest.Start(t, cplane.Options{Users: []cplane.User{{Name: lessee}, {Name: nobody}}})
	cs := kubetest.Client(t, p)
	ctx := context.Background()

	// the admin: the namespace is created, and this replica leads
	g := runGandivaConfig(t, p.Config(), Options{Policy: "fjf", Namespace: "gandiva-made"})
	kubetest.Eventually(t, 60*time.Second, "gandiva kube leading in the namespace it created", func() (bool, error) {
		g.mu.Lock()
		led := g.s != nil
		g.mu.Unlock()
		if !led {
			return false, nil
		}
		_, err := cs.CoordinationV1().Leases("gandiva-made").Get(ctx, "gandiva-scheduler", metav1.GetOptions{})
		return err == nil, err
	})
	g.stop()

	// an account with every right on Leases and on reading namespaces,
	// but not creating them
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "lessee"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"*"}},
			{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch"}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "lessee"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "lessee"},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: lessee}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// (the binding reaches the authorizer after a while)
	lcs, err := kubernetes.NewForConfig(p.UserConfig(lessee))
	if err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 30*time.Second, "the lessee's Lease rights in force", func() (bool, error) {
		_, err := lcs.CoordinationV1().Leases("default").List(ctx, metav1.ListOptions{})
		return err == nil, err
	})

	for _, c := range []struct {
		user string
		want []string
	}{
		{lessee, []string{`namespace "gandiva-missing" does not exist`, "kubectl create namespace gandiva-missing", "--namespace"}},
		{nobody, []string{"may not create the Lease gandiva-missing/gandiva-scheduler", "--namespace"}},
	} {
		// (before the fix, Run retried the missing namespace until ctx ended)
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		t0 := time.Now()
		err := Run(ctx, p.UserConfig(c.user), Options{Policy: "fjf", Namespace: "gandiva-missing",
			LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 200 * time.Millisecond})
		cancel()
		took := time.Since(t0)
		if !errors.Is(err, ErrNoNamespace) {
			t.Fatalf("%s: Run returned %v after %v, want ErrNoNamespace at once", c.user, err, took)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v\nwant it to say %q", c.user, err, w)
			}
		}
		t.Logf("%s: after %.1f s: %v", c.user, took.Seconds(), err)
	}
	if _, err := cs.CoreV1().Namespaces().Get(ctx, "gandiva-missing", metav1.GetOptions{}); err == nil {
		t.Error("namespace gandiva-missing exists: an account that may not create namespaces made it")
	}
}
