package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/gandiva-sched/gandiva/internal/kube"
)

// maxConfigMapBytes bounds the ConfigMap read (the API server's own bound
// on an object is about 1.5 MiB).
const maxConfigMapBytes = 4 << 20

func newKubeQueuesCmd() *cobra.Command {
	var from, parent string
	cmd := &cobra.Command{
		Use:   "queues --from-configmap FILE",
		Short: "Print GandivaQueues that give namespaces the shares the settings ConfigMap's tickets give them",
		Long: `Migrate the settings ConfigMap's tickets (tickets.NAMESPACE: N) to GandivaQueues: reads the
ConfigMap as YAML or JSON (FILE, or - for the standard input) and prints one GandivaQueue per
namespace, named after it, holding it, with its tickets: the same shares as before. With --parent
ORG the queues go under a new queue ORG (tickets 1), ready to be split into teams. Keys other than
tickets.* are named on the standard error and left in the ConfigMap. Nothing is read from or
written to a cluster:

  kubectl get configmap -n gandiva-system gandiva-settings -o yaml |
    gandiva kube queues --from-configmap - > queues.yaml
  kubectl apply -f queues.yaml

Once a queue holds a namespace, the ConfigMap's tickets of that namespace are ignored (the
scheduler logs a warning); remove them. See docs/KUBERNETES.md, "Queues".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if from == "" {
				return fmt.Errorf("--from-configmap: name the ConfigMap's file (or - for the standard input)")
			}
			var r io.Reader = cmd.InOrStdin()
			if from != "-" {
				f, err := os.Open(from)
				if err != nil {
					return fmt.Errorf("--from-configmap: %w", err)
				}
				defer f.Close()
				r = f
			}
			data, err := io.ReadAll(io.LimitReader(r, maxConfigMapBytes+1))
			if err != nil {
				return fmt.Errorf("--from-configmap %s: %w", from, err)
			}
			if len(data) > maxConfigMapBytes {
				return fmt.Errorf("--from-configmap %s: more than %d bytes", from, maxConfigMapBytes)
			}
			var cm corev1.ConfigMap
			if err := yaml.Unmarshal(data, &cm); err != nil {
				return fmt.Errorf("--from-configmap %s: %w", from, err)
			}
			if cm.Kind == "" {
				return fmt.Errorf("--from-configmap %s: no kind: want a ConfigMap (kind: ConfigMap), as kubectl get configmap -o yaml prints it", from)
			}
			if cm.Kind != "ConfigMap" {
				return fmt.Errorf("--from-configmap %s: a %q, not a ConfigMap", from, cm.Kind)
			}
			tickets := 0
			for k := range cm.Data {
				if strings.HasPrefix(k, "tickets.") {
					tickets++
				}
			}
			if tickets == 0 {
				return fmt.Errorf("--from-configmap %s: no tickets.NAMESPACE keys in its data: nothing to migrate", from)
			}
			out, skipped, err := kube.QueuesFromConfigMap(cm.Data, parent)
			if err != nil {
				return fmt.Errorf("--from-configmap %s: %w", from, err)
			}
			for _, k := range skipped {
				fmt.Fprintf(cmd.ErrOrStderr(), "gandiva kube queues: key %q is not tickets.NAMESPACE: left in the ConfigMap\n", k)
			}
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	}
	cmd.Flags().StringVar(&from, "from-configmap", "", "the settings ConfigMap as YAML or JSON (- for the standard input)")
	cmd.Flags().StringVar(&parent, "parent", "", "put the queues under a new queue of this name")
	return cmd
}
