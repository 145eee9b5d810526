// Package trainers runs Gandiva's workload kinds other than the batch/v1
// Job with pods that are real processes: examples/pytorch/ddp.py, a
// torch.distributed (gloo, CPU) DDP training loop, as a 2-rank gang whose
// pods the Kubelet stand-in (internal/kube/kubetest) runs on this machine.
// A suspension (SIGTERM to both ranks) makes the gang checkpoint once and
// exit 143; the resumed ranks restore; the final weights must be
// bit-identical to an uninterrupted 2-rank run's. The tests need a Python
// with torch (torchtest.Python: skipped without one, failed under CI=true)
// and, where they run one, the kind's real controller (scripts/kube-workloads).
// A package of its own so that they run beside internal/kube/workloads'.
package trainers

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/gandiva-sched/gandiva/client/protocol"
	"github.com/gandiva-sched/gandiva/internal/kube"
	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
	"github.com/gandiva-sched/gandiva/internal/kube/kubetest"
	wl "github.com/gandiva-sched/gandiva/internal/kube/workloads"
	"github.com/gandiva-sched/gandiva/internal/torchtest"
)

// The gang's training: 200 mini-batches of 50 ms (10 s) in the cluster.
const (
	steps    = 200
	stepTime = "0.05"
)

// cluster is a local control plane with the Kubelet stand-in running
// ddp.py's ranks, Gandiva, and where the ranks write.
type cluster struct {
	plane   *cplane.Plane
	cs      kubernetes.Interface
	dc      dynamic.Interface
	kubelet *kubetest.Kubelet
	nodes   []string
	py      string
	script  string
	dir     string // checkpoints, results and loss logs
	port    int    // rank 0's rendezvous port
	// want is the result of an uninterrupted 2-rank run
	want torchtest.Result
}

// start runs the reference (an uninterrupted 2-rank ddp.py, outside
// Gandiva), then a control plane with the named workload controllers and
// the CRDs (files relative to the repository root), nodes one-GPU nodes,
// the Kubelet stand-in, and `gandiva kube` under tiresias-l (a job drops
// to the lower queue after 1 GPU-second of service).
func start(t *testing.T, nodes int, controllers []string, crds ...string) *cluster {
	t.Helper()
	py := torchtest.Python(t)
	script := torchtest.Script(t, wl.RepoRoot(t))
	c := &cluster{py: py, script: script, dir: t.TempDir(), port: torchtest.FreePort(t)}
	c.want = uninterrupted(t, py, script)
	p := kubetest.Start(t, cplane.Options{Kwok: true, Controllers: true})
	c.plane = p
	c.cs = kubetest.Client(t, p)
	// the namespaces first: a controller may need its own (the Training
	// Operator's, gandiva-system, which ctl.Start makes where missing)
	kubetest.Namespace(t, c.cs, wl.NS)
	kubetest.Namespace(t, c.cs, "gandiva-system")
	if len(controllers) > 0 {
		kubetest.StartControllers(t, p, controllers...)
	}
	var err error
	if c.dc, err = dynamic.NewForConfig(p.Config()); err != nil {
		t.Fatal(err)
	}
	for _, f := range crds {
		wl.InstallCRD(t, c.dc, f)
	}
	c.kubelet = kubetest.StartKubelet(t, c.cs, map[string]string{"python": py})
	c.nodes = kubetest.AddNodes(t, c.cs, kubetest.Nodes{Count: nodes, GPUs: 1})
	wl.RunGandiva(t, p, kube.Options{Policy: "tiresias-l:limits=1/100000"})
	return c
}

// ddpArgs are ddp.py's arguments but --out and --loss-log.
func ddpArgs(steps int, stepTime string) []string {
	return []string{"--steps", strconv.Itoa(steps), "--global-batch", "8", "--seed", "1",
		"--step-time", stepTime, "--device", "cpu", "--backend", "gloo"}
}

var (
	refOnce sync.Once
	ref     torchtest.Result
)

// uninterrupted returns the result of ddp.py's 2 ranks run outside
// Gandiva: what a gang that was suspended and moved must end with. It
// runs them once for the package's tests (they all train alike).
func uninterrupted(t *testing.T, py, script string) torchtest.Result {
	t.Helper()
	refOnce.Do(func() { ref = runUninterrupted(t, py, script) })
	if ref.Checksum == "" {
		t.Fatal("the uninterrupted run failed (in an earlier test)")
	}
	return ref
}

