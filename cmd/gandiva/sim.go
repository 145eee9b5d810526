package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/dataset"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/experiment"
	"github.com/gandiva-sched/gandiva/internal/metrics"
	"github.com/gandiva-sched/gandiva/internal/plural"
	"github.com/gandiva-sched/gandiva/internal/policy/registry"
	"github.com/gandiva-sched/gandiva/internal/report"
	"github.com/gandiva-sched/gandiva/internal/sim"
	"github.com/gandiva-sched/gandiva/internal/timeline"
	"github.com/gandiva-sched/gandiva/internal/trace"
	"github.com/gandiva-sched/gandiva/internal/ui"
)

// The embedded default: a sample of the Philly trace on a preset cluster.
const (
	defaultTrace   = "philly-sample.csv"
	defaultCluster = "philly-sample"
)

type simFlags struct {
	trace, traceFormat, cluster, policies, format, compat, failures, explain, html, perf string
	vc                                                                                   []string
	seed                                                                                 uint64
	limit                                                                                int
	horizon                                                                              float64
	check, quiet, preRun                                                                 bool
}

func newSimCmd() *cobra.Command {
	var f simFlags
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Replay a trace on a simulated cluster under several policies, side by side",
		Long: `Replay a job trace on a simulated cluster under one or more policies and print their
job completion times, queueing delays, utilisation and throughput side by side.

With no flags it runs the embedded default: a sample of the public Philly trace on a
preset cluster under every policy.

Traces: Tiresias CSV, the pre-processed Philly CSV, the raw Philly cluster_job_log JSON
(streamed), Gavel's trace format (detected by content, or --trace-format).
Clusters (--cluster): a preset name (gandiva presets lists them), a YAML spec, or a
Tiresias cluster-spec CSV.
Policies take parameters after a colon: --policy fifo,philly:relax=300;starve=7200.`,
		Example: `  gandiva sim
  gandiva sim --trace 60_job.csv --cluster n2g4.csv --policy fifo --compat tiresias
  gandiva sim --trace philly.csv --vc b436b2 --cluster tiresias-n8g8 --format json
  gandiva sim --trace 60_job.csv --cluster n2g4.csv --policy tiresias-l,fifo --explain 12
  gandiva sim --policy gandiva,fifo --html report.html`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runSim(cmd, &f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.trace, "trace", "", "trace file (default: the embedded Philly sample)")
	fl.StringVar(&f.traceFormat, "trace-format", "auto", "trace format: auto, tiresias, philly-csv, philly-json, gavel")
	fl.StringVar(&f.cluster, "cluster", "", "cluster: preset name, YAML file or Tiresias spec CSV (default: "+defaultCluster+")")
	fl.StringVar(&f.policies, "policy", strings.Join(registry.Names(), ","), "comma-separated policies, each with optional :key=value;... parameters")
	fl.Uint64Var(&f.seed, "seed", 1, "random seed (same seed, same result)")
	fl.StringVar(&f.format, "format", "table", "output: table, json or csv")
	fl.StringVar(&f.compat, "compat", "", `"tiresias": the Tiresias simulator's settings (GPUs counted only, no locality penalty, free preemption, integer seconds)`)
	fl.StringSliceVar(&f.vc, "vc", nil, "Philly traces: keep only these virtual clusters")
	fl.IntVar(&f.limit, "limit", 0, "keep only the first N jobs of the trace")
	fl.Float64Var(&f.horizon, "horizon", 0, "stop at this simulated time in seconds (0: when every job ends)")
	fl.StringVar(&f.perf, "perf", "default", "performance model: default; h100 (the costs measured on an NVIDIA H100: 37 s start-ups, reported to\nthe engine and overlapped by warm starts; docs/SIMULATOR.md); h100-cold (the same costs, start-ups not overlapped)")
	fl.StringVar(&f.failures, "failures", "none", `failure model: none or philly (user errors and infrastructure failures)`)
	fl.BoolVar(&f.preRun, "prerun", false, "pre-run every job's first mini-batch on one GPU before its gang starts (Philly's failure handling)")
	fl.BoolVar(&f.check, "check", false, "verify the engine's invariants after every event, and that no policy writes to the snapshot it is given (slow)")
	fl.StringVar(&f.explain, "explain", "", "trace the job of this name: its state changes and, while it waits, each policy's own explanation\n(its queue, its place in the policy's order, the reasons per server) whenever it changes")
	fl.StringVar(&f.html, "html", "", "also write each policy's GPU timeline, one above the other, as a self-contained HTML report to this file")
	fl.BoolVar(&f.quiet, "quiet", false, "no progress bar")
	return cmd
}

