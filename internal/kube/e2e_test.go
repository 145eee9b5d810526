package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/gandiva-sched/gandiva/client/protocol"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
	"github.com/gandiva-sched/gandiva/internal/kube/kubetest"
	"github.com/gandiva-sched/gandiva/internal/kube/shared"
)

// gandiva is `gandiva kube` run in the test process.
type gandiva struct {
	mu     sync.Mutex
	s      *Scheduler
	cancel context.CancelFunc
	done   chan error
}

// runGandiva starts the scheduler on the plane; it stops when the test ends.
func runGandiva(t testing.TB, p *cplane.Plane, o Options) *gandiva {
	t.Helper()
	return runGandivaConfig(t, p.Config(), o)
}

// runGandivaConfig starts the scheduler with the rights of cfg.
func runGandivaConfig(t testing.TB, cfg *rest.Config, o Options) *gandiva {
	t.Helper()
	g := &gandiva{done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	g.cancel = cancel
	if o.Log == nil {
		lvl := slog.LevelInfo
		if os.Getenv("GANDIVA_KUBE_DEBUG") != "" {
			lvl = slog.LevelDebug
		}
		o.Log = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: lvl}))
	}
	if o.LeaseDuration == 0 {
		o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 4*time.Second, 3*time.Second, 200*time.Millisecond
	}
	o.OnLeading = func(s *Scheduler) { g.mu.Lock(); g.s = s; g.mu.Unlock() }
	go func() { g.done <- Run(ctx, cfg, o) }()
	t.Cleanup(g.stop)
	return g
}

func (g *gandiva) stop() {
	if g.cancel == nil {
		return
	}
	g.cancel()
	<-g.done
	g.cancel = nil
}

func (g *gandiva) stats() Stats {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.s == nil {
		return Stats{}
	}
	return g.s.Stats()
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Logf("%s", b)
	return len(b), nil
}

// jobSpec describes a test Job.
type jobSpec struct {
	ns, name    string
	pods, gpus  int
	played      bool
	command     []string
	env         []corev1.EnvVar
	preemptible bool
	annotations map[string]string
	selector    map[string]string
	tolerations []corev1.Toleration
	grace       int64
	// shared: a shared job (shared mode): gpus is the pod template's
	// gandiva.io/gpus, and it requests no nvidia.com/gpu
	shared bool
	// mounts and volumes of the pod template (its one container's)
	mounts  []corev1.VolumeMount
	volumes []corev1.Volume
}

func (js jobSpec) object() *batchv1.Job {
	labels := map[string]string{}
	if js.played {
		labels[kubetest.LabelPlayed] = "true"
	}
	cmd := js.command
	if len(cmd) == 0 {
		cmd = []string{"sleep"}
	}
	grace := js.grace
	if grace == 0 {
		grace = 30
	}
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: js.ns, Name: js.name, Annotations: js.annotations},
		Spec: batchv1.JobSpec{
			Parallelism:    ptr.To(int32(js.pods)),
			Completions:    ptr.To(int32(js.pods)),
			CompletionMode: ptr.To(batchv1.IndexedCompletion),
			BackoffLimit:   ptr.To(int32(0)),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					SchedulerName:                 SchedulerName,
					RestartPolicy:                 corev1.RestartPolicyNever,
					TerminationGracePeriodSeconds: &grace,
					NodeSelector:                  js.selector,
					Tolerations:                   js.tolerations,
					Containers: []corev1.Container{{Name: "main", Image: "gandiva-example", Command: cmd, Env: js.env,
						Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
							GPU: *resource.NewQuantity(int64(js.gpus), resource.DecimalSI)}}}},
				},
			},
		},
	}
	j.Spec.Template.Spec.Containers[0].VolumeMounts = js.mounts
	j.Spec.Template.Spec.Volumes = js.volumes
	if js.shared {
		j.Spec.Template.Annotations = map[string]string{shared.AnnGPUs: strconv.Itoa(js.gpus)}
		j.Spec.Template.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
	}
	if js.preemptible {
		j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
			Action:          batchv1.PodFailurePolicyActionIgnore,
			OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}},
		}}}
	}
	return j
}

