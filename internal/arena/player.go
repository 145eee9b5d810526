package arena

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/kube"
	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
	"github.com/gandiva-sched/gandiva/internal/model"
	"github.com/gandiva-sched/gandiva/internal/sim"
)

// Config is an arena run.
type Config struct {
	Plan       *Plan
	Schedulers []Scheduler
	// Speed compresses time: one second of wall time is Speed seconds of
	// trace time.
	Speed       float64
	Checkpoints Checkpoints
	// Perf is the performance model of the jobs' rates and start-ups
	// (sim.DefaultPerf() if its Name is empty).
	Perf sim.PerfModel
	// DeclareWork writes each Job's mini-batches and seconds per
	// mini-batch (in trace seconds: gandiva's clock runs at Speed) as
	// gandiva.io/iters and gandiva.io/iter-time, which Gandiva's
	// shortest-first policies read and other schedulers ignore.
	DeclareWork bool
	// Timeout bounds each scheduler's replay in wall time (jobs not done
	// by then count as unfinished).
	Timeout time.Duration
	// Gandiva is the command that runs `gandiva kube` (argv).
	Gandiva []string
	// BinDir holds the control plane's binaries ("" = cplane.BinDir()).
	BinDir string
	// QPS of kube-scheduler's API client (500 if 0; gandiva's default is
	// the same).
	QPS float64
	// Log receives progress (nil: discarded).
	Log io.Writer
	// Verbose logs every job's starts, stops and ends.
	Verbose bool
	// Workload is WorkloadJob ("" is the same) or WorkloadPods.
	Workload string
	// Profile samples the plane's processes, the scheduler's and the
	// machine's CPU and memory during each replay, and gandiva's round
	// times (scale.go): Result.Scale.
	Profile bool
}

// Result is one scheduler's run.
type Result struct {
	Scheduler string `json:"scheduler"`
	// Status is "ok", "timed out" (some jobs unfinished at Timeout) or
	// "failed: WHY".
	Status string `json:"status"`
	Summary
	Usage
	// Sim is `gandiva sim`'s figures for the same trace, cluster and
	// policy (gandiva rows, when asked for: Simulate).
	Sim *SimFigures `json:"sim,omitempty"`
	// WallSeconds is the replay's wall time.
	WallSeconds float64 `json:"wall_s"`
	Record      *Record `json:"record,omitempty"`
	// Scale is the run's figures at scale (Config.Profile).
	Scale *ScaleFigures `json:"scale,omitempty"`
	// LoadAvg is the machine's 1-minute load average when the replay
	// started and when it ended (absent where /proc/loadavg is not read).
	LoadAvg []float64 `json:"load_avg_1m,omitempty"`
}

