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

// errRegressed makes the command exit non-zero after printing its results.
var errRegressed = errors.New("some outcomes regressed from the ones recorded in internal/experiment/outcomes.json")

func newReproduceCmd() *cobra.Command {
	var quick, quiet bool
	var format, out, phillyTrace string
	var seed uint64
	cmd := &cobra.Command{
		Use:   "reproduce NAME",
		Short: "Reproduce a paper's figures in simulation and check them against bands, over seeds",
		Long: `Reproduce the figures of one of the papers (docs/PAPERS.md) in the simulator. Every check is a
statistic over a set of seeds: the median of our figure, its 10th and 90th percentiles, and the
share of seeds whose figure lies in the check's band around the paper's. A check passes when the
median lies in the band and at least half the seeds do (every seed, for a claim that must hold on
any workload: min_pass_rate 1); otherwise it is a miss, and the write-up says why.

Seeds: --seed N runs the evaluation seeds N*1000+1 .. N*1000+20 (default N=1: 1001-1020), never
used while developing; --seed 0 runs the development seeds 1-20; --quick uses the first 5 of the
set and shorter runs (what CI runs). Deterministic checks (the Tiresias simulator's table, the
stride tables) have no seeds.

--format json prints {"reproduction", "quick", "seeds", "experiments": [{"name", "metric",
"paper", "band", "median", "p10", "p90", "pass_rate", "min_pass_rate", "seeds", "values", "outcome", "recorded",
"baseline", "reason"}], "regressions", "improvements"}; a band is [lo, hi] with null for an open
end. --out DIR also writes DIR/NAME.md with tables and SVG plots (docs/results is where the
committed write-ups live).

The command exits 1 when an outcome regresses from the one recorded in the repository
(internal/experiment/outcomes.json: a recorded pass that misses, a miss without a record, a
recorded check that is gone); a documented miss does not fail it.`,
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
			rec, err := experiment.LoadRecord()
			if err != nil {
				return err
			}
			opts := experiment.Options{Quick: quick, Seed: seed, PhillyTrace: phillyTrace}
			if !quiet {
				stderr := cmd.ErrOrStderr()
				opts.Progress = func(msg string) { fmt.Fprintln(stderr, msg) }
			}
			rep, err := r.Run(opts)
			if err != nil {
				return err
			}
			regressions, improvements := rep.Compare(rec)
			if out != "" {
				if err := writeReport(out, rep); err != nil {
					return err
				}
			}
			w := cmd.OutOrStdout()
			if format == "json" {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				if regressions == nil {
					regressions = []string{}
				}
				if improvements == nil {
					improvements = []string{}
				}
				if err := enc.Encode(map[string]any{"reproduction": rep.Name, "quick": rep.Quick, "seeds": rep.Seeds,
					"experiments": rep.Checks, "regressions": regressions, "improvements": improvements}); err != nil {
					return err
				}
			} else {
				tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "EXPERIMENT\tPAPER\tBAND\tMEDIAN\tP10-P90\tPASS RATE\tSEEDS\tOUTCOME\tRECORDED")
				for _, c := range rep.Checks {
					spread := "-"
					if len(c.Seeds) > 1 {
						spread = fmt.Sprintf("%.4g-%.4g", c.P10, c.P90)
					}
					fmt.Fprintf(tw, "%s\t%v\t%s\t%.4g\t%s\t%.0f%%\t%d\t%s\t%s\n", c.Name, c.Paper, c.Band, c.Median, spread,
						100*c.PassRate, len(c.Seeds), c.Outcome, c.Recorded)
				}
				tw.Flush()
				for _, c := range rep.Checks {
					if !c.Passed() && c.Reason != "" {
						fmt.Fprintf(w, "\n%s (miss): %s\n", c.Name, c.Reason)
					}
				}
				for _, s := range improvements {
					fmt.Fprintf(w, "\nimproved: %s\n", s)
				}
				for _, s := range regressions {
					fmt.Fprintf(w, "\nREGRESSED: %s\n", s)
				}
			}
			if len(regressions) > 0 {
				return errRegressed
			}
			return nil
		},
	}
	var names []string
	for _, r := range experiment.Reproductions() {
		names = append(names, r.Name+" ("+r.Doc+")")
	}
	cmd.Long += "\n\nReproductions: " + strings.Join(names, "; ")
	cmd.Flags().BoolVar(&quick, "quick", false, "the reduced version CI runs (5 seeds, shorter runs; same checks and bands)")
	cmd.Flags().StringVar(&format, "format", "table", "output: table or json")
	cmd.Flags().StringVar(&out, "out", "", "also write NAME.md and its SVG plots into this directory")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "seed set: N runs the evaluation seeds N*1000+1..N*1000+20; 0 the development seeds 1-20")
	cmd.Flags().BoolVar(&quiet, "quiet", false, "no progress lines on stderr")
	cmd.Flags().StringVar(&phillyTrace, "philly-trace", experiment.DefaultPhillyTrace, "reproduce philly: the pre-processed public Philly trace (philly.csv)")
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
