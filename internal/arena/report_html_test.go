package arena

import (
	"bytes"
	"encoding/xml"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const hostile = `<script>alert("x")</script>&'<b`

// reportFixture is a run of three schedulers: two with per-job records (one
// with a hostile name, one with an unfinished job), one without.
func reportFixture() Report {
	rec := func(jcts ...float64) *Record {
		r := &Record{Capacity: 8, End: 1000}
		for i, j := range jcts {
			s := JobSeen{Key: "u-a/j-" + strconv.Itoa(i), Namespace: "u-a", GPUs: 1, Submit: float64(10 * i), FirstBind: -1, FirstRun: -1, Completed: -1, JobComplete: -1}
			if j >= 0 {
				s.Completed = s.Submit + j
			}
			r.Jobs = append(r.Jobs, s)
		}
		return r
	}
	res := []Result{
		{Scheduler: "gandiva:tiresias-l", Status: "ok", Record: rec(300, 100, 200, 100)},
		{Scheduler: hostile, Status: "timed out", Record: rec(50, -1, 700, 400)},
		{Scheduler: "kube-scheduler", Status: "ok"},
	}
	res[0].Summary = Summarize(res[0].Record)
	res[1].Summary = Summarize(res[1].Record)
	res[2].Summary = Summary{Jobs: 4, Finished: 4, AvgJCT: 250, Makespan: 900, Util: []float64{0.5, 1, 0.25, 0, 0.5, 0.5, 0.5, 0.5, 0.5, 0.75}}
	res[2].LoadAvg = []float64{1.5, 2.25}
	return Report{Settings: Settings{Trace: "trace " + hostile, Cluster: "tiresias-n2g4: 2 servers", Jobs: 4, Speed: 20,
		Checkpoints: Checkpoints{Every: 300, OnTerm: true}, DeclareWork: true, Perf: "gandiva-perf/v1"}, Results: res}
}

// svgPath is one <path> of a chart.
type svgPath struct {
	Scheduler, D string
}

// parsePage reads the page as strict XML (it is well-formed) and returns
// each <svg>'s line paths.
func parsePage(t *testing.T, page []byte) [][]svgPath {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(page))
	d.Strict = true
	var charts [][]svgPath
	depth := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the page is not well-formed: %v\n%s", err, page)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			depth++
			switch e.Name.Local {
			case "svg":
				charts = append(charts, nil)
			case "path":
				p := svgPath{}
				for _, a := range e.Attr {
					switch a.Name.Local {
					case "data-scheduler":
						p.Scheduler = a.Value
					case "d":
						p.D = a.Value
					}
				}
				charts[len(charts)-1] = append(charts[len(charts)-1], p)
			case "script", "img", "iframe", "link", "object", "embed":
				t.Errorf("the page has a <%s> element", e.Name.Local)
			}
			for _, a := range e.Attr {
				if a.Name.Local == "src" || a.Name.Local == "href" || strings.HasPrefix(a.Name.Local, "on") {
					t.Errorf("<%s> has attribute %s=%q", e.Name.Local, a.Name.Local, a.Value)
				}
			}
		case xml.EndElement:
			depth--
		}
	}
	if depth != 0 {
		t.Fatalf("unbalanced elements (%d open)", depth)
	}
	return charts
}

// points reads a path of M x y, H x and V y commands into its vertices.
func points(t *testing.T, d string) [][2]float64 {
	t.Helper()
	var out [][2]float64
	f := strings.Fields(d)
	num := func(s string) float64 {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("path %q: %v", d, err)
		}
		return v
	}
	for i := 0; i < len(f); i++ {
		switch c, rest := f[i][0], f[i][1:]; c {
		case 'M':
			out = append(out, [2]float64{num(rest), num(f[i+1])})
			i++
		case 'H':
			out = append(out, [2]float64{num(rest), out[len(out)-1][1]})
		case 'V':
			out = append(out, [2]float64{out[len(out)-1][0], num(rest)})
		default:
			t.Fatalf("path %q: command %q", d, f[i])
		}
	}
	return out
}

