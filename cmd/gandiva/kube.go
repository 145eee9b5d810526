package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gandiva-sched/gandiva/internal/kube"
	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
)

// gandiva kube: the Kubernetes scheduler, and its local bring-up.

func newKubeCmd() *cobra.Command {
	var (
		kubeconfig, policy, ns, lease string
		workers                       int
		verbose                       bool
	)
	cmd := &cobra.Command{
		Use:   "kube",
		Short: "Schedule a Kubernetes cluster's GPU Jobs (schedulerName: gandiva) with Gandiva's engine and policies",
		Long: `Run Gandiva as a second scheduler of a Kubernetes cluster: Jobs (and plain pods) whose pod
template says schedulerName: gandiva are gangs the engine schedules with the chosen policy; their
pods are bound through the binding subresource, and preemption, migration and grow-shrink suspend
and resume the Jobs (the in-job client checkpoints on SIGTERM). Each namespace is a user.

Replicas elect a leader through a Lease in --namespace; the others wait. The state is rebuilt from
the API server when a replica takes over. Run-time settings (tickets of gandiva-fair) come from the
ConfigMap gandiva-settings in --namespace: key tickets.NAMESPACE, value the tickets.

docs/KUBERNETES.md takes a platform team from nothing to a scheduled Job; gandiva kube dev runs a
local control plane to try it.`,
		Example: `  gandiva kube --kubeconfig ~/.kube/config --policy tiresias-l
  gandiva kube --policy 'gandiva-fair:tickets=team-a:4/team-b:1'   # in a pod: in-cluster config`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := kubeConfig(kubeconfig)
			if err != nil {
				return err
			}
			log := newLogger(cmd.ErrOrStderr(), verbose)
			err = kube.Run(cmd.Context(), cfg, kube.Options{Policy: policy, Namespace: ns, LeaseName: lease, Workers: workers, Log: log})
			if errors.Is(err, kube.ErrLostLease) {
				log.Error("another replica leads now; exiting so this one restarts and waits")
			}
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, then the in-cluster config, then ~/.kube/config)")
	fl.StringVar(&policy, "policy", "tiresias-l", "scheduling policy, with optional :key=value;... parameters")
	fl.StringVar(&ns, "namespace", "gandiva-system", "namespace of the leader Lease and the settings ConfigMap")
	fl.StringVar(&lease, "lease-name", "gandiva-scheduler", "name of the leader-election Lease")
	fl.IntVar(&workers, "workers", 16, "concurrent API calls (bindings, patches)")
	fl.BoolVar(&verbose, "verbose", false, "debug logging")
	cmd.AddCommand(newKubeDevCmd())
	return cmd
}

// kubeConfig loads --kubeconfig, else $KUBECONFIG, else the in-cluster
// config, else ~/.kube/config.
func kubeConfig(path string) (*rest.Config, error) {
	if path == "" {
		path = os.Getenv("KUBECONFIG")
	}
	if path == "" {
		if cfg, err := rest.InClusterConfig(); err == nil {
			return cfg, nil
		}
		if home, err := os.UserHomeDir(); err == nil {
			path = filepath.Join(home, ".kube", "config")
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig %q: %w", path, err)
	}
	return cfg, nil
}

func newKubeDevCmd() *cobra.Command {
	var (
		nodes, gpus int
		policy, out string
		verbose     bool
	)
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a local Kubernetes control plane with fake GPU nodes, and gandiva kube on it",
		Long: `Bring up a real control plane on this machine (etcd, kube-apiserver, the Job and pod-GC
controllers) with kwok playing --nodes fake nodes of --gpus nvidia.com/gpu each, write an admin
kubeconfig to --kubeconfig-out, and run gandiva kube against it until Ctrl-C; then everything is
removed. No containers run: kwok marks bound pods Running.

The binaries come from scripts/kube-tools (built once from the Go module proxy, about 20 minutes,
then cached).`,
		Example: `  scripts/kube-tools && gandiva kube dev
  KUBECONFIG=/tmp/gandiva-dev.kubeconfig kubectl apply -f deploy/examples/job.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := kube.CheckPolicy(policy); err != nil {
				return err
			}
			ctx := cmd.Context()
			stderr := cmd.ErrOrStderr()
			fmt.Fprintf(stderr, "starting a local control plane (binaries in %s)...\n", cplane.BinDir())
			sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			p, err := cplane.Start(sctx, cplane.Options{Controllers: true, Kwok: true, PodGCQuarantine: 10 * time.Second})
			cancel()
			if err != nil {
				return err
			}
			defer p.Stop()
			if err := p.WriteKubeconfig(out, "admin"); err != nil {
				return err
			}
			cs, err := kubernetes.NewForConfig(p.Config())
			if err != nil {
				return err
			}
			// the scheduler's namespace, and the example's
			for _, ns := range []string{"gandiva-system", "team-a"} {
				if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
					return fmt.Errorf("creating namespace %s: %w", ns, err)
				}
			}
			for i := range nodes {
				n := cplane.FakeGPUNode(fmt.Sprintf("gpu-%d", i), gpus, nil, nil)
				if _, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
					return fmt.Errorf("creating node %s: %w", n.Name, err)
				}
			}
			fmt.Fprintf(stderr, "control plane at %s with %d kwok nodes of %d GPUs, namespaces gandiva-system and team-a\n  export KUBECONFIG=%s\n  kubectl apply -f deploy/examples/job.yaml\nCtrl-C stops it and removes everything.\n",
				p.URL, nodes, gpus, out)
			err = kube.Run(ctx, p.Config(), kube.Options{Policy: policy, Log: newLogger(stderr, verbose)})
			os.Remove(out)
			return err
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&nodes, "nodes", 4, "fake GPU nodes")
	fl.IntVar(&gpus, "gpus", 8, "nvidia.com/gpu per node")
	fl.StringVar(&policy, "policy", "tiresias-l", "scheduling policy")
	fl.StringVar(&out, "kubeconfig-out", filepath.Join(os.TempDir(), "gandiva-dev.kubeconfig"), "where to write the admin kubeconfig")
	fl.BoolVar(&verbose, "verbose", false, "debug logging")
	return cmd
}
