// Package kubebench measures how fast `gandiva kube` binds pods, beside
// kube-scheduler v1.34.4, on the same local control plane (package cplane):
// kwok GPU nodes, a backlog of pending 1-GPU pods and gangs, then each
// scheduler in turn binds what fits; then pods arrive one by one at a
// steady rate and the time from create to bound is measured. `gandiva kube
// bench` runs it and prints the table docs/PERFORMANCE.md records.
package kubebench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/gandiva-sched/gandiva/internal/kube"
	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
)

// Config sizes a run.
type Config struct {
	Nodes, GPUs     int // kwok nodes and nvidia.com/gpu each
	Pods            int // pending 1-GPU pods
	Gangs, GangSize int // pending gangs of GangSize 1-GPU pods
	// Latency is the number of pods created one by one, at Rate per second,
	// on an empty cluster, to measure create→bound.
	Latency int
	Rate    float64
	// Policy is gandiva's policy ("fjf" if empty).
	Policy string
	// Schedulers to measure, in order: "gandiva", "kube-scheduler" (one
	// may come more than once).
	Schedulers []string
	// Fresh gives each scheduler run a control plane of its own, brought
	// up the same way (same binaries, flags and nodes). Without it the
	// runs share one, and a later run shares it with the earlier runs'
	// leftovers (deleted pods kwok and the watch caches still process,
	// their Events): alternate the schedulers then.
	Fresh bool
	// QPS and Burst of both schedulers' API clients.
	QPS   float32
	Burst int
	// Workers is gandiva's concurrent API calls (kube.Options.Workers).
	Workers int
	// Log receives progress (nil: discarded).
	Log io.Writer
}

// Result is one scheduler's figures.
type Result struct {
	Scheduler string
	Backlog
	Latency
	Loop
}

// Backlog is the backlog phase: pods bound of those pending, the time to
// the first and to the last binding from the scheduler's start, and the
// bindings per second between the first and the last.
type Backlog struct {
	Bound, Pending      int
	FirstBind, LastBind time.Duration
	Rate                float64
}

// Latency is the latency phase: create→bound of pods arriving on an empty
// cluster.
type Latency struct {
	P50, P99, Max time.Duration
	Measured      int
}

// Loop is gandiva's own figures (zero for other schedulers): rounds, their
// mean and longest wall time, and the scheduler's own share of
// create→bound in the latency phase (from its informer's first sight of a
// pod to the binding's answer), of which CallP50 and CallP99 are the
// binding call's.
type Loop struct {
	Rounds              int
	MeanRound, MaxRound time.Duration
	SchedP50, SchedP99  time.Duration
	CallP50, CallP99    time.Duration
}

