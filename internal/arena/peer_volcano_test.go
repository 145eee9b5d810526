package arena

import (
	"strconv"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gandiva-sched/gandiva/internal/trace"
)

// A Job for Volcano is one gang of all its pods, in its namespace's queue,
// for the scheduler named volcano.
func TestVolcanoJob(t *testing.T) {
	_, plan, s := smallPlan(t, trace.SynthConfig{Jobs: 12, Seed: 3, Users: 2, Load: 8, GPUs: []int{1, 8}, MaxDuration: 600}, "volcano")
	pl := newPlayer(&Config{Plan: plan, Speed: 10}, nil, s[0])
	multi := false
	for _, j := range plan.Jobs {
		job := pl.sched.decorate(j, pl.object(j))
		multi = multi || j.Pods > 1
		if got := job.Spec.Template.Spec.SchedulerName; got != "volcano" {
			t.Errorf("%s: schedulerName %q", j.Key(), got)
		}
		if got, want := job.Annotations[annVolcanoMinMember], strconv.Itoa(j.Pods); got != want || int(*job.Spec.Parallelism) != j.Pods {
			t.Errorf("%s: min member %q, parallelism %d, want %s", j.Key(), got, *job.Spec.Parallelism, want)
		}
		if got := job.Spec.Template.Annotations[annVolcanoQueue]; got != j.Namespace {
			t.Errorf("%s: queue %q, want %q", j.Key(), got, j.Namespace)
		}
		if !preemptible(job) {
			t.Errorf("%s: not preemptible", j.Key())
		}
	}
	if !multi {
		t.Fatal("no job of several pods: the test shows nothing about gangs")
	}
	q := volcanoQueueObject("u-a")
	w, _, _ := unstructured.NestedInt64(q.Object, "spec", "weight")
	rec, _, _ := unstructured.NestedBool(q.Object, "spec", "reclaimable")
	if w != 1 || !rec || q.GetName() != "u-a" {
		t.Errorf("queue %v", q.Object)
	}
}

// preemptible: the Job's pod failure policy ignores disruptions (Volcano
// marks the pods it evicts DisruptionTarget).
func preemptible(job *batchv1.Job) bool {
	if job.Spec.PodFailurePolicy == nil {
		return false
	}
	for _, r := range job.Spec.PodFailurePolicy.Rules {
		for _, c := range r.OnPodConditions {
			if r.Action == batchv1.PodFailurePolicyActionIgnore && c.Type == "DisruptionTarget" {
				return true
			}
		}
	}
	return false
}

// Without its build, Volcano's row says "not run" and why, and no plane
// is started.
func TestVolcanoNotBuilt(t *testing.T) {
	checkNotBuilt(t, "volcano", trace.SynthConfig{Jobs: 2, Seed: 1, Users: 1, Load: 8, GPUs: []int{1}, MaxDuration: 60})
}

// A small arena under Volcano: 16 synthetic jobs of 1 to 4 GPUs from 3
// users on 2 servers of 4 GPUs at 100× speed; every job completes, in
// order, no sooner than its work allows, and the figures are sane.
func TestVolcanoArena(t *testing.T) {
	needPeer(t, "volcano", missingVolcano)
	a := playArena(t, trace.SynthConfig{Jobs: 16, Seed: 2, Users: 3, Load: 8, GPUs: []int{1, 1, 2, 4}, MaxDuration: 900},
		"volcano", Config{Speed: 100, Checkpoints: Checkpoints{Every: 300, OnTerm: true}, DeclareWork: true, Timeout: 5 * time.Minute}, 10*time.Minute)
	doc := a.report(t)
	a.checkRows(t, doc.Results, "volcano")
	if doc.Results[0].Sim != nil {
		t.Errorf("volcano's row has simulator figures")
	}
}
