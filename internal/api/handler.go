package api

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Principal is the authenticated caller of a request.
type Principal struct {
	User  string
	Admin bool
	// Agent marks an agent token or a node credential: it may call the
	// agent endpoints only. Node is the node a credential is bound to (""
	// for an agent token, which may only enrol).
	Agent bool
	Node  string
	// TokenID names the token (for rate limits and audit), never its secret.
	TokenID string
}

// Authenticator resolves a bearer token. It returns an error for a
// missing, unknown or revoked token (any error is a 401).
type Authenticator interface {
	Authenticate(token string) (Principal, error)
}

// ListOptions filter GET /v1/jobs.
type ListOptions struct {
	// All lists every user's jobs (admins only); User one user's (admins,
	// or the caller's own name).
	All  bool
	User string
	// States keeps jobs in these states (empty: all).
	States []string
}

// LogOptions select GET /v1/jobs/{id}/logs.
type LogOptions struct {
	// Attempt selects an attempt by its number (Attempt.N: 1, 2, ..., as
	// GET /v1/jobs/{id} lists them; 0: the latest); Rank a worker of it.
	Attempt int64
	Rank    int
	// Tail keeps only the last Tail bytes (0: all).
	Tail int64
	// Follow streams new output until the attempt ends or the client goes.
	Follow bool
}

// Backend is what the handler serves: the server. Every method gets the
// authenticated principal and does its own authorisation; errors are
// *Error values (others become 500s).
type Backend interface {
	// Submit creates a job, or returns the one an earlier submission with
	// the same idempotency key created (created false).
	Submit(ctx context.Context, p Principal, req *JobRequest) (j *Job, created bool, err error)
	List(ctx context.Context, p Principal, o ListOptions) ([]Job, error)
	Get(ctx context.Context, p Principal, id string) (*Job, error)
	Cancel(ctx context.Context, p Principal, id string) (*Job, error)
	Explain(ctx context.Context, p Principal, id string) (*Explanation, error)
	// Logs returns a worker's log; its reads must end (with an error)
	// once ctx is done: a stream stops so when its token is revoked.
	Logs(ctx context.Context, p Principal, id string, o LogOptions) (io.ReadCloser, error)
	Nodes(ctx context.Context, p Principal) ([]Node, error)
	Undrain(ctx context.Context, p Principal, node string) error
	// Drain stops new work going to a node (its jobs keep running);
	// RemoveNode revokes its credential and requeues its jobs at once.
	Drain(ctx context.Context, p Principal, node string) error
	RemoveNode(ctx context.Context, p Principal, node string) error
	Set(ctx context.Context, p Principal, s Setting) error
	CreateToken(ctx context.Context, p Principal, r TokenRequest) (*TokenCreated, error)
	Tokens(ctx context.Context, p Principal) ([]TokenInfo, error)
	// RevokeToken revokes the token whose ID (or unique prefix of at least
	// 6 hex digits) is given.
	RevokeToken(ctx context.Context, p Principal, id string) (*TokenInfo, error)
	WhoAmI(ctx context.Context, p Principal) (*WhoAmI, error)

	Enrol(ctx context.Context, p Principal, e *Enrolment) (*Credential, error)
	Register(ctx context.Context, p Principal, r *Registration) (*RegistrationReply, error)
	Leave(ctx context.Context, p Principal, l *Leave) error
	// Assignments answers at once when the node's assignments differ from
	// version, else waits up to wait for a change.
	Assignments(ctx context.Context, p Principal, node, session string, version uint64, wait time.Duration) (*Assignments, error)
	Report(ctx context.Context, p Principal, b *ReportBatch) error
}

// Options configure the handler.
type Options struct {
	// Metrics, when set, is served at /metrics to any authenticated caller.
	Metrics http.Handler
	// Observe, when set, is told about every request: its route pattern,
	// status and duration.
	Observe func(route string, status int, d time.Duration)
	Log     *slog.Logger
	// MaxWait bounds an agent's long poll (default 30 s).
	MaxWait time.Duration
	// RateLimit bounds each token's requests (zero: DefaultRateLimit);
	// NoRateLimit turns the limits off (benchmarks).
	RateLimit   RateLimit
	NoRateLimit bool
	// Clock is the rate limiter's clock (default time.Now).
	Clock func() time.Time
	// WriteTimeout bounds the writing of every response but a log
	// stream's: from its first byte, the peer must take it all within
	// this long, or the connection is closed (default 60 s). (A log
	// stream is bounded per write instead: ServerOptions.WriteStallTimeout.)
	WriteTimeout time.Duration
	// RecheckAuth is how often a log stream's token is authenticated again
	// while it lasts: once the token is revoked (or its node removed) the
	// stream ends within this long (default 2 s).
	RecheckAuth time.Duration
}

