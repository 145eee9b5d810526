package ctl

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// More workload controllers for Start.
const (
	// KubeApps is kube-apps (tools/kubeapps), Kubernetes' own
	// StatefulSet controller and garbage collector of dependents
	// (ownerReferences): what the workload operators need from
	// kube-controller-manager beyond the Job controller the control plane
	// runs. LWS and KubeRay need it.
	KubeApps = "kube-apps"
	// LWS is the LeaderWorkerSet controller manager
	// (sigs.k8s.io/lws): a LeaderWorkerSet's groups are a leader StatefulSet
	// whose pods each own a worker StatefulSet.
	LWS = "lws"
	// KubeRay is the KubeRay operator (RayCluster, RayJob,
	// RayService): a RayJob makes a RayCluster (head and worker pods it
	// creates itself) and a submitter Job.
	KubeRay = "kuberay"
)

// LWSNameLabel is the label the LeaderWorkerSet controller puts on the pods
// of a LeaderWorkerSet (its name).
const LWSNameLabel = "leaderworkerset.sigs.k8s.io/name"

func init() {
	specs[KubeApps] = spec{
		bin: "kube-apps",
		args: func(_ string, _, probePort int) ([]string, error) {
			return []string{
				// CRDs installed after it starts are collected within this.
				"--gc-sync-period=5s",
				fmt.Sprintf("--readyz-address=127.0.0.1:%d", probePort),
			}, nil
		},
	}
	podSelectors[LWS] = LWSNameLabel
	specs[LWS] = spec{
		bin:   "lws-controller",
		needs: []string{KubeApps},
		// The manager also runs the DisaggregatedSet controllers, which
		// stop it after their cache-sync timeout (2 minutes) unless their
		// CRDs are installed.
		crds: []string{
			"third_party/lws/config/crd/leaderworkerset.x-k8s.io_leaderworkersets.yaml",
			"third_party/lws/config/crd/disaggregatedset.x-k8s.io_disaggregatedsets.yaml",
			"third_party/lws/config/crd/disaggregatedset.x-k8s.io_disaggregatedsetrolescalers.yaml",
		},
		webhooks: "third_party/lws/config/webhook/manifests.yaml",
		args: func(dir string, webhookPort, probePort int) ([]string, error) {
			file, err := managerConfig(dir, "config.lws.x-k8s.io/v1alpha1", webhookPort, probePort)
			if err != nil {
				return nil, err
			}
			return []string{"--config=" + file}, nil
		},
		probe: lwsProbe,
	}
	specs[KubeRay] = spec{
		bin:   "kuberay-operator",
		needs: []string{KubeApps},
		crds: []string{
			"third_party/kuberay/ray-operator/config/crd/ray.io_rayclusters.yaml",
			"third_party/kuberay/ray-operator/config/crd/ray.io_rayjobs.yaml",
			"third_party/kuberay/ray-operator/config/crd/ray.io_rayservices.yaml",
		},
		// Upstream's webhooks are off unless ENABLE_WEBHOOKS=true (they only
		// validate); no leader election, no metrics server.
		args: func(_ string, _, probePort int) ([]string, error) {
			return []string{
				"--enable-leader-election=false",
				"--metrics-addr=0",
				fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", probePort),
				"--log-stdout-encoder=console",
			}, nil
		},
	}
}

// lwsProbe is a LeaderWorkerSet that only the controller's validating
// webhook denies (a sub-group larger than the group; the CRD's schema
// allows it).
func lwsProbe() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "leaderworkerset.x-k8s.io/v1",
		"kind":       "LeaderWorkerSet",
		"metadata":   map[string]any{"name": "kubetest-webhook-probe", "namespace": "default"},
		"spec": map[string]any{
			"leaderWorkerTemplate": map[string]any{
				"size":           int64(2),
				"subGroupPolicy": map[string]any{"subGroupSize": int64(3)},
				"workerTemplate": map[string]any{"spec": map[string]any{
					"containers": []any{map[string]any{"name": "w", "image": "none"}},
				}},
			},
		},
	}}
}
