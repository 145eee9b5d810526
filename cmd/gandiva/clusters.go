package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/policy/registry"
)

func newClustersCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "presets",
		Aliases: []string{"clusters", "policies"},
		Short:   "List the built-in clusters, GPU types and policies",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "CLUSTER\tDESCRIPTION")
			for _, p := range cluster.Presets() {
				fmt.Fprintf(tw, "%s\t%s\n", p.Name, p.Doc)
			}
			fmt.Fprintln(tw, "\nGPU TYPE\tSPEED (V100 = 1)\tMEMORY GiB")
			for _, t := range cluster.KnownGPUTypes() {
				fmt.Fprintf(tw, "%s\t%.3f\t%.0f\n", t.Name, t.Speed, t.MemGiB)
			}
			fmt.Fprintln(tw, "\nPOLICY\tDESCRIPTION")
			for _, e := range registry.All() {
				fmt.Fprintf(tw, "%s\t%s\n", e.Name, e.Doc)
			}
			return tw.Flush()
		},
	}
}
