// Package kubetest is the test support of Gandiva's Kubernetes shell: it
// brings a real control plane up for a test (package cplane), creates kwok
// GPU nodes, and waits for conditions. When the control plane's binaries are
// missing, Start skips the test with a message naming the command that builds
// them, except when CI=true, where it fails: CI must run these tests.
package kubetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
)

// GPU is the extended resource the nodes advertise and pods request.
const GPU corev1.ResourceName = "nvidia.com/gpu"

// Start brings up a control plane for the test and stops it (every process,
// every file) when the test ends; a failed test logs the tail of each
// process's log.
func Start(t testing.TB, o cplane.Options) *cplane.Plane {
	t.Helper()
	dir := o.BinDir
	if dir == "" {
		dir = cplane.BinDir()
	}
	if err := cplane.Check(dir); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v\n(CI=true: the Kubernetes tests must run; .ci/run builds the binaries first)", err)
		}
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t0 := time.Now()
	p, err := cplane.Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("control plane up in %.1f s at %s", time.Since(t0).Seconds(), p.URL)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("control plane logs:\n%s", p.Logs(60))
		}
		p.Stop()
	})
	return p
}

// Client returns an admin clientset of p.
func Client(t testing.TB, p *cplane.Plane) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(p.Config())
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// Nodes describes fake GPU nodes that kwok plays.
type Nodes struct {
	// Prefix names the nodes Prefix0, Prefix1, ... ("gpu-" if empty).
	Prefix string
	// First is the index of the first node's name.
	First, Count int
	// GPUs is each node's nvidia.com/gpu capacity.
	GPUs   int
	Labels map[string]string
	Taints []corev1.Taint
}

// NodeObject returns the Node object of the i-th node of n, as AddNodes creates it.
func (n Nodes) NodeObject(i int) *corev1.Node {
	prefix := n.Prefix
	if prefix == "" {
		prefix = "gpu-"
	}
	return cplane.FakeGPUNode(prefix+strconv.Itoa(n.First+i), n.GPUs, n.Labels, n.Taints)
}

// AddNodes creates the nodes and waits until kwok reports them Ready; it
// returns their names.
func AddNodes(t testing.TB, cs kubernetes.Interface, n Nodes) []string {
	t.Helper()
	ctx := context.Background()
	var names []string
	for i := range n.Count {
		node := n.NodeObject(i)
		if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating node %s: %v", node.Name, err)
		}
		names = append(names, node.Name)
	}
	for _, name := range names {
		Eventually(t, 60*time.Second, "node "+name+" Ready", func() (bool, error) {
			nd, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return NodeReady(nd), nil
		})
	}
	return names
}

// NodeReady reports whether the node's Ready condition is True.
func NodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Namespace creates a namespace.
func Namespace(t testing.TB, cs kubernetes.Interface, name string) {
	t.Helper()
	_, err := cs.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
}

// Eventually polls cond every 20 ms until it returns true, failing the test
// after timeout with what (and cond's last error). Timeouts are generous:
// they bound a test that hangs, they do not measure anything.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	if err := Wait(timeout, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// Wait is Eventually without a test: it returns an error on time-out.
func Wait(timeout time.Duration, cond func() (bool, error)) error {
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
				last = errors.New("condition still false")
			}
			return fmt.Errorf("timed out after %v: %w", timeout, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
