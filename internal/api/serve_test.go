package api

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestConnectionCap: at the cap, a new connection closes the one that has
// waited longest without a request, so a fresh client is served; when
// every connection has a request in progress, the new one is refused.
func TestConnectionCap(t *testing.T) {
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	mux.HandleFunc("/slow", func(w http.ResponseWriter, _ *http.Request) { <-release; io.WriteString(w, "slow") })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, lim := NewHTTPServer(mux, ln, ServerOptions{MaxConns: 4})
	go srv.Serve(lim)
	defer srv.Close()
	addr := ln.Addr().String()
	waitStats := func(ok func(LimiterStats) bool) LimiterStats {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if st := lim.Stats(); ok(st) {
				return st
			}
		}
		t.Fatalf("limiter never reached the state; now %+v", lim.Stats())
		return LimiterStats{}
	}
	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// Four silent connections fill the cap.
	var idle []net.Conn
	for i := 0; i < 4; i++ {
		idle = append(idle, dial())
		waitStats(func(s LimiterStats) bool { return s.Open == i+1 })
	}
	get := func(path string) (string, error) {
		c := dial()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return "", err
		}
		b, _ := io.ReadAll(resp.Body)
		return string(b), nil
	}
	if body, err := get("/ok"); err != nil || body != "ok" {
		t.Fatalf("a request at the cap: %q %v", body, err)
	}
	if st := lim.Stats(); st.Evicted != 1 {
		t.Fatalf("stats %+v, want one eviction", st)
	}
	// The oldest silent connection is the one closed.
	idle[0].SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := idle[0].Read(make([]byte, 1)); err == nil {
		t.Fatal("the oldest idle connection was not closed")
	}
	for _, c := range idle[1:] {
		c.Close()
	}
	waitStats(func(s LimiterStats) bool { return s.Open == 0 })
	// Four requests in progress: a fifth connection is refused.
	results := make(chan string, 4)
	for i := 0; i < 4; i++ {
		go func() {
			body, err := get("/slow")
			if err != nil {
				body = err.Error()
			}
			results <- body
		}()
	}
	waitStats(func(s LimiterStats) bool { return s.Open == 4 && s.Waiting == 0 })
	c := dial()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("a connection beyond the cap, every one busy, was not refused")
	}
	waitStats(func(s LimiterStats) bool { return s.Refused == 1 })
	close(release)
	for i := 0; i < 4; i++ {
		if r := <-results; r != "slow" {
			t.Fatalf("a request in progress at the cap was cut: %q", r)
		}
	}
}

// TestRateLimiter: a token's bucket refills at the rate; its requests in
// progress are bounded; other tokens are not affected.
func TestRateLimiter(t *testing.T) {
	now := time.Unix(1000, 0)
	rl := newRateLimiter(RateLimit{Rate: 2, Burst: 3, Concurrent: 2}, func() time.Time { return now })
	var dones []func()
	for i := 0; i < 2; i++ {
		done, err := rl.enter("a")
		if err != nil {
			t.Fatal(err)
		}
		dones = append(dones, done)
	}
	if _, err := rl.enter("a"); err == nil || err.Status != 429 || !strings.Contains(err.Message, "in progress") {
		t.Fatalf("a third concurrent request: %v", err)
	}
	for _, d := range dones {
		d()
	}
	done, err := rl.enter("a") // the burst's third
	if err != nil {
		t.Fatal(err)
	}
	done()
	err = func() *Error { _, err := rl.enter("a"); return err }()
	if err == nil || err.Status != 429 || err.RetryAfter != 1 || !strings.Contains(err.Message, "per second") {
		t.Fatalf("beyond the burst: %+v", err)
	}
	if d, err := rl.enter("b"); err != nil {
		t.Fatalf("another token: %v", err)
	} else {
		d()
	}
	now = now.Add(500 * time.Millisecond) // one more token at 2/s
	if d, err := rl.enter("a"); err != nil {
		t.Fatalf("after the refill: %v", err)
	} else {
		d()
	}
}

