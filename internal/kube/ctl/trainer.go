package ctl

import (
	"context"
	"fmt"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
)

// TorchRuntime is the ClusterTrainingRuntime that Start installs
// with Trainer: upstream's torch-distributed runtime (one node,
// torch.numProcPerNode auto; its image is never pulled here).
const TorchRuntime = "torch-distributed"

func init() {
	specs[Trainer] = spec{
		bin:   "trainer-controller",
		needs: []string{JobSet},
		crds: []string{
			"third_party/trainer/config/crd/trainer.kubeflow.org_clustertrainingruntimes.yaml",
			"third_party/trainer/config/crd/trainer.kubeflow.org_trainingruntimes.yaml",
			"third_party/trainer/config/crd/trainer.kubeflow.org_trainjobs.yaml",
		},
		webhooks: "third_party/trainer/config/webhook/manifests.yaml",
		args:     trainerArgs,
		probe:    trainerProbe,
		ready: func(ctx context.Context, dc dynamic.Interface, root string) error {
			return applyFile(ctx, dc, filepath.Join(root, "third_party/trainer/config/runtimes/torch_distributed.yaml"),
				map[string]string{"ClusterTrainingRuntime": "clustertrainingruntimes"})
		},
	}
}

// trainerArgs returns the Trainer manager's arguments: --webhook-cert-dir
// (third_party/trainer/main.go) turns its certificate rotation off and
// serves the webhooks with dir's certificate.
func trainerArgs(dir string, webhookPort, probePort int) ([]string, error) {
	return []string{
		"--webhook-cert-dir=" + dir,
		fmt.Sprintf("--webhook-server-port=%d", webhookPort),
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", probePort),
		"--metrics-bind-address=0",
		"--leader-elect=false",
	}, nil
}

// trainerProbe is a TrainJob that only the validating webhook denies (its
// name is a DNS subdomain, which the API server accepts, but no DNS label).
func trainerProbe() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "trainer.kubeflow.org/v1alpha1",
		"kind":       "TrainJob",
		"metadata":   map[string]any{"name": "kubetest.webhook.probe", "namespace": "default"},
		"spec": map[string]any{
			"runtimeRef": map[string]any{"name": TorchRuntime},
		},
	}}
}
