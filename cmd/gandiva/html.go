package main

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gandiva-sched/gandiva/internal/metrics"
	"github.com/gandiva-sched/gandiva/internal/policy/fair"
	"github.com/gandiva-sched/gandiva/internal/timeline"
	"github.com/gandiva-sched/gandiva/internal/ui"
)

// The timeline as a self-contained HTML report (ui.WriteReport), for
// gandiva sim --html and gandiva whatif --html.

// reportRun is one run of a report: its timeline (data, or rec's whole
// timeline when nil), its users' shares (with gandiva-fair's tickets as
// entitlements) and its headline figures.
func reportRun(label, policyName string, params map[string]string, epoch float64, rec *timeline.Recorder, data *timeline.Data, sum *metrics.Summary) ui.ReportRun {
	sq := timeline.ShareQuery{}
	if policyName == fair.Name {
		if t, err := fair.ParseTickets(params["tickets"]); err == nil {
			sq.Tickets = t
		}
	}
	if data == nil {
		data = rec.Data(timeline.Query{})
	}
	r := ui.ReportRun{Label: label, Policy: policyName, Epoch: epoch, Timeline: data, Shares: rec.Shares(sq)}
	if sum != nil {
		r.Stats = []ui.Stat{
			{Name: "jobs finished", Value: fmt.Sprintf("%d of %d", sum.Finished, sum.Jobs)},
			{Name: "avg JCT", Value: duration(sum.AvgJCT)},
			{Name: "p95 JCT", Value: duration(sum.P95JCT)},
			{Name: "avg queueing", Value: duration(sum.AvgQueue)},
			{Name: "makespan", Value: duration(sum.Makespan)},
			{Name: "GPU utilisation", Value: fmt.Sprintf("%.1f%%", 100*sum.GPUUtil)},
			{Name: "preemptions", Value: fmt.Sprint(sum.Preemptions)},
			{Name: "migrations", Value: fmt.Sprint(sum.Migrations)},
		}
	}
	return r
}

// duration is seconds for people: "42 s", "12.5 min", "3.2 h", "4.1 d".
func duration(s float64) string {
	switch {
	case s < 120:
		return fmt.Sprintf("%.3g s", s)
	case s < 7200:
		return fmt.Sprintf("%.3g min", s/60)
	case s < 3*86400:
		return fmt.Sprintf("%.3g h", s/3600)
	}
	return fmt.Sprintf("%.3g d", s/86400)
}

// writeHTML writes rep to path, naming the path in errors.
func writeHTML(path string, rep *ui.Report) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--html: %w", err)
	}
	if err := ui.WriteReport(f, rep); err != nil {
		f.Close()
		return fmt.Errorf("--html %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("--html %s: %w", path, err)
	}
	return nil
}

// writeHTMLAt is writeHTML that also returns the file's absolute path (the
// path given if it has none) and its size, for the line that says where it went.
func writeHTMLAt(path string, rep *ui.Report) (string, int64, error) {
	if err := writeHTML(path, rep); err != nil {
		return "", 0, err
	}
	where, err := filepath.Abs(path)
	if err != nil {
		where = path
	}
	var size int64
	if fi, err := os.Stat(path); err == nil {
		size = fi.Size()
	}
	return where, size, nil
}

// policyLabel is a policy with its parameters, as --policy takes it.
func policyLabel(name string, params map[string]string) string {
	if len(params) == 0 {
		return name
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(params)) {
		parts = append(parts, k+"="+params[k])
	}
	return name + ":" + strings.Join(parts, ";")
}
