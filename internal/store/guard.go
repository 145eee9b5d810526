package store

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"
)

// Damage.
//
// bbolt checks the structure of its meta pages (a checksum) when it opens
// a file, and nothing else: a damaged branch, leaf or freelist page makes
// it panic, or fault on an address past the end of its mapping, whenever
// the page is read, at Open or in any later transaction. A store must
// never crash the server that way, nor be mistaken for a new one. So:
//
//   - Open refuses a file that exists but is empty (a zero-length
//     gandiva.db is a damaged store, not a new one: bbolt would silently
//     start a new database in it), one that is not a gandiva store, and
//     one whose pages reach past its end (truncated);
//   - Open then reads every page of the store once (every bucket, key and
//     value: check), then runs bbolt's own consistency check (freelist,
//     references, key order) over it; docs/PERFORMANCE.md has its cost;
//   - every transaction (guard.View, guard.Update) runs with faults turned
//     into panics (debug.SetPanicOnFault) and turns a panic of bbolt's
//     into an error wrapping ErrDamaged that names the file; the store
//     refuses every later transaction then. A panic of the caller's own
//     callback (Log's fn, say), or of the store's own code (a bug), is not
//     the store's damage: it goes on as a panic (storeDamage).

// ErrDamaged is wrapped by the errors of a store whose file is damaged:
// it cannot be read, now or later, and the message says what to do.
var ErrDamaged = errors.New("the store is damaged")

// damaged returns the error for a damaged store at path.
func damaged(path string, what any) error {
	return fmt.Errorf("store %s: %w (%v). Nothing was written to it. Restore the file from a backup "+
		"(stop the server, copy the backup over it, start again); or, to start a new, empty cluster "+
		"(every job, token and history of this one lost), move it away together with the data directory's "+
		"admin.token and agent.token", path, ErrDamaged, what)
}

// guard is the store's bbolt database with its transactions guarded
// against damage (see Damage above). Its View and Update have bbolt's
// signatures, so the store's code calls them as it would bbolt's.
type guard struct {
	*bolt.DB
	path string
	// bad is the error of the first damage found; every later transaction
	// returns it.
	bad atomic.Pointer[error]
}

// checkSink keeps check's reads of the values from being optimised away.
var checkSink byte

// callerPanic carries a panic of a caller's callback through guard.
type callerPanic struct{ v any }

// View is bolt.DB.View, guarded.
func (g *guard) View(fn func(*bolt.Tx) error) error {
	return g.run(func() error { return g.DB.View(fn) })
}

// Update is bolt.DB.Update, guarded (bbolt rolls the transaction back on
// a panic).
func (g *guard) Update(fn func(*bolt.Tx) error) error {
	return g.run(func() error { return g.DB.Update(fn) })
}

func (g *guard) run(tx func() error) (err error) {
	if p := g.bad.Load(); p != nil {
		return *p
	}
	err = protect(tx, func(v any) error { return damaged(g.path, v) })
	if errors.Is(err, ErrDamaged) {
		g.bad.CompareAndSwap(nil, &err)
	}
	return err
}

// protect runs fn with faults turned into panics, and returns the error
// onPanic makes of a panic (a callerPanic is panicked again as the
// caller's).
func protect(fn func() error, onPanic func(any) error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		if cp, ok := r.(callerPanic); ok {
			panic(cp.v)
		}
		if !storeDamage(r) {
			panic(r) // (a bug of the store's own code, not its file's damage)
		}
		err = onPanic(r)
	}()
	return fn()
}

