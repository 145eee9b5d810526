package ui_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/registry"
	"github.com/gandiva-sched/gandiva/internal/timeline"
	"github.com/gandiva-sched/gandiva/internal/ui"
)

// evil is what a hostile user, job or node puts in a name, a GPU type or a
// reason: escape sequences (clear the screen, set the title), a carriage
// return, the bidi override and isolate that reorder text, a zero-width
// space, and markup.
const evil = "\x1b[2J\x1b]0;pwned\x1b\\\rX\u202eevil\u2066\u200b<b>bold</b>"

// hostile is a DataSource whose GPU types, node reasons and a queued job's
// name, reason and ETA note hold evil (the running job's name holds it from
// the engine).
type hostile struct{ *ui.Memory }

func (h hostile) Timeline(ctx context.Context, v api.Principal, run string, w ui.Window) (*timeline.Data, error) {
	d, err := h.Memory.Timeline(ctx, v, run, w)
	if err != nil {
		return nil, err
	}
	c := *d
	c.Servers = append([]timeline.Server(nil), d.Servers...)
	for i := range c.Servers {
		c.Servers[i].Type += evil
	}
	return &c, nil
}

func (h hostile) Queue(ctx context.Context, v api.Principal) (*ui.Queue, error) {
	q, err := h.Memory.Queue(ctx, v)
	if err != nil {
		return nil, err
	}
	c := *q
	c.Jobs = append([]ui.QueuedJob{{Position: 1, ID: "j9", Name: "queued" + evil, User: "alice", State: "queued", GPUs: 1,
		Reason: "reason " + evil, ETANote: "note " + evil}}, q.Jobs...)
	return &c, nil
}

func (h hostile) Nodes(ctx context.Context, v api.Principal) ([]api.Node, error) {
	ns, err := h.Memory.Nodes(ctx, v)
	if err != nil {
		return nil, err
	}
	out := append([]api.Node(nil), ns...)
	for i := range out {
		out[i].GPUType += evil
		out[i].Reason = "reason " + evil
	}
	return out, nil
}

// recordCanvasText makes the page keep every string it draws on a canvas
// in window.drawnText.
const recordCanvasText = `window.drawnText = [];
const fillText = CanvasRenderingContext2D.prototype.fillText;
CanvasRenderingContext2D.prototype.fillText = function (t, ...rest) { window.drawnText.push(String(t)); return fillText.call(this, t, ...rest); };`

// hiddenIn is a page expression: the texts (text nodes, titles, canvas
// texts) that hold a control, bidi or other invisible format character,
// other than the line feeds and tabs of the page's own layout.
const hiddenIn = `(() => {
  const re = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/u, out = [];
  const bad = (s) => re.test(s.replace(/[\n\t]/g, ''));
  const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walk.nextNode(); n; n = walk.nextNode()) if (bad(n.data)) out.push('text: ' + JSON.stringify(n.data));
  for (const e of document.querySelectorAll('[title]')) if (bad(e.title)) out.push('title: ' + JSON.stringify(e.title));
  for (const s of window.drawnText) if (re.test(s)) out.push('canvas: ' + JSON.stringify(s));
  return out;
})()`

// TestDashboardShowsHostileStringsInertly: a job name, a queued job's
// reason, a node's GPU type with escape sequences, bidi controls and markup
// are shown in the dashboard's tables, tooltip and canvas visibly escaped
// (\u202e), never as markup and never reordering the text.
func TestDashboardShowsHostileStringsInertly(t *testing.T) {
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
	mem := &ui.Memory{Cluster: "live", Policy: "fifo", Runs: []ui.MemoryRun{{Run: ui.Run{ID: "live", Label: "live", Kind: "live"}, Rec: rec}},
		Drained: map[string]string{}}
	name := "job" + evil
	mem.Update(func() {
		e.Submit(0, &cluster.JobSpec{Name: name, User: "alice", GPUs: 2, Iters: 1000, IterTime: 1})
		for _, now := range []float64{0, 60} {
			if _, err := e.Round(now); err != nil {
				t.Fatal(err)
			}
			if err := rec.Observe(e.Snapshot()); err != nil {
				t.Fatal(err)
			}
		}
	})
	srv := httptest.NewServer(ui.Handler(hostile{mem}, testTokens, ui.Options{PollSeconds: 0.2}))
	defer srv.Close()
	run(t, ctx, chromedp.ActionFunc(func(ctx context.Context) error {
		_, err := page.AddScriptToEvaluateOnNewDocument(recordCanvasText).Do(ctx)
		return err
	}), chromedp.Navigate(srv.URL+"/ui/#token=admin-token"))
	waitReady(t, ctx)
	// the tooltip of the job's segment, and the job view's labels
	tip := hoverTip(t, ctx, "main", name, 0, 30)
	// (the job view draws its rows' users, which the GPU view does not)
	run(t, ctx, chromedp.Click(`[data-mode="jobs"]`, chromedp.ByQuery),
		chromedp.Poll(`window.drawnText.includes('alice')`, nil, chromedp.WithPollingTimeout(20*time.Second)))
	var hidden []string
	eval(t, ctx, hiddenIn, &hidden)
	if len(hidden) > 0 {
		t.Errorf("the page shows control, bidi or format characters raw:\n%s", strings.Join(hidden, "\n"))
	}
	const shown = `\x1b[2J\x1b]0;pwned\x1b\\rX\u202eevil\u2066\u200b<b>bold</b>`
	var queue, nodes string
	var drawn []string
	var bolds int
	eval(t, ctx, `document.querySelector('#queue tbody').textContent`, &queue)
	eval(t, ctx, `document.querySelector('#nodes tbody').textContent`, &nodes)
	eval(t, ctx, `window.drawnText`, &drawn)
	eval(t, ctx, `[...document.querySelectorAll('b')].filter((b) => b.textContent === 'bold').length`, &bolds)
	for _, c := range []struct{ where, text, want string }{
		{"queue", queue, "queued" + shown}, {"queue", queue, "reason " + shown},
		{"nodes", nodes, "V100" + shown}, {"nodes", nodes, "reason " + shown},
		{"tooltip", tip, "job" + shown}, {"tooltip", tip, "V100" + shown},
		{"canvas", strings.Join(drawn, "\n"), "job" + shown},
	} {
		if !strings.Contains(c.text, c.want) {
			t.Errorf("the %s does not show %q:\n%q", c.where, c.want, c.text)
		}
	}
	if bolds != 0 {
		t.Errorf("%d <b> elements: markup in data became markup", bolds)
	}
}
