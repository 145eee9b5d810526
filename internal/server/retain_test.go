package server

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gandiva-sched/gandiva/internal/api"
)

// bigJob is a one-GPU job whose command carries an argument of n bytes of
// fill (n at most 64 KiB, the API's bound on one argument).
func bigJob(n int, fill string) *api.JobRequest {
	return &api.JobRequest{Name: "big", Command: []string{"train", strings.Repeat(fill, n)}, GPUs: 1}
}

// storedJobBytes is the size of every job record in the store.
func storedJobBytes(t *testing.T, s *Server) (n int) {
	t.Helper()
	if err := s.db.Jobs(func(_ string, rec []byte) error { n += len(rec); return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// waitLocked polls cond (under the server's read lock) until it holds.
func waitLocked(t *testing.T, s *Server, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s.mu.RLock()
		ok := cond()
		s.mu.RUnlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: never happened", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestBoundedGrowth: one user submitted 100 jobs of 1
// MiB specs that ended at once, and the server kept every byte of them for
// ever (RSS 57 → 414 MB, store 4 → 428 MB), since quotas counted only jobs
// that had not ended. Now a spec beyond quota/spec-bytes is a 413 naming
// it; jobs, ended ones included, are refused once their specs kept in
// full reach quota/stored-bytes (a 429 naming it); retention then drops
// the ended ones' full records from memory, the store and the next
// snapshot; and a restart (a replay of the whole log, then a snapshot)
// rebuilds the same state.
func TestBoundedGrowth(t *testing.T) {
	cfg := Config{DataDir: t.TempDir(), Policy: "fifo", SnapshotEvery: -1}
	s, stop := runServer(t, cfg)
	defer func() { stop() }()
	addNode(t, s, "n1")
	ctx := context.Background()
	admin := api.Principal{User: "admin", Admin: true}
	alice, bob := api.Principal{User: "alice"}, api.Principal{User: "bob"}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	// The attack's 1 MiB spec (16 arguments of 64 KiB): refused by the cap.
	huge := &api.JobRequest{Command: []string{"train"}, GPUs: 1}
	for range 16 {
		huge.Command = append(huge.Command, strings.Repeat("y", 64<<10-16))
	}
	_, _, err := s.Submit(ctx, alice, huge)
	wantAPIError(t, "a 1 MiB spec", err, 413, "command", QuotaSpecBytes)

	// The largest spec the cap allows, jobs that end at once: accepted up
	// to the quota on stored bytes, ended jobs counted, then a 429.
	const quota = 1 << 20
	must(s.Set(ctx, admin, api.Setting{Key: QuotaStoredBytes, Value: "1048576"}))
	size := specBytes(bigJob(63<<10, "x"))
	var ids []string
	for {
		j, _, err := s.Submit(ctx, alice, bigJob(63<<10, "x"))
		if err != nil {
			wantAPIError(t, "a job beyond the stored-bytes quota", err, 429, "", QuotaStoredBytes)
			break
		}
		ids = append(ids, j.ID)
		if _, err := s.Cancel(ctx, alice, j.ID); err != nil {
			t.Fatal(err)
		}
		if len(ids) > 100 {
			t.Fatalf("100 jobs of %d bytes accepted under a quota of %d bytes", size, quota)
		}
	}
	if want := quota / size; len(ids) != want {
		t.Fatalf("%d jobs of %d bytes accepted, want %d under a quota of %d", len(ids), size, want, quota)
	}
	if _, _, err := s.Submit(ctx, bob, bigJob(63<<10, "z")); err != nil {
		t.Fatalf("bob is not bound by alice's quota: %v", err)
	}
	if n := storedJobBytes(t, s); n < len(ids)*size {
		t.Fatalf("the store holds %d bytes of job records, want the %d jobs in full", n, len(ids))
	}

	// Retention summarises them (here at once) and frees the quota.
	must(s.Set(ctx, admin, api.Setting{Key: RetainEndedFor, Value: "0"}))
	kept, _, err := s.Submit(ctx, alice, bigJob(63<<10, "z"))
	if err != nil {
		t.Fatalf("after retention: %v", err)
	}
	for _, id := range ids {
		v, err := s.Get(ctx, alice, id)
		must(err)
		if !v.Summary || len(v.Command) != 0 || v.State != "cancelled" || v.Name != "big" || v.GPUs != 1 || v.Ended == nil {
			t.Fatalf("%s after retention: %+v, want a summary of a cancelled job", id, v)
		}
	}
	if v, _ := s.Get(ctx, alice, kept.ID); v.Summary || len(v.Command) != 2 {
		t.Fatalf("a job not ended: %+v, want its full record", v)
	}
	// Bounded: alice's and bob's live jobs are the only ones kept in full,
	// in memory, in the store and in a snapshot.
	s.mu.RLock()
	stored := s.m.stored["alice"] + s.m.stored["bob"]
	s.mu.RUnlock()
	if stored != 2*size {
		t.Fatalf("%d spec bytes kept in full, want %d (two jobs not ended)", stored, 2*size)
	}
	if n := storedJobBytes(t, s); n > 2*size+len(ids)*1024 {
		t.Fatalf("the store holds %d bytes of job records after retention, want 2 full records and %d summaries", n, len(ids))
	}
	arg := []byte(strings.Repeat("x", 63<<10))
	before := state(t, s)
	stop()

	// A restart replays the whole log: the same summaries.
	s, stop = runServer(t, cfg)
	if s.Replay.Diverged != 0 || s.Replay.Snapshot != 0 {
		t.Fatalf("replay %+v", s.Replay)
	}
	if after := state(t, s); after != before {
		t.Fatalf("state after replay differs.\nbefore:\n%s\nafter:\n%s", before, after)
	}
	must(s.snapshotNow(ctx))
	snaps := mustSnapshots(t, s)
	data, err := s.db.ReadSnapshot(snaps[len(snaps)-1].Seq)
	must(err)
	if n := bytes.Count(data, arg); n != 0 {
		t.Fatalf("the snapshot holds %d copies of the ended jobs' argument, want none", n)
	}
	if !bytes.Contains(data, []byte(strings.Repeat("z", 63<<10))) {
		t.Fatalf("the snapshot lacks the argument of the jobs not ended")
	}
	stop()
	// And from the snapshot.
	s, stop = runServer(t, cfg)
	if s.Replay.Snapshot == 0 || s.Replay.Diverged != 0 {
		t.Fatalf("restart from the snapshot: %+v", s.Replay)
	}
	if after := state(t, s); after != before {
		t.Fatalf("state after a restart from the snapshot differs.\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// TestRetention: with retain/ended-jobs 1, a user's older ended jobs are
// summarised as soon as a newer one ends, and a summary still answers
// jobs, status, the records metrics summarises and a what-if history; an
// idempotency key is forgotten with its job's record. A job whose record
// is kept beyond quota/job-records is refused with a 429 naming it.
func TestRetention(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{DataDir: dir, Policy: "fifo", WarmStarts: -1}
	s, stop := runServer(t, cfg)
	ctx := context.Background()
	admin := api.Principal{User: "admin", Admin: true}
	alice := api.Principal{User: "alice"}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	a := addNode(t, s, "n1")
	must(s.Set(ctx, admin, api.Setting{Key: RetainEndedJobs, Value: "1"}))
	must(s.Set(ctx, admin, api.Setting{Key: QuotaRecords, Value: "3"}))
	rq := &api.JobRequest{Name: "train-a", Command: []string{"train", "--lr", "0.1"}, Env: map[string]string{"SEED": "1"},
		GPUs: 1, Iters: 10, IterTime: 0.5, IdempotencyKey: "k1"}
	j1, _, err := s.Submit(ctx, alice, rq)
	must(err)
	// j1 runs to the end on the fake agent.
	var w *api.Assignment
	for w == nil {
		w = find(a.assignments(), j1.ID, false)
		time.Sleep(5 * time.Millisecond)
	}
	a.report(api.Report{Job: j1.ID, Attempt: w.Attempt, Kind: api.RepStarted},
		api.Report{Job: j1.ID, Attempt: w.Attempt, Kind: api.RepProgress, Done: 10, IterTime: 0.5},
		api.Report{Job: j1.ID, Attempt: w.Attempt, Kind: api.RepExited, Outcome: "finished"})
	waitLocked(t, s, "j1 finished", func() bool { return s.m.jobs[j1.ID].ended })
	v, _ := s.Get(ctx, alice, j1.ID)
	if v.Summary || len(v.Command) != 3 {
		t.Fatalf("j1, the only ended job: %+v, want its full record", v)
	}
	j2, _, err := s.Submit(ctx, alice, &api.JobRequest{Name: "train-b", Command: []string{"train"}, GPUs: 4})
	must(err)
	j3, _, err := s.Submit(ctx, alice, &api.JobRequest{Name: "train-c", Command: []string{"train"}, GPUs: 4})
	must(err)
	_, _, err = s.Submit(ctx, alice, &api.JobRequest{Command: []string{"train"}, GPUs: 4})
	wantAPIError(t, "a fourth job kept in full", err, 429, "", QuotaRecords)
	_, err = s.Cancel(ctx, alice, j2.ID) // j1 is summarised now
	must(err)
	v, err = s.Get(ctx, alice, j1.ID)
	must(err)
	if !v.Summary || v.Command != nil || v.Env != nil || v.State != "finished" || v.Name != "train-a" || v.Done != 10 ||
		v.Started == nil || v.Ended == nil || v.Iters != 10 || len(v.History) == 0 {
		t.Fatalf("j1 after retention: %+v, want its summary", v)
	}
	if v, _ := s.Get(ctx, alice, j2.ID); v.Summary {
		t.Fatalf("j2, the newest ended job, was summarised: %+v", v)
	}
	list, err := s.List(ctx, alice, api.ListOptions{})
	must(err)
	if len(list) != 3 {
		t.Fatalf("jobs lists %d jobs, want 3", len(list))
	}
	if r := s.Records(); len(r.Jobs) != 3 || r.Jobs[0].Busy <= 0 || r.Jobs[0].Done != 10 {
		t.Fatalf("records %+v", r.Jobs)
	}
	// The key went with the record: the same request makes a new job.
	j4, created, err := s.Submit(ctx, alice, rq)
	must(err)
	if !created || j4.ID == j1.ID {
		t.Fatalf("a retry with a summarised job's key: %s (created %v), want a new job", j4.ID, created)
	}
	_, err = s.Cancel(ctx, alice, j3.ID)
	must(err)
	_, err = s.Cancel(ctx, alice, j4.ID)
	must(err)
	before := state(t, s)
	stop()

	h, err := ReadHistory(dir, nil)
	must(err)
	if len(h.Jobs) == 0 || !strings.HasPrefix(h.Jobs[0].Name, j1.ID+" ") || h.Jobs[0].Iters != 10 || h.Jobs[0].IterTime != 0.5 {
		t.Fatalf("what-if history of a summarised job: %+v", h.Jobs)
	}
	s, stop = runServer(t, cfg)
	defer stop()
	if s.Replay.Diverged != 0 {
		t.Fatalf("replay %+v", s.Replay)
	}
	if after := state(t, s); after != before {
		t.Fatalf("state after replay differs.\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// TestLimitsRebuilt: a machine decoded from a snapshot of a build without
// retention (its counts and queues absent: limitsReady false) rebuilds them
// from its jobs exactly as they were kept, so quotas and retention go on
// the same after an upgrade.
func TestLimitsRebuilt(t *testing.T) {
	s, stop := runServer(t, Config{DataDir: t.TempDir(), Policy: "fifo"})
	defer stop()
	addNode(t, s, "n1")
	ctx := context.Background()
	admin := api.Principal{User: "admin", Admin: true}
	if err := s.Set(ctx, admin, api.Setting{Key: RetainEndedJobs, Value: "2"}); err != nil {
		t.Fatal(err)
	}
	for i, u := range []string{"alice", "bob", "alice", "alice", "bob", "alice", "carol"} {
		j, _, err := s.Submit(ctx, api.Principal{User: u}, bigJob(100+i, "x"))
		if err != nil {
			t.Fatal(err)
		}
		if i != 4 {
			if _, err := s.Cancel(ctx, api.Principal{User: u}, j.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.m
	ids := func(js []*job) (out []string) {
		for _, j := range js {
			if !j.rec.Summary {
				out = append(out, j.rec.ID)
			}
		}
		return out
	}
	dump := func() string {
		users := map[string][]string{}
		for u, q := range m.userRetained {
			users[u] = ids(q)
		}
		return mustJSON(t, map[string]any{"stored": m.stored, "full": m.fullJobs, "ended": m.endedFull,
			"retained": ids(m.retained), "users": users})
	}
	want := dump()
	if m.fullJobs["alice"] != 2 || m.endedFull["bob"] != 1 || m.fullJobs["bob"] != 2 {
		t.Fatalf("counts before: %s", want)
	}
	m.limitsReady = false
	m.stored, m.fullJobs, m.endedFull, m.retained, m.userRetained = nil, nil, nil, nil, nil
	for _, j := range m.order {
		j.endT = 0
	}
	m.ensureLimits()
	if got := dump(); got != want {
		t.Fatalf("rebuilt:\n%s\nwant:\n%s", got, want)
	}
}

// TestRetentionByAge: with retain/ended-for 1, a job ended a second ago is
// summarised while nothing else happens (the loop logs a retain entry when
// one falls due), and a replay of that log gives the same state.
func TestRetentionByAge(t *testing.T) {
	cfg := Config{DataDir: t.TempDir(), Policy: "fifo", SnapshotEvery: -1}
	s, stop := runServer(t, cfg)
	addNode(t, s, "n1")
	ctx := context.Background()
	alice := api.Principal{User: "alice"}
	if err := s.Set(ctx, api.Principal{User: "admin", Admin: true}, api.Setting{Key: RetainEndedFor, Value: "1"}); err != nil {
		t.Fatal(err)
	}
	j, _, err := s.Submit(ctx, alice, bigJob(1000, "x"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Cancel(ctx, alice, j.ID); err != nil {
		t.Fatal(err)
	}
	if v, _ := s.Get(ctx, alice, j.ID); v.Summary {
		t.Fatalf("summarised at once, want after a second")
	}
	waitLocked(t, s, "the summary", func() bool { return s.m.jobs[j.ID].rec.Summary })
	s.mu.RLock()
	stored := s.m.stored["alice"]
	s.mu.RUnlock()
	if stored != 0 {
		t.Fatalf("alice has %d spec bytes kept in full after retention", stored)
	}
	before := state(t, s)
	stop()
	s, stop = runServer(t, cfg)
	defer stop()
	if after := state(t, s); after != before || s.Replay.Diverged != 0 {
		t.Fatalf("after replay (%+v):\n%s\nwant:\n%s", s.Replay, after, before)
	}
}