// fakeBackend serves whoami, list and logs for the tests of connections;
// any other call panics (the embedded nil Backend).
type fakeBackend struct {
	Backend
	release chan struct{} // whoami of the user "slow" waits for it
	jobs    int           // jobs List returns
	logs    func(ctx context.Context) io.ReadCloser
}

func (b *fakeBackend) WhoAmI(_ context.Context, p Principal) (*WhoAmI, error) {
	if p.User == "slow" {
		<-b.release
	}
	return &WhoAmI{User: p.User, Admin: p.Admin}, nil
}

func (b *fakeBackend) List(context.Context, Principal, ListOptions) ([]Job, error) {
	js := make([]Job, b.jobs)
	for i := range js {
		js[i] = Job{ID: fmt.Sprintf("j%d", i), User: "alice", Name: strings.Repeat("x", 200)}
	}
	return js, nil
}

func (b *fakeBackend) Logs(ctx context.Context, _ Principal, _ string, _ LogOptions) (io.ReadCloser, error) {
	return b.logs(ctx), nil
}

// fakeAuth knows the token "admin" and user tokens named after their user;
// revoke makes a token unknown.
type fakeAuth struct {
	mu      sync.Mutex
	revoked map[string]bool
}

func (a *fakeAuth) Authenticate(tok string) (Principal, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.revoked[tok] {
		return Principal{}, errors.New("revoked")
	}
	return Principal{User: tok, Admin: tok == "admin", TokenID: tok}, nil
}

func (a *fakeAuth) revoke(tok string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.revoked == nil {
		a.revoked = map[string]bool{}
	}
	a.revoked[tok] = true
}

// connTest is an API server on loopback for the tests of connections:
// Handler over a fakeBackend, plus the unauthenticated routes /big (a
// 64 MiB answer), /bigtimed (the same under WithWriteTimeout of
// o.WriteTimeout) and /hold (answers once hold is closed).
type connTest struct {
	t    *testing.T
	addr string
	lim  *Limiter
	b    *fakeBackend
	auth *fakeAuth
	hold chan struct{}
}

func newConnTest(t *testing.T, so ServerOptions, o Options) *connTest {
	ct := &connTest{t: t, b: &fakeBackend{release: make(chan struct{})}, auth: &fakeAuth{}, hold: make(chan struct{})}
	o.NoRateLimit = true
	mux := http.NewServeMux()
	mux.Handle("/", Handler(ct.b, ct.auth, o))
	big := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		chunk := make([]byte, 64<<10)
		for i := 0; i < 1024; i++ {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	mux.Handle("/big", big)
	mux.Handle("/bigtimed", WithWriteTimeout(big, max(o.WriteTimeout, time.Millisecond)))
	mux.HandleFunc("/hold", func(w http.ResponseWriter, _ *http.Request) { <-ct.hold; io.WriteString(w, "held") })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, lim := NewHTTPServer(mux, ln, so)
	go srv.Serve(lim)
	t.Cleanup(func() { srv.Close() })
	ct.addr, ct.lim = ln.Addr().String(), lim
	return ct
}

// waitStats waits (at most a minute) until the limiter's counts satisfy ok.
func (ct *connTest) waitStats(what string, ok func(LimiterStats) bool) {
	ct.t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if ok(ct.lim.Stats()) {
			return
		}
	}
	ct.t.Fatalf("the limiter never reached the state %q; now %+v", what, ct.lim.Stats())
}

// dialSmall opens a connection whose receive buffer is as small as the
// kernel allows, so that a response it does not read soon stalls the
// server's writes.
func (ct *connTest) dialSmall() net.Conn {
	ct.t.Helper()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 1024)
		}); err != nil {
			return err
		}
		return serr
	}}
	c, err := d.Dial("tcp", ct.addr)
	if err != nil {
		ct.t.Fatal(err)
	}
	ct.t.Cleanup(func() { c.Close() })
	return c
}