func createJob(t testing.TB, cs kubernetes.Interface, js jobSpec) {
	t.Helper()
	if _, err := cs.BatchV1().Jobs(js.ns).Create(context.Background(), js.object(), metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating Job %s/%s: %v", js.ns, js.name, err)
	}
}

// jobPods lists a Job's pods that hold GPUs (bound, not ended) and all its pods.
func jobPods(cs kubernetes.Interface, ns, job string) (bound, all []corev1.Pod, err error) {
	l, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "job-name=" + job})
	if err != nil {
		return nil, nil, err
	}
	for _, p := range l.Items {
		if p.Spec.NodeName != "" && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			bound = append(bound, p)
		}
	}
	return bound, l.Items, nil
}

// finishPods ends a Job's running pods with exit code 0 (the test plays
// their containers' end).
func finishPods(t testing.TB, cs kubernetes.Interface, ns, job string) {
	t.Helper()
	bound, _, err := jobPods(cs, ns, job)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range bound {
		body := []byte(`{"metadata":{"annotations":{"` + kubetest.AnnExit + `":"0"}}}`)
		if _, err := cs.CoreV1().Pods(ns).Patch(context.Background(), p.Name, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func jobDone(cs kubernetes.Interface, ns, name string) func() (bool, error) {
	return func() (bool, error) {
		j, err := cs.BatchV1().Jobs(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		done, failed, why := jobFinished(j)
		if failed {
			return false, fmt.Errorf("job %s/%s failed: %s", ns, name, why)
		}
		return done, nil
	}
}

func boundCount(t testing.TB, cs kubernetes.Interface, ns, job string) int {
	t.Helper()
	b, _, err := jobPods(cs, ns, job)
	if err != nil {
		t.Fatal(err)
	}
	return len(b)
}

// Gangs are bound whole across kwok GPU nodes or not at all; a gang that
// does not fit waits with none of its pods bound while a smaller job that
// fits runs (fjf: first job that fits); GPUs held by another scheduler's
// pod are not given out; a waiting job says why.
func TestGangsAllOrNothing(t *testing.T) {
	t.Parallel() // each has a control plane of its own; they mostly wait
	p := kubetest.Start(t, cplane.Options{Kwok: true, Controllers: true})
	cs := kubetest.Client(t, p)
	ctx := context.Background()
	nodes := kubetest.AddNodes(t, cs, kubetest.Nodes{Count: 2, GPUs: 4})
	kubetest.Namespace(t, cs, "team-a")
	kubetest.Namespace(t, cs, "gandiva-system")
	// another scheduler's pod holds 2 GPUs of node gpu-1
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "other"},
		Spec: corev1.PodSpec{NodeName: nodes[1], Containers: []corev1.Container{{Name: "c", Image: "x",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{GPU: resource.MustParse("2")}}}}}}
	if _, err := cs.CoreV1().Pods("team-a").Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	g := runGandiva(t, p, Options{Policy: "fjf"})
	// a: 3 pods of 2 GPUs = 6: node gpu-0 (4) and gpu-1 (2 left)
	createJob(t, cs, jobSpec{ns: "team-a", name: "a", pods: 3, gpus: 2})
	kubetest.Eventually(t, 60*time.Second, "job a's 3 pods bound", func() (bool, error) {
		return boundCount(t, cs, "team-a", "a") == 3, nil
	})
	// b: 2 pods of 2 GPUs: no room; c: 1 pod of 2 GPUs: no room either
	// (gpu-1's last 2 GPUs are the other scheduler's)
	createJob(t, cs, jobSpec{ns: "team-a", name: "b", pods: 2, gpus: 2})
	time.Sleep(500 * time.Millisecond)
	createJob(t, cs, jobSpec{ns: "team-a", name: "c", pods: 1, gpus: 2})
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if n := boundCount(t, cs, "team-a", "b") + boundCount(t, cs, "team-a", "c"); n != 0 {
			t.Fatalf("%d pods of jobs b and c bound, but no GPU is free", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// the other scheduler's pod ends: 2 GPUs free on gpu-1; c fits, b does not
	if err := cs.CoreV1().Pods("team-a").Delete(ctx, "other", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 60*time.Second, "job c bound", func() (bool, error) {
		return boundCount(t, cs, "team-a", "c") == 1, nil
	})
	if n := boundCount(t, cs, "team-a", "b"); n != 0 {
		t.Fatalf("job b has %d of its 2 pods bound while only ... GPUs are free: a gang is all or nothing", n)
	}
	// what `gandiva jobs/status/explain --kube` show: a and c run where
	// they were bound, b waits and says why (its place in the queue)
	kubetest.Eventually(t, 60*time.Second, "b's waiting reason in the view", func() (bool, error) {
		v, err := Describe(ctx, cs, "team-a", "b")
		// (told when it had waited 2 s, maybe before c started: place 1 of 1 or 2)
		return err == nil && strings.HasPrefix(v.Reason, "queued: needs 4 GPUs") && strings.Contains(v.Reason, "place 1 of"), err
	})
	// first in the queue, nothing ahead to count (it used to say "jobs ahead ask for 0 GPUs")
	if v, err := Describe(ctx, cs, "team-a", "b"); err != nil || strings.Contains(v.Reason, "ahead ask for") {
		t.Errorf("b's waiting reason counts jobs ahead of the first in the queue: %q (%v)", v.Reason, err)
	}
	views, err := List(ctx, cs, "team-a")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, v := range views {
		got[v.Name] = fmt.Sprintf("%s %s %d", v.Kind, v.State, v.GPUs)
		if v.State == StateRunning && v.Placement == "" {
			t.Errorf("view of %s: running with no placement", v.Name)
		}
	}
	if w := map[string]string{"a": "Job running 6", "b": "Job pending 4", "c": "Job running 2"}; !maps.Equal(got, w) {
		t.Fatalf("view: %v, want %v", got, w)
	}
	if v, err := Describe(ctx, cs, "team-a", "a"); err != nil || !slices.ContainsFunc(v.Events, func(e EventView) bool { return e.Reason == "Started" }) {
		t.Fatalf("view of a: %v; events %+v, want a Started Event", err, v.Events)
	}
	// a ends: b's gang fits and is bound whole
	finishPods(t, cs, "team-a", "a")
	kubetest.Eventually(t, 60*time.Second, "job a complete", jobDone(cs, "team-a", "a"))
	kubetest.Eventually(t, 60*time.Second, "job b's 2 pods bound", func() (bool, error) {
		return boundCount(t, cs, "team-a", "b") == 2, nil
	})
	// no node was ever over-committed: at the end, check each node
	for _, n := range nodes {
		l, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + n})
		if err != nil {
			t.Fatal(err)
		}
		used := 0
		for _, p := range l.Items {
			if !terminal(&p) {
				used += gpusOf(&p.Spec)
			}
		}
		if used > 4 {
			t.Fatalf("node %s: %d GPUs in use of 4", n, used)
		}
	}
	t.Logf("stats: %+v", g.stats())
}

// trainerJob is a Job whose pod the Kubelet stand-in plays with the
// deterministic trainer, checkpointing to dir/NAME (the shared storage).
func trainerJob(ns, name, dir string, steps int) jobSpec {
	return jobSpec{ns: ns, name: name, pods: 1, gpus: 1, played: true, preemptible: true,
		command: []string{"trainer", "-steps", strconv.Itoa(steps), "-step-time", "20ms", "-dim", "256", "-seed", "7",
			"-ledger", filepath.Join(dir, name+".ledger"), "-out", filepath.Join(dir, name+".json")},
		env: []corev1.EnvVar{
			{Name: "GANDIVA_CHECKPOINT_DIR", Value: filepath.Join(dir, name)},
			{Name: "GANDIVA_RESTORE", Value: "1"},
			{Name: "GANDIVA_CHECKPOINT_EVERY", Value: "0.3"},
		}}
}

// result reads the trainer's -out file.
func trainerResult(t testing.TB, dir, name string) (checksum string, steps int) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name+".json"))
	if err != nil {
		t.Fatalf("job %s left no result: %v", name, err)
	}
	var r struct {
		Checksum string `json:"checksum"`
		Steps    int    `json:"steps"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r.Checksum, r.Steps
}

// checkLedger fails if a job's trainer ever ran twice at once.
func checkLedger(t testing.TB, dir, name string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name+".ledger"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "overlap") {
		t.Fatalf("job %s ran twice at the same time:\n%s", name, b)
	}
}

// Exclusive-mode preemption under tiresias-l: two running trainers fill
// two one-GPU nodes; a third arrives in the top queue and preempts one by
// suspending its Job (the in-job client checkpoints on SIGTERM); the victim
// resumes on the other node when that one's job ends. Every trainer's
// checksum equals an uninterrupted run's, and none ever ran twice at once.
func TestPreemptionBySuspendTiresias(t *testing.T) {
	t.Parallel() // each has a control plane of its own; they mostly wait
	p := kubetest.Start(t, cplane.Options{Kwok: true, Controllers: true})
	cs := kubetest.Client(t, p)
	kubelet := kubetest.StartKubelet(t, cs, map[string]string{"trainer": kubetest.Trainer(t)})
	kubetest.AddNodes(t, cs, kubetest.Nodes{Count: 2, GPUs: 1})
	kubetest.Namespace(t, cs, "team-a")
	kubetest.Namespace(t, cs, "gandiva-system")
	dir := t.TempDir()
	want := kubetest.Uninterrupted(t, "-steps", "150", "-step-time", "0s", "-dim", "256", "-seed", "7")
	wantC := kubetest.Uninterrupted(t, "-steps", "400", "-step-time", "0s", "-dim", "256", "-seed", "7")
	runGandiva(t, p, Options{Policy: "tiresias-l:limits=1/100000"})
	createJob(t, cs, trainerJob("team-a", "a", dir, 150))
	createJob(t, cs, trainerJob("team-a", "b", dir, 150))
	kubetest.Eventually(t, 60*time.Second, "a and b running", func() (bool, error) {
		return boundCount(t, cs, "team-a", "a") == 1 && boundCount(t, cs, "team-a", "b") == 1, nil
	})
	// both pass 1 GPU-second: queue 1; c arrives in queue 0
	time.Sleep(1500 * time.Millisecond)
	createJob(t, cs, trainerJob("team-a", "c", dir, 400))
	for _, name := range []string{"a", "b", "c"} {
		kubetest.Eventually(t, 3*time.Minute, "job "+name+" complete", jobDone(cs, "team-a", name))
	}
	for _, name := range []string{"a", "b", "c"} {
		sum, steps := trainerResult(t, dir, name)
		w := want
		if name == "c" {
			w = wantC
		}
		if sum != w {
			t.Errorf("job %s: checksum %s after %d steps, an uninterrupted run gives %s", name, sum, steps, w)
		}
		checkLedger(t, dir, name)
	}
	// one job was suspended (its trainer exited 143 after a checkpoint)
	// and resumed on the other node
	nodes := map[string]map[string]bool{}
	suspended := 0
	for _, pr := range kubelet.Processes() {
		if nodes[pr.Job] == nil {
			nodes[pr.Job] = map[string]bool{}
		}
		nodes[pr.Job][pr.Node] = true
		if pr.Exit == 143 {
			suspended++
		}
	}
	moved := 0
	for _, n := range nodes {
		if len(n) > 1 {
			moved++
		}
	}
	if suspended == 0 || moved == 0 {
		t.Fatalf("%d suspensions by SIGTERM, %d jobs resumed on another node; want at least one of each (processes: %+v)", suspended, moved, kubelet.Processes())
	}
}

// A node deleted: its job resumes elsewhere from its last checkpoint (the
// trainer checkpoints every 0.3 s; the node's processes die with it), and
// the checksum equals an uninterrupted run's.
func TestNodeDeletedJobResumesElsewhere(t *testing.T) {
	t.Parallel() // each has a control plane of its own; they mostly wait
	p := kubetest.Start(t, cplane.Options{Kwok: true, Controllers: true, PodGCQuarantine: time.Second})
	cs := kubetest.Client(t, p)
	kubelet := kubetest.StartKubelet(t, cs, map[string]string{"trainer": kubetest.Trainer(t)})
	nodes := kubetest.AddNodes(t, cs, kubetest.Nodes{Count: 2, GPUs: 1})
	kubetest.Namespace(t, cs, "team-a")
	kubetest.Namespace(t, cs, "gandiva-system")
	dir := t.TempDir()
	want := kubetest.Uninterrupted(t, "-steps", "200", "-step-time", "0s", "-dim", "256", "-seed", "7")
	runGandiva(t, p, Options{Policy: "fifo"})
	createJob(t, cs, trainerJob("team-a", "a", dir, 200))
	var first string
	kubetest.Eventually(t, 60*time.Second, "a running", func() (bool, error) {
		b, _, err := jobPods(cs, "team-a", "a")
		if len(b) == 1 && b[0].Status.Phase == corev1.PodRunning {
			first = b[0].Spec.NodeName
			return true, nil
		}
		return false, err
	})
	// let it make progress (and checkpoints), then its node dies
	kubetest.Eventually(t, 60*time.Second, "a checkpointed", func() (bool, error) {
		_, err := os.Stat(filepath.Join(dir, "a", protocol.MetaFile))
		return err == nil, nil
	})
	if err := cs.CoreV1().Nodes().Delete(context.Background(), first, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 2*time.Minute, "job a complete", jobDone(cs, "team-a", "a"))
	sum, _ := trainerResult(t, dir, "a")
	if sum != want {
		t.Fatalf("checksum %s, an uninterrupted run gives %s", sum, want)
	}
	checkLedger(t, dir, "a")
	var last string
	for _, pr := range kubelet.Processes() {
		last = pr.Node
	}
	other := nodes[0]
	if other == first {
		other = nodes[1]
	}
	if last != other {
		t.Fatalf("the job ended on %s; its node %s was deleted, want it resumed on %s", last, first, other)
	}
}

// Fair shares by namespace under gandiva-fair: team-a has 3 tickets,
// team-b 1 (the settings ConfigMap); each keeps 4 one-GPU jobs waiting on 4
// GPUs; over many quanta team-a holds about three quarters of the GPU time.
func TestFairSharesByNamespace(t *testing.T) {
	t.Parallel() // each has a control plane of its own; they mostly wait
	p := kubetest.Start(t, cplane.Options{Kwok: true, Controllers: true})
	cs := kubetest.Client(t, p)
	ctx := context.Background()
	kubetest.AddNodes(t, cs, kubetest.Nodes{Count: 1, GPUs: 4})
	for _, ns := range []string{"team-a", "team-b", "gandiva-system"} {
		kubetest.Namespace(t, cs, ns)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "gandiva-system", Name: "gandiva-settings"},
		Data: map[string]string{"tickets.team-a": "3", "tickets.team-b": "1"}}
	if _, err := cs.CoreV1().ConfigMaps("gandiva-system").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	runGandiva(t, p, Options{Policy: "gandiva-fair:quantum=2"})
	for i := range 4 {
		for _, ns := range []string{"team-a", "team-b"} {
			createJob(t, cs, jobSpec{ns: ns, name: fmt.Sprintf("j%d", i), pods: 1, gpus: 1, preemptible: true})
		}
	}
	held := func() (a, b int) {
		l, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range l.Items {
			if p.Spec.NodeName == "" || terminal(&p) || p.DeletionTimestamp != nil {
				continue
			}
			switch p.Namespace {
			case "team-a":
				a++
			case "team-b":
				b++
			}
		}
		return a, b
	}
	kubetest.Eventually(t, 60*time.Second, "the GPUs in use", func() (bool, error) {
		a, b := held()
		return a+b == 4, nil
	})
	var sa, sb int
	for range 150 { // 30 s: 15 quanta
		a, b := held()
		sa += a
		sb += b
		time.Sleep(200 * time.Millisecond)
	}
	share := float64(sa) / float64(sa+sb)
	t.Logf("team-a held %.2f of the GPU time (%d vs %d samples); tickets say 0.75", share, sa, sb)
	if share < 0.6 || share > 0.9 || sb == 0 {
		t.Fatalf("team-a held %.2f of the GPU time, team-b %d samples; tickets 3:1 say 0.75", share, sb)
	}
}
