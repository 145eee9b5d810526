package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gandiva-sched/gandiva/internal/experiment"
	"github.com/gandiva-sched/gandiva/internal/metrics"
	"github.com/gandiva-sched/gandiva/internal/plural"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/registry"
	"github.com/gandiva-sched/gandiva/internal/report"
	"github.com/gandiva-sched/gandiva/internal/server"
	"github.com/gandiva-sched/gandiva/internal/sim"
	"github.com/gandiva-sched/gandiva/internal/timeline"
	"github.com/gandiva-sched/gandiva/internal/ui"
	"github.com/gandiva-sched/gandiva/internal/visible"
)

type whatifFlags struct {
	dataDir, policies, format, html string
	seed                            uint64
	startup                         float64
	verbose                         bool
}

func newWhatifCmd() *cobra.Command {
	var f whatifFlags
	cmd := &cobra.Command{
		Use:   "whatif",
		Short: "Replay the live cluster's own history under other policies, side by side with what happened",
		Long: `Read the history of a live cluster from its server's store (--data-dir; the server must be
stopped, as it holds the store's lock), turn it into a trace (every job submitted when it was, on
its gang, with the work it did) on the nodes that registered (as a cluster spec), replay it in the
simulator under the policies asked for, and print what really happened beside each replay, as
gandiva sim's table; --html also draws their GPU timelines on one time axis.

Every row holds the same jobs, each counted as it ended live: a job that failed or was cancelled
is replayed as it ran (the work it did, else its run time) and counts as failed or cancelled in
every row; one still waiting or running when the history was read is replayed as the work it
declared (iters × iter_time), else the work it did so far, and is unfinished in every row (not in
the JCT); a job that reported no progress (no in-job client) is replayed as its run time, and no
slowdown is computed for it ("-" when none can be). Jobs that never ran are left out of every row.
The lines after the table say how each job that did not simply finish was replayed. The replays use
the simulator's performance model (gandiva-perf/v1: start-up --startup seconds per start, resume
or migration; interference between packed jobs as measured by Gavel), not the live run's.`,
		Example: `  gandiva up --demo --data-dir /tmp/demo      # keeps the demo's store
  gandiva whatif --data-dir /tmp/demo --policy gandiva,fifo,tiresias-l --html whatif.html`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runWhatif(cmd, &f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.dataDir, "data-dir", defaultDataDir(), "the server's data directory, whose store holds the history ($GANDIVA_DATA)")
	fl.StringVar(&f.policies, "policy", strings.Join(registry.Names(), ","), "comma-separated policies to replay the history under, each with optional :key=value;... parameters")
	fl.Uint64Var(&f.seed, "seed", 1, "random seed of the replays")
	fl.StringVar(&f.format, "format", "table", "output: table, json or csv")
	fl.StringVar(&f.html, "html", "", "also write the GPU timelines (what happened, then each replay) as a self-contained HTML report to this file")
	fl.Float64Var(&f.startup, "startup", sim.DefaultPerf().Startup, "the replays' start-up cost in seconds (a start, a resume elsewhere, a migration)")
	fl.BoolVar(&f.verbose, "verbose", false, "log the replay of the log")
	return cmd
}

func runWhatif(cmd *cobra.Command, f *whatifFlags) error {
	names, params, err := registry.Parse(f.policies)
	if err != nil {
		return fmt.Errorf("--policy: %w", err)
	}
	for i, name := range names {
		if _, err := registry.New(name, policy.Config{Params: params[i]}); err != nil {
			return fmt.Errorf("--policy: %w", err)
		}
	}
	if !contains(report.Formats, f.format) {
		return fmt.Errorf("--format %q: use %s", f.format, strings.Join(report.Formats, ", "))
	}
	if f.startup < 0 {
		return fmt.Errorf("--startup %g: must be ≥ 0 seconds", f.startup)
	}
	stderr := cmd.ErrOrStderr()
	log := newLogger(io.Discard, false)
	if f.verbose {
		log = newLogger(stderr, true)
	}
	h, err := server.ReadHistory(f.dataDir, log)
	if err != nil {
		return err
	}
	if h.Diverged > 0 {
		fmt.Fprintf(stderr, "note: replaying the log made %d state changes differently from the recorded history (the server's failure settings?); what happened is shown as replayed\n", h.Diverged)
	}
	if len(h.Jobs) == 0 {
		return fmt.Errorf("the history in %s has no job to replay", f.dataDir)
	}
	c := h.Cluster
	for _, j := range h.Jobs {
		if j.GPUs > c.NumGPUs() {
			return fmt.Errorf("job %s needs %d GPUs; the registered nodes have %d", j.Name, j.GPUs, c.NumGPUs())
		}
	}
	perf := sim.DefaultPerf()
	perf.Startup = f.startup
	setup := experiment.Setup{Cluster: c, Jobs: h.Jobs, Policies: names, Params: params, Seed: f.seed, Perf: perf,
		PreRun: len(h.PreRuns) > 0, PreRunIf: h.PreRunIf, Timelines: make([]*timeline.Recorder, len(names))}
	for i := range names {
		setup.Timelines[i] = timeline.NewRecorder(timeline.Options{Noted: true})
	}
	start := time.Now()
	results, err := experiment.Compare(setup)
	if err != nil {
		return err
	}
	live := policyLabel(h.Policy, h.Params)
	h.Live.Policy = "live: " + live
	sums := []metrics.Summary{metrics.Summarize(h.Live)}
	for i, r := range results {
		rec := r.Records()
		rec.Policy = "what-if: " + policyLabel(names[i], params[i])
		h.Align(rec)
		sums = append(sums, metrics.Summarize(rec))
	}
	run := report.Run{Trace: fmt.Sprintf("the history in %s (%d jobs)", f.dataDir, len(h.Jobs)), Cluster: "the registered nodes: " + visible.String(c.Summary()), Seed: f.seed,
		Note: fmt.Sprintf("live: what happened; what-if: the same jobs replayed in the simulator, performance model %s with %g s start-up;\n%s", perf.Name, perf.Startup, h.Basis())}
	if err := report.Write(cmd.OutOrStdout(), f.format, run, sums); err != nil {
		return err
	}
	if f.format == "table" {
		for _, n := range h.Notes {
			fmt.Fprintln(cmd.OutOrStdout(), "  "+visible.String(n))
		}
		fmt.Fprintf(stderr, "%s replayed, %s × %s simulated in %.2f s\n", plural.Of(h.Entries, "log entry|log entries"), plural.Of(len(h.Jobs), "job"),
			plural.Of(len(names), "policy|policies"), time.Since(start).Seconds())
	}
	if f.html != "" {
		epoch := float64(h.Epoch.UnixNano()) / 1e9
		rep := &ui.Report{Title: "gandiva whatif: " + f.dataDir,
			Subtitle: fmt.Sprintf("what happened under %s on %s, and the same %d jobs replayed under %s (simulated: %s, %g s start-up)",
				live, c.Summary(), len(h.Jobs), strings.Join(names, ", "), perf.Name, perf.Startup)}
		rep.Runs = append(rep.Runs, reportRun("what happened ("+live+")", h.Policy, h.Params, epoch, h.Timeline, h.TimelineData(timeline.Query{}), &sums[0]))
		for i, name := range names {
			rep.Runs = append(rep.Runs, reportRun("what if: "+policyLabel(name, params[i]), name, params[i], epoch, setup.Timelines[i], nil, &sums[i+1]))
		}
		if err := writeHTML(f.html, rep); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "wrote the timelines of what happened and %d replays to %s\n", len(names), f.html)
	}
	return nil
}
