package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gandiva-sched/gandiva/internal/kube"
	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
	"github.com/gandiva-sched/gandiva/internal/kube/ctl"
	"github.com/gandiva-sched/gandiva/internal/kube/kubebench"
	"github.com/gandiva-sched/gandiva/internal/plural"
)

// gandiva kube: the Kubernetes scheduler, and its local bring-up.

func newKubeCmd() *cobra.Command {
	var (
		kubeconfig, policy, ns, lease, uiListen string
		metricsAddr, pprofAddr                  string
		resvImage                               string
		workers                                 int
		verbose                                 bool
		clockSpeed                              float64
		leaseDur, renewDeadline, retryPeriod    time.Duration
		startUpGrace                            time.Duration
	)
	cmd := &cobra.Command{
		Use:   "kube",
		Short: "Schedule a Kubernetes cluster's GPU Jobs (schedulerName: gandiva) with Gandiva's engine and policies",
		Long: `Run Gandiva as a second scheduler of a Kubernetes cluster: Jobs (and plain pods) whose pod
template names Gandiva (schedulerName: gandiva) are gangs the engine schedules with the chosen policy; their
pods are bound through the binding subresource, and preemption, migration and grow-shrink suspend
and resume the Jobs (the in-job client checkpoints on SIGTERM). Each namespace is a user.

Replicas elect a leader through a Lease in --namespace; the others wait. The state is rebuilt from
the API server when a replica takes over. Run-time settings (tickets of gandiva-fair) come from the
ConfigMap gandiva-settings in --namespace: key tickets.NAMESPACE, value the tickets.

Shared mode: on nodes labelled gandiva.io/shared=true, a reservation pod (--reservation-image) holds
every GPU for Gandiva; jobs whose pods carry the annotation gandiva.io/gpus: N (and request no
nvidia.com/gpu) run there, suspended and resumed in place and packed by the policy through the node
agent (gandiva agent --kube), which carries out the gandiva.io/assign annotations the scheduler writes.

--ui-listen serves the web dashboard (docs/DASHBOARD.md): tokens are Kubernetes tokens, checked
with TokenReview; one that may list pods everywhere sees every job, another one namespace's.

docs/KUBERNETES.md takes a platform team from nothing to a scheduled Job; gandiva kube dev runs a
local control plane to try it.`,
		Example: `  gandiva kube --kubeconfig ~/.kube/config --policy tiresias-l
  gandiva kube --policy 'gandiva-fair:tickets=team-a:4/team-b:1'   # in a pod: in-cluster config`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := positive("--clock-speed", clockSpeed); err != nil {
				return err
			}
			if err := leaseTimes(leaseDur, renewDeadline, retryPeriod); err != nil {
				return err
			}
			cfg, err := kubeConfig(kubeconfig)
			if err != nil {
				return err
			}
			log := newLogger(cmd.ErrOrStderr(), verbose)
			o := kube.Options{Policy: policy, Namespace: ns, LeaseName: lease, Workers: workers, Log: log, ReservationImage: resvImage, ClockSpeed: clockSpeed,
				LeaseDuration: leaseDur, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod, StartUpGrace: startUpGrace}
			stop, err := serveKubeUI(cmd.Context(), cfg, uiListen, &o)
			if err != nil {
				return err
			}
			defer stop()
			stopMetrics, err := serveKubeMetrics(cmd.Context(), metricsAddr, &o)
			if err != nil {
				return err
			}
			defer stopMetrics()
			stopPprof, err := servePprof(cmd.Context(), "--pprof-addr", pprofAddr, log)
			if err != nil {
				return err
			}
			defer stopPprof()
			err = kube.Run(cmd.Context(), cfg, o)
			if errors.Is(err, kube.ErrLostLease) {
				log.Error("another replica leads now; exiting so this one restarts and waits")
			}
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, then the in-cluster config, then ~/.kube/config)")
	fl.StringVar(&policy, "policy", "tiresias-l", "scheduling policy, with optional :key=value;... parameters")
	fl.StringVar(&ns, "namespace", "gandiva-system", "namespace of the leader Lease and the settings ConfigMap (created if missing, where the account may; else gandiva kube exits saying so)")
	fl.StringVar(&lease, "lease-name", "gandiva-scheduler", "name of the leader-election Lease")
	fl.DurationVar(&leaseDur, "lease-duration", 15*time.Second, "leader election: how long a Lease not renewed keeps other replicas waiting")
	fl.DurationVar(&renewDeadline, "lease-renew-deadline", 10*time.Second, "leader election: the leader gives up (and exits) when it could not renew its Lease for this long; less than --lease-duration")
	fl.DurationVar(&retryPeriod, "lease-retry-period", 2*time.Second, "leader election: time between tries to take or renew the Lease; less than --lease-renew-deadline")
	fl.IntVar(&workers, "workers", 256, "concurrent API calls (bindings, patches)")
	fl.StringVar(&resvImage, "reservation-image", kube.DefaultReservationImage, "image of the reservation pods that hold shared nodes' GPUs (nodes labelled gandiva.io/shared=true; docs/KUBERNETES.md)")
	fl.StringVar(&uiListen, "ui-listen", "", "serve the web dashboard (/ui/, tokens checked with TokenReview) on this address, e.g. 127.0.0.1:8080 (off if empty; docs/DASHBOARD.md)")
	fl.StringVar(&metricsAddr, "metrics-addr", "", "serve Prometheus metrics (/metrics, plain HTTP, no authentication) on this address, e.g. :9090 (off if empty; docs/KUBERNETES.md)")
	fl.StringVar(&pprofAddr, "pprof-addr", "", "serve Go's CPU and heap profiles (/debug/pprof/, no authentication) on this loopback address, e.g. 127.0.0.1:6060 (off if empty)")
	fl.BoolVar(&verbose, "verbose", false, "debug logging")
	fl.DurationVar(&startUpGrace, "start-up-grace", 0, "if above 0, a workload is not charged service (Tiresias' attained GPU time, a time-slice) from its placement until all its pods run, for at most this long of wall time, e.g. 10m (off by default: charged from its placement; docs/KUBERNETES.md)")
	fl.Float64Var(&clockSpeed, "clock-speed", 1, "NOT FOR PRODUCTION (simulations and arenas only): the engine's clock runs this many times faster than the wall clock, so a policy's time constants and declared seconds per mini-batch are in seconds of a trace replayed that much faster")
	cmd.AddCommand(newKubeDevCmd(), newKubeBenchCmd(), newKubeArenaCmd(), newKubeQueuesCmd())
	return cmd
}

