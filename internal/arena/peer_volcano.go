package arena

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// volcano: Volcano's scheduler (vc-scheduler) with its PodGroup and Queue
// controllers (vc-controller-manager), release volcanoTag, built from its
// source by `scripts/arena-peers volcano` into peerDir("volcano",
// volcanoTag): bin/vc-scheduler, bin/vc-controller-manager and crd/ (the
// release's CustomResourceDefinitions, config/crd/volcano/bases).
//
// Each Job is a gang: Volcano's PodGroup controller makes one PodGroup per
// Job (the pods' controlling owner) with minMember read from the Job's
// scheduling.volcano.sh/group-min-member annotation (its pods), in the
// queue its pods name in scheduling.volcano.sh/queue-name: one Queue per
// namespace, weight 1, reclaimable.
func init() {
	registerPeer("volcano", &peer{
		schedulerName: volcanoSchedulerName,
		decorate:      decorateVolcano,
		missing:       missingVolcano,
		start:         startVolcano,
	})
}

const (
	// volcanoTag is the release scripts/arena-peers builds (VOLCANO_TAG
	// there; a test checks that they agree).
	volcanoTag = "v1.14.4"
	// volcanoSchedulerName is the pods' schedulerName (Volcano's default).
	volcanoSchedulerName = "volcano"
	// annVolcanoMinMember on a Job is its PodGroup's minMember.
	annVolcanoMinMember = "scheduling.volcano.sh/group-min-member"
	// annVolcanoQueue on a pod is its PodGroup's queue.
	annVolcanoQueue = "scheduling.volcano.sh/queue-name"
)

// volcanoConfig is vc-scheduler's configuration: the actions and plugins
// of Volcano's own configuration with preemption and reclaim
// (installer/helm/chart/volcano/config/volcano-scheduler-ci.conf of the
// release) without overcommit, sla and network-topology-aware; binpack
// packs nvidia.com/gpu (the arguments binpack's documentation gives for
// it). Gang and DRF do not vote on victims (enablePreemptable: false, as
// in Volcano's configurations): with gang voting, no pod of a job running
// exactly its minMember could ever be taken, so reclaim would never act.
const volcanoConfig = `actions: "enqueue, allocate, preempt, reclaim, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
    arguments:
      binpack.weight: 10
      binpack.cpu: 1
      binpack.memory: 1
      binpack.resources: nvidia.com/gpu
      binpack.resources.nvidia.com/gpu: 2
`

var volcanoQueueGVR = schema.GroupVersionResource{Group: "scheduling.volcano.sh", Version: "v1beta1", Resource: "queues"}

// volcanoDir is where scripts/arena-peers builds Volcano.
func volcanoDir() string { return peerDir("volcano", volcanoTag) }

// missingVolcano says why Volcano cannot run: its build is missing or
// incomplete.
func missingVolcano(*Config) string {
	return missingPeer("Volcano", "volcano", volcanoTag, "vc-scheduler", "vc-controller-manager")
}

// volcanoQueue is the Queue of namespace ns's jobs.
func volcanoQueue(ns string) string { return ns }

// decorateVolcano makes j's Job one gang of its pods in its namespace's
// queue.
func decorateVolcano(_ Scheduler, j *PlannedJob, job *batchv1.Job) {
	if job.Annotations == nil {
		job.Annotations = map[string]string{}
	}
	job.Annotations[annVolcanoMinMember] = strconv.Itoa(j.Pods)
	if job.Spec.Template.Annotations == nil {
		job.Spec.Template.Annotations = map[string]string{}
	}
	job.Spec.Template.Annotations[annVolcanoQueue] = volcanoQueue(j.Namespace)
}

// volcanoQueueObject is namespace ns's Queue: weight 1 (equal shares),
// reclaimable (a queue over its share gives back to one under it).
func volcanoQueueObject(ns string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "scheduling.volcano.sh/v1beta1",
		"kind":       "Queue",
		"metadata":   map[string]any{"name": volcanoQueue(ns)},
		"spec":       map[string]any{"weight": int64(1), "reclaimable": true},
	}}
}

