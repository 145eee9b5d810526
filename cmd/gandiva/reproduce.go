package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gandiva-sched/gandiva/internal/experiment"
)

// errFailed makes the command exit non-zero after printing its results.
var errFailed = errors.New("some figures missed their targets (see the pass column)")

func newReproduceCmd() *cobra.Command {
	var quick, quiet bool
	var format, out string
	var seed uint64
	cmd := &cobra.Command{
		Use:   "reproduce NAME",
		Short: "Reproduce a paper's figures in simulation and check them against targets",
		Long: `Reproduce the figures of one of the seed papers in the simulator and compare each with
the paper and with the target this project holds itself to.

--format json prints {"experiments": [{"name", "metric", "paper", "target", "ours", "pass"}]}.
--out DIR also writes DIR/NAME.md with tables and SVG plots (docs/results is where the
committed write-ups live). The command exits 1 if any figure misses its target.`,
		Args: cobra.ExactArgs(1),
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			var names []string
			for _, r := range experiment.Reproductions() {
				names = append(names, r.Name)
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := experiment.LookupReproduction(args[0])
			if err != nil {
				return err
			}
			if format != "table" && format != "json" {
				return fmt.Errorf("--format %q: use table or json", format)
			}
			opts := experiment.Options{Quick: quick, Seed: seed}
			if !quiet {
				stderr := cmd.ErrOrStderr()
				opts.Progress = func(msg string) { fmt.Fprintln(stderr, msg) }
			}
			rep, err := r.Run(opts)
			if err != nil {
				return err
			}
			if out != "" {
				if err := writeReport(out, rep); err != nil {
					return err
				}
			}
			w := cmd.OutOrStdout()
			if format == "json" {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				if err := enc.Encode(map[string]any{"experiments": rep.Checks}); err != nil {
					return err
				}
			} else {
				tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "EXPERIMENT\tMETRIC\tPAPER\tTARGET\tOURS\tPASS")
				for _, c := range rep.Checks {
					fmt.Fprintf(tw, "%s\t%s\t%v\t%s\t%v\t%v\n", c.Name, c.Metric, c.Paper, c.Target, c.Ours, c.Pass)
				}
				tw.Flush()
				for _, c := range rep.Checks {
					if !c.Pass && c.Note != "" {
						fmt.Fprintf(w, "\n%s: %s\n", c.Name, c.Note)
					}
				}
			}
			if !rep.Passed() {
				return errFailed
			}
			return nil
		},
	}
	var names []string
	for _, r := range experiment.Reproductions() {
		names = append(names, r.Name+" ("+r.Doc+")")
	}
	cmd.Long += "\n\nReproductions: " + strings.Join(names, "; ")
	cmd.Flags().BoolVar(&quick, "quick", false, "the reduced version CI runs (same checks, smaller runs)")
	cmd.Flags().StringVar(&format, "format", "table", "output: table or json")
	cmd.Flags().StringVar(&out, "out", "", "also write NAME.md and its SVG plots into this directory")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "random seed")
	cmd.Flags().BoolVar(&quiet, "quiet", false, "no progress lines on stderr")
	return cmd
}

func writeReport(dir string, rep *experiment.Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, data := range rep.Files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(dir, rep.Name+".md"), []byte(rep.Markdown), 0o644)
}