func newKubeBenchCmd() *cobra.Command {
	var (
		c          kubebench.Config
		schedulers string
		qps        float64
		profile    string
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure pods bound per second and create→bound latency of gandiva kube and kube-scheduler on a local control plane",
		Long: `Bring up a local control plane with --nodes kwok nodes of --gpus GPUs, create --pods pending
1-GPU pods and --gangs gangs of --gang-size, and let each scheduler in turn bind what fits; then
create --latency pods one by one at --rate per second on an empty cluster and measure the time
from create to bound. The runs share the control plane: the previous run's pods are deleted in
between, and what they leave may slow the later runs, so alternate the schedulers; with --fresh
each run gets a control plane of its own, brought up the same way. Prints a table
(docs/PERFORMANCE.md). Needs scripts/kube-tools' binaries.`,
		Example: `  gandiva kube bench --nodes 200 --gpus 8 --pods 1500 --gangs 100 --gang-size 8`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c.Schedulers = strings.Split(schedulers, ",")
			c.QPS, c.Burst = float32(qps), int(2*qps)
			c.Log = cmd.ErrOrStderr()
			if profile != "" {
				f, err := os.Create(profile)
				if err != nil {
					return err
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return err
				}
				defer pprof.StopCPUProfile()
			}
			res, err := kubebench.Run(cmd.Context(), c)
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "%d nodes x %d GPUs; backlog %d 1-GPU pods + %d gangs of %d; gandiva policy %s; API clients %g QPS\n\n",
				c.Nodes, c.GPUs, c.Pods, c.Gangs, c.GangSize, c.Policy, qps)
			fmt.Fprintf(w, "| scheduler | bound / pending | first bind (s) | last bind (s) | pods bound/s | create→bound p50 | p99 | max | in the scheduler p50 / p99 | rounds | mean round | max round |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
			ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/1e6) }
			for _, r := range res {
				sched, rounds := "", ""
				if r.Rounds > 0 {
					sched = ms(r.SchedP50) + " / " + ms(r.SchedP99) + " (binding call " + ms(r.CallP50) + " / " + ms(r.CallP99) + ")"
					rounds = fmt.Sprintf("%d | %s | %s", r.Rounds, ms(r.MeanRound), ms(r.MaxRound))
				} else {
					rounds = " | | "
				}
				fmt.Fprintf(w, "| %s | %d / %d | %.2f | %.2f | %.0f | %s | %s | %s | %s | %s |\n", r.Scheduler, r.Bound, r.Pending,
					r.FirstBind.Seconds(), r.LastBind.Seconds(), r.Rate, ms(r.P50), ms(r.P99), ms(r.Max), sched, rounds)
			}
			return err
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&c.Nodes, "nodes", 200, "kwok nodes")
	fl.IntVar(&c.GPUs, "gpus", 8, "nvidia.com/gpu per node")
	fl.IntVar(&c.Pods, "pods", 1500, "pending 1-GPU pods")
	fl.IntVar(&c.Gangs, "gangs", 100, "pending gangs")
	fl.IntVar(&c.GangSize, "gang-size", 8, "1-GPU pods per gang")
	fl.IntVar(&c.Latency, "latency", 300, "pods created one by one for create→bound (0: skip)")
	fl.Float64Var(&c.Rate, "rate", 20, "pods per second in the latency phase")
	fl.StringVar(&c.Policy, "policy", "fjf", "gandiva's policy")
	fl.IntVar(&c.Workers, "workers", 256, "gandiva's concurrent API calls (bindings, patches)")
	fl.StringVar(&schedulers, "schedulers", "kube-scheduler,gandiva", "schedulers to measure, in order")
	fl.BoolVar(&c.Fresh, "fresh", false, "a control plane of its own for each scheduler run, brought up the same way (default: one for all, the later runs sharing it with the earlier runs' leftovers)")
	fl.Float64Var(&qps, "qps", 500, "QPS of both schedulers' API clients (burst twice that)")
	fl.StringVar(&profile, "cpuprofile", "", "write a CPU profile of this process (gandiva runs in it) to this file")
	return cmd
}

