package arena

import (
	"context"
	"encoding/base64"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/gandiva-sched/gandiva/internal/kube"
)

// kueue: Kueue (sigs.k8s.io/kueue) admitting batch/v1 Jobs in front of the
// arena's kube-scheduler, which binds the pods of the Jobs it admitted.
// scripts/arena-peers kueue builds its manager and keeps its
// CustomResourceDefinitions and webhook configurations beside it.
func init() {
	registerPeer("kueue", &peer{decorate: decorateKueue, missing: kueueMissing, start: startKueue})
}

// kueueTag is the release scripts/arena-peers builds (KUEUE_TAG there).
const kueueTag = "v0.17.0"

// Kueue's names the arena uses.
const (
	// kueueQueueLabel puts a Job in a LocalQueue of its namespace.
	kueueQueueLabel = "kueue.x-k8s.io/queue-name"
	// kueueLocalQueue is each namespace's LocalQueue.
	kueueLocalQueue = "arena"
	// kueueNamespace is where the manager keeps its webhook Secret.
	kueueNamespace = "kueue-system"
	// kueueCohort holds every namespace's ClusterQueue.
	kueueCohort = "arena"
)

var kueueGroup = schema.GroupVersion{Group: "kueue.x-k8s.io", Version: "v1beta2"}

// kueueDir is where scripts/arena-peers puts Kueue.
func kueueDir() string { return peerDir("kueue", kueueTag) }

// kueueMissing says what of Kueue's build is not there.
func kueueMissing(*Config) string {
	d := kueueDir()
	for _, f := range []string{"bin/kueue", "crd/kueue.x-k8s.io_clusterqueues.yaml", "webhook/manifests.yaml"} {
		if _, err := os.Stat(filepath.Join(d, f)); err != nil {
			return fmt.Sprintf("Kueue %s is not built (%s is missing): build it once with `scripts/arena-peers kueue` (about 5 minutes)", kueueTag, filepath.Join(d, f))
		}
	}
	return ""
}

// decorateKueue puts the Job in its namespace's LocalQueue; Kueue's
// mutating webhook then creates it suspended, and Kueue unsuspends it when
// it admits its Workload.
func decorateKueue(_ Scheduler, _ *PlannedJob, job *batchv1.Job) {
	if job.Labels == nil {
		job.Labels = map[string]string{}
	}
	job.Labels[kueueQueueLabel] = kueueLocalQueue
}

// kueueConfig is Kueue's Configuration (namespace, health port, webhook
// port, certificate directory, QPS, burst, waitForPodsReady's timeout,
// recovery timeout, backoff base and maximum in seconds). Integrations:
// batch/v1 Jobs only. Internal certificate management stays on (Kueue
// otherwise reads its metrics certificate from a fixed path under /etc):
// its rotator finds the Secret the arena wrote with a CA and a certificate
// for 127.0.0.1 valid for years, keeps them, and only injects that CA into
// the webhook configurations and conversion webhooks, which point at
// 127.0.0.1. Metrics and the visibility server are off.
const kueueConfig = `apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: %s
health:
  healthProbeBindAddress: 127.0.0.1:%d
metrics:
  bindAddress: "0"
webhook:
  host: 127.0.0.1
  port: %d
  certDir: %s
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: true
clientConnection:
  qps: %g
  burst: %d
manageJobsWithoutQueueName: false
waitForPodsReady:
  timeout: %ds
  recoveryTimeout: %ds
  blockAdmission: true
  requeuingStrategy:
    timestamp: Eviction
    backoffBaseSeconds: %d
    backoffMaxSeconds: %d
fairSharing:
  preemptionStrategies: [LessThanOrEqualToFinalShare, LessThanInitialShare]
integrations:
  frameworks:
  - batch/job
`

// kueueWait is waitForPodsReady's times in wall seconds: Kueue's
// documented 10-minute timeout, 3-minute recovery timeout and 60 s to
// 3600 s backoff, in trace time divided by the speed (as the arena divides
// Gandiva's policies' time constants), the timeouts at least 15 s and the
// backoff at least 1 s so that a loaded API server does not evict gangs
// that are starting.
func kueueWait(speed float64) (timeout, recovery, base, maxBackoff int) {
	sec := func(trace, floor float64) int { return int(math.Ceil(max(trace/speed, floor))) }
	return sec(600, 15), sec(180, 15), sec(60, 1), sec(3600, 1)
}