// runUninterrupted runs ddp.py's 2 ranks outside Gandiva and returns rank
// 0's result.
func runUninterrupted(t *testing.T, py, script string) torchtest.Result {
	t.Helper()
	dir := t.TempDir()
	out := filepath.Join(dir, "result.json")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a rank that hangs must not hang the test
	defer cancel()
	res := torchtest.Run(ctx, t, torchtest.Ranks{Python: py, Args: append([]string{script, "--out", out}, ddpArgs(steps, "0")...), Out: out,
		Dir: dir, Env: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "PYTHONDONTWRITEBYTECODE=1"}, World: 2})
	if res.WorldSize != 2 || res.Restored || res.Start != 0 || res.Steps != steps {
		t.Fatalf("uninterrupted ddp.py: result %+v, want world size 2, %d steps from 0, not restored", res, steps)
	}
	return res
}

// template is the pod template of one rank of workload name's gang: one
// GPU, schedulerName gandiva, played by the Kubelet stand-in (container
// container running ddp.py), checkpointing to dir/NAME (the gang's shared
// storage), rank 0 writing its result to dir/NAME.json and its loss curve
// to dir/NAME.loss. The rank is RANK in env if there, else the pod's
// JOB_COMPLETION_INDEX (an Indexed Job's).
func (c *cluster) template(name, container string, env ...corev1.EnvVar) corev1.PodTemplateSpec {
	cmd := append([]string{"python", c.script}, ddpArgs(steps, stepTime)...)
	cmd = append(cmd, "--out", filepath.Join(c.dir, name+".json"), "--loss-log", filepath.Join(c.dir, name+".loss"))
	env = append([]corev1.EnvVar{
		{Name: "WORLD_SIZE", Value: "2"},
		// every pod is a process of this machine; in a cluster this is
		// rank 0's pod by its DNS name
		{Name: "MASTER_ADDR", Value: "127.0.0.1"},
		{Name: "MASTER_PORT", Value: strconv.Itoa(c.port)},
		{Name: "GANDIVA_CHECKPOINT_DIR", Value: filepath.Join(c.dir, name)},
		{Name: "GANDIVA_RESTORE", Value: "1"},
		// a rank that dies or hangs stops its peers within this, inside
		// the tests' waits
		{Name: "GANDIVA_GANG_TIMEOUT", Value: "120"},
		{Name: "PYTHONDONTWRITEBYTECODE", Value: "1"},
		{Name: "PYTHONUNBUFFERED", Value: "1"},
	}, env...)
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{kubetest.LabelPlayed: "true"}},
		Spec: corev1.PodSpec{
			SchedulerName:                 kube.SchedulerName,
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To[int64](120),
			Containers: []corev1.Container{{Name: container, Image: "gandiva-example", Command: cmd, Env: env,
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{kube.GPU: resource.MustParse("1")}}}},
		},
	}
}

// procs are the Kubelet's processes of workload name's pods (named
// NAME-...), in start order.
func (c *cluster) procs(name string) []*kubetest.Process {
	var out []*kubetest.Process
	for _, pr := range c.kubelet.Processes() {
		if strings.HasPrefix(pr.Pod, name+"-") {
			out = append(out, pr)
		}
	}
	return out
}

// ended reports whether every process ended.
func ended(prs []*kubetest.Process) bool {
	for _, pr := range prs {
		if pr.End.IsZero() {
			return false
		}
	}
	return true
}

// training waits until workload name's gang trains: rank 0 logged 10
// mini-batches, its 2 ranks are processes. It returns them.
func (c *cluster) training(t *testing.T, name string) []*kubetest.Process {
	t.Helper()
	kubetest.Eventually(t, 3*time.Minute, name+"'s first mini-batches", func() (bool, error) {
		b, err := os.ReadFile(filepath.Join(c.dir, name+".loss"))
		return err == nil && strings.Count(string(b), "\n") >= 10, err
	})
	prs := c.procs(name)
	if len(prs) != 2 {
		t.Fatalf("%d processes of %s's gang, want 2 (one per rank)\n%s", len(prs), name, kubetest.LogTails(prs))
	}
	return prs
}