// Run replays c.Plan under each scheduler in turn, each on a fresh control
// plane with the same nodes. A scheduler that fails to run gets a row with
// its reason; Run returns an error only when ctx ends or the plan is bad.
func Run(ctx context.Context, c Config) ([]Result, error) {
	if c.Plan == nil || len(c.Plan.Jobs) == 0 {
		return nil, fmt.Errorf("arena: nothing to replay")
	}
	if !(c.Speed > 0) {
		return nil, fmt.Errorf("arena: speed must be > 0, got %v", c.Speed)
	}
	if err := CheckWorkload(c.Workload, c.Schedulers); err != nil {
		return nil, fmt.Errorf("arena: %w", err)
	}
	if c.Perf.Name == "" {
		c.Perf = sim.DefaultPerf()
	}
	if c.Timeout <= 0 {
		c.Timeout = 30 * time.Minute
	}
	if c.QPS <= 0 {
		c.QPS = 500
	}
	if c.BinDir == "" {
		c.BinDir = cplane.BinDir()
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	var out []Result
	for _, s := range c.Schedulers {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		r, err := c.runOne(ctx, s)
		if err != nil {
			r.Status = "failed: " + err.Error()
			fmt.Fprintf(c.Log, "%s: %v\n", s, err)
		}
		out = append(out, r)
	}
	return out, ctx.Err()
}

// runOne brings up a plane, replays the trace under s and tears it down.
func (c *Config) runOne(ctx context.Context, s Scheduler) (Result, error) {
	res := Result{Scheduler: s.String()}
	if why := s.missing(c); why != "" {
		res.Status = "not run: " + why
		fmt.Fprintf(c.Log, "%s: not run: %s\n", s, why)
		return res, nil
	}
	logf := func(format string, args ...any) {
		fmt.Fprintf(c.Log, "%s: %s\n", s, fmt.Sprintf(format, args...))
	}
	sctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	p, err := cplane.Start(sctx, cplane.Options{BinDir: c.BinDir, Kwok: true, Controllers: true})
	cancel()
	if err != nil {
		return res, err
	}
	defer p.Stop()
	cs, err := kubernetes.NewForConfig(p.Config())
	if err != nil {
		return res, err
	}
	if err := c.setUp(ctx, cs); err != nil {
		return res, err
	}
	logf("control plane at %s: %d nodes, %d namespaces", p.URL, len(c.Plan.Nodes), len(c.Plan.Namespaces))
	dir, err := os.MkdirTemp("", "gandiva-arena-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	pl := newPlayer(c, cs, s)
	stopWatch, err := pl.watch(ctx)
	if err != nil {
		return res, err
	}
	defer stopWatch()
	sc, metricsURL, err := c.profiled(s)
	if err != nil {
		return res, err
	}
	ch, err := startScheduler(ctx, p, cs, sc, s, dir)
	if err != nil {
		return res, err
	}
	var smp *sampler
	if c.Profile {
		smp = startSampler(ctx, metricsURL)
	}
	t0 := time.Now()
	load0, okLoad := loadAvg()
	playErr := pl.play(ctx, ch)
	res.WallSeconds = time.Since(t0).Seconds()
	if load1, ok := loadAvg(); ok && okLoad {
		res.LoadAvg = []float64{load0, load1}
	}
	var samples []scaleSample
	if smp != nil {
		samples = smp.stop()
	}
	res.Usage = ch.stop()
	if smp != nil { // (also when the replay failed: what it did until then)
		res.Scale = scaleOf(samples, pl.record(), c.Speed, pl.t0, smp.t0)
	}
	if playErr != nil {
		return res, fmt.Errorf("%w\n%s's log:\n%s", playErr, s, ch.tail(30))
	}
	rec := pl.record()
	res.Record = rec
	res.Summary = Summarize(rec)
	res.Status = "ok"
	if res.Finished < res.Jobs {
		res.Status = "timed out"
	}
	logf("%d of %d jobs finished in %.1f s of wall time; average JCT %.0f s", res.Finished, res.Jobs, res.WallSeconds, res.AvgJCT)
	return res, nil
}

// loadAvg is the machine's 1-minute load average (false where
// /proc/loadavg cannot be read).
func loadAvg() (float64, bool) {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return 0, false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	return v, err == nil
}

// setUp creates the nodes and namespaces and waits until the nodes are Ready.
func (c *Config) setUp(ctx context.Context, cs kubernetes.Interface) error {
	for _, n := range c.Plan.Nodes {
		node := cplane.FakeGPUNode(n.Name, n.GPUs, n.Labels, nil)
		if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating node %s: %w", n.Name, err)
		}
	}
	for _, ns := range append([]string{"gandiva-system"}, c.Plan.Namespaces...) {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating namespace %s: %w", ns, err)
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		l, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		ready := 0
		for _, n := range l.Items {
			for _, cd := range n.Status.Conditions {
				if cd.Type == corev1.NodeReady && cd.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		if ready == len(c.Plan.Nodes) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d nodes Ready after 2 minutes", ready, len(c.Plan.Nodes))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// player replays the plan against one control plane.
type player struct {
	c     *Config
	cs    kubernetes.Interface
	sched Scheduler
	cat   *model.Catalog
	keys  []string // jobs in plan order
	byKey map[string]*PlannedJob

	mu      sync.Mutex
	t0      time.Time
	started bool
	tr      *Tracker
	jobs    map[string]*jobState
	pods    map[types.UID]*podState
	byJob   map[string][]*podState
	holds   []Hold
	endAt   float64
	podInf  cache.SharedIndexInformer
	// plain-pod gangs (player_pods.go): the pods to make again, and the
	// attempts made of each job's pod index
	remake   []remake
	attempts map[string][]int
}

type jobState struct {
	seen       JobSeen
	allRunning bool
	succeeded  int // pods seen Succeeded
}

type podState struct {
	job       string
	node      string
	gpus      int
	bound     float64 // -1: not seen bound
	ended     bool
	running   bool
	succeeded bool
	hold      int // index in holds (-1: none)
	// plain-pod gangs: the pod's index in its gang, and whether the player
	// made it again (player_pods.go)
	index  int
	remade bool
}

func newPlayer(c *Config, cs kubernetes.Interface, s Scheduler) *player {
	pl := &player{c: c, cs: cs, sched: s, cat: model.Default(), byKey: map[string]*PlannedJob{},
		tr: NewTracker(c.Checkpoints), jobs: map[string]*jobState{}, pods: map[types.UID]*podState{}, byJob: map[string][]*podState{}}
	for _, j := range c.Plan.Jobs {
		k := j.Key()
		pl.keys = append(pl.keys, k)
		pl.byKey[k] = j
		pl.tr.Add(k, j.Spec.Iters, j.Spec.GPUs)
		pl.jobs[k] = &jobState{seen: JobSeen{Key: k, Namespace: j.Namespace, GPUs: j.Spec.GPUs, Submit: j.Submit, FirstBind: -1, FirstRun: -1, Completed: -1, JobComplete: -1}}
	}
	return pl
}

// now is the trace time of wall time t.
func (pl *player) now(t time.Time) float64 {
	if !pl.started {
		return 0
	}
	return t.Sub(pl.t0).Seconds() * pl.c.Speed
}

// watch starts the pod and Job informers; stop ends them.
func (pl *player) watch(ctx context.Context) (stop func(), err error) {
	ctx, cancel := context.WithCancel(ctx)
	f := informers.NewSharedInformerFactory(pl.cs, 0)
	pl.podInf = f.Core().V1().Pods().Informer()
	jobs := f.Batch().V1().Jobs().Informer()
	pl.podInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { pl.pod(o, false) },
		UpdateFunc: func(_, o any) { pl.pod(o, false) },
		DeleteFunc: func(o any) {
			if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = t.Obj
			}
			pl.pod(o, true)
		},
	})
	jobs.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    pl.job,
		UpdateFunc: func(_, o any) { pl.job(o) },
	})
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), pl.podInf.HasSynced, jobs.HasSynced) {
		cancel()
		return nil, fmt.Errorf("arena: informers did not sync: %w", ctx.Err())
	}
	return func() { cancel(); f.Shutdown() }, nil
}

