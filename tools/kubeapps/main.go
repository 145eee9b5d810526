// Command kube-apps runs two more of kube-controller-manager's controllers,
// from k8s.io/kubernetes v1.34.4, unchanged: the StatefulSet controller and
// the garbage collector of dependents (ownerReferences: deleting an object
// deletes what it owns, in the background or foreground). The local control
// plane's kube-controllers runs only the Job controller and the pod garbage
// collector; the workload operators' tests need these too (a LeaderWorkerSet
// is StatefulSets; a RayCluster, a leader pod, a JobSet own what they make).
// It is wired as kube-controller-manager wires them.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	cacheddiscovery "k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/controller-manager/pkg/informerfactory"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller/garbagecollector"
	"k8s.io/kubernetes/pkg/controller/statefulset"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig `file` of the cluster")
	controllers := flag.String("controllers", "statefulset,garbagecollector", "comma-separated controllers to run: statefulset, garbagecollector")
	workers := flag.Int("workers", 5, "concurrent syncs of each controller")
	gcSync := flag.Duration("gc-sync-period", 30*time.Second, "how often the garbage collector rereads which resources exist (new CRDs)")
	qps := flag.Float64("kube-api-qps", 200, "client QPS")
	readyz := flag.String("readyz-address", "", "if set, `host:port` where GET /readyz answers 200 once the informers have synced")
	klog.InitFlags(nil)
	flag.Parse()
	if err := run(*kubeconfig, *controllers, *workers, *gcSync, float32(*qps), *readyz); err != nil {
		fmt.Fprintln(os.Stderr, "kube-apps:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, controllers string, workers int, gcSync time.Duration, qps float32, readyz string) error {
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
	var mf metadatainformer.SharedInformerFactory
	started := make(chan struct{})
	var runs []func()
	for _, c := range strings.Split(controllers, ",") {
		switch strings.TrimSpace(c) {
		case "statefulset":
			sc := statefulset.NewStatefulSetController(ctx, f.Core().V1().Pods(), f.Apps().V1().StatefulSets(),
				f.Core().V1().PersistentVolumeClaims(), f.Apps().V1().ControllerRevisions(), cs)
			runs = append(runs, func() { sc.Run(ctx, workers) })
		case "garbagecollector":
			// As kube-controller-manager sets it up: a metadata informer for
			// every deletable resource, found by discovery and refreshed.
			mc, err := metadata.NewForConfig(cfg)
			if err != nil {
				return err
			}
			dc, err := discovery.NewDiscoveryClientForConfig(cfg)
			if err != nil {
				return err
			}
			mapper := restmapper.NewDeferredDiscoveryRESTMapper(cacheddiscovery.NewMemCacheClient(dc))
			go wait.Until(mapper.Reset, gcSync, ctx.Done())
			mf = metadatainformer.NewSharedInformerFactory(mc, 0)
			gb := garbagecollector.NewDependencyGraphBuilder(ctx, mc, mapper, garbagecollector.DefaultIgnoredResources(),
				informerfactory.NewInformerFactory(f, mf), started)
			gc, err := garbagecollector.NewComposedGarbageCollector(ctx, cs, mc, mapper, gb)
			if err != nil {
				return fmt.Errorf("garbage collector: %w", err)
			}
			runs = append(runs, func() { gc.Run(ctx, workers, gcSync) }, func() { gc.Sync(ctx, dc, gcSync) })
		case "":
		default:
			return fmt.Errorf("--controllers: unknown controller %q (known: statefulset, garbagecollector)", c)
		}
	}
	f.Start(ctx.Done())
	if mf != nil {
		mf.Start(ctx.Done())
	}
	close(started)
	for _, r := range runs {
		go r()
	}
	if readyz != "" {
		l, err := net.Listen("tcp", readyz)
		if err != nil {
			return fmt.Errorf("--readyz-address: %w", err)
		}
		var synced atomic.Bool
		mux := http.NewServeMux()
		mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
			if !synced.Load() {
				http.Error(w, "informers not synced", http.StatusServiceUnavailable)
				return
			}
			fmt.Fprintln(w, "ok")
		})
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go srv.Serve(l)
		defer srv.Close()
		go func() {
			f.WaitForCacheSync(ctx.Done())
			if mf != nil {
				mf.WaitForCacheSync(ctx.Done())
			}
			synced.Store(ctx.Err() == nil)
		}()
	}
	<-ctx.Done()
	f.Shutdown()
	if mf != nil {
		mf.Shutdown()
	}
	return nil
}
