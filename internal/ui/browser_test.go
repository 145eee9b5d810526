package ui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/registry"
	"github.com/gandiva-sched/gandiva/internal/timeline"
	"github.com/gandiva-sched/gandiva/internal/ui"
	"github.com/gandiva-sched/gandiva/internal/ui/uitest"
)

// The browser tests drive Debian's Chromium through package uitest.
// GANDIVA_SCREENSHOTS=1 saves docs/dashboard.png, docs/dashboard-user.png,
// docs/dashboard-1000.png and docs/report.png.

func browser(t *testing.T) context.Context { return uitest.Browser(t, 90*time.Second) }

func run(t *testing.T, ctx context.Context, actions ...chromedp.Action) {
	t.Helper()
	uitest.Run(t, ctx, actions...)
}

func eval(t *testing.T, ctx context.Context, expr string, out any) {
	t.Helper()
	uitest.Eval(t, ctx, expr, out)
}

func waitReady(t *testing.T, ctx context.Context) {
	t.Helper()
	uitest.WaitReady(t, ctx)
}

type drawnSeg struct {
	GPU   *int    `json:"gpu"`
	Kind  string  `json:"kind"`
	Start float64 `json:"start"`
	End   float64 `json:"end"`
	Open  bool    `json:"open"`
}

// wantSegs returns the segments of job name in d, as the view lists them.
func wantSegs(d *timeline.Data, name string) []drawnSeg {
	id := cluster.JobID(-2)
	for _, j := range d.Jobs {
		if j.Name == name {
			id = j.ID
		}
	}
	var out []drawnSeg
	for g, row := range d.GPUs {
		for _, s := range row {
			if s.Job == id {
				out = append(out, drawnSeg{GPU: &g, Kind: string(d.Kinds[s.Kind].Kind), Start: s.Start, End: s.End, Open: s.Open})
			}
		}
	}
	return out
}

func sortSegs(s []drawnSeg) {
	slices.SortFunc(s, func(a, b drawnSeg) int {
		if *a.GPU != *b.GPU {
			return *a.GPU - *b.GPU
		}
		switch {
		case a.Start < b.Start:
			return -1
		case a.Start > b.Start:
			return 1
		}
		return strings.Compare(a.Kind, b.Kind)
	})
}

func sameSegs(t *testing.T, what string, got, want []drawnSeg) {
	t.Helper()
	sortSegs(got)
	sortSegs(want)
	if len(got) != len(want) {
		t.Fatalf("%s: the view holds %d segments, the data %d", what, len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if *g.GPU != *w.GPU || g.Kind != w.Kind || math.Abs(g.Start-w.Start) > 1e-9 || math.Abs(g.End-w.End) > 1e-9 || g.Open != w.Open {
			t.Fatalf("%s: segment %d: view %+v (gpu %d), data %+v (gpu %d)", what, i, g, *g.GPU, w, *w.GPU)
		}
	}
}

// hoverTip moves the mouse over job name's segment on gpu at time t and
// returns the tooltip's text.
func hoverTip(t *testing.T, ctx context.Context, view, name string, gpu int, at float64) string {
	t.Helper()
	var pt struct{ X, Y float64 }
	eval(t, ctx, fmt.Sprintf(`gandiva.%s.pointFor(%q, %d, %v)`, view, name, gpu, at), &pt)
	if pt.X == 0 && pt.Y == 0 {
		t.Fatalf("no point for %s on GPU %d at %v", name, gpu, at)
	}
	var tip string
	run(t, ctx, chromedp.MouseEvent("mouseMoved", pt.X, pt.Y),
		chromedp.Sleep(50*time.Millisecond),
		chromedp.Evaluate(`(() => { const t = gandiva.`+view+`.tip; return t.hidden ? '' : t.textContent })()`, &tip))
	return tip
}

func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	uitest.Screenshot(t, ctx, filepath.Join("..", ".."), name)
}