// pod records what a pod event says: its binding, its end, whether its
// job's pods all run.
func (pl *player) pod(o any, deleted bool) {
	p, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	name := p.Labels["job-name"]
	if pl.c.Workload == WorkloadPods {
		name = p.Labels[labelGang]
	}
	key := p.Namespace + "/" + name
	if _, ok := pl.byKey[key]; !ok || name == "" {
		return
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	now := pl.now(time.Now())
	ps := pl.pods[p.UID]
	if ps == nil {
		ps = &podState{job: key, gpus: pl.byKey[key].PodGPUs, bound: -1, hold: -1}
		pl.pods[p.UID] = ps
		pl.byJob[key] = append(pl.byJob[key], ps)
	}
	js := pl.jobs[key]
	if p.Spec.NodeName != "" && ps.bound < 0 {
		ps.bound, ps.node = now, p.Spec.NodeName
		ps.hold = len(pl.holds)
		pl.holds = append(pl.holds, Hold{Namespace: p.Namespace, GPUs: ps.gpus, From: now, To: -1})
		if js.seen.FirstBind < 0 {
			js.seen.FirstBind = now
		}
	}
	ended := deleted || p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	if ended && !ps.ended {
		ps.ended = true
		if ps.hold >= 0 {
			pl.holds[ps.hold].To = now
		}
	}
	if pl.c.Workload == WorkloadPods {
		pl.gone(p, ps, deleted)
	}
	ps.running = !ps.ended && p.Status.Phase == corev1.PodRunning && p.Spec.NodeName != "" && p.Annotations[cplane.AnnExit] == ""
	if p.Status.Phase == corev1.PodSucceeded && !ps.succeeded {
		ps.succeeded = true
		// A Job's pod already being deleted when it exited (a scheduler
		// suspended or evicted the job just as its work ended) does not
		// end the work: the Job controller, which counted the pod gone
		// when it saw it terminating, makes its index again, and the
		// job runs once more (its work kept: Tracker.Stop). If the
		// controller counted the pod's success after all, the Job's
		// Complete condition ends the work instead (job).
		if pl.c.Workload != WorkloadPods && p.DeletionTimestamp != nil {
			pl.update(key, now)
			return
		}
		js.succeeded++
		if js.succeeded >= pl.byKey[key].Pods && js.seen.Completed < 0 {
			// the job's work ended: its last pod exited 0
			js.seen.Completed = now
			pl.tr.Done(key, now)
			if pl.c.Workload == WorkloadPods {
				js.seen.JobComplete = now // (no controller to say so)
			}
		}
	}
	pl.update(key, now)
}

// update starts or stops job key's progress as its pods all run or not.
func (pl *player) update(key string, now float64) {
	js := pl.jobs[key]
	pj := pl.byKey[key]
	var nodes []string
	for _, ps := range pl.byJob[key] {
		if ps.running {
			nodes = append(nodes, ps.node)
		}
	}
	all := len(nodes) >= pj.Pods
	switch {
	case all && !js.allRunning:
		js.allRunning = true
		if js.seen.FirstRun < 0 {
			js.seen.FirstRun = now
		}
		if pl.tr.IsDone(key) && js.seen.JobComplete < 0 && pl.c.Workload != WorkloadPods {
			// its pods run again before the Job says it is complete: the
			// Job controller did not count the success the player saw (a
			// suspension or eviction raced with it) and made the pods
			// again, so the work ends only when they end
			pl.tr.Reopen(key)
			js.seen.Completed, js.succeeded = -1, 0
		}
		gpus := pl.gpusOn(nodes, pj.PodGPUs)
		it := pl.c.Perf.SoloIterTime(pl.cat, pl.c.Plan.Cluster, pj.Spec, gpus)
		oh := pl.tr.Start(key, now, it, pl.c.Perf.Startup, pl.c.Perf.CheckpointSeconds(pl.cat, pj.Spec))
		if pl.c.Verbose {
			fmt.Fprintf(pl.c.Log, "%s: %.1f s: %s runs on %v: %.3f s a mini-batch after %.1f s, %.0f of %.0f mini-batches kept\n",
				pl.sched, now, key, nodes, it, oh, pl.tr.Kept(key), pj.Spec.Iters)
		}
	case !all && js.allRunning:
		js.allRunning = false
		lost := pl.tr.Stop(key, now)
		if pl.c.Verbose {
			fmt.Fprintf(pl.c.Log, "%s: %.1f s: %s stops (%d of %d pods run): %.0f mini-batches kept, %.0f lost\n",
				pl.sched, now, key, len(nodes), pj.Pods, pl.tr.Kept(key), lost)
		}
	}
}

// gpusOn is a gang's GPUs of the cluster: podGPUs on each pod's node
// (distinct GPUs of a node for pods sharing it; which ones does not change
// the rate, only their servers and types do).
func (pl *player) gpusOn(nodes []string, podGPUs int) []cluster.GPUID {
	c := pl.c.Plan.Cluster
	slices.Sort(nodes)
	used := map[cluster.ServerID]int{}
	var out []cluster.GPUID
	for _, n := range nodes {
		s, ok := pl.c.Plan.ServerOf[n]
		if !ok {
			continue
		}
		srv := c.Servers[s]
		for i := 0; i < podGPUs; i++ {
			k := used[s] % srv.NumGPUs
			out = append(out, srv.FirstGPU+cluster.GPUID(k))
			used[s]++
		}
	}
	return out
}

// job records when a Job was seen Complete (the Job controller's word,
// which follows its pods' by up to its sync period).
func (pl *player) job(o any) {
	j, ok := o.(*batchv1.Job)
	if !ok {
		return
	}
	key := j.Namespace + "/" + j.Name
	if _, ok := pl.byKey[key]; !ok {
		return
	}
	complete := false
	for _, c := range j.Status.Conditions {
		// SuccessCriteriaMet: its completions reached; Complete follows
		// once its pods are gone, except for a Job suspended meanwhile
		// (the Job controller then never adds it)
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobSuccessCriteriaMet) && c.Status == corev1.ConditionTrue {
			complete = true
		}
	}
	if !complete {
		return
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	js := pl.jobs[key]
	now := pl.now(time.Now())
	if js.seen.JobComplete < 0 {
		js.seen.JobComplete = now
	}
	if js.seen.Completed < 0 {
		// complete without its last pod seen Succeeded (and not being
		// deleted): the Job controller's word ends the work
		js.seen.Completed = now
		pl.tr.Done(key, now)
	}
}

// play starts the clock, creates the Jobs at their submission times, ends
// the pods of jobs whose work is done, and returns when every Job is
// Complete or the time limit passed. It fails when the scheduler exits.
func (pl *player) play(ctx context.Context, sched *group) error {
	pl.mu.Lock()
	pl.t0, pl.started = time.Now(), true
	pl.mu.Unlock()
	deadline := time.Now().Add(pl.c.Timeout)
	next := 0
	var wg sync.WaitGroup
	defer wg.Wait()
	sem := make(chan struct{}, 16)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		if sched.exited() {
			return fmt.Errorf("the scheduler exited")
		}
		pl.mu.Lock()
		now := pl.now(time.Now())
		pl.mu.Unlock()
		// submissions, in plan order, one at a time: creation order is
		// submission order
		for next < len(pl.c.Plan.Jobs) && pl.c.Plan.Jobs[next].Submit <= now {
			j := pl.c.Plan.Jobs[next]
			if pl.c.Workload == WorkloadPods {
				if err := pl.createGang(ctx, j); err != nil {
					return err
				}
			} else if _, err := pl.cs.BatchV1().Jobs(j.Namespace).Create(ctx, pl.sched.decorate(j, pl.object(j)), metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("creating Job %s: %w", j.Key(), err)
			}
			next++
		}
		if err := pl.remakePods(ctx); err != nil {
			return err
		}
		pl.mu.Lock()
		due := pl.tr.Due(pl.now(time.Now()), pl.keys)
		done := 0
		for _, js := range pl.jobs {
			if js.seen.Completed >= 0 && js.seen.JobComplete >= 0 {
				done++
			}
		}
		pl.mu.Unlock()
		for _, key := range due {
			if pl.c.Verbose {
				fmt.Fprintf(pl.c.Log, "%s: %.1f s: %s is done; ending its pods\n", pl.sched, now, key)
			}
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				pl.finish(ctx, key)
			}()
		}
		if done == len(pl.keys) {
			pl.mu.Lock()
			pl.endAt = pl.now(time.Now())
			pl.mu.Unlock()
			return nil
		}
		if time.Now().After(deadline) {
			pl.mu.Lock()
			pl.endAt = pl.now(time.Now())
			pl.mu.Unlock()
			return nil
		}
	}
}

