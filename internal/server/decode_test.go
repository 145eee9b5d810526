package server

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/store"
)

// logStore is a store whose log holds n entries (entry i is a setting with
// key k<i>), with entry bad (1-based; 0: none) not JSON.
func logStore(t *testing.T, n, bad int) *store.DB {
	t.Helper()
	db, err := store.Open(filepath.Join(t.TempDir(), "gandiva.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	var b store.Batch
	for i := 1; i <= n; i++ {
		e := fmt.Sprintf(`{"kind": "setting", "key": "k%d", "value": "v"}`, i)
		if i == bad {
			e = `{"kind": "setting", "key": `
		}
		b.Entries = append(b.Entries, []byte(e))
	}
	if _, err := db.Commit(&b); err != nil {
		t.Fatal(err)
	}
	return db
}

// TestReadLog: entries come back decoded, in order, across batches; a
// corrupt entry stops the replay there, naming it, after every entry
// before it was applied; an error of apply stops it too; nothing hangs.
func TestReadLog(t *testing.T) {
	for _, n := range []int{0, 1, replayBatch - 1, replayBatch, 3*replayBatch + 17} {
		db := logStore(t, n, 0)
		next := uint64(1)
		err := readLog(db, 1, func(seq uint64, e *entry) error {
			if seq != next || e.Key != fmt.Sprintf("k%d", seq) {
				return fmt.Errorf("got entry %d (%q), want %d", seq, e.Key, next)
			}
			next++
			return nil
		})
		if err != nil || next != uint64(n)+1 {
			t.Fatalf("%d entries: %v after %d", n, err, next-1)
		}
	}
	for _, bad := range []int{1, 700, replayBatch + 1, 2*replayBatch + 5} {
		db := logStore(t, 3*replayBatch, bad)
		applied := 0
		err := readLog(db, 1, func(uint64, *entry) error { applied++; return nil })
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("log entry %d:", bad)) || applied != bad-1 {
			t.Fatalf("corrupt entry %d: err %v after %d applied; want an error naming it after %d", bad, err, applied, bad-1)
		}
	}
	stop := errors.New("stop")
	db := logStore(t, 5*replayBatch, 0)
	applied := 0
	err := readLog(db, 1, func(seq uint64, _ *entry) error {
		applied++
		if seq == 10 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || applied != 10 {
		t.Fatalf("apply failing at entry 10: err %v after %d applied", err, applied)
	}
}
