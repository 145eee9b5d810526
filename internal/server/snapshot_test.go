package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/codec"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/store"
)

// snapshotWorkload drives a server through jobs that pre-run, run, report
// progress, finish, fail and are cancelled, on two agents, taking a
// snapshot (snapshotNow) every snapEvery steps (0: never); it returns the
// agents.
func snapshotWorkload(t *testing.T, s *Server, steps, snapEvery int) []*fakeAgent {
	t.Helper()
	ctx := context.Background()
	alice := api.Principal{User: "alice"}
	agents := []*fakeAgent{{t: t, s: s, name: "n1"}, {t: t, s: s, name: "n2"}}
	for _, a := range agents {
		a.register()
	}
	done := map[string]float64{}
	for step := 0; step < steps; step++ {
		if step%3 == 0 {
			key := fmt.Sprintf("k%d", step)
			if _, _, err := s.Submit(ctx, alice, &api.JobRequest{Command: []string{"train"}, GPUs: 1 + step%2, IdempotencyKey: key}); err != nil {
				t.Fatal(err)
			}
		}
		if step%11 == 5 {
			if _, err := s.Cancel(ctx, alice, fmt.Sprintf("j%d", step/3)); err != nil && !api.IsStatus(err, 409) {
				t.Fatal(err)
			}
		}
		for _, a := range agents {
			var reps []api.Report
			for _, it := range a.assignments() {
				k := fmt.Sprintf("%s/%d/%d", it.Job, it.Attempt, it.Rank)
				r := api.Report{Job: it.Job, Attempt: it.Attempt, Rank: it.Rank}
				switch {
				case it.Want == api.WantKill || it.Want == api.WantCheckpoint:
					r.Kind, r.Outcome = api.RepExited, "killed"
				case it.Want == api.WantSuspend:
					r.Kind, r.Mode = api.RepSuspended, "memory"
				case it.PreRun:
					r.Kind, r.Outcome = api.RepExited, "finished"
				case done[k] >= 30:
					r.Kind, r.Outcome, r.Done = api.RepExited, "finished", done[k]
				case step%17 == 3:
					r.Kind, r.Outcome, r.Message = api.RepExited, "failed", "boom"
				default:
					done[k] += 10
					r.Kind, r.Done, r.IterTime = api.RepProgress, done[k], 0.5
				}
				reps = append(reps, api.Report{Job: it.Job, Attempt: it.Attempt, Rank: it.Rank, Kind: api.RepStarted}, r)
			}
			if len(reps) > 0 {
				a.report(reps...)
			}
		}
		if snapEvery > 0 && step%snapEvery == snapEvery-1 {
			if err := s.snapshotNow(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	return agents
}

// TestSnapshotRestart: a server that took snapshots while it ran restarts
// from the newest (replaying only the entries after it) into exactly the
// state it had; the log keeps the entries after the older snapshot only;
// the job records and the whole change history stay.
func TestSnapshotRestart(t *testing.T) {
	dir := t.TempDir()
	fp := engine.DefaultFailurePolicy()
	fp.Backoff = 0.01
	cfg := Config{DataDir: dir, Policy: "gandiva", PolicyParams: map[string]string{"quantum": "1"}, PreRun: true, Failure: &fp,
		CheckpointEvery: 5, SnapshotEvery: -1}
	s, stop := runServer(t, cfg)
	snapshotWorkload(t, s, 40, 4)
	// a few entries after the last snapshot
	if _, _, err := s.Submit(context.Background(), api.Principal{User: "bob"}, &api.JobRequest{Command: []string{"x"}, GPUs: 1}); err != nil {
		t.Fatal(err)
	}
	before := state(t, s)
	last := s.nextSeq - 1
	stop()

	db, err := store.Open(filepath.Join(dir, "gandiva.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	infos, _ := db.Snapshots()
	first, _ := db.FirstSeq()
	changes, _ := db.ChangesLen()
	jobs := 0
	db.Jobs(func(string, []byte) error { jobs++; return nil })
	db.Close()
	if len(infos) != 2 || infos[0].Seq >= last || first != infos[1].Seq+1 {
		t.Fatalf("snapshots %+v, first entry %d, last %d: want the two newest, and the log from the older one on", infos, first, last)
	}

	s2, stop2 := runServer(t, cfg)
	if s2.Replay.Snapshot != infos[0].Seq || s2.Replay.Snapshot+uint64(s2.Replay.Entries) != last || s2.Replay.Diverged != 0 {
		t.Fatalf("recovery %+v; want from the snapshot at %d to entry %d, no divergence", s2.Replay, infos[0].Seq, last)
	}
	if after := state(t, s2); after != before {
		t.Fatalf("state after the restart differs.\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if n, _ := s2.db.ChangesLen(); n != changes || jobs != len(s2.m.order) {
		t.Fatalf("change history %d (was %d), job records %d of %d", n, changes, jobs, len(s2.m.order))
	}
	// The restarted server goes on, and a restart of it is the same again.
	for _, a := range snapshotWorkload(t, s2, 9, 4) {
		_ = a
	}
	before = state(t, s2)
	stop2()
	s3, stop3 := runServer(t, cfg)
	defer stop3()
	if after := state(t, s3); after != before || s3.Replay.Diverged != 0 {
		t.Fatalf("second restart: diverged %d; state differs.\nbefore:\n%s\nafter:\n%s", s3.Replay.Diverged, before, after)
	}
}

// TestSnapshotFallback: a newest snapshot that cannot be read gives way to
// the older one and the entries after it; with neither readable and the
// log compacted, the server refuses to start, saying why.
func TestSnapshotFallback(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{DataDir: dir, Policy: "gandiva", PreRun: true, SnapshotEvery: -1}
	s, stop := runServer(t, cfg)
	snapshotWorkload(t, s, 30, 4)
	before := state(t, s)
	stop()
	corrupt := func(seq uint64) {
		// (through bbolt: the store has no way to damage its own data)
		db, err := bolt.Open(filepath.Join(dir, "gandiva.db"), 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		err = db.Update(func(tx *bolt.Tx) error {
			var k [8]byte
			binary.BigEndian.PutUint64(k[:], seq)
			b := tx.Bucket([]byte("snapshots")).Bucket(k[:])
			data := bytes.Clone(b.Get([]byte("data/000000")))
			data[len(data)/2] ^= 0xff
			data[len(data)/3] ^= 0xff
			return b.Put([]byte("data/000000"), data)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	db, _ := store.Open(filepath.Join(dir, "gandiva.db"), store.Options{})
	infos, _ := db.Snapshots()
	db.Close()
	if len(infos) != 2 {
		t.Fatalf("%d snapshots", len(infos))
	}
	corrupt(infos[0].Seq)
	s2, stop2 := runServer(t, cfg)
	if s2.Replay.Snapshot != infos[1].Seq || s2.Replay.Diverged != 0 {
		t.Fatalf("recovery %+v, want from the older snapshot %d", s2.Replay, infos[1].Seq)
	}
	if after := state(t, s2); after != before {
		t.Fatalf("state from the older snapshot differs.\nbefore:\n%s\nafter:\n%s", before, after)
	}
	stop2()
	corrupt(infos[1].Seq)
	_, err := Open(cfg)
	if err == nil || !strings.Contains(err.Error(), "compacted") {
		t.Fatalf("open with no readable snapshot and a compacted log: %v", err)
	}
}

// TestSnapshotsTakenByTheLoop: with small limits, the loop snapshots by
// itself and compacts the log.
func TestSnapshotsTakenByTheLoop(t *testing.T) {
	dir := t.TempDir()
	// (a clock of the test's: the state shows times relative to now, such as
	// a start-up's "starting (1 s)", which the wall clock changes between
	// the two servers on a loaded machine)
	at := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	cfg := Config{DataDir: dir, Policy: "gandiva", PreRun: true, SnapshotEvery: 5, Clock: func() time.Time { return at }}
	s, stop := runServer(t, cfg)
	ctx := context.Background()
	(&fakeAgent{t: t, s: s, name: "n1"}).register() // (jobs are admitted only once a node could run them)
	for i := 0; i < 200 && len(mustSnapshots(t, s)) < 2; i++ {
		if _, _, err := s.Submit(ctx, api.Principal{User: "u"}, &api.JobRequest{Command: []string{"x"}, GPUs: 1}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	before := state(t, s)
	stop()
	if _, err := os.Stat(filepath.Join(dir, "gandiva.db")); err != nil {
		t.Fatal(err)
	}
	s2, stop2 := runServer(t, cfg)
	defer stop2()
	if s2.Replay.Snapshot == 0 {
		t.Fatalf("no snapshot taken by the loop: %+v", s2.Replay)
	}
	if after := state(t, s2); after != before {
		t.Fatalf("state differs.\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

func mustSnapshots(t *testing.T, s *Server) []store.SnapshotInfo {
	t.Helper()
	infos, err := s.db.Snapshots()
	if err != nil {
		t.Fatal(err)
	}
	return infos
}

// TestAnswersWhileRecovering: while the state is being recovered
// (OpenAsync; held here), the API answers what needs no state at once,
// holds the rest until the state is back, and then answers it.
func TestAnswersWhileRecovering(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{DataDir: dir, Policy: "fifo"}
	s, stop := runServer(t, cfg)
	(&fakeAgent{t: t, s: s, name: "n1"}).register()
	if _, _, err := s.Submit(context.Background(), api.Principal{User: "alice"}, &api.JobRequest{Command: []string{"x"}, GPUs: 1}); err != nil {
		t.Fatal(err)
	}
	tok := s.AdminToken
	stop()

	gate := make(chan struct{})
	cfg.recoverGate = gate
	s2, err := OpenAsync(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	loop := make(chan error, 1)
	go func() { loop <- s2.Run(ctx) }()
	srv := newHTTPTest(s2)
	defer srv.Close()
	cl := api.NewClient(srv.URL, tok)
	if w, err := cl.WhoAmI(ctx); err != nil || w.User != "admin" {
		t.Fatalf("whoami while recovering: %+v, %v", w, err)
	}
	if _, err := http.Get(srv.URL + "/healthz"); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 2)
	go func() { _, err := cl.Get(ctx, "j1"); got <- err }()
	go func() {
		_, err := cl.Submit(ctx, &api.JobRequest{Command: []string{"y"}, GPUs: 1})
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("a call that needs the state answered while it was being recovered: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(gate)
	for i := 0; i < 2; i++ {
		if err := <-got; err != nil {
			t.Fatalf("after the recovery: %v", err)
		}
	}
	if js, err := cl.List(ctx, api.ListOptions{All: true}); err != nil || len(js) != 2 {
		t.Fatalf("jobs %v, %v", js, err)
	}
	cancel()
	<-loop
	s2.Close()
}

// TestSnapshotEqualsReplay: the log a server wrote (jobs, agents, reports,
// failures, cancels, quota settings and a submission past a quota),
// applied to a fresh machine whole, and applied with the machine
// snapshotted and restored every so many entries, records the same state
// changes and ends in the same state: the machine's part of the state
// (jobs and their records, settings, the per-user counts, the executor,
// the timeline) and the engine's (but for the policy's own state: that
// the policy behaves the same after a restore is what the changes show,
// and the engine's tests) encode to the same bytes.
func TestSnapshotEqualsReplay(t *testing.T) {
	dir := t.TempDir()
	fp := engine.DefaultFailurePolicy()
	fp.Backoff = 0.01
	cfg := Config{DataDir: dir, Policy: "gandiva", PolicyParams: map[string]string{"quantum": "1"}, PreRun: true, Failure: &fp,
		CheckpointEvery: 5, SnapshotEvery: -1}
	s, stop := runServer(t, cfg)
	snapshotWorkload(t, s, 30, 0)
	snapshotWorkloadSettings(t, s, api.Principal{User: "admin", Admin: true})
	snapshotWorkload(t, s, 9, 0)
	stop()
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var entries [][]byte
	if err := readLog(s.db, 1, func(seq uint64, e *entry) error {
		data, err := json.Marshal(e)
		entries = append(entries, data)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(entries) < 50 {
		t.Fatalf("only %d entries", len(entries))
	}
	run := func(every int) (string, []change) {
		pol, err := s.cfg.newPolicy()
		if err != nil {
			t.Fatal(err)
		}
		m := newMachine(s.machineConfig(pol))
		var changes []change
		for i, data := range entries {
			var e entry
			if err := json.Unmarshal(data, &e); err != nil {
				t.Fatal(err)
			}
			m.apply(uint64(i+1), &e)
			changes = append(changes, m.takeChanges()...)
			if every > 0 && (i+1)%every == 0 {
				data, err := m.marshal(0)
				if err != nil {
					t.Fatal(err)
				}
				pol, _ := s.cfg.newPolicy()
				if m, err = restoreMachine(s.machineConfig(pol), data); err != nil {
					t.Fatal(err)
				}
			}
		}
		if m.settings["quota/queued-jobs/carol"] != "1" || m.unended["carol"] != 1 || m.submits == 0 || m.rec.Version() == 0 {
			t.Fatalf("the workload lacks what the test is about: settings %v, unended %v, %d submissions, timeline version %d",
				m.settings, m.unended, m.submits, m.rec.Version())
		}
		mdata, err := codec.Marshal(m, snapshotOptions)
		if err != nil {
			t.Fatal(err)
		}
		st, err := m.eng.Export()
		if err != nil {
			t.Fatal(err)
		}
		st.PolicyState = nil
		edata, err := codec.Marshal(st, nil)
		if err != nil {
			t.Fatal(err)
		}
		return string(mdata) + string(edata), changes
	}
	want, wantChanges := run(0)
	for _, every := range []int{1, 7, len(entries) / 2} {
		got, changes := run(every)
		if c, w := changesText(changes), changesText(wantChanges); c != w {
			t.Fatalf("restored every %d entries: other state changes\n%s\nwant:\n%s", every, c, w)
		}
		if got != want {
			t.Fatalf("restored every %d entries: the state encodes to other bytes (%d, whole replay %d)", every, len(got), len(want))
		}
	}
}

// snapshotWorkloadSettings sets quotas (a default and one user's) and has
// that user submit past hers.
func snapshotWorkloadSettings(t *testing.T, s *Server, admin api.Principal) {
	t.Helper()
	ctx := context.Background()
	for _, st := range []api.Setting{{Key: "quota/queued-jobs", Value: "500"}, {Key: "quota/queued-jobs/carol", Value: "1"}} {
		if err := s.Set(ctx, admin, st); err != nil {
			t.Fatal(err)
		}
	}
	carol := api.Principal{User: "carol"}
	for i := 0; i < 2; i++ {
		if _, _, err := s.Submit(ctx, carol, &api.JobRequest{Command: []string{"c"}, GPUs: 1}); err != nil && !api.IsStatus(err, 429) {
			t.Fatal(err)
		}
	}
}