// The page is one self-contained, well-formed document: the settings and
// results, a JCT CDF with one line per scheduler that has records (each
// a non-decreasing step from 0 to its finished fraction), a utilisation
// chart with one line per scheduler, a legend naming every scheduler, the
// load averages; names from the results escaped everywhere.
func TestWriteHTML(t *testing.T) {
	rep := reportFixture()
	var buf bytes.Buffer
	if err := WriteHTML(&buf, rep); err != nil {
		t.Fatal(err)
	}
	page := buf.Bytes()
	if bytes.Contains(page, []byte("<script")) || bytes.Contains(page, []byte(`alert("x")`)) || bytes.Contains(page, []byte("'<b")) {
		t.Fatalf("a hostile name is not escaped:\n%s", page)
	}
	if n := bytes.Count(page, []byte("&lt;script&gt;")); n < 4 { // trace, table, 2 legends, runs
		t.Errorf("the hostile name escaped %d times, want at least 4", n)
	}
	if bytes.Contains(page, []byte("http://")) && !bytes.Contains(page, []byte(`xmlns="http://www.w3.org/2000/svg"`)) {
		t.Errorf("the page refers to a network address")
	}
	for _, want := range []string{"tiresias-n2g4: 2 servers", "every 300 s of progress; on SIGTERM", "1.50 at the start, 2.25 at the end", noRecords, "gandiva-perf/v1"} {
		if !bytes.Contains(page, []byte(want)) {
			t.Errorf("the page does not say %q", want)
		}
	}
	charts := parsePage(t, page)
	if len(charts) != 2 {
		t.Fatalf("%d charts, want 2 (CDF, utilisation)", len(charts))
	}
	cdf, util := charts[0], charts[1]
	if len(cdf) != 2 || cdf[0].Scheduler != rep.Results[0].Scheduler || cdf[1].Scheduler != hostile {
		t.Fatalf("CDF lines %+v, want one for each scheduler with records", cdf)
	}
	if len(util) != 3 {
		t.Fatalf("%d utilisation lines, want 3", len(util))
	}
	bottom, top := padT+plotH, padT
	for i, p := range cdf {
		pts := points(t, p.D)
		for k := 1; k < len(pts); k++ {
			if pts[k][0] < pts[k-1][0] || pts[k][1] > pts[k-1][1] {
				t.Fatalf("CDF of %s not monotone at %v → %v: %s", p.Scheduler, pts[k-1], pts[k], p.D)
			}
		}
		finished := float64(rep.Results[i].Finished) / float64(rep.Results[i].Jobs)
		first, last := pts[0], pts[len(pts)-1]
		if first != [2]float64{padL, bottom} || last[0] != padL+plotW {
			t.Errorf("CDF of %s runs from %v to %v, want from (%v, %v) to x=%v", p.Scheduler, first, last, padL, bottom, padL+plotW)
		}
		if want := bottom - finished*plotH; last[1] < want-0.1 || last[1] > want+0.1 {
			t.Errorf("CDF of %s ends at y=%v, want %v (%.2f finished)", p.Scheduler, last[1], want, finished)
		}
	}
	for _, p := range util {
		for _, pt := range points(t, p.D) {
			if pt[1] < top-0.01 || pt[1] > bottom+0.01 || pt[0] < padL || pt[0] > padL+plotW+0.01 {
				t.Errorf("utilisation of %s leaves the plot: %v", p.Scheduler, pt)
			}
		}
	}
}

// Results files round-trip through ReadReport; MergeReports joins runs of
// the same settings, keeps the run one of a scheduler failed in one file,
// and refuses different settings and a scheduler run twice, naming them.
func TestReadMergeReports(t *testing.T) {
	rep := reportFixture()
	var buf bytes.Buffer
	if err := Write(&buf, "json", rep.Settings, rep.Results, true); err != nil {
		t.Fatal(err)
	}
	back, err := ReadReport(bytes.NewReader(buf.Bytes()), "a.json")
	if err != nil {
		t.Fatal(err)
	}
	if back.Settings != rep.Settings || len(back.Results) != 3 || back.Results[1].Scheduler != hostile || len(back.Results[0].Record.Jobs) != 4 {
		t.Fatalf("read back %+v", back)
	}
	for _, bad := range []string{"", "{", `{"settings":{}}`, `[1,2]`, `{"settings":{"trace":"t","cluster":"c"},"results":[{"scheduler":""}]}`} {
		if _, err := ReadReport(strings.NewReader(bad), "bad.json"); err == nil || !strings.HasPrefix(err.Error(), "bad.json: ") {
			t.Errorf("%q: error %v, want one naming bad.json", bad, err)
		}
	}

	a := Report{Settings: rep.Settings, Results: slices.Clone(rep.Results[:2])}
	failed := Result{Scheduler: "kube-scheduler", Status: "failed: no binary"}
	a.Results = append(a.Results, failed)
	b := Report{Settings: rep.Settings, Results: []Result{rep.Results[2], {Scheduler: "kueue", Status: "ok"}}}
	m, err := MergeReports([]Report{a, b}, []string{"a.json", "b.json"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range m.Results {
		names = append(names, r.Scheduler+"="+r.Status)
	}
	if got, want := strings.Join(names, ","), "gandiva:tiresias-l=ok,"+hostile+"=timed out,kube-scheduler=ok,kueue=ok"; got != want {
		t.Errorf("merged %s, want %s", got, want)
	}
	if _, err := MergeReports([]Report{a, b, b}, []string{"a.json", "b.json", "c.json"}); err == nil || !strings.Contains(err.Error(), "kube-scheduler: run in both b.json and c.json") {
		t.Errorf("a scheduler run twice: %v", err)
	}
	for field, change := range map[string]func(*Settings){
		"speed":       func(s *Settings) { s.Speed = 50 },
		"trace":       func(s *Settings) { s.Trace = "other" },
		"checkpoints": func(s *Settings) { s.Checkpoints.OnTerm = false },
		"workload":    func(s *Settings) { s.Workload = WorkloadPods },
	} {
		c := b
		change(&c.Settings)
		if _, err := MergeReports([]Report{a, c}, []string{"a.json", "c.json"}); err == nil || !strings.Contains(err.Error(), "a.json and c.json: different "+field) {
			t.Errorf("different %s: %v", field, err)
		}
	}
	// a file written before the workload was recorded is a Job run
	old := b
	old.Settings.Workload = WorkloadJob
	if _, err := MergeReports([]Report{a, old}, []string{"a.json", "old.json"}); err == nil {
		// (the fixture has Workload ""; "job" is the same run)
	} else {
		t.Errorf("workload \"\" and %q: %v", WorkloadJob, err)
	}
}

func TestNiceCeil(t *testing.T) {
	for x, want := range map[float64]float64{0: 1, -3: 1, 0.3: 0.5, 1: 1, 1.2: 2, 2.2: 2.5, 3: 5, 7: 10, 1186: 2000, 2400: 2500, 100000: 100000} {
		if got := niceCeil(x); got != want {
			t.Errorf("niceCeil(%v) = %v, want %v", x, got, want)
		}
	}
}