// send writes a GET of path with token (none if "") on c.
func send(t *testing.T, c net.Conn, path, token string) {
	t.Helper()
	auth := ""
	if token != "" {
		auth = "Authorization: Bearer " + token + "\r\n"
	}
	c.SetWriteDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\n"+auth+"\r\n"); err != nil {
		t.Fatal(err)
	}
}

// get sends a GET of path with token on a new connection and returns the
// status and body (or the error: a refused or closed connection).
func (ct *connTest) get(path, token string) (int, string, error) {
	c, err := net.Dial("tcp", ct.addr)
	if err != nil {
		return 0, "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	send(ct.t, c, path, token)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, "", err
	}
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// TestStalledConnectionsEvicted: connections that send a
// request and never read its answer, their small receive buffers full, so
// that the server's writes block, fill the cap; an admin's request still
// gets through, pushing out the one stalled longest (it was refused: a
// connection with a request in progress was never closed to make room).
func TestStalledConnectionsEvicted(t *testing.T) {
	ct := newConnTest(t, ServerOptions{MaxConns: 4}, Options{})
	for i := 0; i < 4; i++ {
		send(t, ct.dialSmall(), "/big", "")
	}
	ct.waitStats("four stalled", func(s LimiterStats) bool { return s.Open == 4 && s.Stalled == 4 })
	for i := 0; i < 3; i++ {
		st, body, err := ct.get("/v1/whoami", "admin")
		if err != nil || st != 200 || !strings.Contains(body, `"admin"`) {
			t.Fatalf("whoami %d with the cap full of stalled connections: %d %q %v; %+v", i, st, body, err, ct.lim.Stats())
		}
	}
	if s := ct.lim.Stats(); s.EvictedStalled == 0 || s.Refused != 0 {
		t.Fatalf("stats %+v: want stalled connections closed, none refused", s)
	}
}

// TestUnauthenticatedShare: connections on which no request
// has been authenticated hold at most their share of the cap; beyond it a
// new connection closes the oldest of them even with a request in
// progress, while authenticated requests in progress are never closed.
func TestUnauthenticatedShare(t *testing.T) {
	ct := newConnTest(t, ServerOptions{MaxConns: 4, UnauthenticatedShare: 0.5}, Options{})
	slow := make(chan error, 2)
	for i := 0; i < 2; i++ {
		go func() {
			st, body, err := ct.get("/v1/whoami", "slow")
			if err == nil && (st != 200 || !strings.Contains(body, `"slow"`)) {
				err = fmt.Errorf("status %d %q", st, body)
			}
			slow <- err
		}()
	}
	ct.waitStats("two authenticated requests in progress", func(s LimiterStats) bool {
		return s.Open == 2 && s.Waiting == 0 && s.Unauthenticated == 0
	})
	var held []net.Conn
	for i := 0; i < 2; i++ {
		c := ct.dialSmall()
		send(t, c, "/hold", "")
		held = append(held, c)
		ct.waitStats("unauthenticated requests in progress", func(s LimiterStats) bool {
			return s.Open == 3+i && s.Waiting == 0 && s.Unauthenticated == 1+i
		})
	}
	st, body, err := ct.get("/v1/whoami", "admin")
	if err != nil || st != 200 {
		t.Fatalf("whoami with the cap full, unauthenticated connections at their share: %d %q %v; %+v", st, body, err, ct.lim.Stats())
	}
	// The oldest unauthenticated connection was closed; the other still
	// has its request.
	held[0].SetReadDeadline(time.Now().Add(30 * time.Second))
	if n, err := held[0].Read(make([]byte, 1)); err == nil {
		t.Fatalf("the oldest unauthenticated connection was not closed (read %d bytes)", n)
	}
	close(ct.hold)
	close(ct.b.release)
	for i := 0; i < 2; i++ {
		if err := <-slow; err != nil {
			t.Fatalf("an authenticated request in progress at the cap was cut: %v", err)
		}
	}
	held[1].SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(held[1]), nil)
	if err != nil {
		t.Fatalf("the newer unauthenticated request: %v", err)
	}
	if b, _ := io.ReadAll(resp.Body); string(b) != "held" {
		t.Fatalf("the newer unauthenticated request: %q", b)
	}
}