// Handler serves the /v1 API over b, authenticating every call with auth.
// GET /healthz is the one unauthenticated route; it reveals nothing.
func Handler(b Backend, auth Authenticator, o Options) http.Handler {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.MaxWait <= 0 {
		o.MaxWait = 30 * time.Second
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 60 * time.Second
	}
	if o.RecheckAuth <= 0 {
		o.RecheckAuth = 2 * time.Second
	}
	h := &handler{b: b, auth: auth, o: o}
	if !o.NoRateLimit {
		h.rl = newRateLimiter(o.RateLimit, o.Clock)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", WithWriteTimeout(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "ok\n")
	}), o.WriteTimeout))
	route := func(pattern string, kind callerKind, f func(http.ResponseWriter, *http.Request, Principal) error) {
		mux.Handle(pattern, h.wrap(pattern, kind, false, f))
	}
	route("GET /v1/whoami", anyCaller, h.whoami)
	route("POST /v1/jobs", userCaller, h.submit)
	route("GET /v1/jobs", userCaller, h.list)
	route("GET /v1/jobs/{id}", userCaller, h.get)
	route("POST /v1/jobs/{id}/cancel", userCaller, h.cancel)
	route("DELETE /v1/jobs/{id}", userCaller, h.cancel)
	route("GET /v1/jobs/{id}/explain", userCaller, h.explain)
	// A log stream, which may last: no deadline for the whole response,
	// and its token is checked again while it lasts.
	mux.Handle("GET /v1/jobs/{id}/logs", h.wrap("GET /v1/jobs/{id}/logs", userCaller, true, h.logs))
	route("GET /v1/nodes", userCaller, h.nodes)
	route("POST /v1/nodes/{name}/undrain", userCaller, h.undrain)
	route("POST /v1/nodes/{name}/drain", userCaller, h.drain)
	route("DELETE /v1/nodes/{name}", userCaller, h.removeNode)
	route("POST /v1/settings", userCaller, h.set)
	route("POST /v1/tokens", userCaller, h.createToken)
	route("GET /v1/tokens", userCaller, h.tokens)
	route("DELETE /v1/tokens/{id}", userCaller, h.revokeToken)
	route("POST /v1/agent/enrol", agentCaller, h.enrol)
	route("POST /v1/agent/register", agentCaller, h.register)
	route("POST /v1/agent/leave", agentCaller, h.leave)
	route("GET /v1/agent/assignments", agentCaller, h.assignments)
	route("POST /v1/agent/reports", agentCaller, h.report)
	if o.Metrics != nil {
		route("GET /metrics", anyCaller, func(w http.ResponseWriter, r *http.Request, _ Principal) error {
			o.Metrics.ServeHTTP(w, r)
			return nil
		})
	}
	// Everything else under /v1 is a JSON 404 (after authentication, so
	// that the API's shape is not revealed to strangers).
	route("/v1/", anyCaller, func(w http.ResponseWriter, r *http.Request, _ Principal) error {
		return NotFound("no API route %s %s", r.Method, r.URL.Path)
	})
	return mux
}

type callerKind uint8

const (
	anyCaller callerKind = iota
	userCaller
	agentCaller
)

type handler struct {
	b    Backend
	auth Authenticator
	o    Options
	rl   *rateLimiter // nil: no limits
}

// statusWriter records the status of a response, and sets its write
// deadline (when timeout is not 0) at its first byte.
type statusWriter struct {
	http.ResponseWriter
	status  int
	timeout time.Duration
}

func (w *statusWriter) begin(s int) {
	if w.status != 0 {
		return
	}
	w.status = s
	if w.timeout > 0 {
		// (ErrNotSupported under a server that cannot: then none)
		http.NewResponseController(w.ResponseWriter).SetWriteDeadline(time.Now().Add(w.timeout))
	}
}

func (w *statusWriter) WriteHeader(s int) {
	w.begin(s)
	w.ResponseWriter.WriteHeader(s)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.begin(http.StatusOK)
	return w.ResponseWriter.Write(b)
}

