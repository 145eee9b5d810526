package kubetest

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
)

// Dynamic returns an admin dynamic client of p.
func Dynamic(t testing.TB, p *cplane.Plane) dynamic.Interface {
	t.Helper()
	dc, err := dynamic.NewForConfig(p.Config())
	if err != nil {
		t.Fatal(err)
	}
	return dc
}

// WaitCRDEstablished waits up to timeout until the CustomResourceDefinition
// name has the condition Established True, failing the test if not.
func WaitCRDEstablished(t testing.TB, dc dynamic.Interface, name string, timeout time.Duration) {
	t.Helper()
	Eventually(t, timeout, "CRD "+name+" established", func() (bool, error) {
		u, err := dc.Resource(crdGVR).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
}
