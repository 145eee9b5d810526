// Command kube-controllers runs two of kube-controller-manager's controllers, the
// Job controller and the pod garbage collector, from k8s.io/kubernetes v1.34.4,
// unchanged. The local control plane of Gandiva's tests runs it instead of the
// whole kube-controller-manager (much smaller to build, and the other controllers
// would need a kubelet or cloud): it is what creates a Job's pods, deletes them
// when the Job is suspended and recreates them when it is resumed, as on a real
// cluster.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller/job"
	"k8s.io/kubernetes/pkg/controller/podgc"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig `file` of the cluster")
	controllers := flag.String("controllers", "job,podgc", "comma-separated controllers to run: job, podgc")
	workers := flag.Int("job-workers", 5, "concurrent Job syncs")
	terminated := flag.Int("terminated-pod-gc-threshold", 12500, "terminated pods kept before podgc deletes them")
	gcPeriod := flag.Duration("podgc-period", 20*time.Second, "how often podgc looks for pods to collect")
	quarantine := flag.Duration("podgc-quarantine", 40*time.Second, "how long podgc waits for a missing node to reappear before deleting its pods")
	qps := flag.Float64("kube-api-qps", 200, "client QPS")
	klog.InitFlags(nil)
	flag.Parse()
	if err := run(*kubeconfig, *controllers, *workers, *terminated, *gcPeriod, *quarantine, float32(*qps)); err != nil {
		fmt.Fprintln(os.Stderr, "kube-controllers:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, controllers string, workers, terminated int, gcPeriod, quarantine time.Duration, qps float32) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("reading kubeconfig %q: %w", kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = qps, int(2*qps)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	f := informers.NewSharedInformerFactory(cs, 0)
	var runs []func()
	for _, c := range strings.Split(controllers, ",") {
		switch strings.TrimSpace(c) {
		case "job":
			jc, err := job.NewController(ctx, f.Core().V1().Pods(), f.Batch().V1().Jobs(), cs)
			if err != nil {
				return fmt.Errorf("job controller: %w", err)
			}
			runs = append(runs, func() { jc.Run(ctx, workers) })
		case "podgc":
			gc := podgc.NewPodGCInternal(ctx, cs, f.Core().V1().Pods(), f.Core().V1().Nodes(), terminated, gcPeriod, quarantine)
			runs = append(runs, func() { gc.Run(ctx) })
		case "":
		default:
			return fmt.Errorf("--controllers: unknown controller %q (known: job, podgc)", c)
		}
	}
	f.Start(ctx.Done())
	for _, r := range runs {
		go r()
	}
	<-ctx.Done()
	f.Shutdown()
	return nil
}
