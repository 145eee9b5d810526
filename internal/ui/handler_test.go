package ui_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/timeline"
	"github.com/gandiva-sched/gandiva/internal/ui"
)

func get(t *testing.T, srv *httptest.Server, path, token string) (int, []byte, http.Header) {
	t.Helper()
	req, _ := http.NewRequest("GET", srv.URL+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header
}

func TestHandlerRoutesAndAuth(t *testing.T) {
	sc := runScenario(t, "gandiva", 2, 40, 0)
	srv := httptest.NewServer(ui.Handler(sc.memory("gandiva"), testTokens, ui.Options{}))
	defer srv.Close()
	// the page and its assets need no token and hold no data
	for _, p := range []string{"/ui/", "/ui/assets/app.js", "/ui/assets/timeline.js", "/ui/assets/shares.js", "/ui/assets/style.css"} {
		code, body, h := get(t, srv, p, "")
		if code != 200 || len(body) == 0 {
			t.Errorf("GET %s: %d", p, code)
		}
		if strings.Contains(string(body), "alice-") {
			t.Errorf("GET %s holds job data", p)
		}
		if h.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: no nosniff", p)
		}
	}
	if _, _, h := get(t, srv, "/ui/", ""); !strings.Contains(h.Get("Content-Security-Policy"), "script-src 'self'") {
		t.Errorf("the page has no content security policy: %q", h.Get("Content-Security-Policy"))
	}
	for _, p := range []string{"/ui/assets/report.html", "/ui/assets/../handler.go", "/ui/assets/nope.js"} {
		if code, _, _ := get(t, srv, p, ""); code != 404 {
			t.Errorf("GET %s: %d, want 404", p, code)
		}
	}
	// the API: 401 without or with a bad token, 403 for agents
	for _, p := range []string{"/ui/api/summary", "/ui/api/timeline", "/ui/api/shares", "/ui/api/queue", "/ui/api/nodes"} {
		if code, _, h := get(t, srv, p, ""); code != 401 || h.Get("WWW-Authenticate") == "" {
			t.Errorf("GET %s without a token: %d", p, code)
		}
		if code, _, _ := get(t, srv, p, "nope"); code != 401 {
			t.Errorf("GET %s with a bad token: %d", p, code)
		}
		if code, _, _ := get(t, srv, p, "agent-token"); code != 403 {
			t.Errorf("GET %s with an agent token: %d", p, code)
		}
		if code, body, _ := get(t, srv, p, "admin-token"); code != 200 || !json.Valid(body) {
			t.Errorf("GET %s as admin: %d %s", p, code, body)
		}
	}
	// bad parameters name themselves
	for _, c := range []struct{ path, field string }{
		{"/ui/api/timeline?from=x", "from"}, {"/ui/api/timeline?to=-1", "to"}, {"/ui/api/timeline?from=10&to=5", "to"},
		{"/ui/api/shares?step=NaN", "step"}, {"/ui/api/timeline?run=nope", ""}, {"/ui/api/nope", ""},
	} {
		code, body, _ := get(t, srv, c.path, "admin-token")
		var e struct{ Error api.Error }
		if err := json.Unmarshal(body, &e); err != nil || code < 400 || code >= 500 || e.Error.Field != c.field {
			t.Errorf("GET %s: %d %s (want a 4xx naming %q)", c.path, code, body, c.field)
		}
	}
	// a large answer is gzipped for a client that takes it
	req, _ := http.NewRequest("GET", srv.URL+"/ui/api/timeline", nil)
	req.Header.Set("Authorization", "Bearer admin-token")
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := srv.Client().Transport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("Content-Encoding") != "gzip" {
		t.Errorf("the timeline was not gzipped: %v", resp.Header)
	}
}

// TestUserSeesOnlyOwnJobs: through the API, alice gets her jobs by name
// and nobody else's: other users' segments are anonymous, their queued
// jobs counted, their shares summed.
func TestUserSeesOnlyOwnJobs(t *testing.T) {
	sc := runScenario(t, "gandiva", 2, 60, 4000)
	srv := httptest.NewServer(ui.Handler(sc.memory("gandiva"), testTokens, ui.Options{}))
	defer srv.Close()
	all := sc.rec.Data(timeline.Query{})
	others := 0
	for _, j := range all.Jobs {
		if j.User != "alice" {
			others++
		}
	}
	if others == 0 {
		t.Fatal("the scenario has no other users' jobs")
	}
	for _, p := range []string{"/ui/api/summary", "/ui/api/timeline", "/ui/api/shares", "/ui/api/queue", "/ui/api/nodes"} {
		code, body, _ := get(t, srv, p, "alice-token")
		if code != 200 {
			t.Fatalf("GET %s as alice: %d %s", p, code, body)
		}
		for _, who := range []string{"bob", "carol"} {
			if bytes.Contains(body, []byte(who)) {
				t.Errorf("GET %s as alice mentions %s", p, who)
			}
		}
	}
	_, body, _ := get(t, srv, "/ui/api/timeline", "alice-token")
	var d timeline.Data
	if err := json.Unmarshal(body, &d); err != nil {
		t.Fatal(err)
	}
	anon := 0
	for _, row := range d.GPUs {
		for _, s := range row {
			if s.Job < 0 {
				anon++
			}
		}
	}
	if anon == 0 || d.Hidden == 0 {
		t.Errorf("alice's timeline shows no anonymous segment (%d) or hidden job (%d): the cluster's occupancy is lost", anon, d.Hidden)
	}
	_, body, _ = get(t, srv, "/ui/api/queue", "alice-token")
	var q ui.Queue
	json.Unmarshal(body, &q)
	_, body, _ = get(t, srv, "/ui/api/queue", "admin-token")
	var qa ui.Queue
	json.Unmarshal(body, &qa)
	if len(q.Jobs)+q.Hidden != len(qa.Jobs) || len(qa.Jobs) == 0 {
		t.Errorf("alice's queue: %d jobs + %d hidden, the admin's %d", len(q.Jobs), q.Hidden, len(qa.Jobs))
	}
}

