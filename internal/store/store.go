package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"
)

var (
	bMeta    = []byte("meta")
	bUsers   = []byte("users")
	bTokens  = []byte("tokens")
	bJobs    = []byte("jobs")
	bLog     = []byte("log")
	bChanges = []byte("changes")
)

// Meta keys the store itself uses.
const (
	metaEpoch  = "epoch"
	metaBoot   = "boot"
	metaSchema = "schema"
)

// Schema is the on-disk format version; Open refuses other versions.
const Schema = "gandiva-store/v1"

// Options configure Open.
type Options struct {
	// LockTimeout bounds the wait for the database file lock (another
	// process has it open); 0 means 5 s.
	LockTimeout time.Duration
	// NoSync skips fsync: for benchmarks that isolate other costs only.
	// Never use it for a real server.
	NoSync bool
}

// DB is an open store.
type DB struct {
	b    *guard
	path string
}

// Open opens (creating if needed) the store at path, a file inside an
// existing or creatable directory. The file is private to its owner (0600).
//
// A file that exists must be a whole gandiva store: an empty, truncated or
// otherwise damaged file, or one that is not a store, is refused with an
// error wrapping ErrDamaged that names the file and says what to do; Open
// reads every page of it first (guard.go). Nothing is written to a file
// it refuses.
func Open(path string, opts Options) (*DB, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	lt := opts.LockTimeout
	if lt == 0 {
		lt = 5 * time.Second
	}
	b, existed, err := openBolt(path, &bolt.Options{Timeout: lt, NoSync: opts.NoSync})
	if err != nil {
		if errors.Is(err, bolt.ErrTimeout) {
			return nil, fmt.Errorf("store %s: another process has it open (waited %s): %w", path, lt, err)
		}
		if errors.Is(err, ErrDamaged) {
			return nil, err
		}
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	g := &guard{DB: b, path: path}
	db := &DB{b: g, path: path}
	if existed {
		if err := g.check(); err != nil {
			b.Close()
			return nil, err
		}
		err = g.View(func(tx *bolt.Tx) error {
			if k, _ := tx.Cursor().First(); k == nil {
				return nil // (no bucket at all: a first Open that stopped before its first transaction)
			}
			m := tx.Bucket(bMeta)
			if m == nil || m.Get([]byte(metaSchema)) == nil {
				return damaged(path, "the file is a bbolt database but not a gandiva store (it has no format record)")
			}
			return nil
		})
		if err != nil {
			b.Close()
			return nil, err
		}
	}
	err = g.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bMeta, bUsers, bTokens, bJobs, bLog, bChanges} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		m := tx.Bucket(bMeta)
		switch v := m.Get([]byte(metaSchema)); {
		case v == nil:
			return m.Put([]byte(metaSchema), []byte(Schema))
		case string(v) != Schema:
			return fmt.Errorf("format %q, this build reads %q", v, Schema)
		}
		return nil
	})
	if err != nil {
		b.Close()
		if errors.Is(err, ErrDamaged) {
			return nil, err
		}
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	return db, nil
}

// Close closes the database.
func (db *DB) Close() error { return db.b.Close() }

// Path is the database file.
func (db *DB) Path() string { return db.path }

// Epoch returns the store's epoch, setting it to now on first use. The
// second result is true when this call created it (a new store).
func (db *DB) Epoch(now time.Time) (time.Time, bool, error) {
	var epoch time.Time
	created := false
	err := db.b.Update(func(tx *bolt.Tx) error {
		m := tx.Bucket(bMeta)
		if v := m.Get([]byte(metaEpoch)); v != nil {
			return epoch.UnmarshalText(v)
		}
		epoch, created = now, true
		txt, err := now.MarshalText()
		if err != nil {
			return err
		}
		return m.Put([]byte(metaEpoch), txt)
	})
	if err != nil {
		return time.Time{}, false, fmt.Errorf("store: epoch: %w", err)
	}
	return epoch, created, nil
}

// Boot increments and returns the boot counter (1 on a new store).
func (db *DB) Boot() (uint64, error) {
	var n uint64
	err := db.b.Update(func(tx *bolt.Tx) error {
		m := tx.Bucket(bMeta)
		if v := m.Get([]byte(metaBoot)); v != nil {
			var err error
			if n, err = strconv.ParseUint(string(v), 10, 64); err != nil {
				return fmt.Errorf("boot counter %q: %w", v, err)
			}
		}
		n++
		return m.Put([]byte(metaBoot), []byte(strconv.FormatUint(n, 10)))
	})
	if err != nil {
		return 0, fmt.Errorf("store: boot: %w", err)
	}
	return n, nil
}