// storeDamage says whether r, a panic being recovered, is the file's
// damage: a fault reading the mapped file, or a panic raised inside bbolt
// (its checks of the pages it reads). A panic of the store's own code (a
// bug) is not: it must crash as any bug does, not be reported as a damaged
// store that the admin is told to move away. Called from the deferred
// function, where the panicking frames are still on the stack.
func storeDamage(r any) bool {
	if _, fault := r.(interface{ Addr() uintptr }); fault {
		return true
	}
	pc := make([]uintptr, 64)
	frames := runtime.CallersFrames(pc[:runtime.Callers(2, pc)])
	panicking := false
	for {
		f, more := frames.Next()
		switch {
		case f.Function == "runtime.gopanic":
			panicking = true
		case panicking && !strings.HasPrefix(f.Function, "runtime."):
			// the first frame below the panic that is not the runtime's
			return strings.HasPrefix(f.Function, "go.etcd.io/bbolt.") || strings.HasPrefix(f.Function, "go.etcd.io/bbolt/")
		}
		if !more {
			return false
		}
	}
}

// call calls a caller's callback from inside a transaction: a panic of its
// own is marked as the caller's, not the store's.
// (A fault, on an address that is not nil's, is a read of the store's
// mapped file that the callback was given: the store's damage.)
func call(fn func() error) error {
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		if _, fault := r.(interface{ Addr() uintptr }); fault {
			panic(r)
		}
		panic(callerPanic{r})
	}()
	return fn()
}

// openBolt opens the bbolt file at path, refusing an empty or truncated
// file and turning bbolt's panics into errors; existed reports whether the
// file was there before.
func openBolt(path string, o *bolt.Options) (db *bolt.DB, existed bool, err error) {
	switch st, err := os.Stat(path); {
	case err == nil && !st.Mode().IsRegular():
		return nil, true, fmt.Errorf("store %s: not a regular file (%s)", path, st.Mode().Type())
	case err == nil && st.Size() == 0:
		return nil, true, damaged(path, "the file is empty (0 bytes): a new store is never empty, so this one lost its contents")
	case err == nil:
		existed = true
	case !errors.Is(err, os.ErrNotExist):
		return nil, false, fmt.Errorf("store %s: %w", path, err)
	}
	err = protect(func() error {
		var err error
		db, err = bolt.Open(path, 0o600, o)
		return err
	}, func(v any) error { return damaged(path, v) })
	if err != nil {
		if errors.Is(err, ErrDamaged) || errors.Is(err, bolt.ErrTimeout) || !existed {
			return nil, existed, err
		}
		// bbolt's own refusals of a damaged file (invalid meta pages, a
		// checksum, a version it does not know)
		return nil, existed, damaged(path, err)
	}
	return db, existed, nil
}

// check reads the whole store once (see Damage above): its size against
// the pages it claims, every page it references, and bbolt's consistency
// check. It returns an error wrapping ErrDamaged, naming what is wrong.
func (g *guard) check() error {
	return g.View(func(tx *bolt.Tx) error {
		st, err := os.Stat(g.path)
		if err != nil {
			return fmt.Errorf("store %s: %w", g.path, err)
		}
		if tx.Size() > st.Size() {
			return damaged(g.path, fmt.Sprintf("the file is truncated: %d bytes, its pages reach %d", st.Size(), tx.Size()))
		}
		// every page, in this goroutine (faults are panics here, not in
		// bbolt's checker's), so that the checker reads mapped pages only
		var sink byte
		var walk func(b *bolt.Bucket) error
		walk = func(b *bolt.Bucket) error {
			c := b.Cursor()
			for k, v := c.First(); k != nil; k, v = c.Next() {
				if v == nil {
					if sub := b.Bucket(k); sub != nil {
						if err := walk(sub); err != nil {
							return err
						}
					}
					continue
				}
				sink ^= k[0] // (the key's first byte, and the value's last, after it, are in the file)
				if len(v) > 0 {
					sink ^= v[len(v)-1]
				}
			}
			return nil
		}
		if err := tx.ForEach(func(_ []byte, b *bolt.Bucket) error { return walk(b) }); err != nil {
			return err
		}
		checkSink = sink
		var errs []error
		for err := range tx.Check() {
			if len(errs) < 5 {
				errs = append(errs, err)
			}
		}
		if len(errs) > 0 {
			return damaged(g.path, errors.Join(errs...))
		}
		return nil
	})
}
