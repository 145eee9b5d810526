// Package examples tests the example manifests of deploy/examples: that
// docs/KUBERNETES.md shows each as it is, and that each, applied to the
// local control plane with its kind's real controller running, is
// scheduled by gandiva kube (a package of its own so that its control
// plane test runs beside internal/kube's).
package examples

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/gandiva-sched/gandiva/internal/kube"
	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
	"github.com/gandiva-sched/gandiva/internal/kube/ctl"
	"github.com/gandiva-sched/gandiva/internal/kube/kubetest"
	wl "github.com/gandiva-sched/gandiva/internal/kube/workloads"
)

const docPath = "../../docs/KUBERNETES.md"

// shown are the examples docs/KUBERNETES.md shows in full, each in a yaml
// block whose first line is the comment "# deploy/examples/NAME: ...".
var shown = []string{"jobset.yaml", "trainjob.yaml", "rayjob.yaml", "leaderworkerset.yaml", "pytorchjob.yaml", "gandivaqueue.yaml"}

// docBlocks are the fenced yaml blocks of a Markdown text that start with
// a line "# deploy/examples/NAME...", by NAME, each as its lines joined
// (the block's indentation, a list item's, removed).
func docBlocks(doc string) (map[string]string, error) {
	out := map[string]string{}
	lines := strings.Split(doc, "\n")
	for i := 0; i < len(lines); i++ {
		fence := strings.TrimLeft(lines[i], " ")
		if fence != "```yaml" {
			continue
		}
		indent := len(lines[i]) - len(fence)
		var body []string
		j := i + 1
		for ; j < len(lines) && strings.TrimSpace(lines[j]) != "```"; j++ {
			l := lines[j]
			if strings.TrimSpace(l) != "" && (len(l) < indent || strings.TrimSpace(l[:indent]) != "") {
				return nil, fmt.Errorf("line %d: less indented than its block's fence", j+1)
			}
			if len(l) >= indent {
				l = l[indent:]
			}
			body = append(body, l)
		}
		if j == len(lines) {
			return nil, fmt.Errorf("line %d: a yaml block never closed", i+1)
		}
		if len(body) > 0 && strings.HasPrefix(body[0], "# deploy/examples/") {
			name, _, _ := strings.Cut(strings.TrimPrefix(body[0], "# deploy/examples/"), ":")
			if _, dup := out[name]; dup {
				return nil, fmt.Errorf("line %d: deploy/examples/%s shown twice", i+1, name)
			}
			out[name] = strings.Join(body, "\n") + "\n"
		}
		i = j
	}
	return out, nil
}

// docs/KUBERNETES.md shows each example of a workload kind exactly as its
// file (a block that starts "# deploy/examples/NAME"), and links to the
// others; every example file is a valid manifest of named objects.
func TestDocsShowExamples(t *testing.T) {
	doc, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := docBlocks(string(doc))
	if err != nil {
		t.Fatalf("%s: %v", docPath, err)
	}
	files, err := filepath.Glob("*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if objs := decode(t, f); len(objs) == 0 {
			t.Errorf("%s: no objects", f)
		}
		b, ok := blocks[f]
		switch {
		case ok && b != string(data):
			t.Errorf("%s shows deploy/examples/%s otherwise than the file: make them equal\n--- the doc:\n%s--- the file:\n%s", docPath, f, b, data)
		case !ok && slices.Contains(shown, f):
			t.Errorf("%s does not show deploy/examples/%s (a yaml block whose first line is its first line)", docPath, f)
		case !ok && !bytes.Contains(doc, []byte("(../deploy/examples/"+f+")")):
			t.Errorf("%s neither shows nor links to deploy/examples/%s", docPath, f)
		}
		delete(blocks, f)
	}
	for name := range blocks {
		t.Errorf("%s shows deploy/examples/%s, which does not exist", docPath, name)
	}
}

