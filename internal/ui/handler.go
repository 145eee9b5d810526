package ui

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/timeline"
)

//go:embed assets
var assets embed.FS

// Options configure the handler.
type Options struct {
	Log *slog.Logger
	// Observe, when set, is told about every /ui/api/ request: its route,
	// status and duration (the server counts them with its API's).
	Observe func(route string, status int, d time.Duration)
	// PollSeconds is how often the page polls the summary (default 2).
	PollSeconds float64
}

// Handler serves the dashboard under /ui/ and its JSON API under
// /ui/api/: mount it at "/ui/" on the server's mux. The page and its
// assets need no token (they are the same for everyone and hold no data);
// every /ui/api/ route needs a user's bearer token, checked by auth, and
// agent tokens are refused. An error of auth that is an *api.Error of
// status 403 or 503 is answered as it is (a token the viewer may not use
// here, or an authenticator that cannot check it now); any other is a 401.
//
//	GET /ui/api/summary                        Summary
//	GET /ui/api/timeline?run=&from=&to=        timeline.Data
//	GET /ui/api/shares?run=&from=&to=&step=    timeline.Shares
//	GET /ui/api/queue                          Queue
//	GET /ui/api/nodes                          {"nodes": [api.Node]}
func Handler(src DataSource, auth api.Authenticator, o Options) http.Handler {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.PollSeconds <= 0 {
		o.PollSeconds = 2
	}
	h := &handler{src: src, auth: auth, o: o}
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded directory is part of the binary
	}
	h.files = sub
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ui", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ui/", http.StatusMovedPermanently)
	})
	mux.HandleFunc("GET /ui/{$}", func(w http.ResponseWriter, r *http.Request) { h.asset(w, r, "index.html") })
	mux.HandleFunc("GET /ui/assets/{name}", func(w http.ResponseWriter, r *http.Request) { h.asset(w, r, r.PathValue("name")) })
	h.api(mux, "summary", h.summary)
	h.api(mux, "timeline", h.timeline)
	h.api(mux, "shares", h.shares)
	h.api(mux, "queue", h.queue)
	h.api(mux, "nodes", h.nodes)
	mux.HandleFunc("/ui/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, api.NotFound("no dashboard route %s %s", r.Method, r.URL.Path))
	})
	return mux
}

type handler struct {
	src   DataSource
	auth  api.Authenticator
	o     Options
	files fs.FS
}

func securityHeaders(w http.ResponseWriter) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Referrer-Policy", "no-referrer")
}

