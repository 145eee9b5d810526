package kube

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gandiva-sched/gandiva/internal/kube/kubetest"
	"github.com/gandiva-sched/gandiva/internal/kube/shared"
)

// `gandiva kube dev --nodes 2 --gpus 1 --shared-nodes 1` (StartDev, then
// Run as the command does, here under gandiva with 2 s quanta): gpu-1 is
// a shared node with its node agent; deploy/examples/shared-job.yaml and
// a copy of it applied there run on it beside the node's reservation pod,
// each pod with a running assignment on GPU 0, and take turns: the
// stand-ins of their processes attach to the agent's sockets, make
// progress, and are suspended and resumed in place (Events Suspended and
// Resumed on both Jobs). The first carries gandiva.io/iters=40 with
// iter-time 0.1: its stand-in counts mini-batches only while it runs and
// ends on its own (the pod Succeeded, the Job complete, the agent's last
// status at 40 mini-batches); the second, without iters, runs on, alone.
func TestDevSharedNodes(t *testing.T) {
	t.Parallel() // a control plane of its own; it mostly waits
	ctx := context.Background()
	d, err := StartDev(ctx, DevOptions{Nodes: 2, GPUs: 1, SharedNodes: 1, Log: slog.New(slog.NewTextHandler(testWriter{t}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Stop(); err != nil {
			t.Error(err)
		}
	})
	if !slices.Equal(d.Nodes, []string{"gpu-0", "gpu-1"}) || !slices.Equal(d.SharedNodes, []string{"gpu-1"}) {
		t.Fatalf("nodes %v, shared %v; want gpu-0 and gpu-1, gpu-1 shared", d.Nodes, d.SharedNodes)
	}
	cs := kubetest.Client(t, d.Plane)
	runGandivaConfig(t, d.Config(), Options{Policy: "gandiva:quantum=2;pack=false;migrate=false"})
	objs := objects(t, "../../deploy/examples/shared-job.yaml")
	if len(objs) != 1 {
		t.Fatalf("the shared example has %d objects, want its Job", len(objs))
	}
	ex, ok := objs[0].(*batchv1.Job)
	if !ok {
		t.Fatalf("the shared example is a %T, want a Job", objs[0])
	}
	if ex.Annotations == nil {
		ex.Annotations = map[string]string{}
	}
	twin := ex.DeepCopy()
	twin.Name = ex.Name + "-2"
	delete(twin.Annotations, AnnIters)
	delete(twin.Annotations, AnnIterTime)
	ex.Annotations[AnnIters], ex.Annotations[AnnIterTime] = "40", "0.1"
	apply(t, cs, []runtime.Object{ex, twin}, false)
	jobs := []string{ex.Name, twin.Name}
	kubetest.Eventually(t, 2*time.Minute, "both shared examples suspended and resumed in place on gpu-1", func() (bool, error) {
		if reservation(t, cs, "gpu-1") == nil {
			return false, nil
		}
		for _, job := range jobs {
			_, all, err := jobPods(cs, "team-a", job)
			if err != nil || len(all) != 1 {
				return false, err
			}
			p := all[0]
			a, err := shared.ParseAssign(p.Annotations[shared.AnnAssign])
			if p.Spec.NodeName != "gpu-1" || err != nil || !slices.Equal(a.GPUs, []int{0}) {
				return false, nil
			}
			v, err := Describe(ctx, cs, "team-a", job)
			if err != nil {
				return false, err
			}
			reasons := map[string]int{}
			for _, e := range v.Events {
				reasons[e.Reason]++
			}
			if reasons["Suspended"] == 0 || reasons["Resumed"] == 0 {
				return false, nil
			}
		}
		return true, nil
	})
	kubetest.Eventually(t, 2*time.Minute, ex.Name+" done on its own, "+twin.Name+" running alone", func() (bool, error) {
		j, err := cs.BatchV1().Jobs("team-a").Get(ctx, ex.Name, metav1.GetOptions{})
		if err != nil || j.Status.Succeeded != 1 {
			return false, err
		}
		_, all, err := jobPods(cs, "team-a", twin.Name)
		if err != nil || len(all) != 1 {
			return false, err
		}
		a, err := shared.ParseAssign(all[0].Annotations[shared.AnnAssign])
		return err == nil && a.State == shared.Running, nil
	})
	_, all, err := jobPods(cs, "team-a", ex.Name)
	if err != nil || len(all) != 1 || all[0].Status.Phase != corev1.PodSucceeded {
		t.Fatalf("pods of %s: %d, %v; want its one pod Succeeded", ex.Name, len(all), err)
	}
	kubetest.Eventually(t, time.Minute, "the agent's last status of "+ex.Name, func() (bool, error) {
		_, all, err := jobPods(cs, "team-a", ex.Name)
		if err != nil || len(all) != 1 {
			return false, err
		}
		st, ok := statusOf(&all[0])
		return ok && st.Done == 40, nil
	})
	_, all, err = jobPods(cs, "team-a", twin.Name)
	if err != nil || len(all) != 1 {
		t.Fatalf("pods of %s: %d, %v (a shared job stays in its one pod)", twin.Name, len(all), err)
	}
	if st, ok := statusOf(&all[0]); !ok || st.Done == 0 {
		t.Errorf("%s: the agent's status %q shows no progress", twin.Name, all[0].Annotations[shared.AnnStatus])
	}
	if all[0].Status.Phase != corev1.PodRunning {
		t.Errorf("%s (no iters) is %s, want Running until it is ended", twin.Name, all[0].Status.Phase)
	}
}

// devWorkOf reads a played job's work as the scheduler reads it; values it
// would refuse count as absent (the default mini-batch, no end).
func TestDevWorkOf(t *testing.T) {
	for _, c := range []struct {
		ann  map[string]string
		want devWork
	}{
		{nil, devWork{0, DevIterTime}},
		{map[string]string{AnnIters: "40", AnnIterTime: "0.25"}, devWork{40, 250 * time.Millisecond}},
		{map[string]string{AnnIters: " 2.5 ", AnnIterTime: "2"}, devWork{3, 2 * time.Second}},
		{map[string]string{AnnIters: "0", AnnIterTime: "-1"}, devWork{0, DevIterTime}},
		{map[string]string{AnnIters: "x", AnnIterTime: "NaN"}, devWork{0, DevIterTime}},
	} {
		if got := devWorkOf(c.ann); got != c.want {
			t.Errorf("devWorkOf(%v) = %+v, want %+v", c.ann, got, c.want)
		}
	}
}

// `gandiva kube dev --nodes 1 --gpus 2` under gandiva with 2 s quanta:
// two copies of deploy/examples/job.yaml (2 workers of 1 GPU) take turns
// on the node's 2 GPUs. The first carries gandiva.io/iters=40 with
// iter-time 0.1 (4 s of work, more than a quantum): the processes dev
// plays for its pods count mini-batches while they run, checkpoint when
// their pods are deleted at a suspension, restore in the next pods, and
// end on their own, so the Job completes after more than one turn. The
// second, without iters, runs on, alone.
func TestDevExclusiveJobsEnd(t *testing.T) {
	t.Parallel() // a control plane of its own; it mostly waits
	ctx := context.Background()
	d, err := StartDev(ctx, DevOptions{Nodes: 1, GPUs: 2, Log: slog.New(slog.NewTextHandler(testWriter{t}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Stop(); err != nil {
			t.Error(err)
		}
	})
	cs := kubetest.Client(t, d.Plane)
	runGandivaConfig(t, d.Config(), Options{Policy: "gandiva:quantum=2;pack=false;migrate=false"})
	objs := objects(t, "../../deploy/examples/job.yaml")
	if len(objs) != 1 {
		t.Fatalf("the example has %d objects, want its Job", len(objs))
	}
	ex, ok := objs[0].(*batchv1.Job)
	if !ok {
		t.Fatalf("the example is a %T, want a Job", objs[0])
	}
	if ex.Annotations == nil {
		ex.Annotations = map[string]string{}
	}
	twin := ex.DeepCopy()
	twin.Name = ex.Name + "-2"
	delete(twin.Annotations, AnnIters)
	delete(twin.Annotations, AnnIterTime)
	ex.Annotations[AnnIters], ex.Annotations[AnnIterTime] = "40", "0.1"
	apply(t, cs, []runtime.Object{ex, twin}, false)
	kubetest.Eventually(t, 3*time.Minute, ex.Name+" done on its own, "+twin.Name+" running alone", func() (bool, error) {
		j, err := cs.BatchV1().Jobs("team-a").Get(ctx, ex.Name, metav1.GetOptions{})
		if err != nil || j.Status.Succeeded != 2 {
			return false, err
		}
		bound, _, err := jobPods(cs, "team-a", twin.Name)
		return err == nil && len(bound) == 2, err
	})
	v, err := Describe(ctx, cs, "team-a", ex.Name)
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]int{}
	for _, e := range v.Events {
		reasons[e.Reason]++
	}
	if reasons["Suspended"] == 0 {
		t.Errorf("%s ended without a suspension (events %v): the test needs more work than a quantum", ex.Name, reasons)
	}
	_, all, err := jobPods(cs, "team-a", twin.Name)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range all {
		if p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodRunning && p.Status.Phase != corev1.PodPending {
			t.Errorf("%s (no iters): pod %s is %s, want it running until it is ended", twin.Name, p.Name, p.Status.Phase)
		}
	}
}
