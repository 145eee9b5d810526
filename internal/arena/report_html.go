package arena

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Report is a run's results as Write's JSON carries them: the settings and
// one result per scheduler.
type Report struct {
	Settings Settings `json:"settings"`
	Results  []Result `json:"results"`
}

// Bounds of a results file ReadReport accepts (its bytes are hostile).
const (
	maxReportBytes   = 1 << 30
	maxReportResults = 1000
	maxReportJobs    = 1_000_000
	maxReportUtil    = 10_000
	maxNameLen       = 1000
)

// ReadReport reads a results file (`gandiva kube arena --format json`),
// name saying where it came from in errors. It refuses what is not such a
// file, and one beyond the bounds above.
func ReadReport(r io.Reader, name string) (Report, error) {
	var rep Report
	data, err := io.ReadAll(io.LimitReader(r, maxReportBytes+1))
	if err != nil {
		return rep, fmt.Errorf("%s: %w", name, err)
	}
	if len(data) > maxReportBytes {
		return rep, fmt.Errorf("%s: larger than %d bytes", name, maxReportBytes)
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		return rep, fmt.Errorf("%s: not the JSON of gandiva kube arena --format json: %w", name, err)
	}
	if rep.Settings.Trace == "" || rep.Settings.Cluster == "" || len(rep.Results) == 0 {
		return rep, fmt.Errorf("%s: no settings or no results: not the JSON of gandiva kube arena --format json", name)
	}
	if len(rep.Results) > maxReportResults {
		return rep, fmt.Errorf("%s: %d results; at most %d", name, len(rep.Results), maxReportResults)
	}
	for i, r := range rep.Results {
		switch {
		case r.Scheduler == "" || len(r.Scheduler) > maxNameLen:
			return rep, fmt.Errorf("%s: result %d: scheduler name empty or longer than %d bytes", name, i, maxNameLen)
		case len(r.Util) > maxReportUtil:
			return rep, fmt.Errorf("%s: result %d (%s): %d utilisation points; at most %d", name, i, r.Scheduler, len(r.Util), maxReportUtil)
		case r.Record != nil && len(r.Record.Jobs) > maxReportJobs:
			return rep, fmt.Errorf("%s: result %d (%s): %d job records; at most %d", name, i, r.Scheduler, len(r.Record.Jobs), maxReportJobs)
		}
	}
	return rep, nil
}

// MergeReports merges the results of several runs of the same trace and
// settings (peers run separately) into one report, in the order of the
// files and of their results. Settings that differ are an error naming
// the field and the files. A scheduler in several files is kept once: the
// run one (status "ok" or "timed out") where the others failed or were
// not run; two runs of it are an error. names name the reports in errors.
func MergeReports(reps []Report, names []string) (Report, error) {
	if len(reps) == 0 {
		return Report{}, fmt.Errorf("no results to merge")
	}
	out := Report{Settings: reps[0].Settings}
	from := map[string]int{} // scheduler → index in out.Results
	src := map[string]string{}
	for i, rep := range reps {
		if i > 0 {
			if f := settingsDiffer(reps[0].Settings, rep.Settings); f != "" {
				return Report{}, fmt.Errorf("%s and %s: different %s (%v and %v): results of different runs cannot be merged",
					names[0], names[i], f, settingValue(reps[0].Settings, f), settingValue(rep.Settings, f))
			}
		}
		for _, r := range rep.Results {
			k, seen := from[r.Scheduler]
			switch {
			case !seen:
				from[r.Scheduler] = len(out.Results)
				src[r.Scheduler] = names[i]
				out.Results = append(out.Results, r)
			case ran(out.Results[k]) && ran(r):
				return Report{}, fmt.Errorf("scheduler %s: run in both %s and %s; keep one", r.Scheduler, src[r.Scheduler], names[i])
			case ran(r):
				out.Results[k], src[r.Scheduler] = r, names[i]
			}
		}
	}
	return out, nil
}

// ran reports whether a result is a run ("ok" or "timed out"), not a
// failure or a scheduler not run.
func ran(r Result) bool { return r.Status == "ok" || r.Status == "timed out" }

// settingsDiffer names the first setting in which a and b differ ("" if none).
func settingsDiffer(a, b Settings) string {
	switch {
	case a.Trace != b.Trace:
		return "trace"
	case a.Cluster != b.Cluster:
		return "cluster"
	case a.Jobs != b.Jobs:
		return "jobs"
	case a.Speed != b.Speed:
		return "speed"
	case a.Checkpoints != b.Checkpoints:
		return "checkpoints"
	case a.DeclareWork != b.DeclareWork:
		return "declare_work"
	case a.Perf != b.Perf:
		return "perf_model"
	case a.workload() != b.workload():
		return "workload"
	}
	return ""
}

