package arena

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Settings are what a run's results depend on besides the schedulers;
// they are printed with the results.
type Settings struct {
	Trace       string      `json:"trace"`
	Cluster     string      `json:"cluster"`
	Jobs        int         `json:"jobs"`
	Speed       float64     `json:"speed"`
	Checkpoints Checkpoints `json:"checkpoints"`
	DeclareWork bool        `json:"declare_work"`
	Perf        string      `json:"perf_model"`
	// Workload is how jobs were made: "job" (batch/v1 Jobs; "" in files
	// written before it was recorded) or "pods" (plain-pod gangs).
	Workload string `json:"workload,omitempty"`
}

// workload is s.Workload, "job" when not recorded.
func (s Settings) workload() string {
	if s.Workload == "" {
		return WorkloadJob
	}
	return s.Workload
}

// Formats are the output formats Write takes.
var Formats = []string{"table", "json", "csv"}

// Write prints the results as a table, JSON or CSV. JSON carries each
// job's record when records is set.
func Write(w io.Writer, format string, st Settings, res []Result, records bool) error {
	switch format {
	case "json":
		out := make([]Result, len(res))
		for i, r := range res {
			out[i] = r
			if !records {
				out[i].Record = nil
			}
		}
		e := json.NewEncoder(w)
		e.SetIndent("", "  ")
		return e.Encode(Report{st, out})
	case "csv":
		cw := csv.NewWriter(w)
		cw.Write(columns)
		for _, r := range res {
			cw.Write(r.row())
		}
		cw.Flush()
		return cw.Error()
	case "table":
		fmt.Fprintf(w, "trace %s (%d jobs) on %s; speed %g×; checkpoints: every %gs, on SIGTERM %v; work declared %v; %s\n\n",
			st.Trace, st.Jobs, st.Cluster, st.Speed, st.Checkpoints.Every, st.Checkpoints.OnTerm, st.DeclareWork, st.Perf)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		for i, c := range columns {
			if i > 0 {
				fmt.Fprint(tw, "\t")
			}
			fmt.Fprint(tw, c)
		}
		fmt.Fprintln(tw, "\t")
		for _, r := range res {
			for i, c := range r.row() {
				if i > 0 {
					fmt.Fprint(tw, "\t")
				}
				fmt.Fprint(tw, c)
			}
			fmt.Fprintln(tw, "\t")
		}
		return tw.Flush()
	}
	return fmt.Errorf("format %q: use table, json or csv", format)
}

var columns = []string{"scheduler", "status", "finished", "avg JCT s", "p50 JCT s", "p95 JCT s", "makespan s", "GPU util",
	"run util", "Jain", "preemptions", "lost GPU-h", "first bind avg s", "first bind p95 s", "sched CPU s", "sched peak RSS MiB", "wall s", "sim avg JCT s", "arena/sim"}

func (r Result) row() []string {
	f := func(v float64, prec int) string { return strconv.FormatFloat(v, 'f', prec, 64) }
	status, _, _ := strings.Cut(r.Status, "\n")
	if len(status) > 40 {
		status = status[:40] + "…"
	}
	simJCT, ratio := "-", "-"
	if r.Sim != nil {
		simJCT, ratio = f(r.Sim.AvgJCT, 0), f(r.Sim.Ratio, 3)
	}
	return []string{r.Scheduler, status, fmt.Sprintf("%d/%d", r.Finished, r.Jobs), f(r.AvgJCT, 0), f(r.P50JCT, 0), f(r.P95JCT, 0),
		f(r.Makespan, 0), f(r.GPUUtil, 3), f(r.RunUtil, 3), f(r.Jain, 3), strconv.Itoa(r.Preemptions), f(r.LostGPUHours, 2),
		f(r.AvgFirstBind, 1), f(r.P95FirstBind, 1), f(r.CPUSeconds, 2), f(r.PeakRSSMiB, 0), f(r.WallSeconds, 1), simJCT, ratio}
}
