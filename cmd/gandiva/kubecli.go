package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gandiva-sched/gandiva/internal/kube"
	"github.com/gandiva-sched/gandiva/internal/visible"
)

// kubeClient holds the --kube flags of jobs, status and explain: with
// --kube they read a Kubernetes cluster's workloads of Gandiva (Jobs,
// plain pods, their Events and conditions) instead of asking a server.
type kubeClient struct {
	on             bool
	kubeconfig, ns string
	allNamespaces  bool
}

// addKube gives jobs, status and explain their --kube variants.
func addKube(f *clientFlags, jobs, status, explain *cobra.Command) {
	k := &kubeClient{}
	for _, c := range []*cobra.Command{jobs, status, explain} {
		fl := c.Flags()
		fl.BoolVar(&k.on, "kube", false, "read a Kubernetes cluster scheduled by gandiva kube (docs/KUBERNETES.md)")
		fl.StringVar(&k.kubeconfig, "kubeconfig", "", "with --kube: kubeconfig ($KUBECONFIG, ~/.kube/config, in-cluster)")
		fl.StringVarP(&k.ns, "namespace", "n", "", "with --kube: the namespace (the user; default: the kubeconfig context's); JOB may also be NAMESPACE/NAME")
	}
	jobs.Flags().BoolVarP(&k.allNamespaces, "all-namespaces", "A", false, "with --kube: every namespace")
	wrap := func(c *cobra.Command, run func(*cobra.Command, kubernetes.Interface, []string) error) {
		inner := c.RunE
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if !k.on {
				return inner(cmd, args)
			}
			cfg, err := kubeConfig(k.kubeconfig)
			if err != nil {
				return err
			}
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return fmt.Errorf("--kube: %w", err)
			}
			return run(cmd, cs, args)
		}
	}
	wrap(jobs, func(cmd *cobra.Command, cs kubernetes.Interface, _ []string) error {
		ns := k.namespace()
		if k.allNamespaces {
			ns = ""
		}
		views, err := kube.List(cmd.Context(), cs, ns)
		if err != nil {
			return err
		}
		if f.json {
			return printJSON(cmd.OutOrStdout(), views)
		}
		return printKubeJobs(cmd.OutOrStdout(), views, time.Now())
	})
	wrap(status, func(cmd *cobra.Command, cs kubernetes.Interface, args []string) error {
		ns, name := k.job(args[0])
		v, err := kube.Describe(cmd.Context(), cs, ns, name)
		if err != nil {
			return err
		}
		if f.json {
			return printJSON(cmd.OutOrStdout(), v)
		}
		printKubeStatus(cmd.OutOrStdout(), v)
		return nil
	})
	wrap(explain, func(cmd *cobra.Command, cs kubernetes.Interface, args []string) error {
		ns, name := k.job(args[0])
		v, err := kube.Describe(cmd.Context(), cs, ns, name)
		if err != nil {
			return err
		}
		if f.json {
			return printJSON(cmd.OutOrStdout(), v)
		}
		printKubeExplain(cmd.OutOrStdout(), v)
		return nil
	})
}

// namespace is --namespace, else the kubeconfig context's (as kubectl),
// else default.
func (k *kubeClient) namespace() string {
	if k.ns != "" {
		return k.ns
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = k.kubeconfig
	ns, _, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).Namespace()
	if err != nil || ns == "" {
		return "default"
	}
	return ns
}

// job splits NAMESPACE/NAME (or NAME, in --namespace).
func (k *kubeClient) job(arg string) (ns, name string) {
	if i := strings.IndexByte(arg, '/'); i >= 0 {
		return arg[:i], arg[i+1:]
	}
	return k.namespace(), arg
}