// TestDashboardInBrowser loads the dashboard over a recorded simulation
// and checks, in the page, that the timeline holds exactly the segments of
// the data (a job time-sliced on several GPUs), that its tooltip names
// the job, and that the queue and nodes tables show the data.
func TestDashboardInBrowser(t *testing.T) {
	ctx := browser(t)
	sc := runScenario(t, "gandiva", 3, 80, 5200)
	mem := sc.memory("gandiva")
	srv := httptest.NewServer(ui.Handler(mem, testTokens, ui.Options{PollSeconds: 0.2}))
	defer srv.Close()
	all := sc.rec.Data(timeline.Query{})
	name, n := busiest(all, "alice")
	if n < 3 {
		t.Fatalf("alice's busiest job has %d segments: the scenario does not time-slice", n)
	}
	run(t, ctx, chromedp.Navigate(srv.URL+"/ui/#token=admin-token"))
	waitReady(t, ctx)
	var url string
	run(t, ctx, chromedp.Location(&url))
	if strings.Contains(url, "token") {
		t.Errorf("the token stayed in the URL: %s", url)
	}
	var got []drawnSeg
	eval(t, ctx, fmt.Sprintf(`gandiva.main.segmentsOf(%q)`, name), &got)
	want := wantSegs(all, name)
	sameSegs(t, name, got, want)
	t.Logf("%s: %d segments in the view, as in the data", name, len(got))
	// hover over the middle of one of its running segments
	for _, s := range want {
		if s.Kind == "running" || s.Kind == "packed" {
			run(t, ctx, chromedp.Evaluate(fmt.Sprintf(`gandiva.main.scale.set(%v, %v)`, s.Start-(s.End-s.Start), s.End+(s.End-s.Start)), nil))
			tip := hoverTip(t, ctx, "main", name, *s.GPU, (s.Start+s.End)/2)
			for _, w := range []string{name, "alice", s.Kind} {
				if !strings.Contains(tip, w) {
					t.Errorf("tooltip %q does not name %q", tip, w)
				}
			}
			break
		}
	}
	// the queue and the nodes, as the data source has them
	q, _ := mem.Queue(ctx, testTokens["admin-token"])
	var rows []string
	eval(t, ctx, `[...document.querySelectorAll('#queue tbody tr[data-job]')].map(r => r.dataset.job)`, &rows)
	if len(q.Jobs) == 0 || len(rows) != len(q.Jobs) {
		t.Errorf("the queue table has %d rows, the queue %d jobs", len(rows), len(q.Jobs))
	}
	var nodes []string
	eval(t, ctx, `[...document.querySelectorAll('#nodes tbody tr[data-node]')].map(r => r.dataset.node)`, &nodes)
	if len(nodes) != len(sc.c.Servers) {
		t.Errorf("the nodes table has %d rows, the cluster %d servers", len(nodes), len(sc.c.Servers))
	}
	var drained string
	eval(t, ctx, `(document.querySelector('#nodes tr[data-node="gpu-p0"] .badge') || {}).textContent || ''`, &drained)
	if drained != "drained" {
		t.Errorf("gpu-p0 shows %q, not drained", drained)
	}
	// the shares chart draws a line per user
	var lines int
	eval(t, ctx, `document.querySelectorAll('#shares path.held').length`, &lines)
	if lines != 3 {
		t.Errorf("the shares chart has %d lines, want 3 (alice, bob, carol)", lines)
	}
	run(t, ctx, chromedp.Evaluate(`gandiva.main.scale.fit()`, nil), chromedp.Sleep(100*time.Millisecond))
	screenshot(t, ctx, "dashboard.png")
}

