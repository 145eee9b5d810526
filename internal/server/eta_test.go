package server

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gandiva-sched/gandiva/internal/api"
)

// TestETA: the server forecasts in the background; a job's view, its
// explanation and the dashboard's queue give when a waiting job is
// expected to start and every job to finish. Under FIFO with declared
// lengths, a queued job starts when the job ahead of it ends, and ends its
// declared work (plus the model's start-up) later.
func TestETA(t *testing.T) {
	s, _ := testServer(t, Config{Policy: "fifo", WarmStarts: -1}) // (no warm starts: one assignment per running job)
	s.eta.mu.Lock()
	s.eta.every = 50 * time.Millisecond
	s.eta.mu.Unlock()
	ctx := context.Background()
	a := &fakeAgent{t: t, s: s, name: "n1"}
	a.register()
	alice := api.Principal{User: "alice"}
	var ids []string
	for range 3 {
		j, _, err := s.Submit(ctx, alice, &api.JobRequest{Command: []string{"train"}, GPUs: 4, Iters: 100, IterTime: 2})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	var items []api.Assignment
	waitFor(t, func() bool { items = a.assignments(); return len(items) == 1 })
	a.report(api.Report{Job: items[0].Job, Attempt: items[0].Attempt, Kind: api.RepStarted},
		api.Report{Job: items[0].Job, Attempt: items[0].Attempt, Kind: api.RepProgress, Done: 20, IterTime: 2})
	jobs := make([]*api.Job, 3)
	waitFor(t, func() bool {
		for i, id := range ids {
			jobs[i], _ = s.Get(ctx, alice, id)
			if jobs[i].ETA == nil || jobs[i].ETA.Forecast.Before(jobs[0].Submitted) || jobs[i].ETA.Finish == nil {
				return false
			}
		}
		// a forecast made after the progress report
		return strings.Contains(jobs[0].ETA.Note, "80 of 100 mini-batches left")
	})
	j1, j2, j3 := jobs[0].ETA, jobs[1].ETA, jobs[2].ETA
	if j1.Start != nil || j2.Start == nil || j3.Start == nil {
		t.Fatalf("a running job has no start to forecast, the waiting ones do: %+v %+v %+v", j1, j2, j3)
	}
	near := func(a, b time.Time, within float64) bool { return math.Abs(a.Sub(b).Seconds()) <= within }
	if !near(*j2.Start, *j1.Finish, 1e-3) || !near(*j3.Start, *j2.Finish, 1e-3) {
		t.Fatalf("FIFO: j2 starts %v as j1 ends %v; j3 starts %v as j2 ends %v", j2.Start, j1.Finish, j3.Start, j2.Finish)
	}
	// 100 mini-batches of 2 s after the model's 10 s start-up
	if d := j2.Finish.Sub(*j2.Start).Seconds(); math.Abs(d-210) > 1 {
		t.Fatalf("j2 is forecast to run %.1f s, want 210", d)
	}
	if !strings.Contains(j2.Note, "no other job arrives") {
		t.Fatalf("note %q", j2.Note)
	}
	e, err := s.Explain(ctx, alice, ids[2])
	if err != nil || e.ETA == nil || !e.ETA.Start.Equal(*j3.Start) {
		t.Fatalf("explain: %+v, %v", e, err)
	}
	q, err := s.Dashboard().Queue(ctx, alice)
	if err != nil || len(q.Jobs) != 2 || q.Jobs[0].ETAStart == nil || q.Jobs[1].ETAFinish == nil {
		t.Fatalf("queue: %+v, %v", q, err)
	}
	if got := s.epoch.Add(time.Duration(*q.Jobs[0].ETAStart * float64(time.Second))); !near(got, *j2.Start, 1e-3) {
		t.Fatalf("the queue's ETA %v is not the API's %v", got, j2.Start)
	}
}

// TestETABands: jobs that declare no length get ETAs that are medians with
// an 80% band, in the API (its job views and explanations) and the
// dashboard's queue, and say what they assume: the prior, over how many
// jobs, and over how many forecasts. A job with a declared length that
// waits behind one of unknown length gets a band for its start too.
func TestETABands(t *testing.T) {
	s, _ := testServer(t, Config{Policy: "fifo", WarmStarts: -1})
	s.eta.mu.Lock()
	s.eta.every = 50 * time.Millisecond
	s.eta.mu.Unlock()
	ctx := context.Background()
	a := &fakeAgent{t: t, s: s, name: "n1"}
	a.register()
	alice := api.Principal{User: "alice"}
	var ids []string
	for _, iters := range []float64{0, 0, 100} {
		j, _, err := s.Submit(ctx, alice, &api.JobRequest{Command: []string{"train"}, GPUs: 4, Iters: iters, IterTime: 2})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	var items []api.Assignment
	waitFor(t, func() bool { items = a.assignments(); return len(items) == 1 })
	a.report(api.Report{Job: items[0].Job, Attempt: items[0].Attempt, Kind: api.RepStarted})
	jobs := make([]*api.Job, 3)
	waitFor(t, func() bool {
		for i, id := range ids {
			jobs[i], _ = s.Get(ctx, alice, id)
			if jobs[i].ETA == nil || jobs[i].ETA.Finish == nil {
				return false
			}
		}
		return true
	})
	for i, j := range jobs {
		e := j.ETA
		if e.Samples != 20 || e.FinishLow == nil || e.FinishHigh == nil || e.FinishLow.After(*e.Finish) || e.Finish.After(*e.FinishHigh) ||
			!e.FinishLow.Before(*e.FinishHigh) || !strings.Contains(e.Note, "median and p10–p90 of 20 forecasts") {
			t.Fatalf("job %d: %+v", i, e)
		}
		waiting := i > 0
		if waiting != (e.Start != nil && e.StartLow != nil && e.StartHigh != nil) {
			t.Fatalf("job %d (waiting %v): start %v (%v–%v)", i, waiting, e.Start, e.StartLow, e.StartHigh)
		}
	}
	if n := jobs[1].ETA.Note; !strings.Contains(n, "length unknown, drawn from the Philly trace's run times (82,247 jobs)") {
		t.Fatalf("note %q", n)
	}
	if n := jobs[2].ETA.Note; !strings.Contains(n, "100 of 100 mini-batches left") {
		t.Fatalf("note %q", n)
	}
	e, err := s.Explain(ctx, alice, ids[2])
	if err != nil || e.ETA == nil || e.ETA.StartLow == nil || e.ETA.Samples != 20 {
		t.Fatalf("explain: %+v, %v", e, err)
	}
	q, err := s.Dashboard().Queue(ctx, alice)
	if err != nil || len(q.Jobs) != 2 || q.Jobs[0].ETASamples != 20 || q.Jobs[0].ETAStartLow == nil || q.Jobs[0].ETAFinishHigh == nil ||
		*q.Jobs[0].ETAStartLow > *q.Jobs[0].ETAStart {
		t.Fatalf("queue: %+v, %v", q, err)
	}
}