func settingValue(s Settings, field string) any {
	switch field {
	case "trace":
		return strconv.Quote(s.Trace)
	case "cluster":
		return strconv.Quote(s.Cluster)
	case "jobs":
		return s.Jobs
	case "speed":
		return s.Speed
	case "checkpoints":
		return fmt.Sprintf("every %gs, on SIGTERM %v", s.Checkpoints.Every, s.Checkpoints.OnTerm)
	case "declare_work":
		return s.DeclareWork
	case "perf_model":
		return strconv.Quote(s.Perf)
	case "workload":
		return strconv.Quote(s.workload())
	}
	return nil
}

// Chart geometry, in SVG user units.
const (
	chartW, chartH             = 760.0, 360.0
	padL, padR, padT, padB     = 64.0, 16.0, 16.0, 44.0
	plotW, plotH               = chartW - padL - padR, chartH - padT - padB
	legendRow                  = 18.0
	maxCDFPoints               = 20_000
	palette                    = "#1f77b4 #d62728 #2ca02c #9467bd #ff7f0e #17becf #8c564b #e377c2 #7f7f7f #bcbd22"
	reportTitle                = "Gandiva arena report"
	noRecords                  = "no per-job records (--format json --records)"
	utilNote                   = "GPUs held ÷ GPUs, over each tenth of the scheduler's makespan"
	cdfNote                    = "fraction of all the trace's jobs finished within a JCT (unfinished jobs never count)"
	xLabelJCT, xLabelTime      = "JCT (trace seconds)", "time from the first submission (trace seconds)"
	yLabelCDF, yLabelUtil      = "jobs finished", "GPU utilisation"
	ticksX, ticksY             = 5, 4
	strokeW                    = 2.0
	legendSwatch, legendGutter = 14.0, 6.0
)

// htmlChart is one SVG chart: its lines and axes.
type htmlChart struct {
	Title, Note, XLabel, YLabel string
	Lines                       []htmlLine
	XTicks, YTicks              []htmlTick
	W, H                        float64
	Legend                      float64 // the legend's height
}

// htmlLine is one scheduler's line: D its path ("" when it has none, Why
// saying why).
type htmlLine struct {
	Name, Color, D, Why string
	LegendY             float64
}

type htmlTick struct {
	Pos   float64
	Label string
}

// htmlRun is one scheduler's row of the runs table.
type htmlRun struct {
	Name, Status, Wall, Load, Profile string
}

// htmlSetting is one row of the settings table.
type htmlSetting struct{ Name, Value string }

type htmlPage struct {
	Title    string
	Settings []htmlSetting
	Columns  []string
	Rows     [][]string
	Runs     []htmlRun
	Charts   []htmlChart
}

