package arena

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// kai: NVIDIA's KAI-Scheduler, release kaiTag, built from its source by
// `scripts/arena-peers kai` into peerDir("kai", kaiTag): bin/kai-scheduler,
// bin/kai-binder, bin/kai-queuecontroller, bin/kai-podgroupcontroller and
// crd/ (the CustomResourceDefinitions of the release's Helm chart).
//
// The scheduler decides and writes a BindRequest per pod; the binder binds
// it; the queue and PodGroup controllers keep the queues' and PodGroups'
// status. Queues as KAI's documentation recommends: one parent queue, and
// under it one leaf queue per namespace with an equal GPU quota (the
// cluster's GPUs ÷ namespaces), over-quota weight 1 and no limit; the
// scheduler's default actions (allocate, consolidation, reclaim, preempt,
// stale gang eviction) and plugins (proportion: hierarchical fair share
// with DRF; GPUs bin-packed).
//
// Gangs: KAI's podgrouper gives a batch/v1 Job one PodGroup per pod
// (minMember 1: no gang), so it is not run; instead the arena writes each
// Job's PodGroup the way KAI's documentation shows for hand-made ones
// (scheduling.run.ai/v2alpha2, minMember = the Job's pods, the queue, the
// chart's "train" priority class, preemptible), named in the pods'
// pod-group-name annotation. A watch of Jobs in the arena's process writes
// it as the Job appears (so its creation time is the job's submission:
// KAI orders a queue's jobs by it).
func init() {
	registerPeer("kai", &peer{
		schedulerName: kaiSchedulerName,
		decorate:      decorateKAI,
		missing:       missingKAI,
		start:         startKAI,
	})
}

const (
	// kaiTag is the release scripts/arena-peers builds (KAI_TAG there; a
	// test checks that they agree).
	kaiTag = "v0.13.0"
	// kaiSchedulerName is the pods' schedulerName (KAI's default).
	kaiSchedulerName = "kai-scheduler"
	// kaiQueueLabel on a pod (and a PodGroup) names its queue.
	kaiQueueLabel = "kai.scheduler/queue"
	// kaiPodGroupAnn on a pod names its PodGroup.
	kaiPodGroupAnn = "pod-group-name"
	// kaiParentQueue is the leaf queues' parent.
	kaiParentQueue = "arena"
	// kaiPriorityClass is the PodGroups' priority class: the chart's
	// "train" (value 50: below 100, preemptible).
	kaiPriorityClass      = "train"
	kaiPriorityClassValue = 50
	// kaiNamespace is the scheduler's own namespace (its default).
	kaiNamespace = "kai-scheduler"
)

// kaiBinaries are the components the arena runs, in start order.
var kaiBinaries = []string{"kai-queuecontroller", "kai-podgroupcontroller", "kai-binder", "kai-scheduler"}

var (
	kaiQueueGVR    = schema.GroupVersionResource{Group: "scheduling.run.ai", Version: "v2", Resource: "queues"}
	kaiPodGroupGVR = schema.GroupVersionResource{Group: "scheduling.run.ai", Version: "v2alpha2", Resource: "podgroups"}
)

// kaiDir is where scripts/arena-peers builds KAI-Scheduler.
func kaiDir() string { return peerDir("kai", kaiTag) }

// missingKAI says why KAI-Scheduler cannot run: its build is missing or
// incomplete.
func missingKAI(*Config) string {
	return missingPeer("KAI-Scheduler", "kai", kaiTag, kaiBinaries...)
}

// kaiQueue is the leaf queue of namespace ns's jobs.
func kaiQueue(ns string) string { return ns }

// decorateKAI puts j's pods in its namespace's queue and in its PodGroup
// (named as the Job).
func decorateKAI(_ Scheduler, j *PlannedJob, job *batchv1.Job) {
	if job.Labels == nil {
		job.Labels = map[string]string{}
	}
	job.Labels[kaiQueueLabel] = kaiQueue(j.Namespace)
	t := &job.Spec.Template
	if t.Labels == nil {
		t.Labels = map[string]string{}
	}
	t.Labels[kaiQueueLabel] = kaiQueue(j.Namespace)
	if t.Annotations == nil {
		t.Annotations = map[string]string{}
	}
	t.Annotations[kaiPodGroupAnn] = job.Name
}

