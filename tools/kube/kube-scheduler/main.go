// Command kube-scheduler is Kubernetes' default scheduler, v1.34.4, built from the
// module proxy (the same main as k8s.io/kubernetes/cmd/kube-scheduler). Gandiva's
// benchmark compares against it on the same control plane.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() {
	os.Exit(cli.Run(app.NewSchedulerCommand()))
}
