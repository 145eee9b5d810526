package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gandiva-sched/gandiva/internal/api"
)

// TestLogsFollowAcrossAttempts: `gandiva logs -f` follows a job across
// its attempts and nodes until it ends (it returned, exit 0, when the
// first attempt's log ended at a migration, while the job ran on
// elsewhere), with a header line on stderr for each attempt, waiting for
// a new attempt's log the node does not have yet; `status` lists the
// attempts by number with their nodes, GPUs and outcomes.
func TestLogsFollowAcrossAttempts(t *testing.T) {
	old := logsPoll
	logsPoll = 5 * time.Millisecond
	t.Cleanup(func() { logsPoll = old })
	now := time.Now()
	ended := now.Add(time.Second)
	var mu sync.Mutex
	phase := 0  // 0: attempt 1 runs; 1: it moved, attempt 2 runs; 2: finished
	notYet := 1 // attempt 2's log: 404s before the node has it
	job := func() api.Job {
		mu.Lock()
		defer mu.Unlock()
		a1 := api.Attempt{N: 1, Ranks: []api.AttemptRank{{Node: "n1", GPUs: []int{0, 1}}}, Started: &now, Current: phase == 0}
		a2 := api.Attempt{N: 2, Ranks: []api.AttemptRank{{Node: "n2", GPUs: []int{3}}}, Started: &ended, Current: phase == 1}
		j := api.Job{ID: "j1", Name: "train", User: "alice", GPUs: 2, State: "running", Submitted: now, AttemptList: []api.Attempt{a1}}
		if phase >= 1 {
			j.AttemptList[0].Outcome, j.AttemptList[0].Ended = "checkpointed: to move", &ended
			j.AttemptList = append(j.AttemptList, a2)
		}
		if phase == 2 {
			j.State, j.AttemptList[1].Outcome, j.AttemptList[1].Ended = "finished", "finished", &ended
		}
		return j
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/jobs/j1", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(job())
	})
	var asked []string
	mux.HandleFunc("GET /v1/jobs/j1/logs", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, r.URL.RawQuery)
		switch q := r.URL.Query(); {
		case q.Get("follow") != "true":
			http.Error(w, "not followed", http.StatusBadRequest)
		case q.Get("attempt") == "1" || (q.Get("attempt") == "0" || q.Get("attempt") == "") && phase == 0:
			io.WriteString(w, "attempt 1's output\n")
			phase = max(phase, 1) // its log ends: the job moved
		case q.Get("attempt") == "2" && notYet > 0:
			notYet--
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			json.NewEncoder(w).Encode(map[string]any{"error": api.Error{Status: 404, Code: "not_found", Message: "node n2 has no log for job j1 attempt 2 rank 0"}})
		case q.Get("attempt") == "2":
			io.WriteString(w, "attempt 2's output\n")
			phase = 2
		default:
			http.Error(w, "unexpected", http.StatusBadRequest)
		}
	})
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)

	out, errs, err := run(t, "logs", "-f", "j1", "--server", hs.URL, "--token", "gdv_test")
	if err != nil {
		t.Fatalf("logs -f: %v\n%s", err, errs)
	}
	if out != "attempt 1's output\nattempt 2's output\n" {
		mu.Lock()
		t.Errorf("logs -f printed %q, want both attempts' output (asked %v)", out, asked)
		mu.Unlock()
	}
	for _, h := range []string{"==> j1 attempt 1 on n1 GPUs 0,1 <==\n", "==> j1 attempt 2 on n2 GPU 3 <==\n", "==> j1 finished <==\n"} {
		if !strings.Contains(errs, h) {
			t.Errorf("stderr lacks %q:\n%s", h, errs)
		}
	}
	mu.Lock()
	left := notYet
	mu.Unlock()
	if left != 0 {
		t.Errorf("attempt 2's log was never asked for before the node had it")
	}

	st, _, err := run(t, "status", "j1", "--server", hs.URL, "--token", "gdv_test")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{"  attempts:  (gandiva logs --attempt N)\n", "  1  " + now.Local().Format("15:04:05.000") + "  on n1 GPUs 0,1: checkpointed: to move\n",
		"  2  " + ended.Local().Format("15:04:05.000") + "  on n2 GPU 3: finished\n"} {
		if !strings.Contains(st, l) {
			t.Errorf("status lacks %q:\n%s", l, st)
		}
	}
}
