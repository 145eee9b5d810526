package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// wholeStore writes a store with something in every bucket (users and
// tokens, jobs, a log, changes, snapshots with data larger than a page),
// closes it and returns its file's bytes.
func wholeStore(t *testing.T, path string) []byte {
	t.Helper()
	db := open(t, path)
	now := time.Unix(1700000000, 0)
	if _, _, err := db.CreateToken("admin", KindUser, true, "bootstrap", now); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 300; i++ {
		b := &Batch{Jobs: map[string][]byte{fmt.Sprintf("job-%04d", i): bytes.Repeat([]byte{'j'}, 600)},
			Entries: [][]byte{bytes.Repeat([]byte{'e'}, 200)}, Changes: [][]byte{[]byte(`{"c":1}`)}}
		if _, err := db.Commit(b); err != nil {
			t.Fatal(err)
		}
	}
	for _, seq := range []uint64{100, 200} {
		if _, err := db.SaveSnapshot(SnapshotInfo{Seq: seq}, bytes.Repeat([]byte{'s'}, 30000)); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// readAll reads everything the store holds, as a server's start does.
func readAll(db *DB) error {
	if _, err := db.Users(); err != nil {
		return err
	}
	if err := db.Jobs(func(string, []byte) error { return nil }); err != nil {
		return err
	}
	if err := db.Log(1, func(uint64, []byte) error { return nil }); err != nil {
		return err
	}
	if err := db.Changes(func(uint64, []byte) error { return nil }); err != nil {
		return err
	}
	infos, err := db.Snapshots()
	if err != nil {
		return err
	}
	for _, info := range infos {
		if _, err := db.ReadSnapshot(info.Seq); err != nil {
			return err
		}
	}
	return nil
}

// hwm is the number of pages in use that meta page i records.
func hwm(file []byte, i int) int {
	return int(binary.LittleEndian.Uint64(file[i*pageSize+56:]))
}

const pageSize = 4096 // (bbolt's page size on the machines the tests run on: os.Getpagesize)

// TestDamagedStoreRefused: an empty, truncated, overwritten or otherwise
// damaged file is refused at Open with an error wrapping ErrDamaged that
// names the file and says what to do, never a panic, a fault or a new
// empty store; and the file is left as it was.
func TestDamagedStoreRefused(t *testing.T) {
	if os.Getpagesize() != pageSize {
		t.Skipf("page size %d", os.Getpagesize())
	}
	dir := t.TempDir()
	orig := wholeStore(t, filepath.Join(dir, "orig.db"))
	pages := len(orig) / pageSize
	garbage := make([]byte, len(orig))
	r := rand.New(rand.NewPCG(1, 2))
	for i := range garbage {
		garbage[i] = byte(r.Uint32())
	}
	withPages := func(fn func(p []byte, id int)) []byte {
		d := bytes.Clone(orig)
		for id := 2; id < pages; id++ {
			fn(d[id*pageSize:(id+1)*pageSize], id)
		}
		return d
	}
	notGandiva := filepath.Join(dir, "other.db")
	{
		b, err := bolt.Open(notGandiva, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("something else")); return err }); err != nil {
			t.Fatal(err)
		}
		b.Close()
	}
	other, err := os.ReadFile(notGandiva)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string][]byte{
		"empty":                       {},
		"truncated half":              orig[:len(orig)/2],
		"truncated to the meta pages": orig[:2*pageSize],
		"truncated by a page":         orig[:(min(hwm(orig, 0), hwm(orig, 1))-1)*pageSize],
		"garbage":                     garbage,
		"meta pages overwritten":      append(bytes.Clone(garbage[:2*pageSize]), orig[2*pageSize:]...),
		"page types flipped":          withPages(func(p []byte, _ int) { p[8] ^= 0xff }),
		"element counts flipped":      withPages(func(p []byte, _ int) { p[10] ^= 0xff; p[11] ^= 0x5a }),
		"page ids flipped": withPages(func(p []byte, _ int) {
			binary.LittleEndian.PutUint64(p, binary.LittleEndian.Uint64(p)^0xdead_0000_0000)
		}),
		"child pointers flipped": withPages(func(p []byte, _ int) {
			// the first element of a branch page: its pgid; of a leaf: its position
			p[16+8] ^= 0x77
			p[16+9] ^= 0x10
		}),
		"not a gandiva store": other,
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".db")
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			db, err := Open(path, Options{LockTimeout: time.Second})
			if err == nil {
				rerr := readAll(db)
				db.Close()
				t.Fatalf("Open accepted the damaged store (its reads: %v)", rerr)
			}
			if !errors.Is(err, ErrDamaged) {
				t.Fatalf("err = %v, want one wrapping ErrDamaged", err)
			}
			for _, want := range []string{path, "backup", "move it away"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error does not say %q: %v", want, err)
				}
			}
			after, rerr := os.ReadFile(path)
			if rerr != nil || !bytes.Equal(after, data) {
				t.Errorf("the refused file was changed (%d bytes, were %d; %v)", len(after), len(data), rerr)
			}
		})
	}
}