// serveKubeUI starts the dashboard on addr ("" : none) and sets
// o.Dashboard; stop ends it.
func serveKubeUI(ctx context.Context, cfg *rest.Config, addr string, o *kube.Options) (stop func(), err error) {
	if addr == "" {
		return func() {}, nil
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("--ui-listen: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--ui-listen %q: %w", addr, err)
	}
	o.Dashboard = kube.NewDashboard()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := o.Dashboard.Serve(ctx, ln, cs, o.Log); err != nil {
			o.Log.Error("dashboard stopped", "err", err)
		}
	}()
	o.Log.Info("dashboard", "url", "http://"+ln.Addr().String()+"/ui/")
	return func() { cancel(); <-done }, nil
}

// serveKubeMetrics serves /metrics on addr ("": none) and sets
// o.Metrics; stop ends it.
func serveKubeMetrics(ctx context.Context, addr string, o *kube.Options) (stop func(), err error) {
	if addr == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr %q: %w", addr, err)
	}
	o.Metrics = kube.NewMetrics()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := o.Metrics.Serve(ctx, ln); err != nil {
			o.Log.Error("metrics server stopped", "err", err)
		}
	}()
	o.Log.Info("metrics", "url", "http://"+ln.Addr().String()+"/metrics")
	return func() { cancel(); <-done }, nil
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

// devExamples are the examples of deploy/examples that the workload
// controllers of kube dev --workloads run, by controller.
var devExamples = map[string]string{
	ctl.JobSet:  "jobset.yaml",
	ctl.Trainer: "trainjob.yaml",
	ctl.LWS:     "leaderworkerset.yaml",
	ctl.KubeRay: "rayjob.yaml",
	ctl.PyTorch: "pytorchjob.yaml",
}

