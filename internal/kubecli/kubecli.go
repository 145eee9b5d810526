// Package kubecli is what `gandiva jobs/status/explain --kube` and the
// kubectl plugin (cmd/kubectl-gandiva: `kubectl gandiva`) share: kubectl's
// connection flags, and the tables they print of a cluster's Gandiva
// workloads, queues and nodes (package kube reads them from the API
// server).
//
// Every string printed that comes from the cluster's objects goes through
// visible.String: pods' owners, and whoever may write Events, control it.
package kubecli

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gandiva-sched/gandiva/internal/kube"
	"github.com/gandiva-sched/gandiva/internal/visible"
)

// Flags are kubectl's connection flags, with kubectl's meaning: a
// kubeconfig (else $KUBECONFIG, a colon-separated list, else
// ~/.kube/config, else the in-cluster config), a context of it, the
// namespace (else the context's, else default) or every namespace.
type Flags struct {
	Kubeconfig, Context, Namespace string
	AllNamespaces                  bool
}

// Bind gives c and its subcommands --kubeconfig, --context,
// -n/--namespace and -A/--all-namespaces.
func (f *Flags) Bind(c *cobra.Command) {
	fs := c.PersistentFlags()
	fs.StringVar(&f.Kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then the in-cluster config)")
	fs.StringVar(&f.Context, "context", "", "the kubeconfig context to use")
	fs.StringVarP(&f.Namespace, "namespace", "n", "", "the namespace (default: the context's, else default); JOB may also be NAMESPACE/NAME")
	fs.BoolVarP(&f.AllNamespaces, "all-namespaces", "A", false, "every namespace")
}

func (f *Flags) clientConfig() clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.Kubeconfig
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: f.Context})
}

// Config is the REST config the flags name.
func (f *Flags) Config() (*rest.Config, error) {
	cfg, err := f.clientConfig().ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return cfg, nil
}

// NS is --namespace, else the context's namespace, else default; "" with
// --all-namespaces when all is true.
func (f *Flags) NS(all bool) string {
	if all && f.AllNamespaces {
		return ""
	}
	if f.Namespace != "" {
		return f.Namespace
	}
	ns, _, err := f.clientConfig().Namespace()
	if err != nil || ns == "" {
		return "default"
	}
	return ns
}

