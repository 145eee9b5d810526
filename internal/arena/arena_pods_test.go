package arena

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/kube"
	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
	"github.com/gandiva-sched/gandiva/internal/sim"
	"github.com/gandiva-sched/gandiva/internal/trace"
)

// needPlane skips a test without the control plane's binaries (fails in CI).
func needPlane(t *testing.T) {
	t.Helper()
	if err := cplane.Check(cplane.BinDir()); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v\n(CI=true: the arena must run)", err)
		}
		t.Skip(err)
	}
}

// Plain-pod gangs in an arena: 6 jobs of 2, 4 and 8 GPUs (an 8-GPU job is
// 2 pods of 4 on 4-GPU servers) under gandiva (fifo) and kube-scheduler,
// made as ownerless pods; every job completes under both, no sooner than
// its work allows.
func TestPlainPodGangArena(t *testing.T) {
	needPlane(t)
	c, err := cluster.Load("tiresias-n2g4")
	if err != nil {
		t.Fatal(err)
	}
	jobs := trace.Synthetic(trace.SynthConfig{Jobs: 6, Seed: 3, Users: 2, Load: 8, GPUs: []int{2, 4, 8}, MaxDuration: 600})
	plan, err := NewPlan(c, jobs)
	if err != nil {
		t.Fatal(err)
	}
	scheds, err := ParseSchedulers("gandiva:fifo,kube-scheduler")
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(childEnv, "1")
	var log bytes.Buffer
	cfg := Config{Plan: plan, Schedulers: scheds, Speed: 150, Checkpoints: Checkpoints{OnTerm: true}, DeclareWork: true,
		Timeout: 3 * time.Minute, Gandiva: []string{exe}, Log: &log, Workload: WorkloadPods}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	res, err := Run(ctx, cfg)
	t.Logf("log:\n%s", log.String())
	if err != nil {
		t.Fatal(err)
	}
	minJCT := bestCase(c, plan)
	for _, r := range res {
		if r.Status != "ok" || r.Finished != 6 || r.Record == nil {
			t.Fatalf("%s: %s, %d of %d finished", r.Scheduler, r.Status, r.Finished, r.Jobs)
		}
		for _, j := range r.Record.Jobs {
			if jct := j.Completed - j.Submit; jct < minJCT[j.Key]-1e-6 || j.JobComplete != j.Completed {
				t.Errorf("%s: %s: JCT %v (at best %v), complete at %v and %v", r.Scheduler, j.Key, jct, minJCT[j.Key], j.Completed, j.JobComplete)
			}
		}
	}
	if err := CheckWorkload(WorkloadPods, []Scheduler{{Kind: "kueue"}}); err == nil || !strings.Contains(err.Error(), "kueue with Jobs only") {
		t.Errorf("plain pods under kueue: %v", err)
	}
}

// A plain-pod gang's pod deleted by someone else before its job is done is
// made again by the player (the same index, a new name), as a job
// controller would; the job stops (a preemption, its progress kept by its
// checkpoint on SIGTERM), runs again once the new pod is bound, and
// completes. Its pods have no owner, Gandiva's gang label and size, and
// the declared work.
func TestPlainPodGangRemade(t *testing.T) {
	needPlane(t)
	c, err := cluster.Load("tiresias-n2g4")
	if err != nil {
		t.Fatal(err)
	}
	jobs := trace.Synthetic(trace.SynthConfig{Jobs: 1, Seed: 1, Users: 1, Load: 8, GPUs: []int{8}})
	jobs[0].Iters = 3000 / jobs[0].IterTime // about 3000 trace seconds: 60 s at 50×
	plan, err := NewPlan(c, jobs)
	if err != nil {
		t.Fatal(err)
	}
	scheds, _ := ParseSchedulers("kube-scheduler")
	var log bytes.Buffer
	cfg := &Config{Plan: plan, Schedulers: scheds, Speed: 50, Checkpoints: Checkpoints{OnTerm: true}, DeclareWork: true,
		Timeout: 4 * time.Minute, Log: &log, Verbose: true, Workload: WorkloadPods, Perf: sim.DefaultPerf(), BinDir: cplane.BinDir(), QPS: 500}
	defer func() { t.Logf("log:\n%s", log.String()) }()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	p, err := cplane.Start(ctx, cplane.Options{BinDir: cfg.BinDir, Kwok: true, Controllers: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	cs, err := kubernetes.NewForConfig(p.Config())
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.setUp(ctx, cs); err != nil {
		t.Fatal(err)
	}
	pl := newPlayer(cfg, cs, scheds[0])
	stop, err := pl.watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	g, err := startScheduler(ctx, p, cs, cfg, scheds[0], t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer g.stop()
	played := make(chan error, 1)
	go func() { played <- pl.play(ctx, g) }()

	j := plan.Jobs[0]
	running := func() (l []corev1.Pod) {
		pods, err := cs.CoreV1().Pods(j.Namespace).List(ctx, metav1.ListOptions{LabelSelector: labelGang + "=" + j.Name})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				l = append(l, p)
			}
		}
		return l
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(2 * time.Minute); !ok(); time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s: timed out", what)
			}
		}
	}
	waitFor("the gang's 2 pods running", func() bool { return len(running()) == 2 })
	pods := running()
	for _, p := range pods {
		if len(p.OwnerReferences) != 0 || p.Labels[kube.LabelJob] != j.Name || p.Annotations[kube.AnnGangSize] != "2" || p.Annotations[kube.AnnIters] == "" {
			t.Errorf("pod %s: owners %v, labels %v, annotations %v", p.Name, p.OwnerReferences, p.Labels, p.Annotations)
		}
	}
	victim := j.Name + "-1-0"
	if err := cs.CoreV1().Pods(j.Namespace).Delete(ctx, victim, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("pod 1 made again and running", func() bool {
		l := running()
		return len(l) == 2 && (l[0].Name == j.Name+"-1-1" || l[1].Name == j.Name+"-1-1")
	})
	if err := <-played; err != nil {
		t.Fatal(err)
	}
	rec := pl.record()
	s := rec.Jobs[0]
	if s.Completed < 0 || s.JobComplete != s.Completed || s.Preemptions != 1 || s.LostGPUSeconds != 0 {
		t.Errorf("record %+v: want completed, 1 preemption, nothing lost", s)
	}
}
