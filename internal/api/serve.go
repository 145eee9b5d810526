package api

import (
	"container/list"
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ServerOptions bound what the API's HTTP server holds open, so that it
// stays up when flooded with connections (see NewHTTPServer).
type ServerOptions struct {
	// MaxConns caps the open connections; 0: DefaultMaxConns().
	MaxConns int
	// ReadHeaderTimeout (10 s), ReadTimeout (60 s: a request's headers and
	// body) and IdleTimeout (60 s: a kept-alive connection between
	// requests); 0 means the default in brackets.
	ReadHeaderTimeout, ReadTimeout, IdleTimeout time.Duration
	// WriteStallTimeout bounds every single write to a connection (a
	// buffer of a response, a flush of a log stream): one that the peer
	// has not taken in this long fails, and the connection is closed
	// (default 30 s). It is renewed at each write, so a stream lasts for
	// as long as its peer keeps reading. A handler may set an earlier
	// deadline for a whole response (http.ResponseController's
	// SetWriteDeadline; Handler does so for every route but the logs).
	WriteStallTimeout time.Duration
	// StalledAfter is how long a write must have been blocked for its
	// connection to count as stalled, closed first to make room at the cap
	// (default 1 s).
	StalledAfter time.Duration
	// UnauthenticatedShare, in (0, 1), bounds the connections on which no
	// request has been authenticated yet (MarkAuthenticated): when they
	// hold this share of MaxConns or more, a new connection at the cap
	// closes the oldest of them, whatever its state. 0 (or 1 and more):
	// no separate bound; use it only where the handler calls
	// MarkAuthenticated.
	UnauthenticatedShare float64
	// OnEvict, when set, is called for each connection closed to make room
	// and each refused because none could be closed.
	OnEvict, OnRefuse func()
}

// DefaultMaxConns is the connection cap by default: the process's file
// limit less a reserve for the store, the agents' log streams and the
// rest (an eighth, at least 256), at most 16,384 (each idle connection
// costs a goroutine and buffers).
func DefaultMaxConns() int {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil || r.Cur == 0 {
		return 1024
	}
	cur := int(min(r.Cur, 1<<30))
	return max(32, min(cur-max(256, cur/8), 16384))
}

// NewHTTPServer returns an http.Server for handler with time-outs, and ln
// wrapped to cap the open connections at o.MaxConns: serve it with
// srv.Serve(wrapped).
//
// At the cap, a new connection makes room by closing, in this order:
//  1. the oldest connection on which no request has been authenticated,
//     if such connections hold their share of the cap
//     (o.UnauthenticatedShare) or more, whatever it is doing;
//  2. the connection whose write has been blocked longest, at least
//     o.StalledAfter (its peer does not read: it counts as idle);
//  3. the connection that has waited longest without a request in
//     progress (one that has sent no complete request yet, or is idle
//     between requests).
//
// Otherwise (every connection has a request in progress that is not
// stalled: agents' long polls, log streams being read) the new one is
// closed at once. So a flood of idle, slow or never-reading connections
// cannot keep an agent or an admin out: their new connection pushes out
// one of the flood's. (Per-token rate and concurrency limits, in Handler,
// keep one token from holding every connection busy.)
//
// Every write must be taken by the peer within o.WriteStallTimeout, and
// the write deadline a handler sets for its response (Handler sets one for
// every route but the logs) lasts until the response ends: net/http clears
// it after each request.
func NewHTTPServer(handler http.Handler, ln net.Listener, o ServerOptions) (*http.Server, *Limiter) {
	if o.MaxConns <= 0 {
		o.MaxConns = DefaultMaxConns()
	}
	if o.ReadHeaderTimeout <= 0 {
		o.ReadHeaderTimeout = 10 * time.Second
	}
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = 60 * time.Second
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 60 * time.Second
	}
	if o.WriteStallTimeout <= 0 {
		o.WriteStallTimeout = 30 * time.Second
	}
	if o.StalledAfter <= 0 {
		o.StalledAfter = time.Second
	}
	maxUnauth := 0 // no separate bound
	if o.UnauthenticatedShare > 0 && o.UnauthenticatedShare < 1 {
		maxUnauth = max(1, int(o.UnauthenticatedShare*float64(o.MaxConns)))
	}
	l := &Limiter{Listener: ln, o: o, maxUnauth: maxUnauth, conns: map[net.Conn]*connEntry{},
		waiting: list.New(), unauth: list.New()}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: o.ReadHeaderTimeout, ReadTimeout: o.ReadTimeout,
		IdleTimeout: o.IdleTimeout, MaxHeaderBytes: 64 << 10, ConnState: l.connState,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if tc, ok := c.(*trackedConn); ok {
				return context.WithValue(ctx, connKey{}, tc)
			}
			return ctx
		}}
	return srv, l
}

