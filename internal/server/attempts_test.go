package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/engine"
)

// TestAttemptsNumbered: a job's attempts are listed (GET /v1/jobs/{id})
// numbered 1, 2, ... with their node, GPUs and outcome, and
// logs?attempt=N takes those numbers (it took the agents' process
// attempts, 1024, 50432, ..., so that `gandiva logs --attempt 1` answered
// "job j1 has no attempt 1"), asking the node for the right one.
func TestAttemptsNumbered(t *testing.T) {
	fp := engine.DefaultFailurePolicy()
	fp.Backoff = 0.01
	s, hs := testServer(t, Config{Policy: "fifo", NodeTimeout: time.Hour, Failure: &fp})
	ctx := context.Background()
	admin := api.NewClient(hs.URL, s.AdminToken)
	alice := userClient(t, hs, admin, "alice")
	const key = "0123456789abcdef0123"
	agent := logAgent(t, key, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "the log of process attempt %s, rank %s\n", r.URL.Query().Get("attempt"), r.URL.Query().Get("rank"))
	})
	node := evilNode(t, hs, admin, "n1")
	reg, err := node.Register(ctx, &api.Registration{Name: "n1", GPUs: []api.GPU{{Index: 0, Type: "V100", MemGiB: 16}, {Index: 1, Type: "V100", MemGiB: 16}},
		HostMemGiB: 8, Addr: "http://" + agent, LogKey: key, Incarnation: "i1", Running: []api.Running{}})
	if err != nil {
		t.Fatal(err)
	}
	no := false
	j, err := alice.Submit(ctx, &api.JobRequest{Command: []string{"train"}, GPUs: 2, PreRun: &no})
	if err != nil {
		t.Fatal(err)
	}
	seq := uint64(0)
	assigned := func(not int64) *api.Assignment {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
			as, err := node.Assignments(ctx, "n1", reg.Session, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if a := find(as.Items, j.ID, false); a != nil && a.Attempt != not {
				return a
			}
			if time.Now().After(deadline) {
				t.Fatalf("no new assignment of %s", j.ID)
			}
		}
	}
	report := func(rs ...api.Report) {
		t.Helper()
		for i := range rs {
			seq++
			rs[i].Seq = seq
		}
		if err := node.Report(ctx, &api.ReportBatch{Node: "n1", Session: reg.Session, Reports: rs}); err != nil {
			t.Fatal(err)
		}
	}
	// attempt 1 fails (not the job's fault: it is retried), attempt 2 runs
	a1 := assigned(0)
	report(api.Report{Job: j.ID, Attempt: a1.Attempt, Kind: api.RepStarted},
		api.Report{Job: j.ID, Attempt: a1.Attempt, Kind: api.RepExited, Outcome: "failed", Code: 137, Message: "GPU fell off the bus"})
	a2 := assigned(a1.Attempt)
	report(api.Report{Job: j.ID, Attempt: a2.Attempt, Kind: api.RepStarted})
	if a1.Attempt < 256 || a2.Attempt < 256 {
		t.Fatalf("process attempts %d, %d: the test wants them unlike the numbers users see", a1.Attempt, a2.Attempt)
	}
	var v *api.Job
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if v, err = alice.Get(ctx, j.ID); err != nil {
			t.Fatal(err)
		}
		if len(v.AttemptList) == 2 && v.AttemptList[1].Current {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("attempts %+v", v.AttemptList)
		}
	}
	l1, l2 := v.AttemptList[0], v.AttemptList[1]
	if l1.N != 1 || l1.PreRun || len(l1.Ranks) != 1 || l1.Ranks[0].Node != "n1" || fmt.Sprint(l1.Ranks[0].GPUs) != "[0 1]" ||
		l1.Outcome != "failed: GPU fell off the bus" || l1.Ended == nil || l1.Started == nil || l1.Current {
		t.Errorf("attempt 1: %+v", l1)
	}
	if l2.N != 2 || l2.Outcome != "" || l2.Ended != nil || !l2.Current || l2.Ranks[0].Node != "n1" {
		t.Errorf("attempt 2: %+v", l2)
	}
	logOf := func(o api.LogOptions) string {
		t.Helper()
		rc, err := alice.Logs(ctx, j.ID, o)
		if err != nil {
			t.Fatalf("logs %+v: %v", o, err)
		}
		defer rc.Close()
		b, _ := io.ReadAll(rc)
		return string(b)
	}
	for _, c := range []struct {
		o    api.LogOptions
		want int64
	}{{api.LogOptions{Attempt: 1}, a1.Attempt}, {api.LogOptions{Attempt: 2}, a2.Attempt}, {api.LogOptions{}, a2.Attempt}} {
		if got, want := logOf(c.o), fmt.Sprintf("the log of process attempt %d, rank 0\n", c.want); got != want {
			t.Errorf("logs --attempt %d: %q, want %q", c.o.Attempt, got, want)
		}
	}
	if _, err := alice.Logs(ctx, j.ID, api.LogOptions{Attempt: 3}); !api.IsStatus(err, 404) || !strings.Contains(err.Error(), "its attempts are 1 to 2") {
		t.Errorf("logs --attempt 3: %v", err)
	}
	if _, err := alice.Logs(ctx, j.ID, api.LogOptions{Attempt: a1.Attempt}); !api.IsStatus(err, 404) {
		t.Errorf("logs --attempt %d (a process attempt): %v, want a 404", a1.Attempt, err)
	}
}