// kaiQueueObjects are the queues: the parent (the whole cluster's GPUs as
// quota) and one leaf per namespace with an equal share of them. CPU and
// memory are not limited (the arena's pods ask for GPUs only).
func kaiQueueObjects(gpus int, namespaces []string) []*unstructured.Unstructured {
	res := func(gpuQuota float64) map[string]any {
		return map[string]any{
			"gpu":    map[string]any{"quota": gpuQuota, "limit": int64(-1), "overQuotaWeight": int64(1)},
			"cpu":    map[string]any{"quota": int64(-1), "limit": int64(-1), "overQuotaWeight": int64(1)},
			"memory": map[string]any{"quota": int64(-1), "limit": int64(-1), "overQuotaWeight": int64(1)},
		}
	}
	q := func(name, parent string, gpuQuota float64) *unstructured.Unstructured {
		spec := map[string]any{"resources": res(gpuQuota)}
		if parent != "" {
			spec["parentQueue"] = parent
		}
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "scheduling.run.ai/v2",
			"kind":       "Queue",
			"metadata":   map[string]any{"name": name},
			"spec":       spec,
		}}
	}
	out := []*unstructured.Unstructured{q(kaiParentQueue, "", float64(gpus))}
	if len(namespaces) == 0 {
		return out
	}
	share := float64(gpus) / float64(len(namespaces))
	for _, ns := range namespaces {
		out = append(out, q(kaiQueue(ns), kaiParentQueue, share))
	}
	return out
}

// kaiPodGroup is Job job's PodGroup: a gang of its pods (its parallelism)
// in the queue its pods name, owned by the Job.
func kaiPodGroup(job *batchv1.Job) *unstructured.Unstructured {
	min := int64(1)
	if p := job.Spec.Parallelism; p != nil && *p > 0 {
		min = int64(*p)
	}
	queue := job.Spec.Template.Labels[kaiQueueLabel]
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "scheduling.run.ai/v2alpha2",
		"kind":       "PodGroup",
		"metadata": map[string]any{
			"name":      job.Spec.Template.Annotations[kaiPodGroupAnn],
			"namespace": job.Namespace,
			"labels":    map[string]any{kaiQueueLabel: queue},
			"ownerReferences": []any{map[string]any{
				"apiVersion": "batch/v1", "kind": "Job", "name": job.Name, "uid": string(job.UID),
			}},
		},
		"spec": map[string]any{
			"minMember":         min,
			"queue":             queue,
			"priorityClassName": kaiPriorityClass,
			"preemptibility":    "preemptible",
		},
	}}
}