func runSim(cmd *cobra.Command, f *simFlags) error {
	if err := firstErr(intAtLeast("--limit", f.limit, 0), nonNegative("--horizon", f.horizon)); err != nil {
		return err
	}
	compat := false
	switch f.compat {
	case "":
	case "tiresias":
		compat = true
	default:
		return fmt.Errorf("--compat %q: the only compatibility mode is \"tiresias\"", f.compat)
	}
	perf, err := sim.LookupPerf(f.perf)
	if err != nil {
		return fmt.Errorf("--perf: %w", err)
	}
	if compat && f.perf != "default" {
		return fmt.Errorf("--perf %s: --compat tiresias has its own performance model", f.perf)
	}
	if f.perf == "default" {
		perf = sim.PerfModel{} // experiment.Setup's default (or Tiresias' model with --compat)
	}
	var failures *sim.Failures
	switch f.failures {
	case "none", "":
	case "philly":
		fm := sim.PhillyFailures()
		failures = &fm
	default:
		return fmt.Errorf("--failures %q: use none or philly", f.failures)
	}
	names, params, err := registry.Parse(f.policies)
	if err != nil {
		return fmt.Errorf("--policy: %w", err)
	}
	if !contains(report.Formats, f.format) {
		return fmt.Errorf("--format %q: use %s", f.format, strings.Join(report.Formats, ", "))
	}
	opts := trace.Options{VC: f.vc, Limit: f.limit, Seed: f.seed}
	var jobs []*cluster.JobSpec
	var warn *trace.Warnings
	traceName := f.trace
	if f.trace == "" {
		data, err := dataset.ReadFile(defaultTrace)
		if err != nil {
			return err
		}
		traceName = "embedded " + defaultTrace
		jobs, warn, err = trace.Read(bytes.NewReader(data), defaultTrace, trace.Format(f.traceFormat), opts)
		if err != nil {
			return err
		}
	} else {
		jobs, warn, err = trace.ReadFile(f.trace, trace.Format(f.traceFormat), opts)
		if err != nil {
			return err
		}
	}
	if len(jobs) == 0 {
		return fmt.Errorf("trace %s: no jobs to simulate", traceName)
	}
	clusterArg := f.cluster
	if clusterArg == "" {
		clusterArg = defaultCluster
	}
	c, err := loadCluster(clusterArg)
	if err != nil {
		return err
	}
	stderr := cmd.ErrOrStderr()
	if warn != nil && warn.Skipped > 0 {
		fmt.Fprintf(stderr, "trace %s: skipped %d jobs: %s\n", traceName, warn.Skipped, describeSkips(warn.Reasons))
	}
	if max := maxServerGPUs(c); !compat {
		for _, j := range jobs {
			if j.GPUs > c.NumGPUs() {
				return fmt.Errorf("job %s needs %d GPUs; cluster %s has only %d (%d per server)", j.Name, j.GPUs, c.Name, c.NumGPUs(), max)
			}
		}
	}
	setup := experiment.Setup{Cluster: c, Jobs: jobs, Policies: names, Params: params, Compat: compat, Seed: f.seed,
		Horizon: f.horizon, Failures: failures, Check: f.check, PreRun: f.preRun, Perf: perf}
	traces := make([]*sim.JobTrace, len(names))
	if f.explain != "" {
		for i := range traces {
			traces[i] = &sim.JobTrace{Name: f.explain, Out: &bytes.Buffer{}}
		}
		setup.Observe = func(i int) func(float64, *engine.Engine) { return traces[i].Observe }
	}
	if f.html != "" {
		setup.Timelines = make([]*timeline.Recorder, len(names))
		for i := range names {
			setup.Timelines[i] = timeline.NewRecorder(timeline.Options{Noted: true})
		}
	}
	var bar *progressBar
	if !f.quiet && isTerminal(stderr) {
		bar = newProgressBar(stderr, "simulating "+strings.Join(names, ","))
		setup.Progress = bar.update
	}
	start := time.Now()
	results, err := experiment.Compare(setup)
	if bar != nil {
		bar.done()
	}
	if err != nil {
		return err
	}
	if f.explain != "" {
		// the traces go before a table, and to stderr beside JSON or CSV
		w := cmd.OutOrStdout()
		if f.format != "table" {
			w = stderr
		}
		for i, tr := range traces {
			if !tr.Found() {
				return fmt.Errorf("--explain %q: no job of that name in trace %s", f.explain, traceName)
			}
			fmt.Fprintf(w, "policy %s, job %s:\n%s\n", names[i], f.explain, tr.Out.(*bytes.Buffer).String())
		}
	}
	sums := make([]metrics.Summary, len(results))
	for i, r := range results {
		sums[i] = metrics.Summarize(r.Records())
	}
	run := report.Run{Trace: traceName, Cluster: c.Name + ": " + c.Summary(), Seed: f.seed, Compat: f.compat}
	if err := report.Write(cmd.OutOrStdout(), f.format, run, sums); err != nil {
		return err
	}
	if f.format == "table" {
		fmt.Fprintf(stderr, "%s × %s simulated in %.2f s\n", plural.Of(len(jobs), "job"), plural.Of(len(names), "policy|policies"), time.Since(start).Seconds())
	}
	if f.html != "" {
		rep := &ui.Report{Title: fmt.Sprintf("gandiva sim: %s on %s", traceName, c.Name),
			Subtitle: fmt.Sprintf("%d jobs on %s; seed %d; performance model %s", len(jobs), c.Summary(), f.seed, sums[0].PerfModel)}
		for i, name := range names {
			rep.Runs = append(rep.Runs, reportRun(policyLabel(name, params[i]), name, params[i], 0, setup.Timelines[i], nil, &sums[i]))
		}
		where, size, err := writeHTMLAt(f.html, rep)
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "wrote the timeline of %s to %s (%.1f MB; it opens from disk in a browser)\n", plural.Of(len(names), "run"), where, float64(size)/1e6)
	}
	return nil
}