func (c *Config) defaults() {
	if c.Policy == "" {
		c.Policy = "fjf"
	}
	if len(c.Schedulers) == 0 {
		c.Schedulers = []string{"kube-scheduler", "gandiva"}
	}
	if c.QPS == 0 {
		c.QPS, c.Burst = 500, 1000
	}
	if c.Rate <= 0 {
		c.Rate = 20
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
}

// Run brings up a control plane (one per scheduler run with Fresh),
// measures each scheduler and returns the figures.
func Run(ctx context.Context, c Config) ([]Result, error) {
	c.defaults()
	logf := func(format string, args ...any) { fmt.Fprintf(c.Log, format+"\n", args...) }
	var (
		p   *cplane.Plane
		cs  kubernetes.Interface
		err error
	)
	defer func() {
		if p != nil {
			p.Stop()
		}
	}()
	var out []Result
	for i, sched := range c.Schedulers {
		switch {
		case p == nil:
		case c.Fresh:
			p.Stop()
			p = nil
		default:
			// let the control plane settle after the previous run's
			// deletions (kwok, the pod informers, Events)
			time.Sleep(5 * time.Second)
		}
		if p == nil {
			if p, cs, err = c.plane(ctx, logf); err != nil {
				return out, err
			}
		}
		r, err := c.measure(ctx, p, cs, i, sched, logf)
		if err != nil {
			return out, fmt.Errorf("%s: %w", sched, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// plane brings up a control plane with c.Nodes Ready kwok GPU nodes and
// the gandiva-system namespace. On error the plane returned, if any, is
// to be stopped.
func (c *Config) plane(ctx context.Context, logf func(string, ...any)) (*cplane.Plane, kubernetes.Interface, error) {
	sctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	p, err := cplane.Start(sctx, cplane.Options{Kwok: true})
	cancel()
	if err != nil {
		return p, nil, err
	}
	cs, err := kubernetes.NewForConfig(p.Config())
	if err != nil {
		return p, nil, err
	}
	logf("control plane at %s; creating %d nodes of %d GPUs", p.URL, c.Nodes, c.GPUs)
	if err := parallel(ctx, c.Nodes, func(i int) error {
		_, err := cs.CoreV1().Nodes().Create(ctx, cplane.FakeGPUNode(fmt.Sprintf("gpu-%d", i), c.GPUs, nil, nil), metav1.CreateOptions{})
		return err
	}); err != nil {
		return p, nil, fmt.Errorf("creating nodes: %w", err)
	}
	if err := waitFor(ctx, 5*time.Minute, func() (bool, error) {
		l, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		ready := 0
		for _, n := range l.Items {
			for _, cd := range n.Status.Conditions {
				if cd.Type == corev1.NodeReady && cd.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		return ready == c.Nodes, nil
	}); err != nil {
		return p, nil, fmt.Errorf("nodes Ready: %w", err)
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gandiva-system"}}, metav1.CreateOptions{}); err != nil {
		return p, nil, err
	}
	return p, cs, nil
}

// measure runs one scheduler: the backlog, then the latency phase.
func (c *Config) measure(ctx context.Context, p *cplane.Plane, cs kubernetes.Interface, run int, sched string, logf func(string, ...any)) (Result, error) {
	r := Result{Scheduler: sched}
	ns := fmt.Sprintf("bench-%d-%s", run, sched)
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return r, err
	}
	schedName := "default-scheduler"
	if sched == "gandiva" {
		schedName = kube.SchedulerName
	}
	w := newWatcher(ctx, cs, ns)
	defer w.stop()

	// the backlog: every pod pending before the scheduler starts
	total := c.Pods + c.Gangs*c.GangSize
	logf("%s: creating %d pending pods (%d single, %d gangs of %d)", sched, total, c.Pods, c.Gangs, c.GangSize)
	if err := parallel(ctx, total, func(i int) error {
		pod := c.pod(ns, schedName, i)
		_, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		return err
	}); err != nil {
		return r, fmt.Errorf("creating pods: %w", err)
	}
	r.Pending = total
	if err := waitFor(ctx, time.Minute, func() (bool, error) { return w.seen() >= total, nil }); err != nil {
		return r, err
	}
	t0 := time.Now()
	stop, stats, err := c.start(ctx, p, sched, logf)
	if err != nil {
		return r, err
	}
	defer stop()
	capacity := c.Nodes * c.GPUs
	want := min(total, capacity)
	// done when every GPU is bound, or nothing was bound for 5 s
	last, lastN := time.Now(), 0
	for {
		n := w.boundCount()
		if n != lastN {
			last, lastN = time.Now(), n
		}
		if n >= want || (n > 0 && time.Since(last) > 5*time.Second) || time.Since(t0) > 10*time.Minute {
			break
		}
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	first, lastBind := w.span()
	r.Bound = w.boundCount()
	r.FirstBind, r.LastBind = first.Sub(t0), lastBind.Sub(t0)
	if d := lastBind.Sub(first).Seconds(); d > 0 {
		r.Rate = float64(r.Bound-1) / d
	}
	logf("%s: bound %d of %d pending (capacity %d GPUs) in %.2f s (first after %.2f s): %.0f pods/s",
		sched, r.Bound, total, capacity, r.LastBind.Seconds(), r.FirstBind.Seconds(), r.Rate)

	// the latency phase: an empty cluster, pods arriving one by one
	if c.Latency > 0 {
		if err := w.deleteAll(ctx, cs, ns); err != nil {
			return r, err
		}
		time.Sleep(2 * time.Second) // let the scheduler see it
		w.reset()
		logf("%s: %d pods at %.0f/s on an empty cluster", sched, c.Latency, c.Rate)
		every := time.Duration(float64(time.Second) / c.Rate)
		tick := time.NewTicker(every)
		for i := range c.Latency {
			<-tick.C
			pod := c.single(ns, schedName, fmt.Sprintf("lat-%d", i))
			w.markCreated(pod.Name, time.Now())
			if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				tick.Stop()
				return r, err
			}
		}
		tick.Stop()
		if err := waitFor(ctx, time.Minute, func() (bool, error) { return w.boundCount() >= c.Latency, nil }); err != nil {
			return r, fmt.Errorf("latency pods bound: %w", err)
		}
		lat := w.latencies()
		r.Measured = len(lat)
		r.P50, r.P99, r.Max = quantile(lat, 0.5), quantile(lat, 0.99), lat[len(lat)-1]
		logf("%s: create→bound p50 %v p99 %v max %v", sched, r.P50, r.P99, r.Max)
	}
	if stats != nil {
		s := stats()
		r.Rounds = s.Rounds
		if s.Rounds > 0 {
			r.MeanRound = s.RoundTime / time.Duration(s.Rounds)
		}
		r.MaxRound = s.MaxRound
		if c.Latency > 0 && len(s.BindLatency) >= c.Latency {
			lat := slices.Clone(s.BindLatency[len(s.BindLatency)-c.Latency:])
			slices.Sort(lat)
			r.SchedP50, r.SchedP99 = quantile(lat, 0.5), quantile(lat, 0.99)
			call := slices.Clone(s.BindCall[len(s.BindCall)-c.Latency:])
			slices.Sort(call)
			r.CallP50, r.CallP99 = quantile(call, 0.5), quantile(call, 0.99)
		}
	}
	stop()
	// leave the nodes empty for the next scheduler
	return r, w.deleteAll(ctx, cs, ns)
}

// pod i of the backlog: the singles first, then the gangs.
func (c *Config) pod(ns, sched string, i int) *corev1.Pod {
	if i < c.Pods {
		return c.single(ns, sched, fmt.Sprintf("p-%d", i))
	}
	g := (i - c.Pods) / c.GangSize
	p := c.single(ns, sched, fmt.Sprintf("g-%d-%d", g, (i-c.Pods)%c.GangSize))
	p.Labels = map[string]string{kube.LabelJob: "g-" + strconv.Itoa(g)}
	p.Annotations = map[string]string{kube.AnnGangSize: strconv.Itoa(c.GangSize)}
	return p
}

func (c *Config) single(ns, sched, name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{SchedulerName: sched, RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "c", Image: "x", Resources: corev1.ResourceRequirements{
				Limits: corev1.ResourceList{kube.GPU: resource.MustParse("1")}}}}},
	}
}

// start runs a scheduler; stop ends it (and may be called more than once).
func (c *Config) start(ctx context.Context, p *cplane.Plane, sched string, logf func(string, ...any)) (stop func(), stats func() kube.Stats, err error) {
	switch sched {
	case "gandiva":
		cfg := p.Config()
		cfg.QPS, cfg.Burst = c.QPS, c.Burst
		var (
			mu sync.Mutex
			s  *kube.Scheduler
		)
		gctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			done <- kube.Run(gctx, cfg, kube.Options{Policy: c.Policy, Workers: c.Workers,
				Log:       slog.New(slog.NewTextHandler(io.Discard, nil)),
				OnLeading: func(x *kube.Scheduler) { mu.Lock(); s = x; mu.Unlock() }})
		}()
		var once sync.Once
		return func() { once.Do(func() { cancel(); <-done }) }, func() kube.Stats {
			mu.Lock()
			defer mu.Unlock()
			if s == nil {
				return kube.Stats{}
			}
			return s.Stats()
		}, nil
	case "kube-scheduler":
		dir, err := os.MkdirTemp("", "gandiva-bench-")
		if err != nil {
			return nil, nil, err
		}
		kc := filepath.Join(dir, "kubeconfig")
		if err := p.WriteKubeconfig(kc, "admin"); err != nil {
			return nil, nil, err
		}
		conf := filepath.Join(dir, "scheduler.yaml")
		cfg := fmt.Sprintf("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"+
			"clientConnection:\n  kubeconfig: %s\n  qps: %g\n  burst: %d\nleaderElection:\n  leaderElect: false\n", kc, c.QPS, c.Burst)
		if err := os.WriteFile(conf, []byte(cfg), 0o600); err != nil {
			return nil, nil, err
		}
		if _, err := p.Run(filepath.Join(cplane.BinDir(), "kube-scheduler"), "kube-scheduler",
			"--config="+conf, "--secure-port=0", "-v=1"); err != nil {
			return nil, nil, err
		}
		var once sync.Once
		return func() {
			once.Do(func() {
				p.StopProcess("kube-scheduler")
				os.RemoveAll(dir)
			})
		}, nil, nil
	}
	return nil, nil, fmt.Errorf("unknown scheduler %q (gandiva, kube-scheduler)", sched)
}

// watcher records when each pod of a namespace was first seen bound.
type watcher struct {
	inf    cache.SharedIndexInformer
	cancel context.CancelFunc

	mu      sync.Mutex
	bound   map[string]time.Time
	created map[string]time.Time
}

func newWatcher(ctx context.Context, cs kubernetes.Interface, ns string) *watcher {
	ctx, cancel := context.WithCancel(ctx)
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	w := &watcher{inf: f.Core().V1().Pods().Informer(), cancel: cancel, bound: map[string]time.Time{}, created: map[string]time.Time{}}
	seen := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.Spec.NodeName == "" {
			return
		}
		now := time.Now()
		w.mu.Lock()
		if _, ok := w.bound[p.Name]; !ok {
			w.bound[p.Name] = now
		}
		w.mu.Unlock()
	}
	w.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: seen, UpdateFunc: func(_, o any) { seen(o) }})
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	return w
}

