package arena

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/sim"
)

// onePodPlayer is a player (no API server: only its event handlers are
// called) of one job of one pod on one 4-GPU server.
func onePodPlayer(t *testing.T) (*player, string) {
	t.Helper()
	b := cluster.NewBuilder("t", nil)
	b.Add(cluster.ServerGroup{Type: "V100", Count: 1, GPUs: 4, Domain: 0})
	c, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPlan(c, []*cluster.JobSpec{{Name: "a", User: "u", Model: "resnet50", GPUs: 1, Iters: 10, IterTime: 1}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &Config{Plan: p, Speed: 1, Perf: sim.DefaultPerf(), Checkpoints: Checkpoints{OnTerm: true}}
	return newPlayer(cfg, nil, Scheduler{Kind: "kube-scheduler"}), p.Jobs[0].Key()
}

// jobPod is pod uid of job key (namespace/name) in phase ph on gpu-0,
// being deleted when del.
func jobPod(key, uid string, ph corev1.PodPhase, del bool) *corev1.Pod {
	ns, name, _ := splitKey(key)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-0-" + uid, UID: types.UID(uid), Labels: map[string]string{"job-name": name}},
		Spec:       corev1.PodSpec{NodeName: "gpu-0"},
		Status:     corev1.PodStatus{Phase: ph},
	}
	if del {
		p.DeletionTimestamp = &metav1.Time{}
	}
	return p
}

func splitKey(key string) (ns, name string, ok bool) { return strings.Cut(key, "/") }

// A scheduler suspends a Job just as the player ends its work: the pod,
// already being deleted, exits 0, and the Job controller (which counted it
// gone) makes the index again. The job must run again and end then, not
// count as done with its new pod running forever (which kept every replay
// with preemptions from ending).
func TestSuccessWhileDeletedRunsAgain(t *testing.T) {
	pl, key := onePodPlayer(t)
	pl.pod(jobPod(key, "a", corev1.PodRunning, false), false)
	if due := pl.tr.Due(1e6, pl.keys); len(due) != 1 {
		t.Fatalf("due %v, want the job", due)
	}
	pl.pod(jobPod(key, "a", corev1.PodRunning, true), false)   // suspended: being deleted
	pl.pod(jobPod(key, "a", corev1.PodSucceeded, true), false) // exits 0 as it goes
	pl.pod(jobPod(key, "a", corev1.PodSucceeded, true), true)
	if c := pl.jobs[key].seen.Completed; c >= 0 {
		t.Fatalf("completed at %v by a pod that was being deleted", c)
	}
	// the Job controller makes the index again; the job runs and ends
	pl.pod(jobPod(key, "b", corev1.PodRunning, false), false)
	if due := pl.tr.Due(1e6, pl.keys); len(due) != 1 {
		t.Fatalf("the job's new pod runs, but it is never due (due %v)", due)
	}
	pl.pod(jobPod(key, "b", corev1.PodSucceeded, false), false)
	if pl.jobs[key].seen.Completed < 0 {
		t.Fatal("not completed by its new pod's success")
	}
	if n := pl.tr.Stops(key); n != 0 {
		t.Errorf("%d stops counted, want 0 (its work was done when it stopped)", n)
	}
}

// The other outcome of the same race: the Job controller counted the
// success after all and marks the Job Complete; the job's work ends then.
func TestSuccessWhileDeletedJobComplete(t *testing.T) {
	pl, key := onePodPlayer(t)
	pl.pod(jobPod(key, "a", corev1.PodRunning, false), false)
	pl.tr.Due(1e6, pl.keys)
	pl.pod(jobPod(key, "a", corev1.PodSucceeded, true), false)
	ns, name, _ := splitKey(key)
	pl.job(&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}})
	js := pl.jobs[key]
	if js.seen.Completed < 0 || js.seen.JobComplete < 0 {
		t.Fatalf("Job Complete, but the job is not: %+v", js.seen)
	}
}

// The pod exits 0 and is seen Succeeded (not being deleted), but the Job
// controller, which a suspension had told to stop the pod, does not count
// it and makes the index again: the job is not over until its new pod ends.
func TestSuccessNotCountedRunsAgain(t *testing.T) {
	pl, key := onePodPlayer(t)
	pl.pod(jobPod(key, "a", corev1.PodRunning, false), false)
	pl.tr.Due(1e6, pl.keys)
	pl.pod(jobPod(key, "a", corev1.PodSucceeded, false), false)
	if pl.jobs[key].seen.Completed < 0 {
		t.Fatal("not completed by its pod's success")
	}
	pl.pod(jobPod(key, "b", corev1.PodRunning, false), false)
	if due := pl.tr.Due(1e6, pl.keys); len(due) != 1 {
		t.Fatalf("the job's pod made again runs, but it is never due (due %v)", due)
	}
	if c := pl.jobs[key].seen.Completed; c >= 0 {
		t.Fatalf("still completed at %v while its work runs again", c)
	}
	pl.pod(jobPod(key, "b", corev1.PodSucceeded, false), false)
	if pl.jobs[key].seen.Completed < 0 {
		t.Fatal("not completed by its new pod's success")
	}
}

// A Job suspended just as it reached its completions keeps
// SuccessCriteriaMet and never gets Complete: that ends it for the player.
func TestSuccessCriteriaMetEndsJob(t *testing.T) {
	pl, key := onePodPlayer(t)
	pl.pod(jobPod(key, "a", corev1.PodRunning, false), false)
	pl.tr.Due(1e6, pl.keys)
	pl.pod(jobPod(key, "a", corev1.PodSucceeded, false), false)
	ns, name, _ := splitKey(key)
	pl.job(&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue}}}})
	if pl.jobs[key].seen.JobComplete < 0 {
		t.Fatal("SuccessCriteriaMet, but the Job is not seen complete")
	}
}
