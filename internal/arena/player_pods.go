package arena

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gandiva-sched/gandiva/internal/kube"
)

// Plain-pod gangs (Config.Workload = WorkloadPods): each job's pods are
// created by the player with no owner, as one gang: Gandiva's label
// gandiva.io/job (the gang's name) and annotation gandiva.io/gang-size on
// each, and the arena's own labels naming the job and the pod's index.
// kube-scheduler sees them as unrelated pods. No controller completes
// them: the job is complete when its last pod is Succeeded. When a pod of
// an unfinished job is deleted, or fails, the player creates it again
// (the same index, a new name), as a job controller would: a job whose
// pods a scheduler deleted runs again when they are bound again, from its
// checkpoint (the Tracker's rules, as for Jobs).

// The arena's labels of a plain-pod gang's pods.
const (
	labelTraceJob = "arena.gandiva.io/trace-job"
	labelGang     = "arena.gandiva.io/job"
	labelIndex    = "arena.gandiva.io/index"
)

// podsKinds are the schedulers that take plain-pod gangs in the arena.
var podsKinds = map[string]bool{"gandiva": true, "kube-scheduler": true}

// CheckWorkload refuses a workload that is not one of Workloads, and
// plain-pod gangs for schedulers that the arena runs with Jobs only (the
// peers whose queues admit Jobs).
func CheckWorkload(workload string, scheds []Scheduler) error {
	switch workload {
	case "", WorkloadJob:
		return nil
	case WorkloadPods:
		for _, s := range scheds {
			if !podsKinds[s.Kind] {
				return fmt.Errorf("workload %s: the arena runs %s with Jobs only (use workload job, or run it separately)", WorkloadPods, s.Kind)
			}
		}
		return nil
	}
	return fmt.Errorf("workload %q: use %s or %s", workload, WorkloadJob, WorkloadPods)
}

// remake is a pod of a plain-pod gang to create again.
type remake struct {
	key   string
	index int
}

// podName is the name of attempt a of pod index i of job j.
func podName(j *PlannedJob, i, a int) string {
	return j.Name + "-" + strconv.Itoa(i) + "-" + strconv.Itoa(a)
}

// gangPod is attempt a of pod index i of job j's plain-pod gang.
func (pl *player) gangPod(j *PlannedJob, i, a int) *corev1.Pod {
	ann := pl.workAnnotations(j)
	ann[kube.AnnGangSize] = strconv.Itoa(j.Pods)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: j.Namespace, Name: podName(j, i, a), Annotations: ann,
			Labels: map[string]string{kube.LabelJob: j.Name, labelGang: j.Name, labelIndex: strconv.Itoa(i),
				labelTraceJob: dnsLabel(j.Spec.Name, 63)}},
		Spec: pl.podSpec(j),
	}
}

// createGang creates job j's pods (its first attempt).
func (pl *player) createGang(ctx context.Context, j *PlannedJob) error {
	pl.mu.Lock()
	if pl.attempts == nil {
		pl.attempts = map[string][]int{}
	}
	pl.attempts[j.Key()] = make([]int, j.Pods)
	pl.mu.Unlock()
	for i := 0; i < j.Pods; i++ {
		if _, err := pl.cs.CoreV1().Pods(j.Namespace).Create(ctx, pl.gangPod(j, i, 0), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating pod %d of %s: %w", i, j.Key(), err)
		}
	}
	return nil
}

// gone notes (under pl.mu) a plain-pod gang's pod deleted or failed
// before its job completed: it is made again (remakePods).
func (pl *player) gone(p *corev1.Pod, ps *podState, deleted bool) {
	if ps.remade || ps.succeeded || !(deleted || p.Status.Phase == corev1.PodFailed) {
		return
	}
	js := pl.jobs[ps.job]
	if js.seen.Completed >= 0 {
		return
	}
	i, err := strconv.Atoi(p.Labels[labelIndex])
	if err != nil || i < 0 || i >= pl.byKey[ps.job].Pods {
		return // (not one of ours)
	}
	ps.remade, ps.index = true, i
	pl.remake = append(pl.remake, remake{key: ps.job, index: i})
	if pl.c.Verbose {
		fmt.Fprintf(pl.c.Log, "%s: %s: pod %s is gone; making it again\n", pl.sched, ps.job, p.Name)
	}
}

// remakePods creates again the pods of plain-pod gangs that went (a
// failed pod is deleted first).
func (pl *player) remakePods(ctx context.Context) error {
	pl.mu.Lock()
	todo := pl.remake
	pl.remake = nil
	var pods []*corev1.Pod
	var old []string
	for _, r := range todo {
		j := pl.byKey[r.key]
		a := pl.attempts[r.key]
		old = append(old, podName(j, r.index, a[r.index]))
		a[r.index]++
		pods = append(pods, pl.gangPod(j, r.index, a[r.index]))
	}
	pl.mu.Unlock()
	for i, p := range pods {
		// (a failed pod would stay; a deleted one is gone already)
		_ = pl.cs.CoreV1().Pods(p.Namespace).Delete(ctx, old[i], metav1.DeleteOptions{})
		if _, err := pl.cs.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating pod %s/%s again: %w", p.Namespace, p.Name, err)
		}
	}
	return nil
}
