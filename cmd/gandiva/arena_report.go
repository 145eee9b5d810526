package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gandiva-sched/gandiva/internal/arena"
)

func newKubeArenaReportCmd() *cobra.Command {
	var (
		from         []string
		html, format string
		records      bool
	)
	cmd := &cobra.Command{
		Use:   "report",
		Short: "Render saved arena results (one or several runs) as an HTML report, a table, JSON or CSV",
		Long: `Read results written by gandiva kube arena --format json (with --records for the JCT CDF) and
render them again: --html FILE writes one self-contained HTML page (settings, results, a JCT CDF
and GPU utilisation over time of every scheduler, each run's load); --format writes the table,
JSON or CSV to stdout as the arena does.

Several --from files are merged into one report, so that schedulers run separately (peers built
later, a rerun of one that failed) are compared side by side: their settings (trace, cluster,
jobs, speed, checkpoints, declared work, performance model, workload) must be equal; a scheduler
in several files is kept once, the one that ran where the others failed or were not run, and
two runs of the same scheduler are an error.`,
		Example: `  gandiva kube arena --synthetic 30 --cluster tiresias-n2g4 --speed 20 --schedulers gandiva:tiresias-l,kube-scheduler --format json --records > a.json
  gandiva kube arena --synthetic 30 --cluster tiresias-n2g4 --speed 20 --schedulers kueue --format json --records > b.json
  gandiva kube arena report --from a.json --from b.json --html arena.html`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(from) == 0 {
				return fmt.Errorf("--from: name at least one results file (gandiva kube arena --format json)")
			}
			if html == "" && format == "" {
				return fmt.Errorf("--html or --format: say what to write")
			}
			if format != "" && !contains(arena.Formats, format) {
				return fmt.Errorf("--format %q: use %s", format, strings.Join(arena.Formats, ", "))
			}
			if records && format != "json" {
				return fmt.Errorf("--records: only with --format json")
			}
			var reps []arena.Report
			for _, name := range from {
				f, err := os.Open(name)
				if err != nil {
					return fmt.Errorf("--from: %w", err)
				}
				rep, err := arena.ReadReport(bufio.NewReader(f), name)
				f.Close()
				if err != nil {
					return fmt.Errorf("--from: %w", err)
				}
				reps = append(reps, rep)
			}
			rep, err := arena.MergeReports(reps, from)
			if err != nil {
				return fmt.Errorf("--from: %w", err)
			}
			out, err := createArenaHTML(html)
			if err != nil {
				return err
			}
			if out != nil {
				defer out.Close()
				if err := writeArenaHTML(out, rep); err != nil {
					return err
				}
			}
			if format != "" {
				return arena.Write(cmd.OutOrStdout(), format, rep.Settings, rep.Results, records)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&from, "from", nil, "results file of gandiva kube arena --format json (repeat, or comma-separate, to merge runs)")
	fl.StringVar(&html, "html", "", "write the HTML report to this file")
	fl.StringVar(&format, "format", "", "also write the merged results to stdout: table, json or csv")
	fl.BoolVar(&records, "records", false, "--format json: include each job's record")
	return cmd
}

// createArenaHTML creates the HTML report's file (nil for "": none).
func createArenaHTML(path string) (*os.File, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--html: %w", err)
	}
	return f, nil
}

// writeArenaHTML writes the report to f and closes it.
func writeArenaHTML(f *os.File, rep arena.Report) error {
	w := bufio.NewWriter(f)
	if err := arena.WriteHTML(w, rep); err != nil {
		return fmt.Errorf("--html: %w", err)
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("--html: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("--html: %w", err)
	}
	return nil
}
