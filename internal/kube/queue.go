package kube

import (
	"slices"
	"sync"
	"time"
)

// keyKind is what a work queue key names.
type keyKind uint8

const (
	keyNode     keyKind = iota // a node, by name
	keyWorkload                // a workload, by its key (job/NS/NAME, pods/NS/NAME)
	keySettings                // the settings ConfigMap (Name "")
)

// qkey is one key of the work queue.
type qkey struct {
	kind keyKind
	name string
}

// workQueue is the loop's work queue, in the shape of kube-scheduler's
// scheduling queue: informer handlers and API call answers mark keys
// dirty (from any goroutine); the loop takes every key that is due at
// once, in order (nodes, then workloads, then the settings; by name).
//
// Contract: Add marks a key dirty now (a key is at most once in the
// queue: adds merge). Retry marks it dirty after its back-off (a failed
// API call, a conflict): the first retry waits base, each further one
// twice the last, up to max; Forget resets the back-off (the call for it
// succeeded). A key that is both added and backing off is due now: an
// informer event about it is news, not a retry. Take(now) removes and
// returns the keys due at now; NextRetry says when the next retry falls
// due (zero: none), for the loop's timer. Every mark pokes Kick. Time is
// passed in (Retry's and Take's now), so the back-off is tested without
// sleeping.
//
// Why not client-go's workqueue (TypedRateLimitingInterface): it hands
// out one key at a time from a blocking Get, with Done per key, and runs
// its delayed adds on a goroutine of its own. Our loop takes every dirty
// key at once in a fixed order (nodes before the workloads on them, then
// one engine round for all) and keeps one timer for the engine's wake-ups
// and the retries; a blocking per-key Get would need a second goroutine
// feeding the loop and would lose that order. The back-off here is the
// workqueue's ItemExponentialFailureRateLimiter's (base·2^n, capped),
// with time passed in.
type workQueue struct {
	mu      sync.Mutex
	dirty   map[qkey]bool
	backoff map[qkey]*retryRec
	base    time.Duration
	max     time.Duration
	kick    chan struct{}
	m       QueueStats
}

// retryRec is a key's back-off: failures in a row, and when it is due.
type retryRec struct {
	fails int
	due   time.Time // zero: not waiting
}

// QueueStats counts what the work queue did.
type QueueStats struct {
	// Depth is the keys dirty now, Waiting those backing off.
	Depth, Waiting int
	// Adds counts marks (merged or not), Retries the back-offs started.
	Adds, Retries int
}

func newWorkQueue(base, max time.Duration) *workQueue {
	return &workQueue{dirty: map[qkey]bool{}, backoff: map[qkey]*retryRec{}, base: base, max: max, kick: make(chan struct{}, 1)}
}

// Kick is poked (never blocking) when a key is marked.
func (q *workQueue) Kick() <-chan struct{} { return q.kick }

func (q *workQueue) poke() {
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

// Add marks k dirty now.
func (q *workQueue) Add(k qkey) {
	q.mu.Lock()
	q.dirty[k] = true
	q.m.Adds++
	q.mu.Unlock()
	q.poke()
}

// Retry marks k dirty after its back-off from now and returns the delay.
func (q *workQueue) Retry(k qkey, now time.Time) time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	r := q.backoff[k]
	if r == nil {
		r = &retryRec{}
		q.backoff[k] = r
	}
	d := q.base
	for i := 0; i < r.fails && d < q.max; i++ {
		d *= 2
	}
	d = min(d, q.max)
	r.fails++
	if due := now.Add(d); r.due.IsZero() || due.Before(r.due) {
		r.due = due
	}
	q.m.Retries++
	q.m.Adds++
	q.poke()
	return d
}

// Forget resets k's back-off.
func (q *workQueue) Forget(k qkey) {
	q.mu.Lock()
	delete(q.backoff, k)
	q.mu.Unlock()
}

// Take removes and returns the keys due at now, in order.
func (q *workQueue) Take(now time.Time) []qkey {
	q.mu.Lock()
	defer q.mu.Unlock()
	for k, r := range q.backoff {
		if !r.due.IsZero() && (!now.Before(r.due) || q.dirty[k]) {
			r.due = time.Time{}
			q.dirty[k] = true
		}
	}
	out := make([]qkey, 0, len(q.dirty))
	for k := range q.dirty {
		out = append(out, k)
	}
	clear(q.dirty)
	slices.SortFunc(out, func(a, b qkey) int {
		if a.kind != b.kind {
			return int(a.kind) - int(b.kind)
		}
		switch {
		case a.name < b.name:
			return -1
		case a.name > b.name:
			return 1
		}
		return 0
	})
	return out
}

// NextRetry is when the earliest waiting retry falls due (zero: none).
func (q *workQueue) NextRetry() time.Time {
	q.mu.Lock()
	defer q.mu.Unlock()
	var t time.Time
	for _, r := range q.backoff {
		if !r.due.IsZero() && (t.IsZero() || r.due.Before(t)) {
			t = r.due
		}
	}
	return t
}

// Stats returns the counters, with the depth now.
func (q *workQueue) Stats() QueueStats {
	q.mu.Lock()
	defer q.mu.Unlock()
	m := q.m
	m.Depth = len(q.dirty)
	for _, r := range q.backoff {
		if !r.due.IsZero() {
			m.Waiting++
		}
	}
	return m
}
