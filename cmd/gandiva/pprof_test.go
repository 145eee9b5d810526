package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
)

// TestPprofLoopbackOnly: --pprof-addr serves Go's profiles on a loopback
// address only (they have no authentication), and nothing when empty.
func TestPprofLoopbackOnly(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	for _, addr := range []string{"0.0.0.0:0", ":0", "10.1.2.3:6060", "example.com:6060", "127.0.0.1"} {
		if stop, err := servePprof(context.Background(), "--pprof-addr", addr, log); err == nil {
			stop()
			t.Errorf("--pprof-addr %q: served, want refused", addr)
		} else if !strings.Contains(err.Error(), "--pprof-addr") {
			t.Errorf("--pprof-addr %q: error %q does not name the flag", addr, err)
		}
	}
	stop, err := servePprof(context.Background(), "--pprof-addr", "", log)
	if err != nil {
		t.Fatal(err)
	}
	stop()
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0", "localhost:0"} {
		var url string
		logTo := slog.New(slog.NewTextHandler(&urlOf{&url}, nil))
		stop, err := servePprof(context.Background(), "--pprof-addr", addr, logTo)
		if err != nil {
			if addr == "[::1]:0" && strings.Contains(err.Error(), "assign") {
				continue // (no IPv6 loopback here)
			}
			t.Fatalf("--pprof-addr %q: %v", addr, err)
		}
		resp, err := http.Get(url + "heap?debug=1")
		if err != nil {
			stop()
			t.Fatalf("%s: %v", url, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		stop()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "heap profile") {
			t.Errorf("%sheap: %s, %.80q", url, resp.Status, body)
		}
	}
}

// urlOf takes the url=... of the log line servePprof writes.
type urlOf struct{ url *string }

func (u *urlOf) Write(p []byte) (int, error) {
	if _, rest, ok := strings.Cut(string(p), "url="); ok {
		*u.url, _, _ = strings.Cut(rest, "\n")
		*u.url = strings.Fields(*u.url)[0]
	}
	return len(p), nil
}