// TestDashboardUserSeesOnlyOwnJobs: alice's dashboard holds none of bob's
// or carol's jobs (in the page's data, its text and its timeline), while
// the GPUs they hold show as another user's.
func TestDashboardUserSeesOnlyOwnJobs(t *testing.T) {
	ctx := browser(t)
	sc := runScenario(t, "gandiva", 3, 80, 5200)
	srv := httptest.NewServer(ui.Handler(sc.memory("gandiva"), testTokens, ui.Options{PollSeconds: 0.2}))
	defer srv.Close()
	run(t, ctx, chromedp.Navigate(srv.URL+"/ui/#token=alice-token"))
	waitReady(t, ctx)
	var state, text string
	run(t, ctx, chromedp.Evaluate(`JSON.stringify(gandiva.state)`, &state), chromedp.Evaluate(`document.body.innerText`, &text))
	for _, who := range []string{"bob", "carol"} {
		if strings.Contains(state, who) || strings.Contains(text, who) {
			t.Errorf("alice's dashboard mentions %s", who)
		}
	}
	var users []string
	eval(t, ctx, `[...new Set(gandiva.state.data.jobs.map(j => j.user))]`, &users)
	if !slices.Equal(users, []string{"alice"}) {
		t.Errorf("alice's timeline holds jobs of %v", users)
	}
	all := sc.rec.Data(timeline.Query{})
	bobs, _ := busiest(all, "bob")
	var segs []drawnSeg
	eval(t, ctx, fmt.Sprintf(`gandiva.main.segmentsOf(%q)`, bobs), &segs)
	if len(segs) != 0 {
		t.Errorf("alice's timeline draws %d segments of %s", len(segs), bobs)
	}
	var anon int
	eval(t, ctx, `gandiva.main.rows.reduce((n, r) => n + r.segs.filter(s => s.job < 0).length, 0)`, &anon)
	if anon == 0 {
		t.Error("alice's timeline shows no other user's segment: the GPUs they hold look free")
	}
	var queueUsers []string
	eval(t, ctx, `[...new Set([...document.querySelectorAll('#queue tbody tr[data-job] td:nth-child(3)')].map(td => td.textContent))]`, &queueUsers)
	if len(queueUsers) > 1 || len(queueUsers) == 1 && queueUsers[0] != "alice" {
		t.Errorf("alice's queue shows jobs of %v", queueUsers)
	}
	screenshot(t, ctx, "dashboard-user.png")
}

// TestDashboardUpdatesLive: new state recorded while the page is open
// shows up without a reload.
func TestDashboardUpdatesLive(t *testing.T) {
	ctx := browser(t)
	c, err := cluster.NewBuilder("live", nil).Add(cluster.ServerGroup{Type: "V100", Count: 1, GPUs: 2, NamePrefix: "n"}).Build()
	if err != nil {
		t.Fatal(err)
	}
	fifo, err := registry.New("fifo", policy.Config{})
	if err != nil {
		t.Fatal(err)
	}
	e := engine.New(c, fifo, nil, engine.Options{})
	rec := timeline.NewRecorder(timeline.Options{})
	mem := &ui.Memory{Cluster: "live", Policy: "script", Runs: []ui.MemoryRun{{Run: ui.Run{ID: "live", Label: "live", Kind: "live"}, Rec: rec}}}
	step := func(now float64, f func()) {
		mem.Update(func() {
			f()
			if _, err := e.Round(now); err != nil {
				t.Fatal(err)
			}
			if err := rec.Observe(e.Snapshot()); err != nil {
				t.Fatal(err)
			}
		})
	}
	step(0, func() { e.Submit(0, &cluster.JobSpec{Name: "first", User: "alice", GPUs: 1, Iters: 100, IterTime: 1}) })
	srv := httptest.NewServer(ui.Handler(mem, testTokens, ui.Options{PollSeconds: 0.1}))
	defer srv.Close()
	run(t, ctx, chromedp.Navigate(srv.URL+"/ui/#token=admin-token"))
	waitReady(t, ctx)
	var segs []drawnSeg
	eval(t, ctx, `gandiva.main.segmentsOf("first")`, &segs)
	if len(segs) != 1 || !segs[0].Open {
		t.Fatalf("first: %+v, want one open segment", segs)
	}
	step(30, func() {
		e.Apply(cluster.Event{Time: 30, Kind: cluster.EvFinish, Job: 0, Done: 100})
		e.Submit(30, &cluster.JobSpec{Name: "second", User: "alice", GPUs: 2, Iters: 100, IterTime: 1})
	})
	run(t, ctx, chromedp.Poll(`gandiva.main.segmentsOf("second").length === 2`, nil, chromedp.WithPollingTimeout(10*time.Second)))
	eval(t, ctx, `gandiva.main.segmentsOf("first")`, &segs)
	if len(segs) != 1 || segs[0].Open || segs[0].End != 30 {
		t.Fatalf("first after it finished: %+v, want [0, 30)", segs)
	}
}

