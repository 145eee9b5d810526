package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"sort"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Snapshots and compaction.
//
// A snapshot is the server's whole state as of a log entry (opaque bytes,
// package server's), so that a restart reads it and replays only the
// entries after it. The store keeps the two newest snapshots, each in a
// bucket of its own under "snapshots" (its info and its data in chunks),
// and the log entries after the older of the two: so if the newest cannot
// be read, the older one and the entries after it still rebuild the state.
// Older entries are deleted when a snapshot is saved (compaction): the log
// is bounded by two snapshot intervals. The job records and the change
// history are never compacted: they are the jobs' whole history.
//
// Saving a snapshot is one transaction: a crash before it commits leaves
// the previous snapshots and the log as they were.

var bSnapshots = []byte("snapshots")

// chunk is the size of the pieces a snapshot's data is stored in. A
// snapshot up to this size (any real one) is a single value, which a
// restart decodes where the store maps it (ViewSnapshot), with no copy;
// stores written before kept 1 MiB pieces, which are read as well. (A
// variable for the tests of larger data.)
var chunk = 1 << 30

// keepSnapshots is how many snapshots are kept.
const keepSnapshots = 2

// SnapshotInfo describes a stored snapshot.
type SnapshotInfo struct {
	// Seq is the last log entry the snapshot's state includes; replay
	// resumes at Seq+1.
	Seq uint64 `json:"seq"`
	// Changes is the length of the change history at that entry: the
	// changes after it are those of the entries after Seq.
	Changes uint64 `json:"changes"`
	// Size is the data's length in bytes and CRC its CRC-32C (checked when
	// it is read: bbolt checks its pages' structure, not their contents).
	Size    int       `json:"size"`
	CRC     uint32    `json:"crc32c"`
	Created time.Time `json:"created"`
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// SaveSnapshot stores a snapshot of the state as of log entry info.Seq (an
// entry that exists), keeps the newest keepSnapshots, and deletes the log
// entries that the oldest kept snapshot includes, in one synced
// transaction. It returns how many entries it deleted.
func (db *DB) SaveSnapshot(info SnapshotInfo, data []byte) (int, error) {
	info.Size, info.CRC = len(data), crc32.Checksum(data, castagnoli)
	meta, err := json.Marshal(info)
	if err != nil {
		return 0, fmt.Errorf("store: snapshot: %w", err)
	}
	deleted := 0
	err = db.b.Update(func(tx *bolt.Tx) error {
		if last := tx.Bucket(bLog).Sequence(); info.Seq == 0 || info.Seq > last {
			return fmt.Errorf("entry %d is not in the log (its last is %d)", info.Seq, last)
		}
		root, err := tx.CreateBucketIfNotExists(bSnapshots)
		if err != nil {
			return err
		}
		if root.Bucket(key(info.Seq)) != nil {
			return fmt.Errorf("a snapshot at entry %d exists", info.Seq)
		}
		b, err := root.CreateBucket(key(info.Seq))
		if err != nil {
			return err
		}
		if err := b.Put([]byte("info"), meta); err != nil {
			return err
		}
		for i := 0; i*chunk < len(data); i++ {
			if err := b.Put(chunkKey(i), data[i*chunk:min((i+1)*chunk, len(data))]); err != nil {
				return err
			}
		}
		// the newest keepSnapshots stay; the log keeps the entries after
		// the oldest of them
		var seqs []uint64
		if err := root.ForEachBucket(func(k []byte) error {
			seqs = append(seqs, binary.BigEndian.Uint64(k))
			return nil
		}); err != nil {
			return err
		}
		sort.Slice(seqs, func(a, b int) bool { return seqs[a] > seqs[b] })
		for _, s := range seqs[min(len(seqs), keepSnapshots):] {
			if err := root.DeleteBucket(key(s)); err != nil {
				return err
			}
		}
		if len(seqs) >= keepSnapshots {
			deleted, err = deleteLogTo(tx, seqs[keepSnapshots-1])
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("store: saving the snapshot at entry %d: %w", info.Seq, err)
	}
	return deleted, nil
}

func chunkKey(i int) []byte { return []byte(fmt.Sprintf("data/%06d", i)) }

// deleteLogTo deletes the log entries up to seq.
func deleteLogTo(tx *bolt.Tx, seq uint64) (int, error) {
	c := tx.Bucket(bLog).Cursor()
	n := 0
	for k, _ := c.First(); k != nil && binary.BigEndian.Uint64(k) <= seq; k, _ = c.Next() {
		if err := c.Delete(); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// Snapshots lists the stored snapshots, newest first.
func (db *DB) Snapshots() ([]SnapshotInfo, error) {
	var out []SnapshotInfo
	err := db.b.View(func(tx *bolt.Tx) error {
		root := tx.Bucket(bSnapshots)
		if root == nil {
			return nil
		}
		return root.ForEachBucket(func(k []byte) error {
			var info SnapshotInfo
			if err := json.Unmarshal(root.Bucket(k).Get([]byte("info")), &info); err != nil {
				return fmt.Errorf("snapshot %d: info: %w", binary.BigEndian.Uint64(k), err)
			}
			out = append(out, info)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("store: snapshots: %w", err)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Seq > out[b].Seq })
	return out, nil
}

// ErrNoSnapshot is returned by ReadSnapshot for a snapshot the store does
// not have.
var ErrNoSnapshot = errors.New("no such snapshot")

// ReadSnapshot returns the data of the snapshot at entry seq (a copy of
// its own).
func (db *DB) ReadSnapshot(seq uint64) ([]byte, error) {
	var out []byte
	err := db.b.View(func(tx *bolt.Tx) error {
		data, mapped, err := snapshotData(tx, seq)
		if mapped {
			data = bytes.Clone(data)
		}
		out = data
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: snapshot at entry %d: %w", seq, err)
	}
	return out, nil
}

// ViewSnapshot calls fn with the data of the snapshot at entry seq, in a
// read transaction, and returns fn's error as it is (or the store's, if
// the data cannot be read: ErrNoSnapshot, missing or damaged data). The
// data is valid only while fn runs: it may be the store's mapped file,
// which fn must not change, and of which it must keep nothing (copy what
// it keeps). A snapshot stored as one value (every one this build writes)
// is not copied, so a restart does not hold its state twice in memory
// while it decodes it; writes that must grow the file wait for fn.
func (db *DB) ViewSnapshot(seq uint64, fn func(data []byte) error) error {
	var fnErr error
	err := db.b.View(func(tx *bolt.Tx) error {
		data, _, err := snapshotData(tx, seq)
		if err != nil {
			return err
		}
		fnErr = call(func() error { return fn(data) })
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: snapshot at entry %d: %w", seq, err)
	}
	return fnErr
}

// snapshotData returns the data of the snapshot at entry seq, CRC-checked:
// the mapped value itself (mapped: valid only in tx) when it is stored in
// one chunk, else the chunks joined in a new buffer.
func snapshotData(tx *bolt.Tx, seq uint64) (data []byte, mapped bool, err error) {
	root := tx.Bucket(bSnapshots)
	if root == nil || root.Bucket(key(seq)) == nil {
		return nil, false, ErrNoSnapshot
	}
	b := root.Bucket(key(seq))
	var info SnapshotInfo
	if err := json.Unmarshal(b.Get([]byte("info")), &info); err != nil {
		return nil, false, fmt.Errorf("info: %w", err)
	}
	first := b.Get(chunkKey(0))
	switch {
	case first == nil && info.Size > 0:
		return nil, false, fmt.Errorf("chunk 0 of %d bytes is missing", info.Size)
	case len(first) == info.Size:
		data, mapped = first, true
	default:
		data = make([]byte, 0, info.Size)
		for i, n := 0, 0; n < info.Size; i++ {
			v := b.Get(chunkKey(i))
			if len(v) == 0 {
				return nil, false, fmt.Errorf("chunk %d of %d bytes is missing", i, info.Size)
			}
			data = append(data, v...)
			n += len(v)
		}
	}
	if len(data) != info.Size {
		return nil, false, fmt.Errorf("%d bytes, its info says %d", len(data), info.Size)
	}
	if c := crc32.Checksum(data, castagnoli); c != info.CRC {
		return nil, false, fmt.Errorf("its data is damaged (CRC-32C %08x, recorded %08x)", c, info.CRC)
	}
	return data, mapped, nil
}

// FirstSeq returns the sequence number of the first entry the log keeps
// (1 before any compaction), or NextSeq when it is empty.
func (db *DB) FirstSeq() (uint64, error) {
	var n uint64
	err := db.b.View(func(tx *bolt.Tx) error {
		lg := tx.Bucket(bLog)
		if k, _ := lg.Cursor().First(); k != nil {
			n = binary.BigEndian.Uint64(k)
		} else {
			n = lg.Sequence() + 1
		}
		return nil
	})
	return n, err
}

// ChangesLen returns the length of the change history (the sequence
// number of its last change).
func (db *DB) ChangesLen() (uint64, error) {
	var n uint64
	err := db.b.View(func(tx *bolt.Tx) error {
		n = tx.Bucket(bChanges).Sequence()
		return nil
	})
	return n, err
}

// ChangesFrom calls fn for each recorded state change with sequence ≥
// from, in order, until fn returns an error (which it returns).
func (db *DB) ChangesFrom(from uint64, fn func(seq uint64, change []byte) error) error {
	return db.b.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bChanges).Cursor()
		for k, v := c.Seek(key(from)); k != nil; k, v = c.Next() {
			if err := call(func() error { return fn(binary.BigEndian.Uint64(k), v) }); err != nil {
				return err
			}
		}
		return nil
	})
}
