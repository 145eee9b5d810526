package kube

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
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
// Resumed on both Jobs).
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
	twin := ex.DeepCopy()
	twin.Name = ex.Name + "-2"
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
	for _, job := range jobs {
		_, all, err := jobPods(cs, "team-a", job)
		if err != nil || len(all) != 1 {
			t.Fatalf("pods of %s: %d, %v (a shared job stays in its one pod)", job, len(all), err)
		}
		st, ok := statusOf(&all[0])
		if !ok || st.Done == 0 {
			t.Errorf("%s: the agent's status %q shows no progress", job, all[0].Annotations[shared.AnnStatus])
		}
	}
}
