package api

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
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