func (w *watcher) stop() { w.cancel() }

// deleteAll deletes the namespace's pods at once (grace 0) and waits until
// they are gone.
func (w *watcher) deleteAll(ctx context.Context, cs kubernetes.Interface, ns string) error {
	names := w.inf.GetStore().ListKeys()
	zero := int64(0)
	if err := parallel(ctx, len(names), func(i int) error {
		_, name, _ := cache.SplitMetaNamespaceKey(names[i])
		err := cs.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}); err != nil {
		return fmt.Errorf("deleting pods: %w", err)
	}
	if err := waitFor(ctx, 5*time.Minute, func() (bool, error) { return w.seen() == 0, nil }); err != nil {
		return fmt.Errorf("emptying the cluster: %w", err)
	}
	return nil
}

func (w *watcher) seen() int { return len(w.inf.GetStore().ListKeys()) }

// live counts the pods that exist and have not ended.
func (w *watcher) live() int {
	n := 0
	for _, o := range w.inf.GetStore().List() {
		p := o.(*corev1.Pod)
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			n++
		}
	}
	return n
}

func (w *watcher) boundCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.bound)
}

func (w *watcher) span() (first, last time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, t := range w.bound {
		if first.IsZero() || t.Before(first) {
			first = t
		}
		if t.After(last) {
			last = t
		}
	}
	return first, last
}

func (w *watcher) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.bound = map[string]time.Time{}
	w.created = map[string]time.Time{}
}

func (w *watcher) markCreated(name string, t time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.created[name] = t
}

// latencies are create→bound of the pods created since reset, sorted.
func (w *watcher) latencies() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []time.Duration
	for name, c := range w.created {
		if b, ok := w.bound[name]; ok {
			out = append(out, b.Sub(c))
		}
	}
	slices.Sort(out)
	return out
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// parallel runs f(0..n-1) on 16 goroutines and returns the first error.
func parallel(ctx context.Context, n int, f func(int) error) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	next := make(chan int)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := 0; i < n && ctx.Err() == nil; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}

func waitFor(ctx context.Context, timeout time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		if time.Now().After(deadline) {
			if last == nil {
				last = errors.New("still false")
			}
			return fmt.Errorf("timed out after %v: %w", timeout, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