// startKueue installs Kueue's CustomResourceDefinitions, starts its
// manager with its webhooks served on 127.0.0.1, waits until the API
// server calls them, creates the queues (kueueQueues) and starts the
// arena's kube-scheduler.
func startKueue(ctx context.Context, e *peerEnv) (*group, error) {
	d := kueueDir()
	dyn, err := dynamic.NewForConfig(e.Plane.Config())
	if err != nil {
		return nil, err
	}
	webhookPort, err := freePort()
	if err != nil {
		return nil, err
	}
	healthPort, err := freePort()
	if err != nil {
		return nil, err
	}
	certs, err := newWebhookTLS("kueue-ca", "kueue-webhook-service."+kueueNamespace+".svc")
	if err != nil {
		return nil, err
	}
	// CRDs, the five with several versions converted by Kueue's webhook.
	crds, err := kueueCRDs(filepath.Join(d, "crd"), webhookPort, certs.CA)
	if err != nil {
		return nil, err
	}
	crdFile := filepath.Join(e.Dir, "kueue-crds.yaml")
	if err := os.WriteFile(crdFile, crds, 0o600); err != nil {
		return nil, err
	}
	if err := installCRDs(ctx, dyn, crdFile); err != nil {
		return nil, err
	}
	if _, err := e.CS.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kueueNamespace}}, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating namespace %s: %w", kueueNamespace, err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: kueueNamespace, Name: "kueue-webhook-server-cert"},
		Data: map[string][]byte{"ca.crt": certs.CA, "ca.key": certs.CAKey, "tls.crt": certs.Cert, "tls.key": certs.Key}}
	if _, err := e.CS.CoreV1().Secrets(kueueNamespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating Kueue's webhook Secret: %w", err)
	}
	certDir := filepath.Join(e.Dir, "kueue-certs")
	if err := certs.WriteServing(certDir); err != nil {
		return nil, err
	}
	qps := e.Config.QPS
	to, rec, base, maxB := kueueWait(e.Config.Speed)
	conf := filepath.Join(e.Dir, "kueue.yaml")
	cfg := fmt.Sprintf(kueueConfig, kueueNamespace, healthPort, webhookPort, certDir, qps, int(2*qps), to, rec, base, maxB)
	if err := os.WriteFile(conf, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	g := &group{}
	t0 := time.Now()
	if _, err := g.startChild(e.Dir, "kueue", []string{filepath.Join(d, "bin", "kueue"), "--config=" + conf,
		"--feature-gates=VisibilityOnDemand=false", "--zap-log-level=info"}, "KUBECONFIG="+e.Kubeconfig); err != nil {
		return nil, err
	}
	if err := waitReady(ctx, g, fmt.Sprintf("http://127.0.0.1:%d/readyz", healthPort), 3*time.Minute); err != nil {
		return g, fmt.Errorf("Kueue: %w\nits log:\n%s", err, g.tail(30))
	}
	name := func(n string) string { return "kueue-" + n }
	if err := installWebhooks(ctx, e.CS, filepath.Join(d, "webhook", "manifests.yaml"), name,
		rulesOnGroups("batch", kueueGroup.Group), webhookPort, certs.CA); err != nil {
		return g, err
	}
	if err := kueueProbe(ctx, e, g); err != nil {
		return g, err
	}
	if err := kueueQueues(ctx, e, dyn); err != nil {
		return g, err
	}
	e.logf("Kueue %s ready in %.1f s: %d ClusterQueues in cohort %s, waitForPodsReady timeout %d s", kueueTag, time.Since(t0).Seconds(), len(e.Config.Plan.Namespaces), kueueCohort, to)
	if err := g.startKubeSchedulerIn(e); err != nil {
		return g, err
	}
	return g, nil
}

// kueueCRDs is the YAML of the CustomResourceDefinitions in dir, those
// Kueue's manager converts between versions (its rotator injects its CA
// into exactly these) given a conversion webhook at 127.0.0.1:port.
func kueueCRDs(dir string, port int, caPEM []byte) ([]byte, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no CustomResourceDefinitions in %s", dir)
	}
	sort.Strings(files)
	converted := map[string]bool{"localqueues": true, "clusterqueues": true, "workloads": true, "cohorts": true, "multikueueclusters": true}
	var out []byte
	for _, f := range files {
		objs, err := readObjects(f)
		if err != nil {
			return nil, err
		}
		for _, u := range objs {
			if plural, _, _ := strings.Cut(u.GetName(), "."); converted[plural] {
				conv := map[string]any{
					"strategy": "Webhook",
					"webhook": map[string]any{
						"clientConfig": map[string]any{
							"url":      fmt.Sprintf("https://127.0.0.1:%d/convert", port),
							"caBundle": base64.StdEncoding.EncodeToString(caPEM),
						},
						"conversionReviewVersions": []any{"v1"},
					},
				}
				if err := unstructured.SetNestedField(u.Object, conv, "spec", "conversion"); err != nil {
					return nil, err
				}
			}
			b, err := yaml.Marshal(u.Object)
			if err != nil {
				return nil, err
			}
			out = append(append(out, "---\n"...), b...)
		}
	}
	return out, nil
}

