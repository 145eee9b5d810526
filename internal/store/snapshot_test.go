package store

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
	"unsafe"

	bolt "go.etcd.io/bbolt"
)

func commitN(t *testing.T, db *DB, n int) {
	t.Helper()
	b := &Batch{Changes: [][]byte{[]byte("c")}}
	for i := 0; i < n; i++ {
		b.Entries = append(b.Entries, []byte(fmt.Sprint("e", i)))
	}
	if _, err := db.Commit(b); err != nil {
		t.Fatal(err)
	}
}

func logSeqs(t *testing.T, db *DB) (first, last uint64, n int) {
	t.Helper()
	err := db.Log(1, func(seq uint64, _ []byte) error {
		if n == 0 {
			first = seq
		}
		last = seq
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return first, last, n
}

// smallChunks makes snapshots be stored in pieces of 1 MiB (as stores
// written before kept them) for the test.
func smallChunks(t *testing.T) {
	was := chunk
	chunk = 1 << 20
	t.Cleanup(func() { chunk = was })
}

// TestSnapshotsAndCompaction: snapshots come back as saved (data larger
// than a chunk included); the two newest are kept, and the log keeps the
// entries after the older of them; job records and changes are kept.
func TestSnapshotsAndCompaction(t *testing.T) {
	smallChunks(t)
	path := filepath.Join(t.TempDir(), "g.db")
	db := open(t, path)
	big := bytes.Repeat([]byte("0123456789abcdef"), chunk/16*2+100) // 2 chunks and a bit
	commitN(t, db, 10)
	if n, err := db.SaveSnapshot(SnapshotInfo{Seq: 4, Changes: 1, Created: time.Unix(5, 0)}, big); err != nil || n != 0 {
		t.Fatalf("first snapshot: %d deleted, %v", n, err)
	}
	commitN(t, db, 10)
	if n, err := db.SaveSnapshot(SnapshotInfo{Seq: 12, Changes: 2}, []byte("second")); err != nil || n != 4 {
		t.Fatalf("second snapshot: %d deleted (want 4: the entries of the older), %v", n, err)
	}
	if first, last, n := logSeqs(t, db); first != 5 || last != 20 || n != 16 {
		t.Fatalf("log %d..%d (%d entries), want 5..20", first, last, n)
	}
	if f, _ := db.FirstSeq(); f != 5 {
		t.Fatalf("FirstSeq %d", f)
	}
	commitN(t, db, 5)
	if _, err := db.SaveSnapshot(SnapshotInfo{Seq: 22, Changes: 3}, []byte("third")); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db = open(t, path)
	defer db.Close()
	infos, err := db.Snapshots()
	if err != nil || len(infos) != 2 || infos[0].Seq != 22 || infos[1].Seq != 12 {
		t.Fatalf("snapshots %+v, %v; want 22 and 12", infos, err)
	}
	if first, _, _ := logSeqs(t, db); first != 13 {
		t.Fatalf("log starts at %d, want 13", first)
	}
	if _, err := db.ReadSnapshot(4); !errors.Is(err, ErrNoSnapshot) {
		t.Fatalf("the oldest snapshot: %v, want ErrNoSnapshot", err)
	}
	if got, err := db.ReadSnapshot(22); err != nil || string(got) != "third" {
		t.Fatalf("ReadSnapshot(22) = %q, %v", got, err)
	}
	if n, _ := db.ChangesLen(); n != 3 {
		t.Fatalf("changes %d, want 3 (never compacted)", n)
	}
	var from []uint64
	db.ChangesFrom(2, func(seq uint64, _ []byte) error { from = append(from, seq); return nil })
	if fmt.Sprint(from) != "[2 3]" {
		t.Fatalf("ChangesFrom(2): %v", from)
	}
}

// TestSnapshotChunks: a snapshot of several chunks (as stores written
// before kept them) reads back whole, through ReadSnapshot and
// ViewSnapshot; one of a single chunk (as this build writes them) too,
// ViewSnapshot's without a copy.
func TestSnapshotChunks(t *testing.T) {
	db := open(t, filepath.Join(t.TempDir(), "g.db"))
	defer db.Close()
	commitN(t, db, 3)
	data := make([]byte, 2*(1<<20)+7)
	for i := range data {
		data[i] = byte(i * 7)
	}
	func() {
		smallChunks(t)
		if _, err := db.SaveSnapshot(SnapshotInfo{Seq: 1}, data); err != nil {
			t.Fatal(err)
		}
	}()
	chunk = 1 << 30 // (smallChunks' cleanup runs at the test's end)
	if _, err := db.SaveSnapshot(SnapshotInfo{Seq: 2}, data); err != nil {
		t.Fatal(err)
	}
	for _, seq := range []uint64{1, 2} {
		var pieces int
		db.b.View(func(tx *bolt.Tx) error {
			return tx.Bucket(bSnapshots).Bucket(key(seq)).ForEach(func(k, _ []byte) error {
				if bytes.HasPrefix(k, []byte("data/")) {
					pieces++
				}
				return nil
			})
		})
		if want := map[uint64]int{1: 3, 2: 1}[seq]; pieces != want {
			t.Errorf("snapshot %d is stored in %d pieces, want %d", seq, pieces, want)
		}
		got, err := db.ReadSnapshot(seq)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("snapshot %d: ReadSnapshot read back %d bytes, %v", seq, len(got), err)
		}
		var viewed []byte
		var mapped bool
		err = db.ViewSnapshot(seq, func(d []byte) error {
			viewed = bytes.Clone(d)
			mapped = &d[0] != &got[0] && db.isMapped(d)
			return nil
		})
		if err != nil || !bytes.Equal(viewed, data) {
			t.Fatalf("snapshot %d: ViewSnapshot gave %d bytes, %v", seq, len(viewed), err)
		}
		if mapped != (seq == 2) {
			t.Errorf("snapshot %d: ViewSnapshot gave the mapped file's bytes: %v", seq, mapped)
		}
	}
	// fn's error comes back as it is; a missing snapshot is ErrNoSnapshot
	mine := errors.New("mine")
	if err := db.ViewSnapshot(2, func([]byte) error { return mine }); err != mine {
		t.Errorf("ViewSnapshot returned %v, want fn's error", err)
	}
	if err := db.ViewSnapshot(3, func([]byte) error { t.Error("fn called"); return nil }); !errors.Is(err, ErrNoSnapshot) {
		t.Errorf("ViewSnapshot of no snapshot: %v", err)
	}
}

// isMapped reports whether b lies in the store's mapped file.
func (db *DB) isMapped(b []byte) bool {
	info := db.b.Info()
	st, err := os.Stat(db.path)
	if err != nil || len(b) == 0 {
		return false
	}
	p := uintptr(unsafe.Pointer(&b[0]))
	return p >= info.Data && p < info.Data+uintptr(st.Size())
}

// TestSnapshotRefusals: a snapshot of an entry not in the log, or of one
// that has a snapshot, is refused and changes nothing; damaged data is
// detected when read.
func TestSnapshotRefusals(t *testing.T) {
	path := filepath.Join(t.TempDir(), "g.db")
	db := open(t, path)
	commitN(t, db, 3)
	if _, err := db.SaveSnapshot(SnapshotInfo{Seq: 4}, []byte("x")); err == nil {
		t.Fatal("a snapshot past the log's end was saved")
	}
	if _, err := db.SaveSnapshot(SnapshotInfo{Seq: 2}, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SaveSnapshot(SnapshotInfo{Seq: 2}, []byte("y")); err == nil {
		t.Fatal("a second snapshot at one entry was saved")
	}
	if infos, _ := db.Snapshots(); len(infos) != 1 {
		t.Fatalf("%d snapshots", len(infos))
	}
	db.Close()
	raw, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	raw.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bSnapshots).Bucket(key(2)).Put(chunkKey(0), []byte("z"))
	})
	raw.Close()
	db = open(t, path)
	defer db.Close()
	if _, err := db.ReadSnapshot(2); err == nil {
		t.Fatal("damaged snapshot data read without an error")
	}
	if err := db.ViewSnapshot(2, func([]byte) error { t.Error("fn called with damaged data"); return nil }); err == nil {
		t.Fatal("damaged snapshot data viewed without an error")
	}
}
