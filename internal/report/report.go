// Package report writes summaries side by side: an aligned table for
// people, JSON and CSV for scripts. The JSON shape is a contract:
// {"results": [Summary, ...]} with Summary's field names.
package report

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/gandiva-sched/gandiva/internal/metrics"
)

// Formats lists the output formats.
var Formats = []string{"table", "json", "csv"}

// Run is the header of a report: what was simulated.
type Run struct {
	Trace   string `json:"trace"`
	Cluster string `json:"cluster"`
	Seed    uint64 `json:"seed"`
	Compat  string `json:"compat,omitempty"`
	Note    string `json:"note,omitempty"`
}

// Write prints the summaries in format f ("table", "json" or "csv").
func Write(w io.Writer, f string, run Run, sums []metrics.Summary) error {
	switch f {
	case "table", "":
		return table(w, run, sums)
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Run     Run               `json:"run"`
			Results []metrics.Summary `json:"results"`
		}{run, sums})
	case "csv":
		return writeCSV(w, sums)
	}
	return fmt.Errorf("unknown format %q (use %s)", f, strings.Join(Formats, ", "))
}

type column struct {
	head string
	get  func(s *metrics.Summary) string
}

func num(f float64) string {
	switch {
	case f == 0:
		return "0"
	case f >= 100000:
		return strconv.FormatFloat(f, 'f', 0, 64)
	case f >= 1:
		return strconv.FormatFloat(f, 'f', 1, 64)
	}
	return strconv.FormatFloat(f, 'f', 3, 64)
}

// slowdown prints an average slowdown, "-" when none could be computed
// (no finished job whose run time alone is known): a slowdown is never 0.
func slowdown(f float64) string {
	if f == 0 {
		return "-"
	}
	return strconv.FormatFloat(f, 'f', 3, 64)
}

var columns = []column{
	{"policy", func(s *metrics.Summary) string { return s.Policy }},
	{"jobs", func(s *metrics.Summary) string { return strconv.Itoa(s.Jobs) }},
	{"finished", func(s *metrics.Summary) string { return strconv.Itoa(s.Finished) }},
	{"avg JCT s", func(s *metrics.Summary) string { return num(s.AvgJCT) }},
	{"p50", func(s *metrics.Summary) string { return num(s.P50JCT) }},
	{"p95", func(s *metrics.Summary) string { return num(s.P95JCT) }},
	{"p99", func(s *metrics.Summary) string { return num(s.P99JCT) }},
	{"avg queue s", func(s *metrics.Summary) string { return num(s.AvgQueue) }},
	{"to 100 mb s", func(s *metrics.Summary) string { return num(s.AvgT100) }},
	{"slowdown", func(s *metrics.Summary) string { return slowdown(s.AvgSlowdown) }},
	{"makespan s", func(s *metrics.Summary) string { return num(s.Makespan) }},
	{"GPU util", func(s *metrics.Summary) string { return strconv.FormatFloat(s.GPUUtil, 'f', 3, 64) }},
	{"throughput", func(s *metrics.Summary) string { return num(s.Throughput) }},
	{"preempt", func(s *metrics.Summary) string { return strconv.Itoa(s.Preemptions) }},
	{"migr", func(s *metrics.Summary) string { return strconv.Itoa(s.Migrations) }},
}

func table(w io.Writer, run Run, sums []metrics.Summary) error {
	if run.Trace != "" {
		fmt.Fprintf(w, "trace %s on %s, seed %d", run.Trace, run.Cluster, run.Seed)
		if run.Compat != "" {
			fmt.Fprintf(w, ", compat %s", run.Compat)
		}
		if len(sums) > 0 {
			fmt.Fprintf(w, ", performance model %s", sums[0].PerfModel)
		}
		fmt.Fprintln(w)
	}
	if run.Note != "" {
		fmt.Fprintln(w, run.Note)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	for _, c := range columns {
		fmt.Fprintf(tw, "%s\t", c.head)
	}
	fmt.Fprintln(tw)
	for i := range sums {
		for _, c := range columns {
			fmt.Fprintf(tw, "%s\t", c.get(&sums[i]))
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

var csvHeader = []string{"policy", "perf_model", "cluster", "gpus", "jobs", "finished", "failed", "cancelled", "unfinished",
	"avg_jct_s", "p50_jct_s", "p95_jct_s", "p99_jct_s", "avg_queue_s", "p95_queue_s", "makespan_s",
	"avg_time_to_100_minibatches_s", "avg_run_s", "avg_slowdown", "spread_jobs", "multi_gpu_jobs", "multi_gpu_avg_queue_s", "multi_gpu_avg_slowdown", "gpu_utilization", "cluster_throughput", "preemptions", "migrations", "packs", "retries", "events"}

func writeCSV(w io.Writer, sums []metrics.Summary) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader); err != nil {
		return err
	}
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }
	for _, s := range sums {
		rec := []string{s.Policy, s.PerfModel, s.Cluster, strconv.Itoa(s.GPUs), strconv.Itoa(s.Jobs), strconv.Itoa(s.Finished),
			strconv.Itoa(s.Failed), strconv.Itoa(s.Cancelled), strconv.Itoa(s.Unfinished),
			f(s.AvgJCT), f(s.P50JCT), f(s.P95JCT), f(s.P99JCT), f(s.AvgQueue), f(s.P95Queue), f(s.Makespan),
			f(s.AvgT100), f(s.AvgRun), f(s.AvgSlowdown), strconv.Itoa(s.SpreadJobs), strconv.Itoa(s.MultiJobs), f(s.MultiAvgQueue), f(s.MultiAvgSlowdown), f(s.GPUUtil), f(s.Throughput), strconv.Itoa(s.Preemptions), strconv.Itoa(s.Migrations),
			strconv.Itoa(s.Packs), strconv.Itoa(s.Retries), strconv.Itoa(s.Events)}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
