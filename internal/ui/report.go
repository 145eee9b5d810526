package ui

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
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

// The report's data is inlined as JSON, or, above compressAbove bytes of
// it, as gzipped JSON in base64.
const (
	jsonType = "application/json"
	gzipType = "application/gzip+base64"
)

// compressAbove is the size of JSON above which the data is compressed (a
// variable for the tests).
var compressAbove = 1 << 20

var dataScript = regexp.MustCompile(`<script type="([^"]+)" id="report-data">([^<]*)</script>`)

// ReadReport reads back the data of a report WriteReport wrote.
func ReadReport(rd io.Reader) (*Report, error) {
	page, err := io.ReadAll(rd)
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	m := dataScript.FindSubmatch(page)
	if m == nil {
		return nil, fmt.Errorf("report: no report-data script: not a report WriteReport wrote")
	}
	data := m[2]
	switch string(m[1]) {
	case jsonType:
	case gzipType:
		z, err := base64.StdEncoding.DecodeString(string(data))
		if err != nil {
			return nil, fmt.Errorf("report: the data's base64: %w", err)
		}
		zr, err := gzip.NewReader(bytes.NewReader(z))
		if err != nil {
			return nil, fmt.Errorf("report: the data's gzip: %w", err)
		}
		if data, err = io.ReadAll(zr); err != nil {
			return nil, fmt.Errorf("report: the data's gzip: %w", err)
		}
	default:
		return nil, fmt.Errorf("report: data of unknown type %q", m[1])
	}
	r, err := unpackReport(data)
	if err != nil {
		return nil, fmt.Errorf("report: the data: %w", err)
	}
	return r, nil
}

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
	// json.Marshal escapes <, > and &, so the data cannot close its script;
	// the timelines are packed (pack.go)
	data, err := json.Marshal(packReport(r))
	if err != nil {
		return fmt.Errorf("report: encoding the data: %w", err)
	}
	dataType := jsonType
	if len(data) > compressAbove {
		// A long history is megabytes of JSON, mostly repeated digits:
		// gzipped (to about a twentieth once packed) and in base64 (which
		// holds no < or &), the page inflates it with the browser's
		// DecompressionStream. The default level: on the packed data of the
		// default sim's report the best one took 2.8 times as long for a 5%
		// smaller file (measured with zlib, the same deflate).
		var z bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&z, gzip.DefaultCompression)
		zw.Write(data)
		if err := zw.Close(); err != nil {
			return fmt.Errorf("report: compressing the data: %w", err)
		}
		data, dataType = []byte(base64.StdEncoding.EncodeToString(z.Bytes())), gzipType
	}
	if bytes.Contains([]byte(js.String()), []byte("</script")) {
		return fmt.Errorf("report: a script contains </script")
	}
	out := strings.NewReplacer(
		"{{TITLE}}", html.EscapeString(r.Title),
		"{{SUBTITLE}}", html.EscapeString(r.Subtitle),
		"{{CSS}}", string(css),
		"{{DATATYPE}}", dataType,
		"{{DATA}}", string(data),
		"{{JS}}", js.String(),
	).Replace(string(page))
	_, err = io.WriteString(w, out)
	return err
}