// TestRandomDamageNeverCrashes: bytes flipped at random (seeded), half of
// them in the pages' headers:
// Open refuses the file (ErrDamaged), or opens it and every read of it
// returns, data or an ErrDamaged error; nothing panics or faults. (A flip
// inside a value is not bbolt's to see: the snapshots' CRC and the
// server's decoding of its documents see those.)
func TestRandomDamageNeverCrashes(t *testing.T) {
	dir := t.TempDir()
	orig := wholeStore(t, filepath.Join(dir, "orig.db"))
	refused := 0
	for seed := uint64(0); seed < 40; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		d := bytes.Clone(orig)
		for i := 0; i < 1+int(seed%8); i++ {
			off := r.IntN(len(d))
			if i%2 == 0 { // (every other one in a page's header or first elements)
				off = off/pageSize*pageSize + r.IntN(48)
			}
			d[off] ^= byte(1 + r.IntN(255))
		}
		path := filepath.Join(dir, fmt.Sprintf("seed-%d.db", seed))
		if err := os.WriteFile(path, d, 0o600); err != nil {
			t.Fatal(err)
		}
		db, err := Open(path, Options{LockTimeout: time.Second})
		if err != nil {
			if !errors.Is(err, ErrDamaged) {
				t.Fatalf("seed %d: err = %v, want one wrapping ErrDamaged", seed, err)
			}
			refused++
			continue
		}
		if err := readAll(db); err != nil && !errors.Is(err, ErrDamaged) && !strings.Contains(err.Error(), "snapshot") {
			t.Errorf("seed %d: reading: %v", seed, err)
		}
		db.Close()
	}
	t.Logf("%d of 40 damaged files refused at Open", refused)
}

// TestDamageFoundLaterIsAnError: pages damaged after Open (under a running
// server) make the reads that meet them fail with ErrDamaged, naming the
// file, and every later transaction fails the same way; the process goes
// on. A panic in the caller's own callback is still the caller's.
func TestDamageFoundLaterIsAnError(t *testing.T) {
	if os.Getpagesize() != pageSize {
		t.Skipf("page size %d", os.Getpagesize())
	}
	path := filepath.Join(t.TempDir(), "g.db")
	wholeStore(t, path)
	db := open(t, path)
	defer db.Close()
	func() {
		defer func() {
			if r := recover(); r != "the caller's" {
				t.Errorf("recovered %v, want the callback's own panic", r)
			}
		}()
		db.Jobs(func(string, []byte) error { panic("the caller's") })
	}()
	if err := readAll(db); err != nil {
		t.Fatalf("a caller's panic marked the store damaged: %v", err)
	}
	// A bug of the store's own code in a transaction is a bug, not damage
	// (it used to be reported as a damaged store, whose
	// message tells the admin to move it away).
	func() {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "nil map") {
				t.Errorf("recovered %v, want the store's own panic", r)
			}
		}()
		db.b.Update(func(*bolt.Tx) error {
			var m map[string]int
			m["bug"]++
			return nil
		})
	}()
	if err := readAll(db); err != nil {
		t.Fatalf("a bug of the store's own code marked the store damaged: %v", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	for off := int64(2 * pageSize); off < st.Size(); off += pageSize {
		if _, err := f.WriteAt([]byte{0xff, 0xff}, off+8); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	err = db.Jobs(func(string, []byte) error { return nil })
	if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), path) {
		t.Fatalf("reading the jobs of a store damaged under it: %v, want an ErrDamaged naming %s", err, path)
	}
	if _, err := db.NextSeq(); !errors.Is(err, ErrDamaged) {
		t.Fatalf("the next transaction: %v, want ErrDamaged", err)
	}
	if _, err := db.Commit(&Batch{Entries: [][]byte{[]byte("x")}}); !errors.Is(err, ErrDamaged) {
		t.Fatalf("a commit to a damaged store: %v, want ErrDamaged", err)
	}
}
