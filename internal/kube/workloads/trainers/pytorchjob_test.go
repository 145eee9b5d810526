package trainers

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gandiva-sched/gandiva/internal/kube"
	"github.com/gandiva-sched/gandiva/internal/kube/kubetest"
	wl "github.com/gandiva-sched/gandiva/internal/kube/workloads"
)

// masterShim runs ddp.py (argv[1], its arguments after it) with
// MASTER_ADDR 127.0.0.1. The Training Operator appends its own
// MASTER_ADDR, the master's headless Service NAME-master-0, after the
// template's env, so the operator's wins (as in a kubelet, the last of a
// name); with no cluster DNS here it does not resolve, and every pod is a
// process of this machine: the pod's command points the ranks at it.
// RANK, WORLD_SIZE and MASTER_PORT stay the operator's. The init container
// the operator gives the Worker (it waits for that DNS name) is not run:
// kwok marks the pod running and the Kubelet stand-in runs only its
// container; the Worker's rank waits for the master at the rendezvous.
const masterShim = "import os, runpy, sys; os.environ['MASTER_ADDR'] = '127.0.0.1'; " +
	"sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"

// A Kubeflow PyTorchJob of a Master and a Worker under the real Training
// Operator v1.8.1, their pods running ddp.py with the ranks, world size
// and rendezvous port the operator sets (its port named in the template
// is the rendezvous port): Gandiva binds it whole, preempts it through
// spec.runPolicy.suspend after its trainers checkpoint (the operator
// deletes its pods), resumes it on other nodes (the operator makes new
// pods), its final weights bit-identical to an uninterrupted run's
// (suspendResume); the PyTorchJob then succeeds.
func TestPyTorchJobDDPCheckpointResume(t *testing.T) {
	c := start(t, 4, []string{kubetest.PyTorchController})
	ctx := context.Background()
	suspendResume(t, c, suspendable{
		name: "pt",
		create: func(t *testing.T, tmpl corev1.PodTemplateSpec) {
			pt := tmpl.DeepCopy()
			ct := &pt.Spec.Containers[0]
			ct.Name = "pytorch" // the operator's container: it needs this name
			ct.Command = append([]string{ct.Command[0], "-c", masterShim}, ct.Command[1:]...)
			ct.Ports = []corev1.ContainerPort{{Name: "pytorchjob-port", ContainerPort: int32(c.port)}}
			u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pt)
			if err != nil {
				t.Fatal(err)
			}
			spec := func() map[string]any {
				return map[string]any{"replicas": int64(1), "restartPolicy": "Never", "template": runtime.DeepCopyJSON(u)}
			}
			job := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
				// not preemptible by default: its trainers resume from
				// their checkpoints
				"metadata": map[string]any{"namespace": wl.NS, "name": "pt",
					"annotations": map[string]any{kube.AnnPreemptible: "true"}},
				"spec": map[string]any{"pytorchReplicaSpecs": map[string]any{"Master": spec(), "Worker": spec()}},
			}}
			if _, err := c.dc.Resource(wl.PyTorchJobGVR).Namespace(wl.NS).Create(ctx, job, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		},
		suspended: func() (bool, error) {
			u, err := c.dc.Resource(wl.PyTorchJobGVR).Namespace(wl.NS).Get(ctx, "pt", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			susp, _, _ := unstructured.NestedBool(u.Object, "spec", "runPolicy", "suspend")
			st := u.GetAnnotations()[kube.AnnState]
			return st == kube.StateSuspended && susp, fmt.Errorf("state %q, spec.runPolicy.suspend %v", st, susp)
		},
	})
	c.completes(t, wl.PyTorchJobGVR, "pt", "Succeeded")

	// the ranks were the operator's: its env last in each pod (the one a
	// process gets), its MASTER_ADDR the Service the command replaced,
	// and each process trained as its pod's rank
	pods, err := c.cs.CoreV1().Pods(wl.NS).List(ctx, metav1.ListOptions{LabelSelector: "training.kubeflow.org/job-name=pt"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"pt-master-0": "0", "pt-worker-0": "1"}
	for _, p := range pods.Items {
		env := map[string]string{}
		for _, e := range p.Spec.Containers[0].Env {
			env[e.Name] = e.Value
		}
		t.Logf("pod %s: init containers %d, RANK %s WORLD_SIZE %s MASTER_ADDR %s MASTER_PORT %s", p.Name,
			len(p.Spec.InitContainers), env["RANK"], env["WORLD_SIZE"], env["MASTER_ADDR"], env["MASTER_PORT"])
		if env["RANK"] != want[p.Name] || env["WORLD_SIZE"] != "2" || env["MASTER_ADDR"] != "pt-master-0" || env["MASTER_PORT"] != fmt.Sprint(c.port) {
			t.Errorf("pod %s: the operator's env RANK %q WORLD_SIZE %q MASTER_ADDR %q MASTER_PORT %q; want rank %s of 2 at pt-master-0:%d",
				p.Name, env["RANK"], env["WORLD_SIZE"], env["MASTER_ADDR"], env["MASTER_PORT"], want[p.Name], c.port)
		}
	}
	for _, pr := range c.procs("pt") {
		out, err := os.ReadFile(pr.Log)
		if err != nil {
			t.Fatal(err)
		}
		if r, ok := want[pr.Pod]; !ok || !strings.Contains(string(out), "ddp: rank "+r+" of 2") {
			t.Errorf("process of pod %s did not train as its rank:\n%s", pr.Pod, kubetest.LogTails([]*kubetest.Process{pr}))
		}
	}
}
