package ui_test

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gandiva-sched/gandiva/internal/ui"
)

// TestQueueETABandsInBrowser: the queue shows an ETA of unknown length as
// its median with the 80% band ("…" for a band open beyond the forecast),
// one of declared length as a time; a click on an ETA shows what it rests
// on under the table, and follows the job across refreshes; a second
// click hides it.
func TestQueueETABandsInBrowser(t *testing.T) {
	ctx := browser(t)
	sc := runScenario(t, "gandiva", 3, 80, 5200)
	mem := sc.memory("gandiva")
	f := func(x float64) *float64 { return &x }
	const note = "length unknown, drawn from the Philly trace's run times (82,247 jobs)"
	mem.Update(func() {
		mem.Waiting = []ui.QueuedJob{
			{Position: 1, ID: "b", Name: "banded", User: "alice", State: "queued", GPUs: 1, ETASamples: 20, ETANote: note,
				ETAStart: f(7200), ETAStartLow: f(3600), ETAStartHigh: f(10800), ETAFinish: f(14400), ETAFinishLow: f(9000)},
			{Position: 2, ID: "d", Name: "declared", User: "alice", State: "queued", GPUs: 1, ETANote: "100 of 100 mini-batches left",
				ETAStart: f(7200), ETAFinish: f(7400)},
		}
	})
	srv := httptest.NewServer(ui.Handler(mem, testTokens, ui.Options{PollSeconds: 0.2}))
	defer srv.Close()
	run(t, ctx, chromedp.Navigate(srv.URL+"/ui/#token=admin-token"))
	waitReady(t, ctx)
	var cells [][]string
	cellsJS := `[...document.querySelectorAll('#queue tbody tr[data-job]')].map(r => [...r.querySelectorAll('td.eta')].map(td => td.textContent))`
	eval(t, ctx, cellsJS, &cells)
	if len(cells) != 2 || len(cells[0]) != 2 || len(cells[1]) != 2 {
		t.Fatalf("ETA cells %q", cells)
	}
	if s, e := cells[0][0], cells[0][1]; !strings.HasPrefix(s, "~") || strings.Count(s, "–") != 1 || !strings.HasSuffix(e, "–…)") {
		t.Errorf("the banded job's ETAs read %q and %q", s, e)
	}
	if s, e := cells[1][0], cells[1][1]; strings.ContainsAny(s+e, "~(…") || s == "—" || e == "—" {
		t.Errorf("the declared job's ETAs read %q and %q", s, e)
	}
	detail := func() (shown bool, text string) {
		var out struct {
			Hidden bool   `json:"hidden"`
			Text   string `json:"text"`
		}
		eval(t, ctx, `({hidden: document.getElementById('eta-detail').hidden, text: document.getElementById('eta-detail').textContent})`, &out)
		return !out.Hidden, out.Text
	}
	if shown, _ := detail(); shown {
		t.Fatal("the ETA detail shows before any click")
	}
	click := `document.querySelector('#queue tr[data-job="banded"] td.eta').click()`
	run(t, ctx, chromedp.Evaluate(click, nil))
	if shown, text := detail(); !shown || text != "ETA of banded: "+note {
		t.Fatalf("after a click, the detail shows %v: %q", shown, text)
	}
	// it follows the job across the page's refreshes: a new forecast's
	// note replaces it
	mem.Update(func() { mem.Waiting[0].ETANote = note + ", later" })
	deadline := time.Now().Add(30 * time.Second)
	for {
		shown, text := detail()
		if shown && text == "ETA of banded: "+note+", later" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a refresh, the detail shows %v: %q", shown, text)
		}
		run(t, ctx, chromedp.Sleep(50*time.Millisecond))
	}
	run(t, ctx, chromedp.Evaluate(click, nil))
	if shown, _ := detail(); shown {
		t.Fatal("a second click did not hide the detail")
	}
}