// kueueProbe waits until the API server calls Kueue's Job webhook: a
// server-side dry run of a Job in a LocalQueue comes back suspended.
func kueueProbe(ctx context.Context, e *peerEnv, g *group) error {
	ns := e.Config.Plan.Namespaces[0]
	n := int32(1)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kueue-probe", Labels: map[string]string{kueueQueueLabel: kueueLocalQueue}},
		Spec: batchv1.JobSpec{Parallelism: &n, Completions: &n, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "probe", Image: "probe"}}}}},
	}
	var last error
	err := waitFor(ctx, time.Minute, func() (bool, error) {
		if g.exited() {
			return false, fmt.Errorf("Kueue exited")
		}
		got, err := e.CS.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			last = err
			return false, nil
		}
		return got.Spec.Suspend != nil && *got.Spec.Suspend, nil
	}, "the API server to call Kueue's Job webhook")
	if err != nil && last != nil {
		err = fmt.Errorf("%w (last: %v)", err, last)
	}
	return err
}

// kueueQueues creates, as Kueue's documentation lays out GPU training for
// several teams: a ResourceFlavor per GPU type (its nodes by the type's
// label); per namespace a ClusterQueue in one cohort whose nominal quota
// of each flavor's GPUs is its fair share (the type's GPUs divided among
// the namespaces, the remainder one each to the first in name order), CPU
// and memory generous, borrowing unlimited, preemption to reclaim nominal
// quota from any borrower (reclaimWithinCohort: Any) and of lower priority
// within the queue (withinClusterQueue: LowerPriority; the arena's jobs
// have equal priority); borrowWithinCohort stays off, as Kueue allows only
// without fair sharing; and a LocalQueue "arena" in each namespace. It
// waits until every ClusterQueue is Active.
func kueueQueues(ctx context.Context, e *peerEnv, dyn dynamic.Interface) error {
	gpus := map[string]int{}
	for _, n := range e.Config.Plan.Nodes {
		gpus[n.Labels[labelGPUType]] += n.GPUs
	}
	var types []string
	for t := range gpus {
		types = append(types, t)
	}
	sort.Strings(types)
	rf := kueueGroup.WithResource("resourceflavors")
	cq := kueueGroup.WithResource("clusterqueues")
	lq := kueueGroup.WithResource("localqueues")
	create := func(gvr schema.GroupVersionResource, ns string, obj map[string]any) error {
		u := &unstructured.Unstructured{Object: obj}
		u.SetAPIVersion(kueueGroup.String())
		var err error
		if ns == "" {
			_, err = dyn.Resource(gvr).Create(ctx, u, metav1.CreateOptions{})
		} else {
			_, err = dyn.Resource(gvr).Namespace(ns).Create(ctx, u, metav1.CreateOptions{})
		}
		if err != nil {
			return fmt.Errorf("creating %s %s: %w", u.GetKind(), u.GetName(), err)
		}
		return nil
	}
	flavor := map[string]string{}
	for _, t := range types {
		flavor[t] = dnsLabel(t, 63)
		if err := create(rf, "", map[string]any{"kind": "ResourceFlavor", "metadata": map[string]any{"name": flavor[t]},
			"spec": map[string]any{"nodeLabels": map[string]any{labelGPUType: t}}}); err != nil {
			return err
		}
	}
	nss := e.Config.Plan.Namespaces
	for i, ns := range nss {
		var fl []any
		for _, t := range types {
			q := gpus[t] / len(nss)
			if i < gpus[t]%len(nss) {
				q++
			}
			fl = append(fl, map[string]any{"name": flavor[t], "resources": []any{
				map[string]any{"name": "cpu", "nominalQuota": "10k"},
				map[string]any{"name": "memory", "nominalQuota": "100Ti"},
				map[string]any{"name": string(kube.GPU), "nominalQuota": strconv.Itoa(q)},
			}})
		}
		spec := map[string]any{
			"cohortName":        kueueCohort,
			"namespaceSelector": map[string]any{"matchLabels": map[string]any{corev1.LabelMetadataName: ns}},
			"queueingStrategy":  "BestEffortFIFO",
			"resourceGroups":    []any{map[string]any{"coveredResources": []any{"cpu", "memory", string(kube.GPU)}, "flavors": fl}},
			"preemption":        map[string]any{"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
		}
		if err := create(cq, "", map[string]any{"kind": "ClusterQueue", "metadata": map[string]any{"name": "arena-" + ns}, "spec": spec}); err != nil {
			return err
		}
		if err := create(lq, ns, map[string]any{"kind": "LocalQueue", "metadata": map[string]any{"name": kueueLocalQueue, "namespace": ns},
			"spec": map[string]any{"clusterQueue": "arena-" + ns}}); err != nil {
			return err
		}
	}
	return waitFor(ctx, time.Minute, func() (bool, error) {
		for _, ns := range nss {
			got, err := dyn.Resource(cq).Get(ctx, "arena-"+ns, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			if err != nil {
				return false, err
			}
			if !kueueActive(got) {
				return false, nil
			}
		}
		return true, nil
	}, "Kueue's ClusterQueues to be Active")
}

// kueueActive reports whether a ClusterQueue's Active condition is True.
func kueueActive(u *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Active" && m["status"] == "True" {
			return true
		}
	}
	return false
}