// startKAI installs KAI's CustomResourceDefinitions, the "train" priority
// class and the queues, starts the PodGroup writer and KAI's components,
// and returns once the scheduler serves its metrics and the binder is
// ready.
func startKAI(ctx context.Context, e *peerEnv) (*group, error) {
	d := kaiDir()
	crds, err := filepath.Glob(filepath.Join(d, "crd", "*.yaml"))
	if err != nil || len(crds) == 0 {
		return nil, fmt.Errorf("no CustomResourceDefinitions in %s/crd (run scripts/arena-peers kai)", d)
	}
	dyn, err := dynamic.NewForConfig(e.Plane.Config())
	if err != nil {
		return nil, err
	}
	if err := installCRDs(ctx, dyn, crds...); err != nil {
		return nil, err
	}
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: kaiPriorityClass}, Value: kaiPriorityClassValue}
	if _, err := e.CS.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating priority class %s: %w", kaiPriorityClass, err)
	}
	if _, err := e.CS.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kaiNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating namespace %s: %w", kaiNamespace, err)
	}
	for _, q := range kaiQueueObjects(e.Config.Plan.Capacity(), e.Config.Plan.Namespaces) {
		if _, err := dyn.Resource(kaiQueueGVR).Create(ctx, q, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating KAI queue %s: %w", q.GetName(), err)
		}
	}
	g := &group{}
	stopPG, err := startKAIPodGroups(ctx, e, dyn)
	if err != nil {
		return nil, err
	}
	g.onStop(stopPG)

	qps := strconv.FormatFloat(e.Config.QPS, 'g', -1, 64)
	burst := strconv.Itoa(int(2 * e.Config.QPS))
	env := "KUBECONFIG=" + e.Kubeconfig
	bin := func(name string) string { return filepath.Join(d, "bin", name) }
	if _, err := g.startChild(e.Dir, "kai-queuecontroller", []string{bin("kai-queuecontroller"),
		"--enable-webhook=false", "--metrics-listen-address=0", "--qps=" + strconv.Itoa(int(e.Config.QPS)), "--burst=" + burst}, env); err != nil {
		return g, err
	}
	if _, err := g.startChild(e.Dir, "kai-podgroupcontroller", []string{bin("kai-podgroupcontroller"),
		"--enable-podgroup-webhook=false", "--metrics-bind-address=0", "--health-probe-bind-address=0",
		"--scheduler-name=" + kaiSchedulerName, "--qps=" + strconv.Itoa(int(e.Config.QPS)), "--burst=" + burst}, env); err != nil {
		return g, err
	}
	probe, err := freePort()
	if err != nil {
		return g, err
	}
	if _, err := g.startChild(e.Dir, "kai-binder", []string{bin("kai-binder"),
		"--scheduler-name=" + kaiSchedulerName, "--metrics-bind-address=0",
		"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(probe), "--qps=" + qps, "--burst=" + burst}, env); err != nil {
		return g, err
	}
	metrics, err := freePort()
	if err != nil {
		return g, err
	}
	plugins, err := freePort()
	if err != nil {
		return g, err
	}
	if _, err := g.startChild(e.Dir, "kai-scheduler", []string{bin("kai-scheduler"),
		"--scheduler-name=" + kaiSchedulerName, "--namespace=" + kaiNamespace,
		"--listen-address=127.0.0.1:" + strconv.Itoa(metrics), "--plugin-server-port=" + strconv.Itoa(plugins),
		"--qps=" + strconv.Itoa(int(e.Config.QPS)), "--burst=" + burst, "--v=3"}, env); err != nil {
		return g, err
	}
	// The binder registers no health checks: its probe server answering
	// at all (404) says its manager started.
	waits := []struct {
		what, url string
		anyStatus bool
	}{
		{"the binder's manager", fmt.Sprintf("http://127.0.0.1:%d/readyz", probe), true},
		{"the scheduler serving its metrics", fmt.Sprintf("http://127.0.0.1:%d/metrics", metrics), false},
	}
	hc := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(2 * time.Minute)
	for _, w := range waits {
		for {
			if r, err := hc.Get(w.url); err == nil {
				r.Body.Close()
				if r.StatusCode == http.StatusOK || w.anyStatus {
					break
				}
			}
			if g.exited() {
				return g, fmt.Errorf("KAI-Scheduler exited while starting:\n%s", g.tail(20))
			}
			if time.Now().After(deadline) {
				return g, fmt.Errorf("KAI-Scheduler not ready after 2 minutes: waiting for %s\n%s", w.what, g.tail(20))
			}
			select {
			case <-ctx.Done():
				return g, ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	e.logf("KAI-Scheduler %s: %d queues under %q", kaiTag, len(e.Config.Plan.Namespaces), kaiParentQueue)
	return g, nil
}

// startKAIPodGroups watches the Jobs for KAI and writes each one's
// PodGroup as it appears (retrying for up to a minute when the API server
// refuses); the function returned stops the watch.
func startKAIPodGroups(ctx context.Context, e *peerEnv, dyn dynamic.Interface) (func(), error) {
	ctx, cancel := context.WithCancel(ctx)
	f := informers.NewSharedInformerFactory(e.CS, 0)
	inf := f.Batch().V1().Jobs().Informer()
	write := func(o any) {
		job, ok := o.(*batchv1.Job)
		if !ok || job.Spec.Template.Spec.SchedulerName != kaiSchedulerName || job.Spec.Template.Annotations[kaiPodGroupAnn] == "" {
			return
		}
		pg := kaiPodGroup(job)
		wait := 100 * time.Millisecond
		for deadline := time.Now().Add(time.Minute); ; {
			_, err := dyn.Resource(kaiPodGroupGVR).Namespace(job.Namespace).Create(ctx, pg, metav1.CreateOptions{})
			if err == nil || apierrors.IsAlreadyExists(err) {
				return
			}
			if ctx.Err() != nil || time.Now().After(deadline) {
				e.logf("PodGroup %s/%s: %v", job.Namespace, pg.GetName(), err)
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			wait = min(2*wait, 5*time.Second)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: write}); err != nil {
		cancel()
		return nil, err
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		cancel()
		f.Shutdown()
		return nil, fmt.Errorf("the Job watch for KAI's PodGroups did not sync")
	}
	return func() { cancel(); f.Shutdown() }, nil
}
