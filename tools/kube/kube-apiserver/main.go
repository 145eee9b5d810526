// Command kube-apiserver is Kubernetes' API server, v1.34.4, built from the module
// proxy (the same main as k8s.io/kubernetes/cmd/kube-apiserver).
package main

import (
	"os"
	_ "time/tzdata" // for time zones in CronJobs, as upstream

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