// TestDashboardAsksForAToken: no token, a login form; a bad one, an error.
func TestDashboardAsksForAToken(t *testing.T) {
	ctx := browser(t)
	sc := runScenario(t, "fifo", 1, 10, 0)
	srv := httptest.NewServer(ui.Handler(sc.memory("fifo"), testTokens, ui.Options{}))
	defer srv.Close()
	var msg string
	run(t, ctx, chromedp.Navigate(srv.URL+"/ui/"), chromedp.WaitVisible(`#login-form`, chromedp.ByQuery),
		chromedp.SendKeys(`#token`, "wrong", chromedp.ByQuery), chromedp.Click(`#login-form button`, chromedp.ByQuery),
		chromedp.Poll(`document.getElementById('login-error').textContent !== ''`, nil, chromedp.WithPollingTimeout(5*time.Second)),
		chromedp.Text(`#login-error`, &msg, chromedp.ByQuery))
	if !strings.Contains(msg, "refused") {
		t.Errorf("a bad token says %q", msg)
	}
	run(t, ctx, chromedp.SendKeys(`#token`, "bob-token", chromedp.ByQuery), chromedp.Click(`#login-form button`, chromedp.ByQuery))
	waitReady(t, ctx)
	var viewer string
	run(t, ctx, chromedp.Text(`#viewer`, &viewer, chromedp.ByQuery))
	if !strings.Contains(viewer, "bob") {
		t.Errorf("the header shows %q, not bob", viewer)
	}
}

// TestReportInBrowser opens the self-contained report from disk with two
// runs side by side, checks each view holds exactly its run's segments,
// and that the page made no request but for itself; with its data inlined
// as JSON, and compressed (as a long history's is).
func TestReportInBrowser(t *testing.T) {
	t.Run("json", func(t *testing.T) { reportInBrowser(t, false) })
	t.Run("compressed", func(t *testing.T) { reportInBrowser(t, true) })
}

