// Package trainerstatus tests that Gandiva uses the training progress
// Kubeflow Trainer (v2.2 and later) reports in a TrainJob's status, on the
// local control plane with the real Trainer and JobSet controllers (a
// package of its own so that it runs beside the other workload tests).
package trainerstatus

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/gandiva-sched/gandiva/internal/kube"
	"github.com/gandiva-sched/gandiva/internal/kube/kubetest"
	"github.com/gandiva-sched/gandiva/internal/kube/workloads"
)

// trainerStatusSchema is status.trainerStatus of Trainer v2.2.0's TrainJob
// CRD (manifests/base/crds/trainer.kubeflow.org_trainjobs.yaml, without its
// descriptions): the v2.0.0 CRD served here lacks it, and the API server
// would prune the field.
const trainerStatusSchema = `
type: object
x-kubernetes-validations:
- message: lastUpdatedTime is required when trainerStatus is present
  rule: has(self.lastUpdatedTime)
properties:
  estimatedRemainingSeconds: {format: int32, minimum: 0, type: integer}
  lastUpdatedTime: {format: date-time, type: string}
  metrics:
    maxItems: 256
    type: array
    x-kubernetes-list-type: atomic
    items:
      type: object
      required: [name, value]
      properties:
        name: {maxLength: 64, minLength: 1, type: string}
        value: {maxLength: 64, minLength: 1, type: string}
  progressPercentage: {format: int32, maximum: 100, minimum: 0, type: integer}
`

// endOf is the median end of a pod's gandiva.io/eta ("end ~Nov 27 18:07
// UTC ..."), in the year of now (or the next, when that is nearer).
func endOf(ann string, now time.Time) (time.Time, bool) {
	m := endRE.FindStringSubmatch(ann)
	if m == nil {
		return time.Time{}, false
	}
	t, err := time.Parse("Jan 2 15:04 2006", fmt.Sprintf("%s %d", m[1], now.Year()))
	if err != nil {
		return time.Time{}, false
	}
	if t.Before(now.AddDate(0, -6, 0)) {
		t = t.AddDate(1, 0, 0)
	}
	return t, true
}

var endRE = regexp.MustCompile(`^end ~([A-Z][a-z]{2} [0-9]{1,2} [0-9]{2}:[0-9]{2}) UTC\b`)

