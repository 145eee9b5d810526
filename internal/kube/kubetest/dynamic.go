package kubetest

import (
	"context"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"

	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
	"github.com/gandiva-sched/gandiva/internal/kube/ctl"
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
	if err := ctl.WaitEstablished(context.Background(), dc, name, timeout); err != nil {
		t.Fatal(err)
	}
}
