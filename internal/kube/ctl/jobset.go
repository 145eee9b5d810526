package ctl

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func init() {
	specs[JobSet] = spec{
		bin:      "jobset-controller",
		crds:     []string{"third_party/jobset/config/crd/jobset.x-k8s.io_jobsets.yaml"},
		webhooks: "third_party/jobset/config/webhook/manifests.yaml",
		args:     jobSetArgs,
		probe:    jobSetProbe,
	}
	// The JobSet pod webhooks see only the pods of JobSets.
	podSelectors[JobSet] = "jobset.sigs.k8s.io/jobset-name"
}

// jobSetArgs writes the JobSet manager's configuration (managerConfig)
// and returns its arguments.
func jobSetArgs(dir string, webhookPort, probePort int) ([]string, error) {
	file, err := managerConfig(dir, "config.jobset.x-k8s.io/v1alpha1", webhookPort, probePort)
	if err != nil {
		return nil, err
	}
	return []string{"--config=" + file, "--metrics-bind-address=0", "--leader-elect=false",
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", probePort)}, nil
}

// managerConfig writes dir/config.yaml, the file configuration (kind
// Configuration of apiVersion) that the JobSet and LeaderWorkerSet
// managers share: upstream's defaults but no leader election, no
// certificate management of their own (Start makes the webhook server's
// certificate, in dir), the webhook server and the probes on 127.0.0.1,
// no metrics server. It returns the file's path.
func managerConfig(dir, apiVersion string, webhookPort, probePort int) (string, error) {
	cfg := fmt.Sprintf(`apiVersion: %s
kind: Configuration
internalCertManagement:
  enable: false
leaderElection:
  leaderElect: false
webhook:
  host: 127.0.0.1
  port: %d
  certDir: %s
health:
  healthProbeBindAddress: 127.0.0.1:%d
metrics:
  bindAddress: "0"
`, apiVersion, webhookPort, dir, probePort)
	file := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		return "", err
	}
	return file, nil
}

// jobSetProbe is a JobSet that only the validating webhook denies (its
// subdomain is no DNS label; the CRD's schema lets it through).
func jobSetProbe() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "jobset.x-k8s.io/v1alpha2",
		"kind":       "JobSet",
		"metadata":   map[string]any{"name": "kubetest-webhook-probe", "namespace": "default"},
		"spec": map[string]any{
			"network": map[string]any{"subdomain": "Not_A_DNS_Label"},
			"replicatedJobs": []any{map[string]any{
				"name": "w",
				"template": map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
					"restartPolicy": "Never",
					"containers":    []any{map[string]any{"name": "c", "image": "none"}},
				}}}},
			}},
		},
	}}
}
