package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"

	kubeagent "github.com/gandiva-sched/gandiva/internal/kube/agent"
)

// kubeAgentFlags are the flags of `gandiva agent --kube` (shared mode's
// node agent; internal/kube/agent).
type kubeAgentFlags struct {
	kube                   bool
	node, socketDir, kcfg  string
	reportEvery, helloWait time.Duration
}

func (k *kubeAgentFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.BoolVar(&k.kube, "kube", false, "run as the node agent of Kubernetes shared mode (a DaemonSet: deploy/base/agent-daemonset.yaml; docs/KUBERNETES.md);\nwith it only --node, --socket-dir, --report-every, --hello-timeout, --client-deadline, --kubeconfig and --verbose apply")
	fl.StringVar(&k.node, "node", os.Getenv("NODE_NAME"), "with --kube: this node's name ($NODE_NAME; the DaemonSet sets it from spec.nodeName)")
	fl.StringVar(&k.socketDir, "socket-dir", "/var/run/gandiva/pods", "with --kube: host directory of the pods' sockets (DIR/POD-UID/agent.sock)")
	fl.DurationVar(&k.reportEvery, "report-every", kubeagent.DefaultReportEvery, "with --kube: how often a job's progress is republished on its pod")
	fl.DurationVar(&k.helloWait, "hello-timeout", kubeagent.DefaultHelloTimeout, "with --kube: how long a connection may take to say its hello")
	fl.StringVar(&k.kcfg, "kubeconfig", "", "with --kube: kubeconfig file (default: $KUBECONFIG, then the in-cluster config, then ~/.kube/config)")
}

// run runs the kube agent; clientDeadline and verbose come from the
// agent's common flags.
func (k *kubeAgentFlags) run(cmd *cobra.Command, clientDeadline time.Duration, verbose bool) error {
	for _, name := range []string{"server", "token", "fake-gpus", "run-as", "user-map", "work-dir", "listen"} {
		if cmd.Flags().Changed(name) {
			return fmt.Errorf("--%s does not apply with --kube (the pod's kubelet runs the job)", name)
		}
	}
	if err := firstErr(positiveDuration("--report-every", k.reportEvery), positiveDuration("--hello-timeout", k.helloWait),
		positiveDuration("--client-deadline", clientDeadline)); err != nil {
		return err
	}
	if k.node == "" {
		return fmt.Errorf("--node: required with --kube (or $NODE_NAME)")
	}
	cfg, err := kubeConfig(k.kcfg)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	log := newLogger(cmd.ErrOrStderr(), verbose)
	return kubeagent.Run(cmd.Context(), cs, kubeagent.Options{Node: k.node, SocketDir: k.socketDir,
		ReportEvery: k.reportEvery, HelloTimeout: k.helloWait, ClientDeadline: clientDeadline, Log: log})
}