// startVolcano installs Volcano's CustomResourceDefinitions and a Queue
// per namespace, starts vc-controller-manager (PodGroup and Queue
// controllers only) and vc-scheduler, and returns once the queues are Open
// (the Queue controller works) and the scheduler made its default queue
// (it runs).
func startVolcano(ctx context.Context, e *peerEnv) (*group, error) {
	d := volcanoDir()
	crds, err := filepath.Glob(filepath.Join(d, "crd", "*.yaml"))
	if err != nil || len(crds) == 0 {
		return nil, fmt.Errorf("no CustomResourceDefinitions in %s/crd (run scripts/arena-peers volcano)", d)
	}
	dyn, err := dynamic.NewForConfig(e.Plane.Config())
	if err != nil {
		return nil, err
	}
	if err := installCRDs(ctx, dyn, crds...); err != nil {
		return nil, err
	}
	var queues []string
	for _, ns := range e.Config.Plan.Namespaces {
		q := volcanoQueueObject(ns)
		if _, err := dyn.Resource(volcanoQueueGVR).Create(ctx, q, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating Volcano queue %s: %w", q.GetName(), err)
		}
		queues = append(queues, q.GetName())
	}
	conf := filepath.Join(e.Dir, "volcano-scheduler.conf")
	if err := os.WriteFile(conf, []byte(volcanoConfig), 0o600); err != nil {
		return nil, err
	}
	qps := strconv.FormatFloat(e.Config.QPS, 'g', -1, 64)
	burst := strconv.Itoa(int(2 * e.Config.QPS))
	g := &group{}
	if _, err := g.startChild(e.Dir, "vc-controller-manager", []string{filepath.Join(d, "bin", "vc-controller-manager"),
		"--kubeconfig=" + e.Kubeconfig, "--controllers=pg-controller,queue-controller", "--scheduler-name=" + volcanoSchedulerName,
		"--leader-elect=false", "--kube-api-qps=" + qps, "--kube-api-burst=" + burst, "-v=2"}); err != nil {
		return g, err
	}
	if _, err := g.startChild(e.Dir, "vc-scheduler", []string{filepath.Join(d, "bin", "vc-scheduler"),
		"--kubeconfig=" + e.Kubeconfig, "--scheduler-conf=" + conf, "--scheduler-name=" + volcanoSchedulerName,
		"--leader-elect=false", "--cache-dumper=false", "--kube-api-qps=" + qps, "--kube-api-burst=" + burst, "-v=2"}); err != nil {
		return g, err
	}
	// Ready: every queue Open, and the scheduler's default queue made.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		waiting, err := volcanoNotReady(ctx, dyn, queues)
		if err != nil {
			return g, err
		}
		if waiting == "" {
			e.logf("Volcano %s: %d queues open", volcanoTag, len(queues))
			return g, nil
		}
		if g.exited() {
			return g, fmt.Errorf("Volcano exited while starting:\n%s", g.tail(20))
		}
		if time.Now().After(deadline) {
			return g, fmt.Errorf("Volcano not ready after 2 minutes: %s\n%s", waiting, g.tail(20))
		}
		select {
		case <-ctx.Done():
			return g, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// volcanoNotReady says what Volcano's start still waits for ("" when
// nothing): a queue not Open, or the scheduler's default queue absent.
func volcanoNotReady(ctx context.Context, dyn dynamic.Interface, queues []string) (string, error) {
	if _, err := dyn.Resource(volcanoQueueGVR).Get(ctx, "default", metav1.GetOptions{}); apierrors.IsNotFound(err) {
		return "vc-scheduler has not made its default queue", nil
	} else if err != nil {
		return "", err
	}
	for _, name := range queues {
		q, err := dyn.Resource(volcanoQueueGVR).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		if st, _, _ := unstructured.NestedString(q.Object, "status", "state"); st != "Open" {
			return fmt.Sprintf("queue %s is %q, not Open", name, st), nil
		}
	}
	return "", nil
}
