package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
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

// upWorkArgs returns up's flags for an agent work directory of the test's
// own, which the jobs' account can reach, and (as root) that account.
func upWorkArgs(t *testing.T) []string {
	t.Helper()
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
	return args
}

// runJobToEnd submits a one-GPU job that exits 0 and waits until it has
// finished (failing the test with its last state if it does not).
func runJobToEnd(t *testing.T, url, dataDir string) {
	t.Helper()
	runToEnd(t, url, dataDir, "exit 0")
}

// runToEnd runs the shell script script as a one-GPU job of the store in
// dataDir until it has finished (failing the test if it does not) and
// returns the job's ID.
func runToEnd(t *testing.T, url, dataDir, script string) string {
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
		j, err = cl.Submit(ctx, &api.JobRequest{Command: []string{"/bin/sh", "-c", script}, GPUs: 1, PreRun: new(bool)})
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
			return j.ID
		}
		if last.State == "failed" || last.State == "cancelled" {
			break
		}
	}
	t.Fatalf("job %s did not run to the end: %+v", j.ID, last)
	return ""
}

// TestUpSecondStoreRunsJobs: `gandiva up --data-dir A`, stopped, then
// `gandiva up --data-dir B` with the same agent work directory (as the
// default one is: per host, not per store) runs a job to the end; and so
// does A again afterwards (the agent used to keep A's node credential in
// the work directory, B refused it, and nothing ever ran).
func TestUpSecondStoreRunsJobs(t *testing.T) {
	base := t.TempDir()
	args := upWorkArgs(t)
	a, b := filepath.Join(base, "A"), filepath.Join(base, "B")
	for i, data := range []string{a, b, a} {
		url, stop := startUp(t, append([]string{"--data-dir", data}, args...)...)
		runJobToEnd(t, url, data)
		if err := stop(); err != nil {
			t.Fatalf("up %d (--data-dir %s): %v", i+1, data, err)
		}
	}
}

// TestUpStoresKeepJobFilesApart: two stores run by `gandiva up` with one
// agent work directory (and so one checkpoint root) number their jobs
// alike (j1 in each), but never see each other's checkpoints or logs
// (B's j1 once restored A's j1's checkpoint and finished at
// once with A's result, and B's `logs j1` began with A's output).
func TestUpStoresKeepJobFilesApart(t *testing.T) {
	base := t.TempDir()
	args := upWorkArgs(t)
	// Each job fails if it finds a checkpoint, then leaves one and says
	// which store ran it.
	script := func(store string) string {
		return `test ! -e "$GANDIVA_CHECKPOINT_DIR/mark" || { echo "found $(cat "$GANDIVA_CHECKPOINT_DIR/mark")'s checkpoint"; exit 3; }; ` +
			`echo ` + store + ` > "$GANDIVA_CHECKPOINT_DIR/mark" && echo "ran in ` + store + `"`
	}
	ids := map[string]string{}
	for _, store := range []string{"A", "B"} {
		data := filepath.Join(base, store)
		url, stop := startUp(t, append([]string{"--data-dir", data}, args...)...)
		ids[store] = runToEnd(t, url, data, script(store))
		tok, err := os.ReadFile(filepath.Join(data, "admin.token"))
		if err != nil {
			t.Fatal(err)
		}
		rc, err := api.NewClient(url, strings.TrimSpace(string(tok))).Logs(context.Background(), ids[store], api.LogOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var log bytes.Buffer
		log.ReadFrom(rc)
		rc.Close()
		var runs []string // (the log's lines of output, past gandiva's own)
		for _, l := range strings.Split(log.String(), "\n") {
			if strings.HasPrefix(l, "ran in ") || strings.HasPrefix(l, "found ") {
				runs = append(runs, l)
			}
		}
		if want := []string{"ran in " + store}; !slices.Equal(runs, want) {
			t.Errorf("store %s: logs %s show %q, want %q:\n%s", store, ids[store], runs, want, log.String())
		}
		if err := stop(); err != nil {
			t.Fatalf("up --data-dir %s: %v", data, err)
		}
	}
	if ids["A"] != ids["B"] {
		t.Fatalf("the stores named their first jobs %s and %s: the test needs one ID in both", ids["A"], ids["B"])
	}
}
