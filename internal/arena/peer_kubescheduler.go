package arena

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// kube-scheduler: the control plane's kube-scheduler alone, bin-packing
// GPUs (kubeSchedulerConfig).
func init() {
	registerPeer("kube-scheduler", &peer{start: startKubeScheduler})
}

// kubeSchedulerConfig is kube-scheduler's configuration (kubeconfig, QPS,
// burst): the default profile, with GPUs bin-packed (NodeResourcesFit
// scoring MostAllocated on nvidia.com/gpu, as Kubernetes' "Resource Bin
// Packing" page suggests for extended resources such as GPUs) so that
// small jobs do not fragment the servers larger gangs need. Pods of equal
// priority (the arena sets none) leave its queue in the order they entered
// it: FIFO by creation.
const kubeSchedulerConfig = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %s
  qps: %g
  burst: %d
leaderElection:
  leaderElect: false
profiles:
- schedulerName: default-scheduler
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
        resources:
        - name: nvidia.com/gpu
          weight: 1
`

// startKubeScheduler starts the plane's kube-scheduler with
// kubeSchedulerConfig; other peers that bind through kube-scheduler (a
// queue in front of it) start it the same way into their group.
func startKubeScheduler(_ context.Context, e *peerEnv) (*group, error) {
	g := &group{}
	if err := g.startKubeSchedulerIn(e); err != nil {
		return nil, err
	}
	return g, nil
}

// startKubeSchedulerIn starts kube-scheduler (kubeSchedulerConfig) into g.
func (g *group) startKubeSchedulerIn(e *peerEnv) error {
	conf := filepath.Join(e.Dir, "kube-scheduler.yaml")
	cfg := fmt.Sprintf(kubeSchedulerConfig, e.Kubeconfig, e.Config.QPS, int(2*e.Config.QPS))
	if err := os.WriteFile(conf, []byte(cfg), 0o600); err != nil {
		return err
	}
	_, err := g.startChild(e.Dir, "kube-scheduler", []string{filepath.Join(e.Config.BinDir, "kube-scheduler"), "--config=" + conf, "--secure-port=0", "-v=1"})
	return err
}