// MarkAuthenticated records that r, served by an http.Server of
// NewHTTPServer, was authenticated: its connection no longer counts
// against the unauthenticated share of the cap. Handler calls it for every
// request with a valid token; other servers' handlers may too.
func MarkAuthenticated(r *http.Request) {
	if tc, ok := r.Context().Value(connKey{}).(*trackedConn); ok && !tc.authenticated.Load() {
		tc.l.markAuthenticated(tc)
	}
}

type connKey struct{}

// Limiter is the listener NewHTTPServer wraps: it tracks every open
// connection's state and enforces the cap.
type Limiter struct {
	net.Listener
	o         ServerOptions
	maxUnauth int

	mu    sync.Mutex
	conns map[net.Conn]*connEntry
	// waiting holds the connections without a request in progress, the
	// longest waiting first; unauth those on which no request has been
	// authenticated, the oldest first.
	waiting, unauth                            *list.List
	accepted, evicted, evictedStalled, refused int
}

type connEntry struct {
	c        *trackedConn
	waitAt   *list.Element // in waiting; nil while a request is in progress
	unauthAt *list.Element // in unauth; nil once authenticated
}

// trackedConn is a connection the Limiter accepted: it bounds each write
// and tells the Limiter when a write is blocked.
type trackedConn struct {
	net.Conn
	l *Limiter
	// writing is when the write in progress began (Unix ns), 0: none.
	writing atomic.Int64
	// authenticated: a request on it was (MarkAuthenticated).
	authenticated atomic.Bool
	mu            sync.Mutex
	// deadline is the handler's deadline for the response (zero: none).
	deadline time.Time
}

// Write implements net.Conn: the write must be taken within the stall
// time-out, and before the response's deadline.
func (c *trackedConn) Write(b []byte) (int, error) {
	now := time.Now()
	c.mu.Lock()
	d := now.Add(c.l.o.WriteStallTimeout)
	if !c.deadline.IsZero() && c.deadline.Before(d) {
		d = c.deadline
	}
	c.mu.Unlock()
	if err := c.Conn.SetWriteDeadline(d); err != nil {
		return 0, err
	}
	c.writing.Store(now.UnixNano())
	n, err := c.Conn.Write(b)
	c.writing.Store(0)
	return n, err
}

// SetWriteDeadline implements net.Conn: t is the deadline of the response
// being written (zero: none but the stall time-out), applied at once to a
// write in progress too.
func (c *trackedConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	c.mu.Unlock()
	if t.IsZero() {
		return nil // the next write sets its own deadline
	}
	if d := time.Now().Add(c.l.o.WriteStallTimeout); d.Before(t) {
		t = d
	}
	return c.Conn.SetWriteDeadline(t)
}

