package ui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"io/fs"
	"regexp"
	"strings"

	"github.com/gandiva-sched/gandiva/internal/timeline"
)

// Report is what WriteReport draws: one or more runs on one time axis
// (a simulation; what happened beside what-if replays).
type Report struct {
	Title    string      `json:"title"`
	Subtitle string      `json:"subtitle,omitempty"`
	Runs     []ReportRun `json:"runs"`
}

// ReportRun is one run of a Report.
type ReportRun struct {
	Label  string `json:"label"`
	Policy string `json:"policy,omitempty"`
	// Epoch is the Unix time of the run's time 0 (0: simulated time).
	Epoch    float64          `json:"epoch,omitempty"`
	Timeline *timeline.Data   `json:"timeline"`
	Shares   *timeline.Shares `json:"shares,omitempty"`
	// Stats are figures shown above the timeline ("avg JCT", "3.2 h").
	Stats []Stat `json:"stats,omitempty"`
}

// Stat is one named figure.
type Stat struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

var importLine = regexp.MustCompile(`(?m)^import .*;\n`)

// WriteReport writes r as one self-contained HTML file: styles, scripts
// and data inlined, no request made when it opens (from disk, in a
// browser with no network).
func WriteReport(w io.Writer, r *Report) error {
	if r == nil || len(r.Runs) == 0 {
		return fmt.Errorf("report: no runs to draw")
	}
	for i, run := range r.Runs {
		if run.Timeline == nil {
			return fmt.Errorf("report: run %d (%q) has no timeline", i+1, run.Label)
		}
	}
	page, err := fs.ReadFile(assets, "assets/report.html")
	if err != nil {
		return err
	}
	var js strings.Builder
	for _, name := range []string{"timeline.js", "shares.js", "report.js"} {
		b, err := fs.ReadFile(assets, "assets/"+name)
		if err != nil {
			return err
		}
		// one module: the imports between these files go
		js.WriteString(importLine.ReplaceAllString(string(b), ""))
		js.WriteString("\n")
	}
	css, err := fs.ReadFile(assets, "assets/style.css")
	if err != nil {
		return err
	}
	// json.Marshal escapes <, > and &, so the data cannot close its script
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("report: encoding the data: %w", err)
	}
	if bytes.Contains([]byte(js.String()), []byte("</script")) {
		return fmt.Errorf("report: a script contains </script")
	}
	out := strings.NewReplacer(
		"{{TITLE}}", html.EscapeString(r.Title),
		"{{SUBTITLE}}", html.EscapeString(r.Subtitle),
		"{{CSS}}", string(css),
		"{{DATA}}", string(data),
		"{{JS}}", js.String(),
	).Replace(string(page))
	_, err = io.WriteString(w, out)
	return err
}