// finished waits until n processes of workload name's gang ran and ended;
// it returns them.
func (c *cluster) finished(t *testing.T, name string, n int) []*kubetest.Process {
	t.Helper()
	kubetest.Eventually(t, 4*time.Minute, fmt.Sprintf("%d processes of %s ended", n, name), func() (bool, error) {
		prs := c.procs(name)
		return len(prs) >= n && ended(prs), fmt.Errorf("%d processes", len(prs))
	})
	return c.procs(name)
}

// check fails unless workload name's result is the uninterrupted run's
// (the same checksum, world size 2, every mini-batch; restored from
// mini-batch from when from > 0) and rank 0 logged every mini-batch once.
func (c *cluster) check(t *testing.T, name string, from int64) {
	t.Helper()
	res := torchtest.ReadResult(t, filepath.Join(c.dir, name+".json"))
	t.Logf("%s: result %+v; uninterrupted %s", name, res, c.want.Checksum)
	if res.Restored != (from > 0) || res.Start != int(from) || res.WorldSize != 2 || res.Steps != steps {
		t.Errorf("%s: result %+v: want restored %v from mini-batch %d, world size 2, %d steps", name, res, from > 0, from, steps)
	}
	if res.Checksum != c.want.Checksum {
		t.Errorf("%s: checksum %s; an uninterrupted 2-rank run gives %s", name, res.Checksum, c.want.Checksum)
	}
	log := torchtest.ReadLossLog(t, filepath.Join(c.dir, name+".loss"))
	for i, l := range log {
		if l.Step != i+1 || l.World != 2 {
			t.Fatalf("%s: loss log line %d: step %d, world size %d; want step %d, world size 2", name, i+1, l.Step, l.World, i+1)
		}
	}
	if len(log) != steps {
		t.Errorf("%s: loss log of %d mini-batches, want %d (each once)", name, len(log), steps)
	}
}

// gangPods are the live pods of batch/v1 Job name.
func (c *cluster) gangPods(name string) ([]corev1.Pod, error) {
	return wl.LivePods(c.cs, "batch.kubernetes.io/job-name="+name)
}

// suspendable is a workload kind that Gandiva suspends.
type suspendable struct {
	// name is the workload's; its pods' names start with NAME-
	name string
	// create creates it, its gang's pods of tmpl
	create func(t *testing.T, tmpl corev1.PodTemplateSpec)
	// suspended reports whether Gandiva's decision is on it: state
	// suspended, and the kind's spec.suspend true
	suspended func() (bool, error)
}