// SetDeadline implements net.Conn.
func (c *trackedConn) SetDeadline(t time.Time) error {
	if err := c.Conn.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

// CloseWrite lets net/http half-close the connection, as it does a TCP
// connection's, before closing it after a response.
func (c *trackedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// Accept implements net.Listener, making room at the cap (see
// NewHTTPServer).
func (l *Limiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		if len(l.conns) >= l.o.MaxConns {
			victim, stalled := l.victim(time.Now())
			if victim == nil {
				l.refused++
				l.mu.Unlock()
				c.Close()
				if l.o.OnRefuse != nil {
					l.o.OnRefuse()
				}
				continue
			}
			l.forget(victim.c)
			l.evicted++
			if stalled {
				l.evictedStalled++
			}
			l.mu.Unlock()
			victim.c.Close()
			if l.o.OnEvict != nil {
				l.o.OnEvict()
			}
			l.mu.Lock()
		}
		tc := &trackedConn{Conn: c, l: l}
		e := &connEntry{c: tc}
		e.waitAt = l.waiting.PushBack(e)
		e.unauthAt = l.unauth.PushBack(e)
		l.conns[tc] = e
		l.accepted++
		l.mu.Unlock()
		return tc, nil
	}
}

// victim chooses the connection to close to make room, or nil; stalled
// tells that it was chosen for a blocked write (l.mu held).
func (l *Limiter) victim(now time.Time) (e *connEntry, stalled bool) {
	if l.maxUnauth > 0 && l.unauth.Len() >= l.maxUnauth {
		return l.unauth.Front().Value.(*connEntry), false
	}
	// A scan, at the cap only: the write blocked longest, if long enough.
	var oldest int64
	limit := now.Add(-l.o.StalledAfter).UnixNano()
	for _, c := range l.conns {
		if w := c.c.writing.Load(); w != 0 && w <= limit && (e == nil || w < oldest) {
			e, oldest = c, w
		}
	}
	if e != nil {
		return e, true
	}
	if front := l.waiting.Front(); front != nil {
		return front.Value.(*connEntry), false
	}
	return nil, false
}

// markAuthenticated takes c out of the unauthenticated connections.
func (l *Limiter) markAuthenticated(c *trackedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c.authenticated.Store(true)
	if e := l.conns[c]; e != nil && e.unauthAt != nil {
		l.unauth.Remove(e.unauthAt)
		e.unauthAt = nil
	}
}

// forget drops c from the books (l.mu held).
func (l *Limiter) forget(c net.Conn) {
	if e := l.conns[c]; e != nil {
		if e.waitAt != nil {
			l.waiting.Remove(e.waitAt)
		}
		if e.unauthAt != nil {
			l.unauth.Remove(e.unauthAt)
		}
		delete(l.conns, c)
	}
}

// connState is the http.Server's ConnState hook.
func (l *Limiter) connState(c net.Conn, st http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.conns[c]
	if e == nil {
		return // closed to make room (or never ours)
	}
	switch st {
	case http.StateActive:
		if e.waitAt != nil {
			l.waiting.Remove(e.waitAt)
			e.waitAt = nil
		}
	case http.StateIdle, http.StateNew:
		if e.waitAt != nil {
			l.waiting.Remove(e.waitAt)
		}
		e.waitAt = l.waiting.PushBack(e)
	case http.StateClosed, http.StateHijacked:
		l.forget(c)
	}
}

// LimiterStats are a Limiter's counts: connections open, waiting without
// a request in progress, not authenticated, with a write blocked for
// StalledAfter or more; and connections accepted, closed to make room
// (of which, for a blocked write) and refused.
type LimiterStats struct {
	Open, Waiting, Unauthenticated, Stalled    int
	Accepted, Evicted, EvictedStalled, Refused int
	Max                                        int
}

// Stats returns the limiter's counts now.
func (l *Limiter) Stats() LimiterStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	limit := time.Now().Add(-l.o.StalledAfter).UnixNano()
	stalled := 0
	for _, e := range l.conns {
		if w := e.c.writing.Load(); w != 0 && w <= limit {
			stalled++
		}
	}
	return LimiterStats{Open: len(l.conns), Waiting: l.waiting.Len(), Unauthenticated: l.unauth.Len(), Stalled: stalled,
		Accepted: l.accepted, Evicted: l.evicted, EvictedStalled: l.evictedStalled, Refused: l.refused, Max: l.o.MaxConns}
}

// WithWriteTimeout returns h with a deadline for writing each response:
// d from the start of its request (for handlers whose responses are quick
// to make, such as static files; not for streams). Under NewHTTPServer
// every write is bounded anyway (ServerOptions.WriteStallTimeout); this
// bounds the whole response too.
func WithWriteTimeout(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// (ErrNotSupported under a server that cannot: then none)
		http.NewResponseController(w).SetWriteDeadline(time.Now().Add(d))
		h.ServeHTTP(w, r)
	})
}