func reportInBrowser(t *testing.T, compressed bool) {
	if compressed {
		defer ui.CompressReportsAbove(0)()
	}
	ctx := browser(t)
	a := runScenario(t, "gandiva", 3, 80, 0)
	b := runScenario(t, "fifo", 3, 80, 0)
	rep := &ui.Report{Title: "gandiva vs fifo", Subtitle: "80 synthetic jobs on 12 V100 + 4 P100", Runs: []ui.ReportRun{
		{Label: "gandiva", Policy: "gandiva", Timeline: a.rec.Data(timeline.Query{}), Shares: a.rec.Shares(timeline.ShareQuery{Tickets: map[string]float64{"alice": 2}}),
			Stats: []ui.Stat{{Name: "suspends", Value: fmt.Sprint(a.res.Stats.Suspends)}}},
		{Label: "fifo", Policy: "fifo", Timeline: b.rec.Data(timeline.Query{}), Shares: b.rec.Shares(timeline.ShareQuery{})},
	}}
	path := filepath.Join(t.TempDir(), "report.html")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := ui.WriteReport(f, rep); err != nil {
		t.Fatal(err)
	}
	f.Close()
	page, _ := os.ReadFile(path)
	if got := strings.Contains(string(page), `type="application/gzip+base64"`); got != compressed {
		t.Fatalf("the report's data compressed: %v, want %v", got, compressed)
	}
	back, err := ui.ReadReport(strings.NewReader(string(page)))
	if err != nil {
		t.Fatal(err)
	}
	if x, y := mustJSON(t, back), mustJSON(t, rep); x != y {
		t.Fatalf("ReadReport gives other data (%d bytes, wrote %d)", len(x), len(y))
	}
	var mu sync.Mutex
	var requests []string
	chromedp.ListenTarget(ctx, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok {
			mu.Lock()
			requests = append(requests, e.Request.URL)
			mu.Unlock()
		}
	})
	run(t, ctx, network.Enable(), chromedp.Navigate("file://"+path))
	waitReady(t, ctx)
	name, n := busiest(rep.Runs[0].Timeline, "bob")
	if n < 3 {
		t.Fatalf("bob's busiest job under gandiva has %d segments", n)
	}
	for i, r := range rep.Runs {
		var got []drawnSeg
		eval(t, ctx, fmt.Sprintf(`gandiva.views[%d].segmentsOf(%q)`, i, name), &got)
		sameSegs(t, r.Label+": "+name, got, wantSegs(r.Timeline, name))
	}
	var views int
	eval(t, ctx, `document.querySelectorAll('section[data-run] .tl-canvas').length`, &views)
	if views != 2 {
		t.Errorf("%d timelines drawn, want 2", views)
	}
	mu.Lock()
	for _, u := range requests {
		if !strings.HasPrefix(u, "file://") && !strings.HasPrefix(u, "data:") {
			t.Errorf("the report requested %s", u)
		}
	}
	mu.Unlock()
	if !compressed {
		screenshot(t, ctx, "report.png")
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestDashboardAtScale loads 1,000 GPUs and 10,000 jobs (a FIFO
// simulation stopped while thousands wait) and checks that the views are
// virtualised: every GPU and job has its row, and a paint draws only the
// rows in view. It logs the load and paint times (figures for
// docs/DASHBOARD.md, not asserted: the machine is shared).
func TestDashboardAtScale(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	ctx := browser(t)
	sc := runScenarioP(t, "fifo", nil, 167, 10000, 22000, 1.3, false)
	if sc.c.NumGPUs() != 1000 {
		t.Fatalf("%d GPUs", sc.c.NumGPUs())
	}
	mem := sc.memory("fifo")
	srv := httptest.NewServer(ui.Handler(mem, testTokens, ui.Options{PollSeconds: 5}))
	defer srv.Close()
	start := time.Now()
	run(t, ctx, chromedp.Navigate(srv.URL+"/ui/#token=admin-token"))
	waitReady(t, ctx)
	load := time.Since(start)
	var res string
	run(t, ctx, chromedp.Evaluate(`JSON.stringify(performance.getEntriesByType('resource').map(e => [e.name.replace(/^.*\/ui\//, ''), Math.round(e.startTime), Math.round(e.duration), e.encodedBodySize]))`, &res))
	t.Logf("requests [name, start ms, duration ms, bytes]: %s", res)
	run(t, ctx, chromedp.Evaluate(`JSON.stringify(gandiva.timings)`, &res))
	t.Logf("timings: %s", res)
	var m struct {
		Rows, Drawn, Jobs, JobRows, JobDrawn, Segs, QueueRows, Queue int
		Paint, JobPaint                                              float64
	}
	eval(t, ctx, `(() => {
		const v = gandiva.main, s = v.scale, time = () => { const t0 = performance.now(); for (let i = 0; i < 20; i++) { s.zoom(i % 2 ? 1.05 : 1/1.05); v.paint(); } return (performance.now() - t0) / 20; };
		s.fit();
		const r = { Rows: v.rowCount(), Drawn: v.drawnRows(), Segs: v.rows.reduce((n, r) => n + r.segs.length, 0), Paint: time(),
			Jobs: gandiva.state.data.jobs.length, QueueRows: document.querySelectorAll('#queue tbody tr[data-job]').length, Queue: gandiva.state.queue.jobs.length };
		v.setOptions({ mode: 'jobs' });
		r.JobRows = v.rowCount(); r.JobDrawn = v.drawnRows(); r.JobPaint = time();
		v.setOptions({ mode: 'gpus' });
		return r; })()`, &m)
	t.Logf("1,000 GPUs, %d jobs in the timeline, %d segments: loaded in %v; a paint of the whole history takes %.1f ms (GPU rows), %.1f ms (job rows); %d of %d GPU rows and %d of %d job rows drawn; queue: %d of %d rows in the table",
		m.Jobs, m.Segs, load.Round(time.Millisecond), m.Paint, m.JobPaint, m.Drawn, m.Rows, m.JobDrawn, m.JobRows, m.QueueRows, m.Queue)
	if m.Rows != 1000 || m.Drawn > 40 || m.Drawn == 0 {
		t.Errorf("GPU rows: %d rows, %d drawn; want 1000, at most a screenful drawn", m.Rows, m.Drawn)
	}
	if m.Jobs < 5000 || m.JobRows < 5000 || m.JobDrawn > 40 {
		t.Errorf("job rows: %d jobs, %d rows, %d drawn", m.Jobs, m.JobRows, m.JobDrawn)
	}
	if m.Queue < 1000 || m.QueueRows != 200 {
		t.Errorf("queue: %d waiting, %d rows in the table (want the first 200)", m.Queue, m.QueueRows)
	}
	screenshot(t, ctx, "dashboard-1000.png")
}