// Job splits NAMESPACE/NAME, or NAME in NS.
func (f *Flags) Job(arg string) (ns, name string) {
	if i := strings.IndexByte(arg, '/'); i >= 0 {
		return arg[:i], arg[i+1:]
	}
	return f.NS(false), arg
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// PrintNotes prints what a listing does not show and why (kube.ListKinds'
// notes), one line each, for stderr.
func PrintNotes(w io.Writer, notes []string) {
	for _, n := range notes {
		fmt.Fprintf(w, "note: %s\n", visible.String(n))
	}
}

// PrintJobs prints the workloads as a table; now gives their ages.
func PrintJobs(w io.Writer, views []kube.JobView, now time.Time) error {
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

// PrintStatus prints one workload: its pods, their assignments, its Events.
func PrintStatus(w io.Writer, v kube.JobView) {
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

// etaSep is what the scheduler puts between why a workload waits and its
// ETA in the waiting condition's message (package kube, eta.go).
const etaSep = "; ETA: "

// PrintExplain prints why a workload waits, with its ETA on a line of its
// own (a waiting one's start and end band, as the scheduler last wrote
// it; a running one's end).
func PrintExplain(w io.Writer, v kube.JobView) {
	ns, name := visible.String(v.Namespace), visible.String(v.Name)
	reason, eta, _ := strings.Cut(v.Reason, etaSep)
	refused := ""
	for _, e := range v.Events {
		if e.Reason == "NotSchedulable" {
			refused = e.Message // (the newest: Events are oldest first)
		}
	}
	switch {
	case v.Reason != "":
		fmt.Fprintf(w, "%s/%s: %s\n", ns, name, visible.String(reason))
	case v.State == "pending" && refused != "":
		// a workload Gandiva refuses is never submitted, so it gets no
		// reason: its Event says why
		fmt.Fprintf(w, "%s/%s: not scheduled: %s\n", ns, name, visible.String(refused))
	case v.State == "pending":
		fmt.Fprintf(w, "%s/%s: pending; gandiva kube has not said why yet (it tells a job after it has waited 2 s)\n", ns, name)
	default:
		fmt.Fprintf(w, "%s/%s: not waiting: %s on %s\n", ns, name, visible.String(v.State), orDash(visible.String(v.Placement)))
		eta = v.ETA
	}
	if eta != "" {
		fmt.Fprintf(w, "  eta:   %s\n", visible.String(eta))
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

// PrintQueues prints the GandivaQueues (their tree, tickets, GPUs held,
// share and entitlement as Gandiva last wrote them), then each namespace's
// tickets, entitlement, usage and share.
func PrintQueues(w io.Writer, info kube.QueuesInfo) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if len(info.Tree) > 0 {
		fmt.Fprintln(tw, "QUEUE\tTICKETS\tNAMESPACES\tQUOTA\tGPUS\tSHARE\tENTITLEMENT\tVALID")
		for _, q := range info.Tree {
			quota := make([]string, 0, len(q.Quota))
			for t, n := range q.Quota {
				quota = append(quota, fmt.Sprintf("%s=%d", visible.String(t), n))
			}
			slices.Sort(quota)
			valid := orDash(visible.String(q.Valid))
			if q.Valid == "False" && q.Why != "" {
				valid += ": " + visible.String(q.Why)
			}
			nss := make([]string, len(q.Namespaces))
			for i, ns := range q.Namespaces {
				nss[i] = visible.String(ns)
			}
			fmt.Fprintf(tw, "%s%s\t%g\t%s\t%s\t%d\t%.0f%%\t%.1f\t%s\n", strings.Repeat("  ", min(q.Depth, 16)), visible.String(q.Name), q.Tickets,
				orDash(strings.Join(nss, ",")), orDash(strings.Join(quota, ",")), q.GPUs, 100*q.Share, q.Entitlement, valid)
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprintln(tw, "NAMESPACE\tTICKETS\tENTITLED\tGPUS HELD\tSHARE\tGPUS PENDING\tRUNNING\tWAITING")
	for _, q := range info.Queues {
		t := fmt.Sprintf("%g", q.Tickets)
		if !q.TicketsSet {
			t += " (default)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%.0f%%\t%d\t%.0f%%\t%d\t%d\t%d\n", visible.String(q.Namespace), t, 100*q.Entitled, q.Held, 100*q.Share,
			q.Pending, q.Running, q.Waiting)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if info.SettingsErr != "" {
		fmt.Fprintf(w, "(tickets: ConfigMap %s: %s; a namespace without a key has gandiva-fair's default, %g unless its --policy parameters say otherwise)\n",
			visible.String(info.Settings), info.SettingsErr, kube.DefaultTickets)
	}
	if info.NoCRD {
		fmt.Fprintln(w, "(no GandivaQueue CRD installed: the namespaces' tickets are the settings ConfigMap's)")
	}
	fmt.Fprintf(w, "(namespaces: SHARE is GPUs held of the cluster's %d; ENTITLED is its tickets of all listed)\n", info.TotalGPUs)
	return nil
}

// PrintNodes prints each node's GPUs: held by Gandiva, by others, free;
// whether it is shared and its reservation.
func PrintNodes(w io.Writer, nodes []kube.NodeView) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSTATUS\tTYPE\tGPUS\tGANDIVA\tOTHERS\tFREE\tSHARED\tRESERVATION")
	var g, o, f, t int
	for _, n := range nodes {
		sh := "-"
		if n.Shared {
			sh = fmt.Sprintf("yes (%d pods)", n.SharedPods)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\n", visible.String(n.Name), n.Status, visible.String(n.GPUType), n.GPUs, n.Gandiva, n.Others, n.Free,
			sh, orDash(n.Reservation))
		t, g, o, f = t+n.GPUs, g+n.Gandiva, o+n.Others, f+n.Free
	}
	fmt.Fprintf(tw, "TOTAL\t\t\t%d\t%d\t%d\t%d\t\t\n", t, g, o, f)
	return tw.Flush()
}
