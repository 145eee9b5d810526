package kube

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
	"github.com/gandiva-sched/gandiva/internal/kube/kubetest"
)

// The test binary doubles as `gandiva kube` for TestKill9: with
// GANDIVA_KUBE_CHILD=KUBECONFIG it runs the scheduler and nothing else.
func TestMain(m *testing.M) {
	if kc := os.Getenv("GANDIVA_KUBE_CHILD"); kc != "" {
		os.Exit(child(kc, os.Getenv("GANDIVA_KUBE_POLICY")))
	}
	os.Exit(m.Run())
}

func child(kubeconfig, policy string) int {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	lvl := slog.LevelInfo
	if os.Getenv("GANDIVA_KUBE_DEBUG") != "" {
		lvl = slog.LevelDebug
	}
	err = Run(ctx, cfg, Options{Policy: policy, Identity: os.Getenv("GANDIVA_KUBE_ID"), Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl})),
		LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 200 * time.Millisecond})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// kill -9 of `gandiva kube`, two replicas of which run at all times, again
// and again (the leader while it binds, suspends and resumes gangs under
// tiresias-l with low thresholds, so that it preempts all the time; or
// either replica at any moment): no node is ever over-committed, no Job ever has more pods
// holding GPUs than its gang, and every Job completes: no binding was made
// twice and no suspension was lost.
func TestKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	p := kubetest.Start(t, cplane.Options{Kwok: true, Controllers: true})
	cs := kubetest.Client(t, p)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const nodes, gpus = 3, 4
	kubetest.AddNodes(t, cs, kubetest.Nodes{Count: nodes, GPUs: gpus})
	kubetest.Namespace(t, cs, "team-a")
	kubetest.Namespace(t, cs, "gandiva-system")
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := p.WriteKubeconfig(kc, "admin"); err != nil {
		t.Fatal(err)
	}

	// the watcher: GPUs held per node and pods held per Job, at every event
	var (
		mu         sync.Mutex
		violations []string
		maxNode    int
		preempted  = map[types.UID]bool{}
		suspends   int
	)
	f := informers.NewSharedInformerFactory(cs, 0)
	podInf := f.Core().V1().Pods().Informer()
	check := func() {
		perNode := map[string]int{}
		perJob := map[string]int{}
		mu.Lock()
		for _, o := range podInf.GetStore().List() {
			p := o.(*corev1.Pod)
			if c := podCondition(p, corev1.DisruptionTarget); c != nil && c.Reason == reasonGandivaSuspend {
				preempted[p.UID] = true
			}
		}
		mu.Unlock()
		for _, o := range podInf.GetStore().List() {
			p := o.(*corev1.Pod)
			if p.Spec.NodeName == "" || terminal(p) {
				continue
			}
			perNode[p.Spec.NodeName] += gpusOf(&p.Spec)
			perJob[p.Labels["job-name"]]++
		}
		mu.Lock()
		defer mu.Unlock()
		for n, k := range perNode {
			maxNode = max(maxNode, k)
			if k > gpus {
				violations = append(violations, fmt.Sprintf("node %s holds %d GPUs of %d", n, k, gpus))
			}
		}
		for j, k := range perJob {
			if k > 3 {
				violations = append(violations, fmt.Sprintf("job %s has %d pods holding GPUs, its gang is at most 3", j, k))
			}
		}
	}
	podInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { check() }, UpdateFunc: func(any, any) { check() }, DeleteFunc: func(any) { check() }})
	// suspensions: a Job's state annotation turning to suspended or moving
	f.Batch().V1().Jobs().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, obj any) {
			o, n := old.(*batchv1.Job).Annotations[AnnState], obj.(*batchv1.Job).Annotations[AnnState]
			if o != n && (n == StateSuspended || n == StateMoving) {
				mu.Lock()
				suspends++
				mu.Unlock()
			}
		}})
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())

	// the jobs: 4 long gangs of 3 one-GPU pods, which fill the 12 GPUs and
	// end only when the test says so (so that there is always something to
	// preempt), and 14 short gangs of 1 to 3 pods; a gang's pods end
	// together once all of them have run for its duration (1 to 3 s)
	var (
		dur      sync.Map // job name → time.Duration; absent: held
		released atomic.Bool
	)
	var names []string
	addJob := func(name string, pods int, long bool) {
		if !long {
			h := fnv.New32a()
			h.Write([]byte(name))
			dur.Store(name, time.Second+time.Duration(h.Sum32()%2000)*time.Millisecond)
		}
		names = append(names, name)
		createJob(t, cs, jobSpec{ns: "team-a", name: name, pods: pods, gpus: 1, preemptible: true})
	}
	for i := range 4 {
		addJob(fmt.Sprintf("long%d", i), 3, true)
	}
	for i := range 14 {
		addJob(fmt.Sprintf("j%02d", i), 1+i%3, false)
	}
	go func() { // the containers' end
		for ctx.Err() == nil {
			time.Sleep(100 * time.Millisecond)
			byJob := map[string][]*corev1.Pod{}
			for _, o := range podInf.GetStore().List() {
				p := o.(*corev1.Pod)
				if p.Namespace == "team-a" && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && p.Annotations[kubetest.AnnExit] == "" {
					byJob[p.Labels["job-name"]] = append(byJob[p.Labels["job-name"]], p)
				}
			}
			for job, pods := range byJob {
				j, err := cs.BatchV1().Jobs("team-a").Get(ctx, job, metav1.GetOptions{})
				// all its pods that have yet to succeed run
				if err != nil || len(pods) < int(*j.Spec.Parallelism-j.Status.Succeeded) {
					continue
				}
				d := time.Second
				if v, ok := dur.Load(job); ok {
					d = v.(time.Duration)
				} else if !released.Load() {
					continue // a long job: held until the test releases it
				}
				ready := true
				for _, p := range pods {
					if p.Status.StartTime == nil || time.Since(p.Status.StartTime.Time) < d {
						ready = false
					}
				}
				if !ready {
					continue
				}
				for _, p := range pods {
					body := []byte(`{"metadata":{"annotations":{"` + kubetest.AnnExit + `":"0"}}}`)
					cs.CoreV1().Pods("team-a").Patch(ctx, p.Name, types.MergePatchType, body, metav1.PatchOptions{})
				}
			}
		}
	}()

	// two replicas at all times, as the Deployment runs them
	nextID := 0
	start := func() (string, *exec.Cmd) {
		nextID++
		id := fmt.Sprintf("replica-%d", nextID)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "GANDIVA_KUBE_CHILD="+kc, "GANDIVA_KUBE_ID="+id,
			"GANDIVA_KUBE_POLICY=tiresias-l:limits=0.3/100000")
		cmd.Stdout, cmd.Stderr = testWriter{t}, testWriter{t}
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return id, cmd
	}
	rng := rand.New(rand.NewPCG(1, 2))
	holder := func() (id, term string) {
		l, err := cs.CoordinationV1().Leases("gandiva-system").Get(ctx, "gandiva-scheduler", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return "", ""
		}
		return *l.Spec.HolderIdentity, *l.Spec.HolderIdentity + "/" + l.Spec.AcquireTime.String()
	}
	replicas := map[string]*exec.Cmd{}
	for range 2 {
		id, cmd := start()
		replicas[id] = cmd
	}
	t.Cleanup(func() {
		for _, cmd := range replicas {
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
		}
	})
	kills := 0
	last := ""
	for kills < 8 {
		var victim string
		if kills%2 == 0 {
			// wait for a new leader, then kill it while it works
			kubetest.Eventually(t, time.Minute, "a new leader", func() (bool, error) {
				id, term := holder()
				return term != "" && term != last && replicas[id] != nil, nil
			})
			victim, last = holder()
			time.Sleep(time.Duration(300+rng.IntN(1500)) * time.Millisecond)
		} else {
			// or either replica, whatever it is doing: waiting for the
			// lease, rebuilding, in its first rounds
			time.Sleep(time.Duration(rng.IntN(2500)) * time.Millisecond)
			for id := range replicas {
				if victim == "" || (rng.IntN(2) == 0) {
					victim = id
				}
			}
		}
		cmd := replicas[victim]
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		delete(replicas, victim)
		kills++
		id, c := start()
		replicas[id] = c
	}
	t.Cleanup(func() {
		if t.Failed() {
			dumpJobs(t, cs, "team-a")
		}
	})
	// after the kills, a second wave arrives (in Tiresias' first queue)
	// while the long jobs hold the GPUs: the last leader must preempt
	kubetest.Eventually(t, time.Minute, "the last leader", func() (bool, error) {
		id, term := holder()
		return term != "" && term != last && replicas[id] != nil, nil
	})
	time.Sleep(time.Second)
	for i := range 4 {
		addJob(fmt.Sprintf("late%d", i), 2, false)
	}
	// they preempt: at least one Job is suspended (tiresias-l would then
	// put the long jobs, which came first, ahead in its second queue; the
	// test lets them end)
	kubetest.Eventually(t, time.Minute, "a suspension", func() (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return suspends > 0, nil
	})
	released.Store(true)
	for _, name := range names {
		kubetest.Eventually(t, 3*time.Minute, "job "+name+" complete", jobDone(cs, "team-a", name))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(violations) > 0 {
		t.Fatalf("%d violations, first: %v", len(violations), violations[:min(5, len(violations))])
	}
	t.Logf("%d kills, %d suspensions, %d running pods preempted; the busiest node held %d GPUs at most", kills, suspends, len(preempted), maxNode)
	if suspends == 0 {
		t.Fatal("no Job was suspended: the test did not exercise suspensions")
	}
}

// dumpJobs logs the Jobs of a namespace and their pods, for a failed test.
func dumpJobs(t testing.TB, cs kubernetes.Interface, ns string) {
	ctx := context.Background()
	jl, err := cs.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Log(err)
		return
	}
	for _, j := range jl.Items {
		done, _, why := jobFinished(&j)
		if done {
			continue
		}
		t.Logf("job %s: suspend=%v parallelism=%d state=%q placement=%q active=%d failed=%d succeeded=%d %s conditions=%v",
			j.Name, ptrBool(j.Spec.Suspend), *j.Spec.Parallelism, j.Annotations[AnnState], j.Annotations[AnnPlacement],
			j.Status.Active, j.Status.Failed, j.Status.Succeeded, why, j.Status.Conditions)
		pl, _ := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + j.Name})
		for _, p := range pl.Items {
			t.Logf("   pod %s node=%q phase=%s deleting=%v ann=%v", p.Name, p.Spec.NodeName, p.Status.Phase, p.DeletionTimestamp != nil, p.Annotations)
		}
	}
}

func ptrBool(b *bool) bool { return b != nil && *b }
