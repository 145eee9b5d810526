package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gandiva-sched/gandiva/internal/api"
)

// startUp runs `gandiva up` with args until the returned stop is called,
// and returns its API's URL once it says it is up.
func startUp(t *testing.T, args ...string) (url string, stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	root := newRoot()
	var stderr syncBuffer
	root.SetErr(&stderr)
	root.SetOut(&bytes.Buffer{})
	root.SetArgs(append([]string{"up", "--listen", "127.0.0.1:0", "--policy", "fifo", "--fake-gpus", "1xV100"}, args...))
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	re := regexp.MustCompile(`gandiva is up: API (http://[0-9.:]+),`)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		select {
		case err := <-done:
			cancel()
			t.Fatalf("up ended: %v\n%s", err, stderr.String())
		default:
		}
		if m := re.FindStringSubmatch(stderr.String()); m != nil {
			url = m[1]
			break
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("up never said it is up:\n%s", stderr.String())
		}
	}
	var stopped bool
	stop = func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		err := <-done
		if err != nil {
			t.Logf("up's log:\n%s", stderr.String())
		}
		return err
	}
	t.Cleanup(func() { stop() })
	return url, stop
}

// runJobToEnd submits a one-GPU job that exits 0 and waits until it has
// finished (failing the test with its last state if it does not).
func runJobToEnd(t *testing.T, url, dataDir string) {
	t.Helper()
	tok, err := os.ReadFile(filepath.Join(dataDir, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	cl := api.NewClient(url, strings.TrimSpace(string(tok)))
	ctx := context.Background()
	// (accepted once the node has registered: the agent enrols first)
	var j *api.Job
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		j, err = cl.Submit(ctx, &api.JobRequest{Command: []string{"/bin/sh", "-c", "exit 0"}, GPUs: 1})
		if err == nil {
			break
		}
		if !strings.Contains(err.Error(), "no node has registered") || time.Now().After(deadline) {
			t.Fatalf("submitting: %v", err)
		}
	}
	var last *api.Job
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if last, err = cl.Get(ctx, j.ID); err != nil {
			t.Fatal(err)
		}
		if last.State == "finished" {
			return
		}
		if last.State == "failed" || last.State == "cancelled" {
			break
		}
	}
	t.Fatalf("job %s did not run to the end: %+v", j.ID, last)
}

// TestUpSecondStoreRunsJobs: `gandiva up --data-dir A`, stopped, then
// `gandiva up --data-dir B` with the same agent work directory (as the
// default one is: per host, not per store) runs a job to the end; and so
// does A again afterwards (issue 22: the agent kept A's node credential in
// the work directory, B refused it, and nothing ever ran).
func TestUpSecondStoreRunsJobs(t *testing.T) {
	base := t.TempDir()
	work, err := os.MkdirTemp("", "gandiva-up-work-") // (the jobs' account must reach it)
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(work, 0o755)
	t.Cleanup(func() { os.RemoveAll(work) })
	args := []string{"--work-dir", work}
	if os.Geteuid() == 0 {
		args = append(args, "--run-as", "nobody")
	}
	a, b := filepath.Join(base, "A"), filepath.Join(base, "B")
	for i, data := range []string{a, b, a} {
		url, stop := startUp(t, append([]string{"--data-dir", data}, args...)...)
		runJobToEnd(t, url, data)
		if err := stop(); err != nil {
			t.Fatalf("up %d (--data-dir %s): %v", i+1, data, err)
		}
	}
}
