package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for one writer and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestUpHintWorks: the commands up's "try:" hint prints reach the server
// it started, also with a non-default --listen and --data-dir (the hint
// used to name neither, so it failed).
func TestUpHintWorks(t *testing.T) {
	data := t.TempDir() + "/data"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	root := newRoot()
	var stderr syncBuffer
	root.SetErr(&stderr)
	root.SetOut(&bytes.Buffer{})
	root.SetArgs(append([]string{"up", "--listen", "127.0.0.1:0", "--data-dir", data, "--policy", "fifo", "--fake-gpus", "1xV100"}, upTestArgs(t)...))
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	re := regexp.MustCompile(`gandiva (jobs[^;]*);`)
	var m []string
	for deadline := time.Now().Add(30 * time.Second); m == nil; time.Sleep(20 * time.Millisecond) {
		select {
		case err := <-done:
			t.Fatalf("up ended: %v\n%s", err, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no hint:\n%s", stderr.String())
		}
		m = re.FindStringSubmatch(stderr.String())
	}
	args := strings.Fields(m[1])
	if !strings.Contains(m[1], "--server http://127.0.0.1:") || !strings.Contains(m[1], "--token-file "+data+"/admin.token") {
		t.Fatalf("the hint %q does not name the server and the token file", m[1])
	}
	out, _, err := run(t, args...)
	if err != nil || !strings.Contains(out, "ID") {
		t.Fatalf("gandiva %s: %v\n%s", m[1], err, out)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("up: %v", err)
	}
}
