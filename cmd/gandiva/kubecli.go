package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gandiva-sched/gandiva/internal/kube"
	"github.com/gandiva-sched/gandiva/internal/kubecli"
)

// kubeClient holds the --kube flags of jobs, status and explain: with
// --kube they read a Kubernetes cluster's workloads of Gandiva (Jobs,
// JobSets, TrainJobs, RayJobs, LeaderWorkerSets, plain pods, their Events
// and conditions) instead of asking a server.
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
	wrap := func(c *cobra.Command, run func(*cobra.Command, kubernetes.Interface, dynamic.Interface, []string) error) {
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
			dyn, err := dynamic.NewForConfig(cfg)
			if err != nil {
				return fmt.Errorf("--kube: %w", err)
			}
			return run(cmd, cs, dyn, args)
		}
	}
	wrap(jobs, func(cmd *cobra.Command, cs kubernetes.Interface, dyn dynamic.Interface, _ []string) error {
		ns := k.namespace()
		if k.allNamespaces {
			ns = ""
		}
		views, notes, err := kube.ListKinds(cmd.Context(), cs, dyn, ns)
		kubecli.PrintNotes(cmd.ErrOrStderr(), notes)
		if err != nil {
			return err
		}
		if f.json {
			return printJSON(cmd.OutOrStdout(), views)
		}
		return kubecli.PrintJobs(cmd.OutOrStdout(), views, time.Now())
	})
	wrap(status, func(cmd *cobra.Command, cs kubernetes.Interface, dyn dynamic.Interface, args []string) error {
		ns, name := k.job(args[0])
		v, notes, err := kube.DescribeKinds(cmd.Context(), cs, dyn, ns, name)
		kubecli.PrintNotes(cmd.ErrOrStderr(), notes)
		if err != nil {
			return err
		}
		if f.json {
			return printJSON(cmd.OutOrStdout(), v)
		}
		kubecli.PrintStatus(cmd.OutOrStdout(), v)
		return nil
	})
	wrap(explain, func(cmd *cobra.Command, cs kubernetes.Interface, dyn dynamic.Interface, args []string) error {
		ns, name := k.job(args[0])
		v, notes, err := kube.DescribeKinds(cmd.Context(), cs, dyn, ns, name)
		kubecli.PrintNotes(cmd.ErrOrStderr(), notes)
		if err != nil {
			return err
		}
		if f.json {
			return printJSON(cmd.OutOrStdout(), v)
		}
		kubecli.PrintExplain(cmd.OutOrStdout(), v)
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