// Unwrap gives http.ResponseController the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// wrap makes f a route: authenticated, authorised for kind, rate
// limited, its errors answered as JSON. A stream's response has no
// deadline as a whole (each write has one, see NewHTTPServer) and ends
// soon after its token stops authenticating.
func (h *handler) wrap(pattern string, kind callerKind, stream bool, f func(http.ResponseWriter, *http.Request, Principal) error) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		start := time.Now()
		w := &statusWriter{ResponseWriter: rw}
		if !stream {
			w.timeout = h.o.WriteTimeout
		}
		err := h.serve(w, r, kind, stream, f)
		if err != nil {
			e := AsError(err)
			if e.Status >= 500 && e.Status != http.StatusServiceUnavailable {
				h.o.Log.Error("api", "route", pattern, "err", err)
			}
			if e.Status == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="gandiva"`)
			}
			if e.RetryAfter > 0 {
				w.Header().Set("Retry-After", retryAfter(e))
			}
			writeJSON(w, e.Status, map[string]*Error{"error": e})
		}
		if h.o.Observe != nil {
			st := w.status
			if st == 0 {
				st = http.StatusOK
			}
			h.o.Observe(pattern, st, time.Since(start))
		}
	})
}

func (h *handler) serve(w http.ResponseWriter, r *http.Request, kind callerKind, stream bool, f func(http.ResponseWriter, *http.Request, Principal) error) error {
	tok, ok := bearer(r)
	if !ok {
		return &Error{Status: http.StatusUnauthorized, Code: CodeUnauthenticated, Message: "missing token: send Authorization: Bearer <token>"}
	}
	p, err := h.auth.Authenticate(tok)
	if err != nil {
		return &Error{Status: http.StatusUnauthorized, Code: CodeUnauthenticated, Message: "invalid token"}
	}
	MarkAuthenticated(r)
	switch {
	case kind == userCaller && p.Agent:
		return Forbidden("agent tokens may call only /v1/agent/")
	case kind == agentCaller && !p.Agent:
		return Forbidden("%s is for agents; use an agent token", r.URL.Path)
	}
	if h.rl != nil {
		key := p.TokenID
		if key == "" {
			key = "user:" + p.User
		}
		done, err := h.rl.enter(key)
		if err != nil {
			return err
		}
		defer done()
	}
	if stream {
		ctx, stop := h.whileAuthenticated(r.Context(), tok)
		defer stop()
		r = r.WithContext(ctx)
	}
	return f(w, r, p)
}

// whileAuthenticated returns a context that is cancelled once tok no
// longer authenticates (checked every RecheckAuth), or when parent is
// done; stop releases it.
func (h *handler) whileAuthenticated(parent context.Context, tok string) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(parent)
	go func() {
		t := time.NewTicker(h.o.RecheckAuth)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if _, err := h.auth.Authenticate(tok); err != nil {
				h.o.Log.Info("api: a stream's token no longer authenticates; ending the stream", "err", err)
				cancel()
				return
			}
		}
	}()
	return ctx, cancel
}

func bearer(r *http.Request) (string, bool) {
	a := r.Header.Get("Authorization")
	if len(a) < 7 || !strings.EqualFold(a[:7], "bearer ") {
		return "", false
	}
	t := strings.TrimSpace(a[7:])
	return t, t != ""
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

func decodeBody[T any](r *http.Request) (*T, error) {
	data, err := ReadBody(r)
	if err != nil {
		return nil, err
	}
	return Decode[T](data)
}

func (h *handler) whoami(w http.ResponseWriter, r *http.Request, p Principal) error {
	v, err := h.b.WhoAmI(r.Context(), p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

func (h *handler) submit(w http.ResponseWriter, r *http.Request, p Principal) error {
	req, err := decodeBody[JobRequest](r)
	if err != nil {
		return err
	}
	if k := r.Header.Get(IdempotencyHeader); k != "" {
		if err := idempotencyKey(IdempotencyHeader, k); err != nil {
			return err
		}
		if req.IdempotencyKey != "" && req.IdempotencyKey != k {
			return Invalid(IdempotencyHeader, "%q differs from the body's idempotency_key %q", k, req.IdempotencyKey)
		}
		req.IdempotencyKey = k
	}
	if err := req.Validate(); err != nil {
		return err
	}
	j, created, err := h.b.Submit(r.Context(), p, req)
	if err != nil {
		return err
	}
	w.Header().Set("Location", Version+"/jobs/"+j.ID)
	status := http.StatusCreated
	if !created {
		status = http.StatusOK // an earlier submission with this idempotency key
	}
	writeJSON(w, status, j)
	return nil
}

func (h *handler) list(w http.ResponseWriter, r *http.Request, p Principal) error {
	q := r.URL.Query()
	o := ListOptions{User: q.Get("user")}
	if v := q.Get("all"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return Invalid("all", "want true or false, got %q", v)
		}
		o.All = b
	}
	for _, s := range q["state"] {
		for _, x := range strings.Split(s, ",") {
			if x = strings.TrimSpace(x); x != "" {
				o.States = append(o.States, x)
			}
		}
	}
	jobs, err := h.b.List(r.Context(), p, o)
	if err != nil {
		return err
	}
	if jobs == nil {
		jobs = []Job{}
	}
	writeJSON(w, http.StatusOK, JobList{Jobs: jobs})
	return nil
}

func (h *handler) get(w http.ResponseWriter, r *http.Request, p Principal) error {
	j, err := h.b.Get(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, j)
	return nil
}

func (h *handler) cancel(w http.ResponseWriter, r *http.Request, p Principal) error {
	j, err := h.b.Cancel(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, j)
	return nil
}

func (h *handler) explain(w http.ResponseWriter, r *http.Request, p Principal) error {
	e, err := h.b.Explain(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, e)
	return nil
}

func (h *handler) logs(w http.ResponseWriter, r *http.Request, p Principal) error {
	q := r.URL.Query()
	var o LogOptions
	var err error
	if v := q.Get("attempt"); v != "" {
		if o.Attempt, err = strconv.ParseInt(v, 10, 64); err != nil || o.Attempt < 0 {
			return Invalid("attempt", "want a non-negative integer, got %q", v)
		}
	}
	if v := q.Get("rank"); v != "" {
		if o.Rank, err = strconv.Atoi(v); err != nil || o.Rank < 0 {
			return Invalid("rank", "want a non-negative integer, got %q", v)
		}
	}
	if v := q.Get("tail"); v != "" {
		if o.Tail, err = strconv.ParseInt(v, 10, 64); err != nil || o.Tail < 0 {
			return Invalid("tail", "want a non-negative number of bytes, got %q", v)
		}
	}
	if v := q.Get("follow"); v != "" {
		if o.Follow, err = strconv.ParseBool(v); err != nil {
			return Invalid("follow", "want true or false, got %q", v)
		}
	}
	ctx := r.Context() // done when the token is revoked (see wrap)
	rc, err := h.b.Logs(ctx, p, r.PathValue("id"), o)
	if err != nil {
		return err
	}
	defer rc.Close()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	buf := make([]byte, 32<<10)
	for {
		n, err := rc.Read(buf)
		if ctx.Err() != nil {
			return nil // revoked, or the client went: nothing more is sent
		}
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return nil
			}
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
		}
		if err != nil {
			return nil // the status is sent; an error now can only end the stream
		}
	}
}

func (h *handler) nodes(w http.ResponseWriter, r *http.Request, p Principal) error {
	ns, err := h.b.Nodes(r.Context(), p)
	if err != nil {
		return err
	}
	if ns == nil {
		ns = []Node{}
	}
	writeJSON(w, http.StatusOK, NodeList{Nodes: ns})
	return nil
}

func (h *handler) undrain(w http.ResponseWriter, r *http.Request, p Principal) error {
	if err := h.b.Undrain(r.Context(), p, r.PathValue("name")); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"node": r.PathValue("name"), "status": "undrained"})
	return nil
}

func (h *handler) drain(w http.ResponseWriter, r *http.Request, p Principal) error {
	if err := h.b.Drain(r.Context(), p, r.PathValue("name")); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"node": r.PathValue("name"), "status": "drained"})
	return nil
}

func (h *handler) removeNode(w http.ResponseWriter, r *http.Request, p Principal) error {
	if err := h.b.RemoveNode(r.Context(), p, r.PathValue("name")); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"node": r.PathValue("name"), "status": "removed"})
	return nil
}

func (h *handler) tokens(w http.ResponseWriter, r *http.Request, p Principal) error {
	ts, err := h.b.Tokens(r.Context(), p)
	if err != nil {
		return err
	}
	if ts == nil {
		ts = []TokenInfo{}
	}
	writeJSON(w, http.StatusOK, TokenList{Tokens: ts})
	return nil
}

func (h *handler) revokeToken(w http.ResponseWriter, r *http.Request, p Principal) error {
	t, err := h.b.RevokeToken(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, t)
	return nil
}

func (h *handler) enrol(w http.ResponseWriter, r *http.Request, p Principal) error {
	e, err := decodeBody[Enrolment](r)
	if err != nil {
		return err
	}
	if err := validNodeName(e.Name); err != nil {
		return err
	}
	c, err := h.b.Enrol(r.Context(), p, e)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, c)
	return nil
}

func (h *handler) leave(w http.ResponseWriter, r *http.Request, p Principal) error {
	l, err := decodeBody[Leave](r)
	if err != nil {
		return err
	}
	if l.Node == "" {
		return Invalid("node", "required")
	}
	if err := checkReports(l.Reports); err != nil {
		return err
	}
	if len(l.Reason) > 1024 || !utf8.ValidString(l.Reason) {
		return Invalid("reason", "at most 1024 bytes of UTF-8")
	}
	if err := h.b.Leave(r.Context(), p, l); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]int{"acknowledged": len(l.Reports)})
	return nil
}

func (h *handler) set(w http.ResponseWriter, r *http.Request, p Principal) error {
	s, err := decodeBody[Setting](r)
	if err != nil {
		return err
	}
	if s.Key == "" || len(s.Key) > 256 {
		return Invalid("key", "required, at most 256 bytes")
	}
	if len(s.Value) > 4096 {
		return Invalid("value", "at most 4096 bytes")
	}
	if err := h.b.Set(r.Context(), p, *s); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s)
	return nil
}

func (h *handler) createToken(w http.ResponseWriter, r *http.Request, p Principal) error {
	t, err := decodeBody[TokenRequest](r)
	if err != nil {
		return err
	}
	if t.Agent && (t.User != "" || t.Admin) {
		return Invalid("agent", "an agent token has no user and no admin rights")
	}
	if !t.Agent && t.User == "" {
		return Invalid("user", "required for a user token")
	}
	if !t.Agent && (t.Uses != 0 || t.TTL != 0) {
		return Invalid("uses", "uses and ttl_s are an agent token's limits; a user token has none")
	}
	if err := label("label", t.Label); err != nil {
		return err
	}
	c, err := h.b.CreateToken(r.Context(), p, *t)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, c)
	return nil
}

func (h *handler) register(w http.ResponseWriter, r *http.Request, p Principal) error {
	reg, err := decodeBody[Registration](r)
	if err != nil {
		return err
	}
	if err := reg.Validate(); err != nil {
		return err
	}
	rep, err := h.b.Register(withPeer(r.Context(), r), p, reg)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rep)
	return nil
}

func (h *handler) assignments(w http.ResponseWriter, r *http.Request, p Principal) error {
	q := r.URL.Query()
	node, session := q.Get("node"), q.Get("session")
	if node == "" {
		return Invalid("node", "required")
	}
	var version uint64
	if v := q.Get("version"); v != "" {
		var err error
		if version, err = strconv.ParseUint(v, 10, 64); err != nil {
			return Invalid("version", "want a non-negative integer, got %q", v)
		}
	}
	wait := time.Duration(0)
	if v := q.Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return Invalid("wait", "want a duration such as 10s, got %q", v)
		}
		wait = min(d, h.o.MaxWait)
	}
	a, err := h.b.Assignments(r.Context(), p, node, session, version, wait)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, a)
	return nil
}

func (h *handler) report(w http.ResponseWriter, r *http.Request, p Principal) error {
	b, err := decodeBody[ReportBatch](r)
	if err != nil {
		return err
	}
	if b.Node == "" {
		return Invalid("node", "required")
	}
	if err := checkReports(b.Reports); err != nil {
		return err
	}
	if err := h.b.Report(r.Context(), p, b); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]int{"acknowledged": len(b.Reports)})
	return nil
}

func checkReports(reports []Report) error {
	for i := range reports {
		rep := &reports[i]
		if rep.Job == "" {
			return Invalid("reports["+strconv.Itoa(i)+"].job", "required")
		}
		switch rep.Kind {
		case RepStarted, RepProgress, RepReady, RepSuspended, RepResumed, RepSaved, RepCheckpointed, RepExited:
		default:
			return Invalid("reports["+strconv.Itoa(i)+"].kind", "unknown kind %q", rep.Kind)
		}
		if badNum(rep.Done) || badNum(rep.IterTime) || badNum(rep.Took) || (rep.Metric != nil && badNum(*rep.Metric)) {
			return Invalid("reports["+strconv.Itoa(i)+"]", "numbers must be finite")
		}
	}
	return nil
}

// ErrClosed is what a Backend returns while shutting down (a 503).
var ErrClosed = errors.New("server is shutting down")
