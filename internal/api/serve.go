package api

import (
	"container/list"
	"net"
	"net/http"
	"sync"
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
	// requests); 0 means the default in brackets. There is no write
	// time-out: long polls and log streams write for as long as they last.
	ReadHeaderTimeout, ReadTimeout, IdleTimeout time.Duration
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
// At the cap, a new connection makes room by closing the connection that
// has waited longest without a request in progress (one that has sent no
// complete request yet, or is idle between requests); connections with a
// request in progress (an agent's long poll, a log stream) are never closed
// to make room. If every connection has a request in progress, the new one
// is closed at once. So a flood of idle or slow connections cannot keep an
// agent or an admin out: their new connection pushes out the oldest idle
// one, and the flood's own connections are the oldest. (Per-token rate and
// concurrency limits, in Handler, keep one token from holding every
// connection busy.)
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
	l := &Limiter{Listener: ln, o: o, conns: map[net.Conn]*connEntry{}, waiting: list.New()}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: o.ReadHeaderTimeout, ReadTimeout: o.ReadTimeout,
		IdleTimeout: o.IdleTimeout, MaxHeaderBytes: 64 << 10, ConnState: l.connState}
	return srv, l
}

// Limiter is the listener NewHTTPServer wraps: it tracks every open
// connection's state and enforces the cap.
type Limiter struct {
	net.Listener
	o ServerOptions

	mu    sync.Mutex
	conns map[net.Conn]*connEntry
	// waiting holds the connections without a request in progress, the
	// longest waiting first.
	waiting          *list.List
	evicted, refused int
}

type connEntry struct {
	c      net.Conn
	waitAt *list.Element // in waiting; nil while a request is in progress
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
			front := l.waiting.Front()
			if front == nil {
				l.refused++
				l.mu.Unlock()
				c.Close()
				if l.o.OnRefuse != nil {
					l.o.OnRefuse()
				}
				continue
			}
			victim := front.Value.(*connEntry)
			l.forget(victim.c)
			l.evicted++
			l.mu.Unlock()
			victim.c.Close()
			if l.o.OnEvict != nil {
				l.o.OnEvict()
			}
			l.mu.Lock()
		}
		e := &connEntry{c: c}
		e.waitAt = l.waiting.PushBack(e)
		l.conns[c] = e
		l.mu.Unlock()
		return c, nil
	}
}

// forget drops c from the books (l.mu held).
func (l *Limiter) forget(c net.Conn) {
	if e := l.conns[c]; e != nil {
		if e.waitAt != nil {
			l.waiting.Remove(e.waitAt)
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

// LimiterStats are a Limiter's counts.
type LimiterStats struct {
	Open, Waiting, Evicted, Refused, Max int
}

// Stats returns the limiter's counts now.
func (l *Limiter) Stats() LimiterStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return LimiterStats{Open: len(l.conns), Waiting: l.waiting.Len(), Evicted: l.evicted, Refused: l.refused, Max: l.o.MaxConns}
}