func printKubeJobs(w io.Writer, views []kube.JobView, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tNAME\tKIND\tGPUS\tSTATE\tWHERE\tAGE\tREASON")
	for _, v := range views {
		reason := v.Reason
		if reason == "" && v.ETA != "" {
			reason = "ETA: " + v.ETA // (a running job's end)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", visible.String(v.Namespace), visible.String(v.Name), visible.String(v.Kind), v.GPUs, visible.String(v.State),
			orDash(visible.String(v.Placement)), now.Sub(v.Created).Round(time.Second), visible.String(reason))
	}
	return tw.Flush()
}

// printKubeStatus, printKubeExplain and printKubeJobs show every string of
// the cluster's objects through visible.String: pod owners and whoever may
// write events control them.
func printKubeStatus(w io.Writer, v kube.JobView) {
	fmt.Fprintf(w, "%s/%s (%s): %s", visible.String(v.Namespace), visible.String(v.Name), visible.String(v.Kind), visible.String(v.State))
	if v.Reason != "" {
		fmt.Fprintf(w, " — %s", visible.String(v.Reason))
	}
	fmt.Fprintf(w, "\n  gpus:    %d (%d pods of %d)\n  where:   %s\n", v.GPUs, v.Gang, v.PodGPUs, orDash(visible.String(v.Placement)))
	if v.ETA != "" {
		fmt.Fprintf(w, "  eta:     %s (a forecast; docs/KUBERNETES.md)\n", visible.String(v.ETA))
	}
	fmt.Fprintln(w, "  pods:")
	if v.Shared {
		fmt.Fprintf(w, "  mode:    shared (suspended and resumed in place by the node agent; may be packed)\n")
	}
	for _, p := range v.Pods {
		fmt.Fprintf(w, "    %s  %s  %s", visible.String(p.Name), orDash(visible.String(p.Node)), visible.String(p.Phase))
		if p.Assign != "" {
			fmt.Fprintf(w, "  gpus %v  assigned %s (gen %d)", p.GPUs, visible.String(p.Assign), p.AssignGen)
			if p.Agent != "" {
				fmt.Fprintf(w, "  agent %s (gen %d, %d mini-batches", visible.String(p.Agent), p.AgentGen, p.Done)
				if p.IterTime > 0 {
					fmt.Fprintf(w, ", %.3f s each", p.IterTime)
				}
				fmt.Fprint(w, ")")
				if p.AgentError != "" {
					fmt.Fprintf(w, ": %s", visible.String(p.AgentError))
				}
			} else {
				fmt.Fprint(w, "  agent: no report yet")
			}
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "  events:")
	for _, e := range v.Events {
		fmt.Fprintf(w, "    %s  %s  %s  %s", e.At.Local().Format("15:04:05"), visible.String(e.Object), visible.String(e.Reason), visible.String(e.Message))
		if e.Count > 1 {
			fmt.Fprintf(w, " (×%d)", e.Count)
		}
		fmt.Fprintln(w)
	}
}

func printKubeExplain(w io.Writer, v kube.JobView) {
	ns, name := visible.String(v.Namespace), visible.String(v.Name)
	switch {
	case v.Reason != "":
		fmt.Fprintf(w, "%s/%s: %s\n", ns, name, visible.String(v.Reason))
	case v.State == "pending":
		fmt.Fprintf(w, "%s/%s: pending; gandiva kube has not said why yet (it tells a job after it has waited 2 s)\n", ns, name)
	default:
		fmt.Fprintf(w, "%s/%s: not waiting: %s on %s", ns, name, visible.String(v.State), orDash(visible.String(v.Placement)))
		if v.ETA != "" {
			fmt.Fprintf(w, "; ETA: %s", visible.String(v.ETA))
		}
		fmt.Fprintln(w)
	}
	pending := 0
	for _, p := range v.Pods {
		if p.Node == "" && p.Phase == "Pending" {
			pending++
		}
	}
	if pending > 0 {
		fmt.Fprintf(w, "  pods:  %d of %d pending (a gang is bound whole or not at all)\n", pending, len(v.Pods))
	}
}