// The example TrainJob (deploy/examples/trainjob.yaml: 10000 mini-batches
// of 0.2 s declared, about 33 minutes) runs, scheduled by gandiva through
// its JobSet, and its pods' end ETA follows its declared length; then the
// test writes, through the TrainJob's status subresource as Trainer v2.2
// does, status.trainerStatus: 50% done, 10 hours left. Gandiva takes it as
// the job's progress and speed (5000 mini-batches left at 7.2 s each): the
// end ETA on its pods moves to about 10 hours from now.
func TestTrainJobProgressFromStatus(t *testing.T) {
	p, cs, dc := workloads.Plane(t, kubetest.TrainerController)
	ctx := context.Background()

	// the TrainJob CRD of v2.2: status.trainerStatus served
	var sch map[string]any
	if err := yaml.Unmarshal([]byte(trainerStatusSchema), &sch); err != nil {
		t.Fatal(err)
	}
	crd, err := dc.Resource(workloads.CRDGVR).Get(ctx, "trainjobs.trainer.kubeflow.org", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	if len(versions) != 1 {
		t.Fatalf("the TrainJob CRD has %d versions, want 1", len(versions))
	}
	if err := unstructured.SetNestedField(versions[0].(map[string]any), sch, "schema", "openAPIV3Schema", "properties", "status", "properties", "trainerStatus"); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedSlice(crd.Object, versions, "spec", "versions"); err != nil {
		t.Fatal(err)
	}
	if _, err := dc.Resource(workloads.CRDGVR).Update(ctx, crd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	kubetest.Namespace(t, cs, workloads.NS)
	kubetest.Namespace(t, cs, "gandiva-system")
	kubetest.AddNodes(t, cs, kubetest.Nodes{Count: 1, GPUs: 2})
	workloads.RunGandivaChecked(t, p, kube.Options{Policy: "fifo"})

	var tj *unstructured.Unstructured
	for _, u := range workloads.Docs(t, "deploy/examples/trainjob.yaml") {
		gvr := workloads.TrainingRuntimeGVR
		if u.GetKind() == "TrainJob" {
			gvr, tj = workloads.TrainJobGVR, u
		}
		if _, err := dc.Resource(gvr).Namespace(u.GetNamespace()).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	if tj == nil {
		t.Fatal("deploy/examples/trainjob.yaml has no TrainJob")
	}
	ns, name := tj.GetNamespace(), tj.GetName()

	// the pods' end ETA, once each of the 2 is bound and has one
	ends := func() ([]time.Time, error) {
		l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: workloads.JobSetLabel + "=" + name})
		if err != nil {
			return nil, err
		}
		var out []time.Time
		var seen []string
		for _, p := range l.Items {
			seen = append(seen, fmt.Sprintf("%s on %q %s: %q", p.Name, p.Spec.NodeName, p.Status.Phase, p.Annotations[kube.AnnETA]))
			if p.Spec.NodeName == "" || p.Status.Phase != corev1.PodRunning {
				continue
			}
			if e, ok := endOf(p.Annotations[kube.AnnETA], time.Now()); ok {
				out = append(out, e)
			}
		}
		if len(out) != 2 {
			return nil, fmt.Errorf("%d of %d pods bound, running and with an end ETA: %v", len(out), len(l.Items), seen)
		}
		return out, nil
	}
	kubetest.Eventually(t, 3*time.Minute, "the TrainJob's 2 pods bound by gandiva, its JobSet running, an end ETA of its declared length", func() (bool, error) {
		js, err := dc.Resource(workloads.JobSetGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if st := js.GetAnnotations()[kube.AnnState]; st != kube.StateRunning {
			return false, fmt.Errorf("the JobSet's %s is %q", kube.AnnState, st)
		}
		e, err := ends()
		if err != nil {
			return false, err
		}
		// 2000 s declared: within the hour, far from 10 hours
		return e[0].Before(time.Now().Add(time.Hour)), fmt.Errorf("ends %v", e)
	})

	report := func(ts any) {
		t.Helper()
		b := fmt.Sprintf(`{"status":{"trainerStatus":%s}}`, ts)
		if _, err := dc.Resource(workloads.TrainJobGVR).Namespace(ns).Patch(ctx, name, types.MergePatchType, []byte(b), metav1.PatchOptions{}, "status"); err != nil {
			t.Fatalf("writing the TrainJob's status.trainerStatus: %v", err)
		}
	}
	at := time.Now().UTC().Format(time.RFC3339)
	report(`{"progressPercentage":50,"estimatedRemainingSeconds":36000,"lastUpdatedTime":"` + at + `","metrics":[{"name":"loss","value":"0.42"}]}`)
	got, err := dc.Resource(workloads.TrainJobGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pc, ok, _ := unstructured.NestedInt64(got.Object, "status", "trainerStatus", "progressPercentage"); !ok || pc != 50 {
		t.Fatalf("the TrainJob's status.trainerStatus as stored: %v", got.Object["status"])
	}
	kubetest.Eventually(t, 3*time.Minute, "the pods' end ETA about 10 hours away (the trainer's report)", func() (bool, error) {
		e, err := ends()
		if err != nil {
			return false, err
		}
		now := time.Now()
		for _, x := range e {
			if x.Before(now.Add(9*time.Hour)) || x.After(now.Add(11*time.Hour)) {
				return false, fmt.Errorf("ends %v", e)
			}
		}
		return true, nil
	})
}

func TestEndOf(t *testing.T) {
	now := time.Date(2026, 12, 31, 20, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		ann  string
		want time.Time
		ok   bool
	}{
		{"end ~Dec 31 23:46 UTC; declared length (gandiva.io/iters)", time.Date(2026, 12, 31, 23, 46, 0, 0, time.UTC), true},
		{"end ~Jan 1 06:05 UTC (p10–p90 Jan 1 05:00 UTC – later); prior: x", time.Date(2027, 1, 1, 6, 5, 0, 0, time.UTC), true},
		{"end ~later", time.Time{}, false},
		{"", time.Time{}, false},
	} {
		if got, ok := endOf(c.ann, now); ok != c.ok || !got.Equal(c.want) {
			t.Errorf("%q: %v %v, want %v %v", c.ann, got, ok, c.want, c.ok)
		}
	}
}
