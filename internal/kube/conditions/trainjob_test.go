package conditions

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gandiva-sched/gandiva/internal/kube"
	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
	"github.com/gandiva-sched/gandiva/internal/kube/kubetest"
	wl "github.com/gandiva-sched/gandiva/internal/kube/workloads"
)

// The example TrainJob (deploy/examples/trainjob.yaml) with the real
// Trainer and JobSet controllers, Gandiva run under the service account
// of deploy/base/rbac.yaml (its rights and admission policy): once its
// JobSet runs, the TrainJob and the JobSet show GandivaScheduling Running
// and gandiva.io/reason; when its pods end well, the Trainer's status
// write (its Complete condition) keeps the TrainJob's condition (every
// version watched after the first that showed it still shows it), and no
// write of the scheduler's is refused.
func TestTrainJobConditions(t *testing.T) {
	t.Parallel()
	cs, dc, leader := startAsScheduler(t, "fifo", kubetest.TrainerController)
	ctx := context.Background()

	var name string
	var tjHist *history
	for _, u := range docs(t, "deploy/examples/trainjob.yaml") {
		r := wl.TrainingRuntimeGVR
		if u.GetKind() == "TrainJob" {
			r, name = trainGVR, u.GetName()
			tjHist = watchHistory(t, dc, trainGVR, name)
		}
		if _, err := dc.Resource(r).Namespace(u.GetNamespace()).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	if tjHist == nil {
		t.Fatal("deploy/examples/trainjob.yaml has no TrainJob")
	}
	running := func(u *unstructured.Unstructured) error {
		c := condition(u, kube.CondScheduling)
		r := u.GetAnnotations()[kube.AnnReason]
		if c == nil || c["status"] != "True" || c["reason"] != kube.ReasonRunning || !strings.HasPrefix(r, "Running: running on gpu-") {
			return fmt.Errorf("%s %s: condition %v, %s %q", u.GetKind(), u.GetName(), c, kube.AnnReason, r)
		}
		return nil
	}
	kubetest.Eventually(t, 3*time.Minute, "the TrainJob and its JobSet show GandivaScheduling Running", func() (bool, error) {
		tj, err := dc.Resource(trainGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		js, err := dc.Resource(jobSetGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if err := running(tj); err != nil {
			return false, err
		}
		return running(js) == nil, running(js)
	})
	// its pods end well (kwok's exit annotation): the JobSet completes and
	// the Trainer writes the TrainJob's Complete condition, after Gandiva's
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "jobset.sigs.k8s.io/jobset-name=" + name})
	if err != nil || len(pods.Items) != 2 {
		t.Fatalf("the TrainJob's pods: %d (%v), want 2", len(pods.Items), err)
	}
	for _, pd := range pods.Items {
		body := []byte(`{"metadata":{"annotations":{"` + cplane.AnnExit + `":"0"}}}`)
		if _, err := cs.CoreV1().Pods(ns).Patch(ctx, pd.Name, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	kubetest.Eventually(t, 3*time.Minute, "the Trainer's Complete condition on the TrainJob beside Gandiva's", func() (bool, error) {
		tj, err := dc.Resource(trainGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		done, ours := condition(tj, "Complete"), condition(tj, kube.CondScheduling)
		return done != nil && done["status"] == "True" && ours != nil, fmt.Errorf("Complete %v, %s %v", done, kube.CondScheduling, ours)
	})
	time.Sleep(5 * time.Second)
	tjHist.check(t, "TrainJob "+name)
	noRefusedWrites(t, leader)
}
