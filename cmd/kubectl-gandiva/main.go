// Command kubectl-gandiva is the kubectl plugin of Gandiva's Kubernetes
// scheduler: kubectl runs any executable named kubectl-gandiva on PATH as
// `kubectl gandiva`. It shows what `gandiva kube` schedules, read from the
// API server alone, with kubectl's connection flags (--kubeconfig,
// --context, -n/--namespace, -A/--all-namespaces; kubectl passes none of
// its own to a plugin):
//
//	kubectl gandiva jobs [-n NS | -A]   the workloads, their state, where, why they wait
//	kubectl gandiva explain JOB         why JOB waits, and its ETA
//	kubectl gandiva status JOB          its pods, assignments and Events
//	kubectl gandiva queues              each namespace's tickets, usage and share
//	kubectl gandiva nodes               GPUs per node: Gandiva's, others', free
//
// Install: go install ./cmd/kubectl-gandiva (docs/KUBERNETES.md).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/gandiva-sched/gandiva/internal/kube"
	"github.com/gandiva-sched/gandiva/internal/kubecli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRoot().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// opts are the plugin's flags.
type opts struct {
	kubecli.Flags
	output            string
	settingsNamespace string
	settings          string
	timeout           time.Duration
}

func newRoot() *cobra.Command {
	o := &opts{}
	root := &cobra.Command{
		Use:   "kubectl-gandiva",
		Short: "Gandiva's view of a Kubernetes cluster: jobs, why they wait and when they start, queues, nodes",
		Long: `kubectl gandiva shows what gandiva kube (Gandiva's Kubernetes scheduler) schedules: the
workloads whose pods name schedulerName: gandiva, why each waits and its ETA, each namespace's
tickets, usage and share, and each node's GPUs. It reads the API server alone, with the
account of your kubeconfig (listing pods cluster-wide for queues and nodes).
docs/KUBERNETES.md.`,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl gandiva"},
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	o.Bind(root)
	pf := root.PersistentFlags()
	pf.StringVarP(&o.output, "output", "o", "", "output format: \"\" (tables) or json")
	pf.DurationVar(&o.timeout, "request-timeout", 30*time.Second, "give up on the API server after this long")
	var dyn dynamic.Interface
	connect := func(cmd *cobra.Command) (context.Context, context.CancelFunc, kubernetes.Interface, error) {
		if o.output != "" && o.output != "json" {
			return nil, nil, nil, fmt.Errorf("--output %q: want json, or nothing for tables", o.output)
		}
		cfg, err := o.Config()
		if err != nil {
			return nil, nil, nil, err
		}
		cfg.UserAgent = "kubectl-gandiva"
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("kubeconfig: %w", err)
		}
		if dyn, err = dynamic.NewForConfig(cfg); err != nil {
			return nil, nil, nil, fmt.Errorf("kubeconfig: %w", err)
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), o.timeout)
		return ctx, cancel, cs, nil
	}
	jobs := &cobra.Command{
		Use:     "jobs",
		Aliases: []string{"job", "workloads"},
		Short:   "List Gandiva's workloads: state, GPUs, where they run, why they wait",
		Example: "  kubectl gandiva jobs -n team-a\n  kubectl gandiva jobs -A -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return show(cmd, o, connect, func(ctx context.Context, cs kubernetes.Interface) ([]kube.JobView, []string, error) {
				return kube.ListKinds(ctx, cs, dyn, o.NS(true))
			}, func(w io.Writer, views []kube.JobView) error { return kubecli.PrintJobs(w, views, time.Now()) })
		},
	}
	describe := func(use, short string, print func(io.Writer, kube.JobView)) *cobra.Command {
		return &cobra.Command{
			Use:   use + " JOB",
			Short: short,
			Long: short + `. JOB is a Job's, JobSet's, TrainJob's, RayJob's or LeaderWorkerSet's name, or a
plain-pod gang's gandiva.io/job label (or its pod's name), in --namespace; or NAMESPACE/NAME.`,
			Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				ns, name := o.Job(args[0])
				return show(cmd, o, connect, func(ctx context.Context, cs kubernetes.Interface) (kube.JobView, []string, error) {
					return kube.DescribeKinds(ctx, cs, dyn, ns, name)
				}, func(w io.Writer, v kube.JobView) error { print(w, v); return nil })
			},
		}
	}
	queues := &cobra.Command{
		Use:     "queues",
		Aliases: []string{"queue"},
		Short:   "The GandivaQueues (tree, tickets, GPUs held, share, entitlement), then each namespace's tickets, GPUs held and share, GPUs it waits for",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return show(cmd, o, connect, func(ctx context.Context, cs kubernetes.Interface) (kube.QueuesInfo, []string, error) {
				info, err := kube.Queues(ctx, cs, dyn, o.settingsNamespace, o.settings)
				return info, nil, err
			}, kubecli.PrintQueues)
		},
	}
	queues.Flags().StringVar(&o.settingsNamespace, "gandiva-namespace", "gandiva-system", "the namespace of gandiva kube (its --namespace), which holds the settings ConfigMap")
	queues.Flags().StringVar(&o.settings, "settings", "gandiva-settings", "the settings ConfigMap (tickets.NAMESPACE keys)")
	nodes := &cobra.Command{
		Use:     "nodes",
		Aliases: []string{"node"},
		Short:   "GPUs per node: held by Gandiva, by other schedulers, free; shared nodes and their reservations",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return show(cmd, o, connect, func(ctx context.Context, cs kubernetes.Interface) ([]kube.NodeView, []string, error) {
				views, err := kube.Nodes(ctx, cs)
				return views, nil, err
			}, kubecli.PrintNodes)
		},
	}
	root.AddCommand(jobs,
		describe("explain", "Why a workload waits (the scheduler's reason and its place in the queue) and its ETA", kubecli.PrintExplain),
		describe("status", "A workload's pods, their nodes and assignments, and Gandiva's Events on it", kubecli.PrintStatus),
		queues, nodes)
	return root
}

// connector opens the API server for one command: a context bounded by
// --request-timeout, its cancel, and a clientset.
type connector func(cmd *cobra.Command) (context.Context, context.CancelFunc, kubernetes.Interface, error)

// show is every subcommand's body: connect, read the view (its notes, such
// as a workload kind the account may not list, on stderr even when the read
// fails), and print it, as JSON with -o json, else with print.
func show[T any](cmd *cobra.Command, o *opts, connect connector,
	read func(context.Context, kubernetes.Interface) (T, []string, error), print func(io.Writer, T) error) error {
	ctx, cancel, cs, err := connect(cmd)
	if err != nil {
		return err
	}
	defer cancel()
	v, notes, err := read(ctx, cs)
	kubecli.PrintNotes(cmd.ErrOrStderr(), notes)
	if err != nil {
		return err
	}
	if o.output == "json" {
		return printJSON(cmd.OutOrStdout(), v)
	}
	return print(cmd.OutOrStdout(), v)
}

func printJSON(w io.Writer, v any) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(v)
}