// endlessLog is a log that grows without end until its context is done;
// closed is closed when it is.
type endlessLog struct {
	ctx    context.Context
	closed chan struct{}
	once   sync.Once
}

func (l *endlessLog) Read(p []byte) (int, error) {
	select {
	case <-l.ctx.Done():
		return 0, l.ctx.Err()
	case <-time.After(time.Millisecond):
	}
	return copy(p, strings.Repeat("a log line\n", 1000)), nil
}

func (l *endlessLog) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

// TestWriteDeadlines: a client that never reads is dropped
// from a log stream (each write must be taken within WriteStallTimeout)
// and from an ordinary response (the whole of it within WriteTimeout);
// before, both held their connections for as long as the client did.
func TestWriteDeadlines(t *testing.T) {
	t.Run("stream", func(t *testing.T) {
		ct := newConnTest(t, ServerOptions{WriteStallTimeout: 200 * time.Millisecond}, Options{WriteTimeout: time.Hour})
		logs := make(chan *endlessLog, 1)
		ct.b.logs = func(ctx context.Context) io.ReadCloser {
			l := &endlessLog{ctx: ctx, closed: make(chan struct{})}
			logs <- l
			return l
		}
		send(t, ct.dialSmall(), "/v1/jobs/j1/logs?follow=true", "alice")
		l := <-logs
		select {
		case <-l.closed:
		case <-time.After(time.Minute):
			t.Fatalf("a log stream to a client that never reads still runs; %+v", ct.lim.Stats())
		}
		ct.waitStats("the stream's connection closed", func(s LimiterStats) bool { return s.Accepted == 1 && s.Open == 0 })
	})
	t.Run("response", func(t *testing.T) {
		// (only the deadline of the whole response can close it here)
		ct := newConnTest(t, ServerOptions{WriteStallTimeout: time.Hour}, Options{WriteTimeout: 200 * time.Millisecond})
		ct.b.jobs = 60000 // some 20 MB of JSON
		send(t, ct.dialSmall(), "/v1/jobs", "alice")
		ct.waitStats("the list's connection closed", func(s LimiterStats) bool { return s.Accepted == 1 && s.Open == 0 })
		send(t, ct.dialSmall(), "/bigtimed", "")
		ct.waitStats("the WithWriteTimeout connection closed", func(s LimiterStats) bool { return s.Accepted == 2 && s.Open == 0 })
	})
}

// TestLogStreamEndsOnRevocation: a log stream opened before
// its token is revoked ends soon after (it streamed on for as long as the
// log grew).
func TestLogStreamEndsOnRevocation(t *testing.T) {
	ct := newConnTest(t, ServerOptions{}, Options{RecheckAuth: 50 * time.Millisecond, WriteTimeout: 50 * time.Millisecond})
	logs := make(chan *endlessLog, 1)
	ct.b.logs = func(ctx context.Context) io.ReadCloser {
		l := &endlessLog{ctx: ctx, closed: make(chan struct{})}
		logs <- l
		return l
	}
	c, err := net.Dial("tcp", ct.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	send(t, c, "/v1/jobs/j1/logs?follow=true", "alice")
	c.SetReadDeadline(time.Now().Add(time.Minute))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the stream: %v %v", resp, err)
	}
	// A stream that is read lasts beyond WriteTimeout, and beyond a
	// recheck of its token.
	for start := time.Now(); time.Since(start) < 300*time.Millisecond; {
		if _, err := io.ReadFull(resp.Body, make([]byte, 100)); err != nil {
			t.Fatalf("the stream, before the revocation: %v", err)
		}
	}
	l := <-logs
	ct.auth.revoke("alice")
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		t.Fatalf("the stream did not end after the revocation (%d more bytes): %v", n, err)
	}
	<-l.closed
	if st, _, err := ct.get("/v1/whoami", "alice"); err != nil || st != 401 {
		t.Fatalf("the revoked token: %d %v", st, err)
	}
}
