package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/gandiva-sched/gandiva/internal/store"
)

// replayBatch is how many log entries are decoded together while the batch
// before them is applied.
const replayBatch = 1024

// decoded is one log entry read back: its sequence number and its entry,
// or why it could not be decoded.
type decoded struct {
	seq uint64
	e   entry
	err error
}

// errStopped ends the log scan when the applier has stopped.
var errStopped = errors.New("replay stopped")

// readLog reads the log from entry from and calls apply for each entry in order,
// stopping at the first error apply returns or the first entry that does
// not decode (which it returns, naming the entry).
//
// Decoding JSON is most of a replay's time and needs no order, so entries
// are decoded a batch at a time on every core (GOMAXPROCS), in a goroutine
// that reads ahead one batch while apply, which must see them in order,
// runs on the caller's.
func readLog(db *store.DB, from uint64, apply func(seq uint64, e *entry) error) error {
	batches := make(chan []decoded, 1)
	stop := make(chan struct{})
	var readErr error
	go func() {
		defer close(batches)
		var raw [][]byte
		var seqs []uint64
		flush := func() bool {
			out := decodeAll(seqs, raw)
			raw, seqs = nil, nil
			select {
			case batches <- out:
				return true
			case <-stop:
				return false
			}
		}
		readErr = db.Log(from, func(seq uint64, data []byte) error {
			// (data is valid only in the store's transaction: copied)
			raw, seqs = append(raw, append([]byte(nil), data...)), append(seqs, seq)
			if len(raw) == replayBatch && !flush() {
				return errStopped
			}
			return nil
		})
		if readErr == nil && len(raw) > 0 {
			flush()
		}
	}()
	var err error
	for b := range batches {
		if err != nil {
			continue // draining after a stop
		}
		for i := range b {
			if b[i].err != nil {
				err = fmt.Errorf("log entry %d: %w", b[i].seq, b[i].err)
				break
			}
			if err = apply(b[i].seq, &b[i].e); err != nil {
				break
			}
		}
		if err != nil {
			close(stop)
		}
	}
	if err != nil {
		return err
	}
	return readErr
}

// decodeAll decodes the entries raw (with sequence numbers seqs) on up to
// GOMAXPROCS goroutines.
func decodeAll(seqs []uint64, raw [][]byte) []decoded {
	out := make([]decoded, len(raw))
	workers := min(runtime.GOMAXPROCS(0), (len(raw)+63)/64)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(raw); i += workers {
				out[i].seq = seqs[i]
				out[i].err = json.Unmarshal(raw[i], &out[i].e)
			}
		}()
	}
	wg.Wait()
	return out
}