// A block that differs from its file by one character is found.
func TestDocBlocksCompared(t *testing.T) {
	doc := "text\n\n   ```yaml\n   # deploy/examples/x.yaml: an example\n   kind: X\n\n   ```\n\n```yaml\nkind: Y\n```\n"
	b, err := docBlocks(doc)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 1 || b["x.yaml"] != "# deploy/examples/x.yaml: an example\nkind: X\n\n" {
		t.Fatalf("blocks %q", b)
	}
	if _, err := docBlocks("```yaml\n# deploy/examples/x.yaml\n"); err == nil {
		t.Fatal("an unclosed block was accepted")
	}
	if _, err := docBlocks("  ```yaml\n x\n  ```\n"); err == nil {
		t.Fatal("a line less indented than its fence was accepted")
	}
}

// decode reads a manifest's objects; each must have an apiVersion, a kind
// and a name.
func decode(t testing.TB, file string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	for i, doc := range strings.Split(string(data), "\n---\n") {
		m := map[string]any{}
		if err := yaml.UnmarshalStrict([]byte(doc), &m); err != nil {
			t.Fatalf("%s: document %d: %v", file, i+1, err)
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetAPIVersion() == "" || u.GetKind() == "" || u.GetName() == "" {
			t.Fatalf("%s: document %d has no apiVersion, kind or name", file, i+1)
		}
		out = append(out, u)
	}
	return out
}

// resources are the resources of the examples' kinds.
var resources = map[string]string{
	"Job": "jobs", "JobSet": "jobsets", "TrainJob": "trainjobs", "TrainingRuntime": "trainingruntimes",
	"RayJob": "rayjobs", "LeaderWorkerSet": "leaderworkersets", "PyTorchJob": "pytorchjobs", "GandivaQueue": "gandivaqueues",
}

// apply creates the objects of a manifest, as kubectl apply -f would.
func apply(t testing.TB, dc dynamic.Interface, file string) []*unstructured.Unstructured {
	t.Helper()
	objs := decode(t, file)
	for _, u := range objs {
		res, ok := resources[u.GetKind()]
		if !ok {
			t.Fatalf("%s: kind %s is not one this test knows", file, u.GetKind())
		}
		gvr := u.GroupVersionKind().GroupVersion().WithResource(res)
		var err error
		if u.GetNamespace() == "" {
			_, err = dc.Resource(gvr).Create(context.Background(), u, metav1.CreateOptions{})
		} else {
			_, err = dc.Resource(gvr).Namespace(u.GetNamespace()).Create(context.Background(), u, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatalf("%s: creating %s %s: %v", file, u.GetKind(), u.GetName(), err)
		}
	}
	return objs
}

// installCRD installs a CustomResourceDefinition from a file and waits
// until it is established.
func installCRD(t testing.TB, dc dynamic.Interface, file string) {
	t.Helper()
	objs := decode(t, file)
	gvr := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	for _, crd := range objs {
		if _, err := dc.Resource(gvr).Create(context.Background(), crd, metav1.CreateOptions{}); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		kubetest.WaitCRDEstablished(t, dc, crd.GetName(), 30*time.Second)
	}
}

// example is one workload example and how its pods are found.
type example struct {
	file     string
	selector string // its pods' labels
	pods     int    // its gang
}

// startDev starts the local cluster of `gandiva kube dev` with o (as its
// command does: kube.StartDev), for the test: skipped when a binary is not
// built (failed under CI=true), stopped at the end, the controllers' and
// the plane's logs shown when the test failed.
func startDev(t *testing.T, o kube.DevOptions) *kube.Dev {
	t.Helper()
	if err := cplane.Check(cplane.BinDir()); err != nil {
		kubetest.Unbuilt(t, err)
	}
	if _, err := ctl.Check(o.Workloads...); err != nil {
		kubetest.Unbuilt(t, err)
	}
	t0 := time.Now()
	d, err := kube.StartDev(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kube dev up in %.1f s at %s", time.Since(t0).Seconds(), d.Plane.URL)
	t.Cleanup(func() {
		if t.Failed() {
			if d.Workloads != nil {
				for _, n := range d.Workloads.Order {
					c := d.Workloads.ByName[n]
					t.Logf("%s controller log (%s):\n%s", n, c.Log, cplane.Tail(c.Log, 60))
				}
			}
			t.Logf("control plane logs:\n%s", d.Plane.Logs(60))
		}
		if err := d.Stop(); err != nil {
			t.Error(err)
		}
	})
	return d
}

// Every workload example of deploy/examples, applied as the docs say
// (kubectl apply -f) to the local cluster of `gandiva kube dev --nodes 6
// --gpus 2 --workloads all` (kube.StartDev, which runs each kind's real
// controller: Kubernetes' Job controller, JobSet, Kubeflow Trainer,
// LeaderWorkerSet with Kubernetes' StatefulSet controller, KubeRay, the
// Kubeflow Training Operator v1), is
// scheduled by gandiva kube: its gang's pods are bound by gandiva (no
// other scheduler runs), and the workload object carries gandiva.io/state
// running (the RayJob's head, which names no scheduler, stays pending: no
// kube-scheduler runs here); the example GandivaQueues are valid; every
// controller still runs at the end. deploy/examples/shared-job.yaml needs
// shared nodes and their agent: internal/kube's TestDevSharedNodes runs
// it.
func TestExamplesScheduled(t *testing.T) {
	all, err := ctl.Workloads("all")
	if err != nil {
		t.Fatal(err)
	}
	// 12 GPUs: the 6 examples' gangs of 2 GPUs at once
	d := startDev(t, kube.DevOptions{Nodes: 6, GPUs: 2, Workloads: all})
	p := d.Plane
	cs := kubetest.Client(t, p)
	dc := kubetest.Dynamic(t, p)
	installCRD(t, dc, "../base/crds/gandivaqueues.yaml")

	wl.RunGandivaChecked(t, p, kube.Options{Policy: "fifo"})

	examples := []example{
		{"job.yaml", "batch.kubernetes.io/job-name=resnet", 2},
		{"jobset.yaml", "jobset.sigs.k8s.io/jobset-name=bert", 2},
		{"trainjob.yaml", "jobset.sigs.k8s.io/jobset-name=llama-finetune", 2},
		{"rayjob.yaml", "ray.io/node-type=worker", 2},
		{"leaderworkerset.yaml", kubetest.LWSNameLabel + "=serve", 2},
		{"pytorchjob.yaml", "training.kubeflow.org/job-name=mnist", 2},
	}
	workloads := map[string]*unstructured.Unstructured{} // by file: the object Gandiva schedules
	for _, ex := range examples {
		for _, u := range apply(t, dc, ex.file) {
			switch u.GetKind() {
			case "TrainingRuntime":
			case "TrainJob": // scheduled as its JobSet
				w := &unstructured.Unstructured{}
				w.SetAPIVersion("jobset.x-k8s.io/v1alpha2")
				w.SetKind("JobSet")
				w.SetNamespace(u.GetNamespace())
				w.SetName(u.GetName())
				workloads[ex.file] = w
			default:
				workloads[ex.file] = u
			}
		}
	}
	apply(t, dc, "gandivaqueue.yaml")

	for _, ex := range examples {
		kubetest.Eventually(t, 3*time.Minute, ex.file+": its pods bound by gandiva", func() (bool, error) {
			bound, err := boundPods(cs, "team-a", ex.selector)
			if err != nil {
				return false, err
			}
			return len(bound) == ex.pods, fmt.Errorf("%d of %d pods bound", len(bound), ex.pods)
		})
		w := workloads[ex.file]
		gvr := w.GroupVersionKind().GroupVersion().WithResource(resources[w.GetKind()])
		kubetest.Eventually(t, time.Minute, ex.file+": "+w.GetKind()+" "+w.GetName()+" running by gandiva", func() (bool, error) {
			got, err := dc.Resource(gvr).Namespace(w.GetNamespace()).Get(context.Background(), w.GetName(), metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			st := got.GetAnnotations()[kube.AnnState]
			return st == kube.StateRunning, fmt.Errorf("%s %q", kube.AnnState, st)
		})
		t.Logf("%s: %d pods bound by gandiva", ex.file, ex.pods)
	}
	// what `kubectl gandiva jobs` shows: every example as its user made
	// it (the TrainJob, not its JobSet), running, with GPUs
	kubetest.Eventually(t, time.Minute, "kube.ListKinds shows every example running", func() (bool, error) {
		views, notes, err := kube.ListKinds(context.Background(), cs, dc, "team-a")
		if err != nil || len(notes) > 0 {
			return false, fmt.Errorf("%v (notes %q)", err, notes)
		}
		got := map[string]string{}
		for _, v := range views {
			got[v.Kind+"/"+v.Name] = fmt.Sprintf("%s, GPUs %t", v.State, v.GPUs > 0)
		}
		for _, ex := range examples {
			w := workloads[ex.file]
			kind := w.GetKind()
			if ex.file == "trainjob.yaml" {
				kind = "TrainJob"
			}
			if g := got[kind+"/"+w.GetName()]; g != kube.StateRunning+", GPUs true" {
				return false, fmt.Errorf("%s/%s: %q, want running with its GPUs (listed: %v)", kind, w.GetName(), g, got)
			}
		}
		return true, nil
	})
	// the RayJob's head names no scheduler: it is kube-scheduler's, which
	// does not run here, and gandiva leaves it alone
	heads, err := cs.CoreV1().Pods("team-a").List(context.Background(), metav1.ListOptions{LabelSelector: "ray.io/node-type=head"})
	if err != nil {
		t.Fatal(err)
	}
	if len(heads.Items) != 1 || heads.Items[0].Spec.NodeName != "" || heads.Items[0].Spec.SchedulerName == kube.SchedulerName {
		t.Errorf("the RayJob's head pods: %d, want 1, unbound and not gandiva's", len(heads.Items))
	}
	for _, n := range d.Workloads.Order {
		if d.Workloads.ByName[n].Exited() {
			t.Errorf("the %s controller exited (log %s):\n%s", n, d.Workloads.ByName[n].Log, cplane.Tail(d.Workloads.ByName[n].Log, 30))
		}
	}
	for _, q := range []string{"research", "vision"} {
		kubetest.Eventually(t, time.Minute, "GandivaQueue "+q+" valid", func() (bool, error) {
			got, err := dc.Resource(kube.QueueGVR).Get(context.Background(), q, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			for _, c := range conds {
				if m, ok := c.(map[string]any); ok && m["type"] == "Valid" {
					return m["status"] == "True", fmt.Errorf("Valid %v: %v", m["status"], m["message"])
				}
			}
			return false, fmt.Errorf("no Valid condition")
		})
	}
}

// boundPods are the live pods of ns with the selector that are bound to a
// node and carry a Scheduled Event from gandiva.
func boundPods(cs kubernetes.Interface, ns, selector string) ([]string, error) {
	ctx := context.Background()
	l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	evs, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=Scheduled"})
	if err != nil {
		return nil, err
	}
	byGandiva := map[string]bool{}
	for _, e := range evs.Items {
		if e.Source.Component == "gandiva" && e.InvolvedObject.Kind == "Pod" {
			byGandiva[string(e.InvolvedObject.UID)] = true
		}
	}
	var out []string
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil && p.Spec.NodeName != "" && p.Status.Phase != corev1.PodFailed && byGandiva[string(p.UID)] {
			out = append(out, p.Name)
		}
	}
	return out, nil
}