// WriteHTML writes rep as one self-contained HTML page (no scripts, no
// fetches): the settings, the results table, a JCT CDF of every scheduler
// (from the per-job records) and each scheduler's GPU utilisation over
// time, as inline SVG drawn here, and each run's wall time and the
// machine's load. Every name from the results is escaped; the page is
// well-formed XML as well as HTML.
func WriteHTML(w io.Writer, rep Report) error {
	st := rep.Settings
	ck := "none periodic"
	if st.Checkpoints.Every > 0 {
		ck = fmt.Sprintf("every %g s of progress", st.Checkpoints.Every)
	}
	if st.Checkpoints.OnTerm {
		ck += "; on SIGTERM (all progress kept)"
	} else {
		ck += "; not on SIGTERM"
	}
	p := htmlPage{Title: reportTitle, Columns: columns,
		Settings: []htmlSetting{{"trace", st.Trace}, {"cluster", st.Cluster}, {"jobs", strconv.Itoa(st.Jobs)},
			{"speed", fmt.Sprintf("%g trace seconds per wall second (gandiva's clock at the same speed)", st.Speed)},
			{"workload", st.workload()}, {"checkpoints", ck}, {"work declared", strconv.FormatBool(st.DeclareWork)},
			{"performance model", st.Perf}}}
	for _, r := range rep.Results {
		p.Rows = append(p.Rows, r.row())
		run := htmlRun{Name: r.Scheduler, Status: r.Status, Wall: strconv.FormatFloat(r.WallSeconds, 'f', 1, 64), Load: "not recorded", Profile: "-"}
		if len(r.LoadAvg) == 2 {
			run.Load = fmt.Sprintf("%.2f at the start, %.2f at the end", r.LoadAvg[0], r.LoadAvg[1])
		}
		if s := r.Scale; s != nil {
			run.Profile = fmt.Sprintf("load average %.2f (max %.2f) on %d CPUs, machine busy %.0f%%", s.LoadAvg, s.LoadAvgMax, s.CPUs, 100*s.MachineBusy)
		}
		p.Runs = append(p.Runs, run)
	}
	p.Charts = []htmlChart{cdfChart(rep.Results), utilChart(rep.Results)}
	var buf bytes.Buffer
	if err := pageTmpl.Execute(&buf, p); err != nil {
		return err
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// colors is the palette, one color per scheduler in order (repeating).
var colors = strings.Fields(palette)

// jcts are r's finished jobs' JCTs, sorted (nil, false without records).
func jcts(r Result) ([]float64, bool) {
	if r.Record == nil {
		return nil, false
	}
	var out []float64
	for _, j := range r.Record.Jobs {
		if j.Completed >= 0 {
			out = append(out, j.Completed-j.Submit)
		}
	}
	slices.Sort(out)
	return out, true
}

// cdfChart is the JCT CDF: for each scheduler, the fraction of all its
// jobs finished within each JCT, a step line.
func cdfChart(res []Result) htmlChart {
	c := newChart("JCT CDF", cdfNote, xLabelJCT, yLabelCDF, res)
	xmax := 0.0
	for _, r := range res {
		if js, ok := jcts(r); ok && len(js) > 0 {
			xmax = math.Max(xmax, js[len(js)-1])
		}
	}
	xmax = niceCeil(xmax)
	c.ticks(xmax, 1)
	for i, r := range res {
		js, ok := jcts(r)
		n := len(r.Record.jobsOrNil())
		switch {
		case !ok:
			c.Lines[i].Why = noRecords
			continue
		case len(js) == 0:
			c.Lines[i].Why = "no job finished"
			continue
		}
		// a step per job (at most maxCDFPoints, evenly spread, the last
		// one always)
		stride := max(1, (len(js)+maxCDFPoints-1)/maxCDFPoints)
		var d strings.Builder
		fmt.Fprintf(&d, "M%s %s", xpos(0, xmax), ypos(0, 1))
		for q := stride - 1; ; q += stride {
			q = min(q, len(js)-1)
			fmt.Fprintf(&d, " H%s V%s", xpos(js[q], xmax), ypos(float64(q+1)/float64(n), 1))
			if q == len(js)-1 {
				break
			}
		}
		fmt.Fprintf(&d, " H%s", xpos(xmax, xmax))
		c.Lines[i].D = d.String()
	}
	return c
}

// jobsOrNil is r's jobs (nil for a nil record).
func (r *Record) jobsOrNil() []JobSeen {
	if r == nil {
		return nil
	}
	return r.Jobs
}

// utilChart is each scheduler's GPU utilisation over each tenth of its
// makespan, a step line on a common time axis.
func utilChart(res []Result) htmlChart {
	c := newChart("GPU utilisation over time", utilNote, xLabelTime, yLabelUtil, res)
	xmax := 0.0
	for _, r := range res {
		if len(r.Util) > 0 {
			xmax = math.Max(xmax, r.Makespan)
		}
	}
	xmax = niceCeil(xmax)
	c.ticks(xmax, 1)
	for i, r := range res {
		if len(r.Util) == 0 || !(r.Makespan > 0) {
			c.Lines[i].Why = "no utilisation recorded"
			continue
		}
		var d strings.Builder
		step := r.Makespan / float64(len(r.Util))
		for q, u := range r.Util {
			u = math.Min(math.Max(u, 0), 1)
			if q == 0 {
				fmt.Fprintf(&d, "M%s %s", xpos(0, xmax), ypos(u, 1))
			} else {
				fmt.Fprintf(&d, " V%s", ypos(u, 1))
			}
			fmt.Fprintf(&d, " H%s", xpos(float64(q+1)*step, xmax))
		}
		c.Lines[i].D = d.String()
	}
	return c
}

func newChart(title, note, xl, yl string, res []Result) htmlChart {
	c := htmlChart{Title: title, Note: note, XLabel: xl, YLabel: yl, W: chartW, H: chartH, Legend: legendRow*float64(len(res)) + legendGutter}
	for i, r := range res {
		c.Lines = append(c.Lines, htmlLine{Name: r.Scheduler, Color: colors[i%len(colors)], LegendY: chartH + legendRow*float64(i) + legendSwatch/2})
	}
	return c
}

// ticks sets the axes' ticks for x in [0, xmax] and y in [0, ymax].
func (c *htmlChart) ticks(xmax, ymax float64) {
	for i := 0; i <= ticksX; i++ {
		v := xmax * float64(i) / ticksX
		c.XTicks = append(c.XTicks, htmlTick{Pos: padL + plotW*float64(i)/ticksX, Label: strconv.FormatFloat(v, 'f', -1, 64)})
	}
	for i := 0; i <= ticksY; i++ {
		v := ymax * float64(i) / ticksY
		c.YTicks = append(c.YTicks, htmlTick{Pos: padT + plotH*(1-float64(i)/ticksY), Label: strconv.FormatFloat(v, 'f', 2, 64)})
	}
}

// niceCeil rounds x > 0 up to 1, 2, 2.5 or 5 times a power of ten (1 for
// x <= 0), so that the ticks are round.
func niceCeil(x float64) float64 {
	if !(x > 0) || math.IsInf(x, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= x {
			return m * p
		}
	}
	return 10 * p
}

func xpos(x, xmax float64) string {
	return strconv.FormatFloat(padL+plotW*math.Min(math.Max(x/xmax, 0), 1), 'f', 1, 64)
}

func ypos(y, ymax float64) string {
	return strconv.FormatFloat(padT+plotH*(1-math.Min(math.Max(y/ymax, 0), 1)), 'f', 1, 64)
}

var pageTmpl = template.Must(template.New("arena").Funcs(template.FuncMap{
	"add": func(a, b float64) float64 { return a + b },
}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8"/>
<title>{{.Title}}</title>
<style>
body { font-family: sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin-bottom: 1.5em; }
td, th { border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: right; }
td.name, th.name { text-align: left; }
svg text { font-size: 12px; fill: #222; }
svg .axis { stroke: #444; stroke-width: 1; }
svg .grid { stroke: #ddd; stroke-width: 1; }
svg .line { fill: none; stroke-width: 2; }
p.note { color: #555; }
</style>
</head>
<body>
<h1>{{.Title}}</h1>
<h2>Settings</h2>
<table class="settings">
{{range .Settings}}<tr><th class="name">{{.Name}}</th><td class="name">{{.Value}}</td></tr>
{{end}}</table>
<h2>Results</h2>
<table class="results">
<tr>{{range .Columns}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr>{{range $i, $c := .}}{{if eq $i 0}}<td class="name">{{$c}}</td>{{else}}<td>{{$c}}</td>{{end}}{{end}}</tr>
{{end}}</table>
{{range .Charts}}{{$c := .}}<h2>{{.Title}}</h2>
<p class="note">{{.Note}}</p>
<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{{.W}}" height="{{add .H .Legend}}" viewBox="0 0 {{.W}} {{add .H .Legend}}" role="img">
<title>{{.Title}}</title>
{{range .YTicks}}<line class="grid" x1="` + f1(padL) + `" x2="` + f1(padL+plotW) + `" y1="{{.Pos}}" y2="{{.Pos}}"/><text x="` + f1(padL-6) + `" y="{{.Pos}}" text-anchor="end" dominant-baseline="middle">{{.Label}}</text>
{{end}}{{range .XTicks}}<line class="grid" x1="{{.Pos}}" x2="{{.Pos}}" y1="` + f1(padT) + `" y2="` + f1(padT+plotH) + `"/><text x="{{.Pos}}" y="` + f1(padT+plotH+16) + `" text-anchor="middle">{{.Label}}</text>
{{end}}<line class="axis" x1="` + f1(padL) + `" x2="` + f1(padL) + `" y1="` + f1(padT) + `" y2="` + f1(padT+plotH) + `"/><line class="axis" x1="` + f1(padL) + `" x2="` + f1(padL+plotW) + `" y1="` + f1(padT+plotH) + `" y2="` + f1(padT+plotH) + `"/>
<text x="` + f1(padL+plotW/2) + `" y="` + f1(padT+plotH+36) + `" text-anchor="middle">{{.XLabel}}</text>
<text x="14" y="` + f1(padT+plotH/2) + `" text-anchor="middle" transform="rotate(-90 14 ` + f1(padT+plotH/2) + `)">{{.YLabel}}</text>
{{range .Lines}}{{if .D}}<path class="line" data-scheduler="{{.Name}}" stroke="{{.Color}}" d="{{.D}}"><title>{{.Name}}</title></path>
{{end}}{{end}}<g class="legend">
{{range .Lines}}<rect x="` + f1(padL) + `" y="{{add .LegendY -7}}" width="` + f1(legendSwatch) + `" height="` + f1(legendSwatch) + `" fill="{{.Color}}"/><text x="` + f1(padL+legendSwatch+legendGutter) + `" y="{{.LegendY}}" dominant-baseline="middle">{{.Name}}{{if .Why}} ({{.Why}}){{end}}</text>
{{end}}</g>
</svg>
{{end}}<h2>Runs</h2>
<table class="runs">
<tr><th class="name">scheduler</th><th class="name">status</th><th>wall s</th><th class="name">1-minute load average</th><th class="name">profile (--profile)</th></tr>
{{range .Runs}}<tr><td class="name">{{.Name}}</td><td class="name">{{.Status}}</td><td>{{.Wall}}</td><td class="name">{{.Load}}</td><td class="name">{{.Profile}}</td></tr>
{{end}}</table>
</body>
</html>
`))

func f1(x float64) string { return strconv.FormatFloat(x, 'f', 1, 64) }
