package kube

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// errDispatchFull is the error of a call refused because its dispatcher's
// queue was full; its workload is looked at again after a back-off.
var errDispatchFull = errors.New("kube: API call queue full; retried later")

// dispatcher runs the scheduler's API calls on a pool of workers, in the
// shape of kube-scheduler's API dispatcher.
//
// Contract: Add never blocks. It queues a call (FIFO), unless the call's
// key has a call queued already, which the newer call replaces in its
// place in line (the older one is never made; its fail result is
// reported, as if it had failed), or the queue holds max calls, when it
// refuses the call (false) and the caller reports it as failed. At most
// one call per key is in flight: a call whose key is in flight waits in
// line until the answer is taken. Each call runs with the context given
// to run (cancelled at the end of the term of leadership) and a timeout of
// its own. Answers are kept until Take, in the order they came; a key is
// Busy from Add until its answer is taken. notify is called (from a
// worker) after each answer, and must not block.
type dispatcher struct {
	mu      sync.Mutex
	cond    *sync.Cond
	line    []string         // queued keys, in order
	queued  map[string]op    // by key
	flying  map[string]bool  // keys in flight, or answered and not taken
	answers []opResult       // answered, not taken
	max     int              // most calls queued
	timeout time.Duration    // per call
	notify  func()           // an answer is ready
	stopped bool             // run's context ended
	stats   dispatchStats    // counters
	started func(key string) // a call starts (tests; nil)
}

// dispatchStats counts what a dispatcher did.
type dispatchStats struct {
	Calls, Replaced, Refused int
}

func newDispatcher(max int, timeout time.Duration, notify func()) *dispatcher {
	d := &dispatcher{queued: map[string]op{}, flying: map[string]bool{}, max: max, timeout: timeout, notify: notify}
	d.cond = sync.NewCond(&d.mu)
	return d
}

// Add queues call o (see the type's contract); false means refused.
func (d *dispatcher) Add(o op) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return false
	}
	if old, ok := d.queued[o.key]; ok {
		d.queued[o.key] = o
		d.stats.Replaced++
		r := old.fail
		r.err = errReplaced
		d.answer(old, r)
		return true
	}
	if len(d.line) >= d.max {
		d.stats.Refused++
		return false
	}
	d.queued[o.key] = o
	d.line = append(d.line, o.key)
	if !d.flying[o.key] {
		d.cond.Signal() // (one whose key is in flight waits for Take)
	}
	return true
}

// errReplaced is the answer of a queued call that a newer one for the
// same key replaced.
var errReplaced = errors.New("kube: API call replaced by a newer one before it was made")

// answer records r as o's answer (d.mu held).
func (d *dispatcher) answer(o op, r opResult) {
	r.key, r.wl, r.tok = o.key, o.wl, o.tok
	d.answers = append(d.answers, r)
	if d.notify != nil {
		d.notify()
	}
}

// Busy reports whether a call for key is queued, in flight, or answered
// and not taken.
func (d *dispatcher) Busy(key string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.flying[key] {
		return true
	}
	_, ok := d.queued[key]
	return ok
}

// Take returns the answers not taken yet, in the order they came, and
// frees their keys.
func (d *dispatcher) Take() []opResult {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := d.answers
	d.answers = nil
	wake := false
	for _, r := range out {
		if r.err == errReplaced {
			continue // (a replaced call was never in flight)
		}
		delete(d.flying, r.key)
		if _, ok := d.queued[r.key]; ok {
			wake = true // a call waited for this answer to be taken
		}
	}
	if wake {
		d.cond.Broadcast()
	}
	return out
}

// Len is the number of calls queued.
func (d *dispatcher) Len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.line)
}

// Stats returns the counters.
func (d *dispatcher) Stats() dispatchStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stats
}

// next waits for a call whose key is not in flight and takes it from the
// line; ok is false once ctx ended.
func (d *dispatcher) next(ctx context.Context) (op, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for {
		if ctx.Err() != nil || d.stopped {
			return op{}, false
		}
		for i, k := range d.line {
			if d.flying[k] {
				continue
			}
			o := d.queued[k]
			delete(d.queued, k)
			if i == 0 {
				d.line = d.line[1:]
			} else {
				d.line = slices.Delete(d.line, i, i+1)
			}
			d.flying[k] = true
			d.stats.Calls++
			return o, true
		}
		d.cond.Wait()
	}
}

// run runs workers calls at a time until ctx ends; the calls still queued
// then are dropped (the term is over), and run returns once every worker
// has.
func (d *dispatcher) run(ctx context.Context, workers int) {
	stop := context.AfterFunc(ctx, func() {
		d.mu.Lock()
		d.stopped = true
		d.line, d.queued = nil, map[string]op{}
		d.cond.Broadcast()
		d.mu.Unlock()
	})
	defer stop()
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				o, ok := d.next(ctx)
				if !ok {
					return
				}
				if d.started != nil {
					d.started(o.key)
				}
				cctx, cancel := context.WithTimeout(ctx, d.timeout)
				r := o.do(cctx)
				cancel()
				d.mu.Lock()
				d.answer(o, r)
				d.mu.Unlock()
			}
		}()
	}
	wg.Wait()
}