// leaky is a DataSource that shows everyone everything.
type leaky struct{ *ui.Memory }

func (l leaky) Timeline(ctx context.Context, _ api.Principal, run string, w ui.Window) (*timeline.Data, error) {
	return l.Memory.Timeline(ctx, api.Principal{Admin: true}, run, w)
}

func (l leaky) Queue(ctx context.Context, _ api.Principal) (*ui.Queue, error) {
	return l.Memory.Queue(ctx, api.Principal{Admin: true})
}

func (l leaky) Shares(ctx context.Context, _ api.Principal, run string, w ui.Window) (*timeline.Shares, error) {
	return l.Memory.Shares(ctx, api.Principal{Admin: true}, run, w)
}

// TestHandlerRefusesALeak: a data source that gets visibility wrong makes
// a 500 that names nobody, not a leak.
func TestHandlerRefusesALeak(t *testing.T) {
	sc := runScenario(t, "gandiva", 2, 60, 4000)
	srv := httptest.NewServer(ui.Handler(leaky{sc.memory("gandiva")}, testTokens, ui.Options{}))
	defer srv.Close()
	for _, p := range []string{"/ui/api/timeline", "/ui/api/queue", "/ui/api/shares"} {
		code, body, _ := get(t, srv, p, "alice-token")
		if code != 500 || bytes.Contains(body, []byte("bob")) || bytes.Contains(body, []byte("carol")) {
			t.Errorf("GET %s from a leaky source as alice: %d %s", p, code, body)
		}
		if code, _, _ := get(t, srv, p, "admin-token"); code != 200 {
			t.Errorf("GET %s as admin: %d", p, code)
		}
	}
}

// TestReportIsSelfContained: the report references nothing outside itself.
func TestReportIsSelfContained(t *testing.T) {
	sc := runScenario(t, "gandiva", 2, 30, 0)
	var b bytes.Buffer
	err := ui.WriteReport(&b, &ui.Report{Title: "a <b>test</b>", Runs: []ui.ReportRun{{Label: "gandiva", Timeline: sc.rec.Data(timeline.Query{}),
		Shares: sc.rec.Shares(timeline.ShareQuery{})}}})
	if err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, bad := range []string{"<script src", "<link", "import ", "fetch(", "https://", "{{", "<b>test"} {
		if strings.Contains(page, bad) {
			t.Errorf("the report contains %q", bad)
		}
	}
	if !strings.Contains(page, "a &lt;b&gt;test&lt;/b&gt;") {
		t.Error("the title is not escaped")
	}
	if err := ui.WriteReport(io.Discard, &ui.Report{}); err == nil {
		t.Error("a report with no runs was written")
	}
}

// authErrors is an authenticator that fails with the *api.Error its token
// names, or a plain error.
type authErrors struct{}

func (authErrors) Authenticate(tok string) (api.Principal, error) {
	switch tok {
	case "forbidden":
		return api.Principal{}, api.Forbidden("you may not use this token here")
	case "unavailable":
		return api.Principal{}, api.Unavailable("cannot check tokens now")
	case "conflict":
		return api.Principal{}, &api.Error{Status: http.StatusConflict, Code: api.CodeConflict, Message: "secret detail"}
	}
	return api.Principal{}, errors.New("secret detail")
}

// TestAuthenticatorErrors: an authenticator's 403 and 503 reach the viewer
// as they are; any other failure is a 401 that says nothing more.
func TestAuthenticatorErrors(t *testing.T) {
	srv := httptest.NewServer(ui.Handler(&ui.Memory{}, authErrors{}, ui.Options{}))
	defer srv.Close()
	for tok, want := range map[string]int{"forbidden": 403, "unavailable": 503, "conflict": 401, "other": 401} {
		code, body, _ := get(t, srv, "/ui/api/summary", tok)
		if code != want || (want == 401 && strings.Contains(string(body), "secret")) {
			t.Errorf("token %q: %d %s, want %d", tok, code, body, want)
		}
	}
}