// finish ends a job's running pods with exit code 0: kwok then marks them
// Succeeded, and the Job controller completes the Job.
func (pl *player) finish(ctx context.Context, key string) {
	pj := pl.byKey[key]
	sel := "job-name=" + pj.Name
	if pl.c.Workload == WorkloadPods {
		sel = labelGang + "=" + pj.Name
	}
	pods, err := pl.cs.CoreV1().Pods(pj.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		fmt.Fprintf(pl.c.Log, "%s: listing the pods of %s: %v\n", pl.sched, key, err)
		return
	}
	body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{cplane.AnnExit: "0"}}})
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" || p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
			continue
		}
		if _, err := pl.cs.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, body, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			fmt.Fprintf(pl.c.Log, "%s: ending pod %s/%s: %v\n", pl.sched, p.Namespace, p.Name, err)
		}
	}
}

// object is job j's batch/v1 Job: an Indexed Job of j.Pods pods, each
// asking for j.PodGPUs nvidia.com/gpu, preemptible (its pod failure policy
// ignores disruptions), for the scheduler under test.
func (pl *player) object(j *PlannedJob) *batchv1.Job {
	n := int32(j.Pods)
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: j.Namespace, Name: j.Name, Annotations: pl.workAnnotations(j),
			Labels: map[string]string{labelTraceJob: dnsLabel(j.Spec.Name, 63)}},
		Spec: batchv1.JobSpec{
			Parallelism:    &n,
			Completions:    &n,
			CompletionMode: ptr.To(batchv1.IndexedCompletion),
			BackoffLimit:   ptr.To(int32(1000)),
			PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
				Action:          batchv1.PodFailurePolicyActionIgnore,
				OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}},
			}}},
			Template: corev1.PodTemplateSpec{Spec: pl.podSpec(j)},
		},
	}
}