func describeSkips(reasons map[string]int) string {
	keys := make([]string, 0, len(reasons))
	for k := range reasons {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d %s", reasons[k], k)
	}
	return strings.Join(parts, ", ")
}

func loadCluster(arg string) (*cluster.Cluster, error) { return cluster.Load(arg) }

func maxServerGPUs(c *cluster.Cluster) int {
	m := 0
	for _, s := range c.Servers {
		m = max(m, s.NumGPUs)
	}
	return m
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// progressBar draws "label [=====     ] 52% 1234/2400 jobs" on a terminal.
type progressBar struct {
	w     io.Writer
	label string
	last  time.Time
	start time.Time
}

func newProgressBar(w io.Writer, label string) *progressBar {
	return &progressBar{w: w, label: label, start: time.Now()}
}

func (b *progressBar) update(done, total int) {
	if time.Since(b.last) < 100*time.Millisecond || total == 0 {
		return
	}
	b.last = time.Now()
	const width = 30
	n := done * width / total
	fmt.Fprintf(b.w, "\r%s [%s%s] %3d%% %d/%d jobs %.0fs", b.label, strings.Repeat("=", n), strings.Repeat(" ", width-n),
		done*100/total, done, total, time.Since(b.start).Seconds())
}

func (b *progressBar) done() { fmt.Fprint(b.w, "\r\033[K") }