// asset serves one embedded file; names are flat (no directories).
func (h *handler) asset(w http.ResponseWriter, r *http.Request, name string) {
	securityHeaders(w)
	if name == "" || strings.ContainsAny(name, `/\`) || strings.HasPrefix(name, ".") || name == "report.html" {
		http.NotFound(w, r)
		return
	}
	data, err := fs.ReadFile(h.files, name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	sum := sha256.Sum256(data)
	etag := `"` + hex.EncodeToString(sum[:8]) + `"`
	ct := mime.TypeByExtension(path.Ext(name))
	switch path.Ext(name) {
	case ".js":
		ct = "text/javascript; charset=utf-8"
	case ".html":
		ct = "text/html; charset=utf-8"
		w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("ETag", etag)
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Write(data)
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(s int) {
	if w.status == 0 {
		w.status = s
	}
	w.ResponseWriter.WriteHeader(s)
}

func (h *handler) api(mux *http.ServeMux, name string, f func(ctx context.Context, r *http.Request, v api.Principal) (any, error)) {
	route := "GET /ui/api/" + name
	mux.HandleFunc(route, func(rw http.ResponseWriter, r *http.Request) {
		start := time.Now()
		w := &statusWriter{ResponseWriter: rw}
		securityHeaders(w)
		w.Header().Set("Cache-Control", "no-store")
		v, err := h.authenticate(r)
		var out any
		if err == nil {
			out, err = f(r.Context(), r, v)
		}
		if err != nil {
			e := api.AsError(err)
			if e.Status >= 500 && e.Status != http.StatusServiceUnavailable {
				h.o.Log.Error("dashboard", "route", route, "user", v.User, "err", err)
			}
			writeError(w, e)
		} else {
			writeJSON(w, r, out)
		}
		if h.o.Observe != nil {
			st := w.status
			if st == 0 {
				st = http.StatusOK
			}
			h.o.Observe(route, st, time.Since(start))
		}
	})
}

func (h *handler) authenticate(r *http.Request) (api.Principal, error) {
	a := r.Header.Get("Authorization")
	if len(a) < 7 || !strings.EqualFold(a[:7], "bearer ") || strings.TrimSpace(a[7:]) == "" {
		return api.Principal{}, &api.Error{Status: http.StatusUnauthorized, Code: api.CodeUnauthenticated, Message: "missing token: send Authorization: Bearer <token>"}
	}
	p, err := h.auth.Authenticate(strings.TrimSpace(a[7:]))
	var ae *api.Error
	if errors.As(err, &ae) && (ae.Status == http.StatusForbidden || ae.Status == http.StatusServiceUnavailable) {
		return api.Principal{}, ae // a valid token the viewer may not use here, or no answer to check it
	}
	if err != nil {
		return api.Principal{}, &api.Error{Status: http.StatusUnauthorized, Code: api.CodeUnauthenticated, Message: "invalid token"}
	}
	// (as the /v1 API does: at the connection cap, the server closes the
	// connections with no authenticated request first)
	api.MarkAuthenticated(r)
	if p.Agent {
		return api.Principal{}, api.Forbidden("agent tokens may not read the dashboard")
	}
	return p, nil
}

func writeError(w http.ResponseWriter, e *api.Error) {
	if e.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="gandiva"`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	json.NewEncoder(w).Encode(map[string]*api.Error{"error": e})
}

// writeJSON writes v, gzipped when the client takes it and it is large.
func writeJSON(w http.ResponseWriter, r *http.Request, v any) {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(v); err != nil {
		writeError(w, api.AsError(fmt.Errorf("encoding the answer: %w", err)))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Vary", "Accept-Encoding")
	if buf.Len() > 16<<10 && strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		w.Header().Set("Content-Encoding", "gzip")
		zw, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
		zw.Write(buf.Bytes())
		zw.Close()
		return
	}
	w.Write(buf.Bytes())
}

// window reads from, to and step; each must be a finite number ≥ 0.
func window(r *http.Request) (Window, error) {
	var win Window
	for _, f := range []struct {
		name string
		dst  *float64
	}{{"from", &win.From}, {"to", &win.To}, {"step", &win.Step}} {
		s := r.URL.Query().Get(f.name)
		if s == "" {
			continue
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return win, api.Invalid(f.name, "must be a finite number of seconds ≥ 0, got %q", s)
		}
		*f.dst = v
	}
	if win.To != 0 && win.To < win.From {
		return win, api.Invalid("to", "must not be before from (%g < %g)", win.To, win.From)
	}
	return win, nil
}

func runParam(r *http.Request) (string, error) {
	run := r.URL.Query().Get("run")
	if len(run) > 200 {
		return "", api.Invalid("run", "too long (%d bytes)", len(run))
	}
	return run, nil
}

func (h *handler) summary(ctx context.Context, _ *http.Request, v api.Principal) (any, error) {
	s, err := h.src.Summary(ctx, v)
	if err != nil {
		return nil, err
	}
	s.Viewer = Viewer{User: v.User, Admin: v.Admin}
	s.PollSeconds = h.o.PollSeconds
	return s, nil
}

func (h *handler) timeline(ctx context.Context, r *http.Request, v api.Principal) (any, error) {
	run, err := runParam(r)
	if err != nil {
		return nil, err
	}
	win, err := window(r)
	if err != nil {
		return nil, err
	}
	d, err := h.src.Timeline(ctx, v, run, win)
	if err != nil {
		return nil, err
	}
	return d, h.checkTimeline(v, d)
}

func (h *handler) shares(ctx context.Context, r *http.Request, v api.Principal) (any, error) {
	run, err := runParam(r)
	if err != nil {
		return nil, err
	}
	win, err := window(r)
	if err != nil {
		return nil, err
	}
	s, err := h.src.Shares(ctx, v, run, win)
	if err != nil {
		return nil, err
	}
	if !v.Admin {
		for _, u := range s.Users {
			if u.User != "" && u.User != v.User {
				return nil, h.leak(v, "shares", u.User)
			}
		}
	}
	return s, nil
}

func (h *handler) queue(ctx context.Context, _ *http.Request, v api.Principal) (any, error) {
	q, err := h.src.Queue(ctx, v)
	if err != nil {
		return nil, err
	}
	if !v.Admin {
		for _, j := range q.Jobs {
			if j.User != v.User {
				return nil, h.leak(v, "queue", j.User)
			}
		}
	}
	return q, nil
}

func (h *handler) nodes(ctx context.Context, _ *http.Request, v api.Principal) (any, error) {
	ns, err := h.src.Nodes(ctx, v)
	if err != nil {
		return nil, err
	}
	if ns == nil {
		ns = []api.Node{}
	}
	return map[string][]api.Node{"nodes": ns}, nil
}

// checkTimeline refuses a timeline that shows a non-admin another user's
// job: by its record, or by a segment naming a job the viewer may not see.
func (h *handler) checkTimeline(v api.Principal, d *timeline.Data) error {
	if v.Admin {
		return nil
	}
	mine := map[int32]bool{}
	for _, j := range d.Jobs {
		if j.User != v.User {
			return h.leak(v, "timeline", j.User)
		}
		mine[int32(j.ID)] = true
	}
	for _, row := range d.GPUs {
		for _, s := range row {
			if s.Job >= 0 && !mine[int32(s.Job)] {
				return h.leak(v, "timeline", fmt.Sprintf("job %d", s.Job))
			}
		}
	}
	return nil
}

// leak logs what a data source got wrong and returns the 500 the viewer
// gets, which names nobody.
func (h *handler) leak(v api.Principal, what, whose string) error {
	h.o.Log.Error("dashboard data source returned another user's data; refused", "viewer", v.User, "in", what, "whose", whose)
	return &api.Error{Status: http.StatusInternalServerError, Code: api.CodeInternal,
		Message: fmt.Sprintf("the dashboard's data source returned another user's data in the %s; refused", what)}
}