// workAnnotations declare job j's work (Config.DeclareWork): its
// mini-batches and seconds per mini-batch, in trace seconds (gandiva's
// clock runs at Speed).
func (pl *player) workAnnotations(j *PlannedJob) map[string]string {
	ann := map[string]string{}
	if pl.c.DeclareWork && j.Spec.Iters > 0 && j.Spec.IterTime > 0 {
		ann[kube.AnnIters] = strconv.FormatFloat(j.Spec.Iters, 'f', -1, 64)
		ann[kube.AnnIterTime] = strconv.FormatFloat(j.Spec.IterTime, 'g', 6, 64)
	}
	return ann
}

// podSpec is the spec of each pod of job j: j.PodGPUs nvidia.com/gpu, for
// the scheduler under test, 30 s to end when stopped.
func (pl *player) podSpec(j *PlannedJob) corev1.PodSpec {
	grace := int64(30)
	return corev1.PodSpec{
		SchedulerName:                 pl.sched.schedulerName(),
		RestartPolicy:                 corev1.RestartPolicyNever,
		TerminationGracePeriodSeconds: &grace,
		Containers: []corev1.Container{{Name: "train", Image: "arena-trainer", Command: []string{"train"},
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
				kube.GPU: *resource.NewQuantity(int64(j.PodGPUs), resource.DecimalSI)}}}},
	}
}

// record is the run's record, once play returned.
func (pl *player) record() *Record {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	r := &Record{Capacity: pl.c.Plan.Capacity(), End: pl.endAt, Holds: slices.Clone(pl.holds)}
	for _, k := range pl.keys {
		js := pl.jobs[k]
		s := js.seen
		s.Preemptions = pl.tr.Stops(k)
		s.LostGPUSeconds = pl.tr.LostGPUSeconds(k)
		s.RanGPUSeconds = pl.tr.RanGPUSeconds(k, pl.endAt)
		r.Jobs = append(r.Jobs, s)
	}
	return r
}