// suspendResume runs w, a 2-rank ddp.py gang, on a cluster of 4 one-GPU
// nodes, 2 of them held by a Job that is not preemptible: the gang trains
// on the other 2; a 2-pod Job in Tiresias' top queue preempts it: Gandiva
// suspends w, both ranks get SIGTERM, the gang checkpoints once (one
// payload, at one mini-batch in mid-training) and both exit 143. When the
// holding Job ends, w resumes on its nodes, restores and trains to the
// end: its final weights are bit-identical to an uninterrupted run's, and
// rank 0 logged every mini-batch once.
func suspendResume(t *testing.T, c *cluster, w suspendable) {
	t.Helper()
	ctx := context.Background()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("processes of %s:\n%s", w.name, kubetest.LogTails(c.procs(w.name)))
		}
	})
	if _, err := c.cs.BatchV1().Jobs(wl.NS).Create(ctx, wl.GangJob("hold", 2, false), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var hold []corev1.Pod
	kubetest.Eventually(t, time.Minute, "Job hold's 2 pods bound", func() (bool, error) {
		var err error
		hold, err = c.gangPods("hold")
		return err == nil && len(hold) == 2 && !slices.Contains(wl.NodesOf(hold), ""), err
	})
	holdNodes := wl.NodesOf(hold)
	w.create(t, c.template(w.name, "node"))
	first := c.training(t, w.name)
	for _, pr := range first {
		if slices.Contains(holdNodes, pr.Node) {
			t.Fatalf("rank %s runs on %s, one of Job hold's nodes %v", pr.Pod, pr.Node, holdNodes)
		}
	}

	if _, err := c.cs.BatchV1().Jobs(wl.NS).Create(ctx, wl.GangJob("urgent", 2, false), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 2*time.Minute, "both ranks checkpointed and exited", func() (bool, error) {
		return ended(c.procs(w.name)[:2]), nil
	})
	first = c.procs(w.name)[:2]
	for _, pr := range first {
		if pr.Exit != 143 {
			t.Fatalf("rank %s exited %d on suspension, want 143 (checkpointed after SIGTERM)\n%s", pr.Pod, pr.Exit, kubetest.LogTails(first))
		}
	}
	kubetest.Eventually(t, time.Minute, w.name+" suspended by Gandiva", w.suspended)
	meta, f, err := protocol.ReadCheckpoint(filepath.Join(c.dir, w.name))
	if err != nil {
		t.Fatalf("the gang's checkpoint: %v", err)
	}
	f.Close()
	if meta.Done <= 0 || meta.Done >= steps {
		t.Fatalf("the gang's checkpoint is at mini-batch %d of %d", meta.Done, steps)
	}
	payloads, _ := filepath.Glob(filepath.Join(c.dir, w.name, "ckpt-*"))
	if len(payloads) != 1 {
		t.Fatalf("%d checkpoint payloads %v after the suspension, want 1 (one checkpoint for the gang)", len(payloads), payloads)
	}

	// Job hold ends: the gang resumes on its nodes
	for _, p := range hold {
		body := []byte(`{"metadata":{"annotations":{"` + kubetest.AnnExit + `":"0"}}}`)
		if _, err := c.cs.CoreV1().Pods(wl.NS).Patch(ctx, p.Name, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	all := c.finished(t, w.name, 4)
	if len(all) != 4 {
		t.Fatalf("%d processes of the gang, want 4 (2 ranks, suspended once)\n%s", len(all), kubetest.LogTails(all))
	}
	for _, pr := range all[2:] {
		if pr.Exit != 0 {
			t.Fatalf("resumed rank %s exited %d\n%s", pr.Pod, pr.Exit, kubetest.LogTails(all))
		}
		if !slices.Contains(holdNodes, pr.Node) {
			t.Errorf("rank %s resumed on %s; Job hold's nodes %v were the free ones", pr.Pod, pr.Node, holdNodes)
		}
	}
	t.Logf("checkpoint at mini-batch %d", meta.Done)
	c.check(t, w.name, meta.Done)
}

// stateOf returns the Gandiva state annotation of object name of gvr in
// NS, and whether its spec.suspend is true.
func (c *cluster) stateOf(gvr schema.GroupVersionResource, name string) (string, bool, error) {
	u, err := c.dc.Resource(gvr).Namespace(wl.NS).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return "", false, err
	}
	susp, _, _ := unstructured.NestedBool(u.Object, "spec", "suspend")
	return u.GetAnnotations()[kube.AnnState], susp, nil
}

// suspendedBy returns a suspendable's suspended for a kind whose
// decision Gandiva writes on object name of gvr and whose spec.suspend is
// object name of suspendGVR's.
func (c *cluster) suspendedBy(gvr schema.GroupVersionResource, name string, suspendGVR schema.GroupVersionResource) func() (bool, error) {
	return func() (bool, error) {
		st, _, err := c.stateOf(gvr, name)
		if err != nil {
			return false, err
		}
		_, susp, err := c.stateOf(suspendGVR, name)
		if err != nil {
			return false, err
		}
		return st == kube.StateSuspended && susp, fmt.Errorf("state %q, spec.suspend %v", st, susp)
	}
}

// completes waits until object name of gvr in NS has the status
// condition typ True.
func (c *cluster) completes(t *testing.T, gvr schema.GroupVersionResource, name, typ string) {
	t.Helper()
	kubetest.Eventually(t, time.Minute, fmt.Sprintf("%s %s: condition %s", gvr.Resource, name, typ), func() (bool, error) {
		u, err := c.dc.Resource(gvr).Namespace(wl.NS).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		return wl.HasCondition(u, typ), fmt.Errorf("conditions %v", conds)
	})
}