// Meta returns a metadata value set with SetMeta (nil, false if absent).
func (db *DB) Meta(key string) ([]byte, bool, error) {
	var out []byte
	err := db.b.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bMeta).Get([]byte("x/" + key)); v != nil {
			out = append([]byte(nil), v...)
		}
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("store: meta %s: %w", key, err)
	}
	return out, out != nil, nil
}

// SetMeta sets a metadata value (synced).
func (db *DB) SetMeta(key string, value []byte) error {
	err := db.b.Update(func(tx *bolt.Tx) error { return tx.Bucket(bMeta).Put([]byte("x/"+key), value) })
	if err != nil {
		return fmt.Errorf("store: meta %s: %w", key, err)
	}
	return nil
}

// Batch is what one Commit writes, atomically.
type Batch struct {
	// Entries are appended to the log, in order; Commit returns the
	// sequence number of the first (sequences start at 1 and have no gaps).
	Entries [][]byte
	// Jobs are job records to create or replace, by job ID.
	Jobs map[string][]byte
	// Changes are appended to the change history, in order.
	Changes [][]byte
}

// Empty reports whether the batch writes nothing.
func (b *Batch) Empty() bool { return len(b.Entries) == 0 && len(b.Jobs) == 0 && len(b.Changes) == 0 }

// NextSeq returns the sequence number the next log entry will get.
func (db *DB) NextSeq() (uint64, error) {
	var n uint64
	err := db.b.View(func(tx *bolt.Tx) error {
		n = tx.Bucket(bLog).Sequence() + 1
		return nil
	})
	return n, err
}

// Commit writes a batch in one transaction and syncs it to disk. Nothing
// is written when it fails.
func (db *DB) Commit(b *Batch) (first uint64, err error) {
	err = db.b.Update(func(tx *bolt.Tx) error {
		lg := tx.Bucket(bLog)
		for i, e := range b.Entries {
			seq, err := lg.NextSequence()
			if err != nil {
				return err
			}
			if i == 0 {
				first = seq
			}
			if err := lg.Put(key(seq), e); err != nil {
				return err
			}
		}
		jb := tx.Bucket(bJobs)
		for id, rec := range b.Jobs {
			if err := jb.Put([]byte(id), rec); err != nil {
				return err
			}
		}
		ch := tx.Bucket(bChanges)
		for _, c := range b.Changes {
			seq, err := ch.NextSequence()
			if err != nil {
				return err
			}
			if err := ch.Put(key(seq), c); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("store: commit: %w", err)
	}
	return first, nil
}

// Log calls fn for each log entry with sequence ≥ from, in order, until fn
// returns an error (which Log returns). The entry bytes are valid only
// during the call.
func (db *DB) Log(from uint64, fn func(seq uint64, entry []byte) error) error {
	return db.b.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bLog).Cursor()
		for k, v := c.Seek(key(from)); k != nil; k, v = c.Next() {
			if err := call(func() error { return fn(binary.BigEndian.Uint64(k), v) }); err != nil {
				return err
			}
		}
		return nil
	})
}

// Changes calls fn for each recorded state change, in order.
func (db *DB) Changes(fn func(seq uint64, change []byte) error) error {
	return db.b.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bChanges).ForEach(func(k, v []byte) error {
			return call(func() error { return fn(binary.BigEndian.Uint64(k), v) })
		})
	})
}

// Job returns a job record (nil, false if absent).
func (db *DB) Job(id string) ([]byte, bool, error) {
	var out []byte
	err := db.b.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bJobs).Get([]byte(id)); v != nil {
			out = append([]byte(nil), v...)
		}
		return nil
	})
	return out, out != nil, err
}

// Jobs calls fn for each job record in ID order.
func (db *DB) Jobs(fn func(id string, rec []byte) error) error {
	return db.b.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bJobs).ForEach(func(k, v []byte) error { return call(func() error { return fn(string(k), v) }) })
	})
}

func key(seq uint64) []byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], seq)
	return k[:]
}
