package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gandiva-sched/gandiva/internal/kube/agent"
	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
	"github.com/gandiva-sched/gandiva/internal/kube/ctl"
	"github.com/gandiva-sched/gandiva/internal/kube/shared"
)

// DevOptions configure StartDev: a local cluster to try Gandiva on
// (`gandiva kube dev`).
type DevOptions struct {
	// Nodes fake GPU nodes (kwok) of GPUs nvidia.com/gpu each, named
	// gpu-0, gpu-1, ...; the last SharedNodes of them are shared nodes
	// (labelled gandiva.io/shared=true) with a node agent each.
	Nodes, GPUs, SharedNodes int
	// Workloads are workload controllers (package ctl's names, e.g. from
	// ctl.Workloads) to run beside the plane, with their CRDs: each
	// reads the CRDs and webhooks of the checkout at Root (empty: the
	// repository found upward from the working directory) and logs to
	// Dev.Workloads' Controller.Log, under the plane's directory.
	Workloads []string
	Root      string
	// Log receives the node agents' log (default slog.Default()).
	Log *slog.Logger
}

// Dev is a running local cluster: a control plane with kwok nodes, the
// namespaces gandiva-system and team-a, and the node agents of its shared
// nodes. The scheduler is not part of it (Run it on Config()).
type Dev struct {
	// Plane is the control plane.
	Plane *cplane.Plane
	// Nodes and SharedNodes are the names of all the nodes and of the
	// shared ones among them.
	Nodes, SharedNodes []string
	// SocketDir holds the agents' sockets (SocketDir/NODE/POD-UID/agent.sock).
	SocketDir string
	// Workloads are the workload controllers of DevOptions.Workloads (and
	// those they need), running; nil without any.
	Workloads *ctl.Set

	cancel context.CancelFunc
	wg     sync.WaitGroup
	errs   []error
	mu     sync.Mutex
}

// StartDev brings up a control plane on this machine (scripts/kube-tools'
// binaries) with kwok playing o.Nodes fake GPU nodes, creates the
// namespaces gandiva-system (the scheduler's) and team-a (the examples'),
// and runs the node agent (package agent) of each shared node in this
// process until Stop. kwok runs no containers: it marks bound pods
// Running, and this process plays their processes until Stop (no GPU,
// no state: they only count). A pod of a job with gandiva.io/iters and
// gandiva.io/iter-time counts mini-batches while it runs and exits 0
// once the job has done its iters; a job without iters runs until its
// pods are ended. On the shared nodes the played process is an in-job
// client of the node's agent, suspended and resumed in place, so that
// time-slicing can be watched (see playJobs and docs/KUBERNETES.md). With
// o.Workloads it also runs those workload controllers (ctl.Start) until
// Stop; a controller whose binary is missing (a *ctl.NotBuiltError), or
// no checkout to read their CRDs from, is an error before anything starts.
func StartDev(ctx context.Context, o DevOptions) (d *Dev, err error) {
	switch {
	case o.Nodes < 1 || o.GPUs < 1:
		return nil, fmt.Errorf("kube dev: want at least one node of at least one GPU, got %d nodes of %d GPUs", o.Nodes, o.GPUs)
	case o.SharedNodes < 0 || o.SharedNodes > o.Nodes:
		return nil, fmt.Errorf("kube dev: --shared-nodes must be from 0 to --nodes (%d), got %d", o.Nodes, o.SharedNodes)
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if len(o.Workloads) > 0 {
		if _, err := ctl.Check(o.Workloads...); err != nil {
			return nil, fmt.Errorf("kube dev --workloads: %w", err)
		}
		if o.Root == "" {
			if o.Root, err = ctl.RepoRoot(); err != nil {
				return nil, fmt.Errorf("kube dev --workloads: %w", err)
			}
		}
	}
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	p, err := cplane.Start(sctx, cplane.Options{Controllers: true, Kwok: true, PodGCQuarantine: 10 * time.Second})
	cancel()
	if err != nil {
		return nil, err
	}
	d = &Dev{Plane: p}
	defer func() {
		if err != nil {
			d.Stop()
		}
	}()
	cs, err := kubernetes.NewForConfig(p.Config())
	if err != nil {
		return nil, err
	}
	dc, err := dynamic.NewForConfig(p.Config())
	if err != nil {
		return nil, err
	}
	for _, ns := range []string{"gandiva-system", "team-a"} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("creating namespace %s: %w", ns, err)
		}
	}
	for i := range o.Nodes {
		var labels map[string]string
		if i >= o.Nodes-o.SharedNodes {
			labels = map[string]string{shared.LabelSharedNode: "true"}
		}
		n := cplane.FakeGPUNode(fmt.Sprintf("gpu-%d", i), o.GPUs, labels, nil)
		if _, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("creating node %s: %w", n.Name, err)
		}
		d.Nodes = append(d.Nodes, n.Name)
		if labels != nil {
			d.SharedNodes = append(d.SharedNodes, n.Name)
		}
	}
	if len(o.Workloads) > 0 {
		dir := filepath.Join(p.Dir, "workloads")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		if d.Workloads, err = ctl.Start(ctx, p, ctl.Options{Root: o.Root, Dir: dir}, o.Workloads...); err != nil {
			return nil, fmt.Errorf("kube dev --workloads: %w", err)
		}
	}
	if len(d.SharedNodes) > 0 {
		// short: a socket's path has at most 107 bytes
		if d.SocketDir, err = os.MkdirTemp("", "gandiva-dev-"); err != nil {
			return nil, err
		}
	}
	actx, stop := context.WithCancel(context.Background())
	d.cancel = stop
	d.wg.Add(1)
	go func() { defer d.wg.Done(); playJobs(actx, cs, dc, d.SocketDir, d.Nodes, d.SharedNodes, o.Log) }()
	for _, node := range d.SharedNodes {
		ao := agent.Options{Node: node, SocketDir: filepath.Join(d.SocketDir, node), Log: o.Log.With("agent", node)}
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			if err := agent.Run(actx, cs, ao); err != nil && actx.Err() == nil {
				o.Log.Error("node agent stopped", "node", node, "err", err)
				d.mu.Lock()
				d.errs = append(d.errs, fmt.Errorf("node agent of %s: %w", node, err))
				d.mu.Unlock()
			}
		}()
	}
	return d, nil
}

// Config is the control plane's admin configuration.
func (d *Dev) Config() *rest.Config { return d.Plane.Config() }

// Stop ends the agents and the control plane and removes what they left;
// it returns the errors of agents that stopped before.
func (d *Dev) Stop() error {
	if d.cancel != nil {
		d.cancel()
		d.wg.Wait()
		d.cancel = nil
	}
	if d.SocketDir != "" {
		os.RemoveAll(d.SocketDir)
	}
	if d.Workloads != nil {
		d.Workloads.Stop()
		d.Workloads = nil
	}
	d.Plane.Stop()
	d.mu.Lock()
	defer d.mu.Unlock()
	return errors.Join(d.errs...)
}