func newKubeDevCmd() *cobra.Command {
	var (
		nodes, gpus, sharedNodes         int
		policy, out, uiListen, workloads string
		verbose                          bool
	)
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a local Kubernetes control plane with fake GPU nodes, and gandiva kube on it",
		Long: `Bring up a real control plane on this machine (etcd, kube-apiserver, the Job and pod-GC
controllers) with kwok playing --nodes fake nodes of --gpus nvidia.com/gpu each, write an admin
kubeconfig to --kubeconfig-out, and run gandiva kube against it until Ctrl-C; then everything is
removed. No containers run: kwok marks bound pods Running, and this process plays their processes.
A pod of a job with gandiva.io/iters and gandiva.io/iter-time (on the Job) counts mini-batches of
iter-time seconds while it runs (not while suspended; a suspended or moved job's next pods go on
from where it stopped) and exits 0 once the job has done iters of them; a job without iters runs
until its pods are ended (kubectl annotate pod POD kubetest.gandiva.io/exit=0) or its Job deleted.

--shared-nodes N makes the last N of the nodes shared nodes (labelled gandiva.io/shared=true), each
with a node agent (gandiva agent --kube) run in this process: shared jobs (deploy/examples/shared-job.yaml)
are bound there with their gandiva.io/assign, beside the node's reservation pod. Their processes are
played as in-job clients that attach to the agent, report their progress and are suspended and
resumed in place (no GPU, no state), so that time-slicing can be watched (docs/KUBERNETES.md, "Try
shared mode on one machine").

--workloads jobset,trainer,lws,ray,pytorch (or all) also runs the real workload controllers, so
that the JobSet, TrainJob, LeaderWorkerSet, RayJob and PyTorchJob examples of deploy/examples run:
it installs their CRDs and webhooks (read from third_party/ of the checkout it is run in) and
starts the JobSet, Kubeflow Trainer (with JobSet), LeaderWorkerSet (with Kubernetes' StatefulSet
controller and garbage collector), KubeRay and Kubeflow Training Operator v1 controllers, built by
scripts/kube-workloads (after scripts/kube-tools), each logging to a file it names; Ctrl-C stops
them with the rest. The Training Operator reads its webhook certificates from the fixed
/tmp/k8s-webhook-server/serving-certs, which kube dev makes (or keeps, if it is this user's own,
not a link, and writable by no one else) and fills from the operator's Secret. KubeRay's
RayJob does not run to completion here: its operator reaches the Ray dashboard through a cluster
DNS name, which a local plane does not have, and no container runs Ray (docs/KUBERNETES.md).

You drive it with kubectl (not built by scripts/kube-tools; v1.33 to v1.35, docs/KUBERNETES.md says
how to get it) and gandiva jobs --kube.

The binaries come from scripts/kube-tools (built once from the Go module proxy, about 20 minutes,
then cached).`,
		Example: `  scripts/kube-tools && gandiva kube dev
  KUBECONFIG=/tmp/gandiva-dev.kubeconfig kubectl apply -f deploy/examples/job.yaml
  KUBECONFIG=/tmp/gandiva-dev.kubeconfig gandiva jobs --kube -n team-a
  gandiva kube dev --shared-nodes 1 --ui-listen 127.0.0.1:8080
  KUBECONFIG=/tmp/gandiva-dev.kubeconfig kubectl apply -f deploy/examples/shared-job.yaml
  scripts/kube-workloads && gandiva kube dev --workloads all
  KUBECONFIG=/tmp/gandiva-dev.kubeconfig kubectl apply -f deploy/examples/jobset.yaml
  gandiva kube dev --workloads pytorch
  KUBECONFIG=/tmp/gandiva-dev.kubeconfig kubectl apply -f deploy/examples/pytorchjob.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := kube.CheckPolicy(policy); err != nil {
				return err
			}
			ctls, err := ctl.Workloads(workloads)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			stderr := cmd.ErrOrStderr()
			log := newLogger(stderr, verbose)
			fmt.Fprintf(stderr, "starting a local control plane (binaries in %s)...\n", cplane.BinDir())
			if len(ctls) > 0 {
				fmt.Fprintf(stderr, "then the workload controllers %s, with their CRDs and webhooks (a minute or more)...\n", strings.Join(ctls, ", "))
			}
			d, err := kube.StartDev(ctx, kube.DevOptions{Nodes: nodes, GPUs: gpus, SharedNodes: sharedNodes, Workloads: ctls, Log: log})
			if err != nil {
				return err
			}
			defer d.Stop()
			if err := d.Plane.WriteKubeconfig(out, "admin"); err != nil {
				return err
			}
			defer os.Remove(out)
			fmt.Fprintf(stderr, "control plane at %s with %s of %s, namespaces gandiva-system and team-a\n  export KUBECONFIG=%s\n  kubectl apply -f deploy/examples/job.yaml\n  gandiva jobs --kube -n team-a\n",
				d.Plane.URL, plural.Of(nodes, "kwok node"), plural.Of(gpus, "GPU"), out)
			if len(d.SharedNodes) > 0 {
				fmt.Fprintf(stderr, "shared nodes (gandiva.io/shared=true, a node agent each): %s\n  kubectl apply -f deploy/examples/shared-job.yaml\n",
					strings.Join(d.SharedNodes, ", "))
			}
			if d.Workloads != nil {
				fmt.Fprintf(stderr, "workload controllers (their CRDs installed), each logging to a file:\n")
				for _, n := range d.Workloads.Order {
					fmt.Fprintf(stderr, "  %-9s %s\n", n, d.Workloads.ByName[n].Log)
				}
				fmt.Fprintf(stderr, "their examples:\n")
				for _, n := range d.Workloads.Order {
					if ex, ok := devExamples[n]; ok {
						fmt.Fprintf(stderr, "  kubectl apply -f deploy/examples/%s\n", ex)
					}
				}
			}
			fmt.Fprintf(stderr, "Ctrl-C stops it and removes everything")
			if d.Workloads != nil && d.Workloads.ByName[ctl.PyTorch] != nil {
				fmt.Fprintf(stderr, " but the Training Operator's certificate directory %s (the operators of this machine share it)", ctl.OperatorCertDir)
			}
			fmt.Fprintf(stderr, ".\n")
			o := kube.Options{Policy: policy, Log: log}
			stop, err := serveKubeUI(ctx, d.Config(), uiListen, &o)
			if err != nil {
				return err
			}
			defer stop()
			return kube.Run(ctx, d.Config(), o)
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&nodes, "nodes", 4, "fake GPU nodes")
	fl.IntVar(&gpus, "gpus", 8, "nvidia.com/gpu per node")
	fl.IntVar(&sharedNodes, "shared-nodes", 0, "how many of the --nodes (the last ones) are shared nodes, labelled gandiva.io/shared=true, with a node agent each")
	fl.StringVar(&policy, "policy", "tiresias-l", "scheduling policy")
	fl.StringVar(&workloads, "workloads", "", "run these workload controllers too, comma-separated: jobset, trainer, lws, ray, pytorch, or all (built by scripts/kube-workloads; run from the checkout)")
	fl.StringVar(&uiListen, "ui-listen", "", "serve the web dashboard on this address, e.g. 127.0.0.1:8080 (the admin token: kubectl config view --raw)")
	fl.StringVar(&out, "kubeconfig-out", filepath.Join(os.TempDir(), "gandiva-dev.kubeconfig"), "where to write the admin kubeconfig")
	fl.BoolVar(&verbose, "verbose", false, "debug logging")
	return cmd
}

// leaseTimes checks the leader election's durations: each positive, the
// retry period shorter than the renew deadline, shorter than the lease.
func leaseTimes(lease, renew, retry time.Duration) error {
	switch {
	case lease <= 0 || renew <= 0 || retry <= 0:
		return fmt.Errorf("--lease-duration, --lease-renew-deadline, --lease-retry-period: must be positive (got %v, %v, %v)", lease, renew, retry)
	case renew >= lease:
		return fmt.Errorf("--lease-renew-deadline %v: must be less than --lease-duration %v", renew, lease)
	case retry >= renew:
		return fmt.Errorf("--lease-retry-period %v: must be less than --lease-renew-deadline %v", retry, renew)
	}
	return nil
}
