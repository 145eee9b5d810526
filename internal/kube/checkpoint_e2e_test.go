package kube

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
	"github.com/gandiva-sched/gandiva/internal/kube/kubetest"
)

// The checkpoint contract on a control plane: two preemptible Jobs run on
// two one-GPU nodes, equal to tiresias-l (one queue); their trainers
// report checkpoints on the Jobs (gandiva.io/checkpoint-time), a's
// after b's. A third Job arrives in the top queue: the scheduler
// suspends a, which loses less work, though b comes last in the queue
// (which alone would make b the victim: see the tiresias scenario
// checkpoint.txt).
func TestCheckpointAnnotationPicksVictimE2E(t *testing.T) {
	t.Parallel() // each has a control plane of its own; they mostly wait
	p := kubetest.Start(t, cplane.Options{Kwok: true, Controllers: true})
	cs := kubetest.Client(t, p)
	ctx := context.Background()
	kubetest.AddNodes(t, cs, kubetest.Nodes{Count: 2, GPUs: 1})
	kubetest.Namespace(t, cs, "team-a")
	kubetest.Namespace(t, cs, "gandiva-system")
	runGandiva(t, p, Options{Policy: "tiresias-l:limits=1/100000"})
	createJob(t, cs, jobSpec{ns: "team-a", name: "a", pods: 1, gpus: 1, preemptible: true})
	kubetest.Eventually(t, 60*time.Second, "a running", func() (bool, error) { return boundCount(t, cs, "team-a", "a") == 1, nil })
	createJob(t, cs, jobSpec{ns: "team-a", name: "b", pods: 1, gpus: 1, preemptible: true})
	kubetest.Eventually(t, 60*time.Second, "b running", func() (bool, error) { return boundCount(t, cs, "team-a", "b") == 1, nil })
	annotate := func(name string, at time.Time) {
		t.Helper()
		body := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q,%q:"100"}}}`, AnnCheckpointTime, at.UTC().Format(time.RFC3339Nano), AnnCheckpointStep)
		if _, err := cs.BatchV1().Jobs("team-a").Patch(ctx, name, types.MergePatchType, []byte(body), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	annotate("b", time.Now())
	time.Sleep(1500 * time.Millisecond) // both pass 1 GPU-second: queue 1
	annotate("a", time.Now())
	time.Sleep(300 * time.Millisecond) // (the scheduler sees the annotation)
	createJob(t, cs, jobSpec{ns: "team-a", name: "c", pods: 1, gpus: 1, preemptible: true})
	state := func(name string) string {
		j, err := cs.BatchV1().Jobs("team-a").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return j.Annotations[AnnState]
	}
	kubetest.Eventually(t, 60*time.Second, "a victim suspended", func() (bool, error) {
		return state("a") == StateSuspended || state("b") == StateSuspended, nil
	})
	if a, b := state("a"), state("b"); a != StateSuspended || b != StateRunning {
		t.Fatalf("a %q, b %q: want a suspended (its checkpoint is newer: it loses less) and b running", a, b)
	}
}
