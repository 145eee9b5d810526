package kube

import (
	"cmp"
	"slices"
	"time"
)

// assumeCache is the scheduler's assumed state, in the shape of
// kube-scheduler's cache of assumed pods: what this term's API calls
// changed that the informers do not show yet. Each key moves through a
// small state machine:
//
//	Assume (the call is made)      → in flight (value v)
//	Finish ok (the call answered)  → done (value v, or the one the call returned), with an expiry
//	Finish failed                  → back to the last done value, or gone
//	Confirm (the informer shows it)→ gone, or, with keep, marked shown
//	Forget (the object is gone)    → gone
//	Expire (done, never confirmed past its expiry) → gone
//
// Contract: a Finish carries the token its Assume returned, and is
// ignored when the key was confirmed, forgotten or assumed again since
// (an answer that comes after the informer showed the call's effect, or
// after a newer call, changes nothing); Confirm and Forget of an unknown
// key do nothing. With keep (written assignments: they stand for the term
// whatever the object shows) a confirmed entry stays, marked shown, until
// Forget; keep entries never expire. A ttl of 0 means no expiry. Time is
// passed in. It is owned by the loop goroutine: no locking.
type assumeCache[K cmp.Ordered, V any] struct {
	m    map[K]*assumed[V]
	ttl  time.Duration
	keep bool
	tok  uint64
}

// assumed is one key's entry.
type assumed[V any] struct {
	tok      uint64 // the token of the call in flight (0: none)
	flying   bool
	inflight V // the call in flight's value
	done     bool
	value    V    // the last call answered ok
	shown    bool // the informer showed value (keep)
	deadline time.Time
}

func newAssumeCache[K cmp.Ordered, V any](ttl time.Duration, keep bool) *assumeCache[K, V] {
	return &assumeCache[K, V]{m: map[K]*assumed[V]{}, ttl: ttl, keep: keep}
}

// Assume records a call made for k with value v, and returns the token its
// Finish must carry.
func (c *assumeCache[K, V]) Assume(k K, v V) uint64 {
	e := c.m[k]
	if e == nil {
		e = &assumed[V]{}
		c.m[k] = e
	}
	c.tok++
	e.tok, e.flying, e.inflight = c.tok, true, v
	return c.tok
}

// Finish records the answer to the call with token tok: ok makes its value
// (ret when set, else the assumed one) the done value, expiring at
// now+ttl; a failure drops the call, leaving the last done value if any.
// It reports whether the answer was taken (false: stale or unknown).
func (c *assumeCache[K, V]) Finish(k K, tok uint64, ok bool, ret *V, now time.Time) bool {
	e := c.m[k]
	if e == nil || !e.flying || e.tok != tok {
		return false
	}
	v := e.inflight
	var zero V
	e.flying, e.tok, e.inflight = false, 0, zero
	if !ok {
		if !e.done {
			delete(c.m, k)
		}
		return true
	}
	if ret != nil {
		v = *ret
	}
	e.done, e.value, e.shown = true, v, false
	if c.ttl > 0 {
		e.deadline = now.Add(c.ttl)
	}
	return true
}

// Confirm records that the informer shows k's call took effect: the entry
// goes (with keep: its done value is marked shown and stays).
func (c *assumeCache[K, V]) Confirm(k K) {
	e := c.m[k]
	if e == nil {
		return
	}
	if c.keep {
		if e.done {
			e.shown = true
		}
		return
	}
	delete(c.m, k)
}

// Forget drops k (its object is gone, or its record is out of date).
func (c *assumeCache[K, V]) Forget(k K) { delete(c.m, k) }

// Expire drops the done entries past their expiry with no call in flight
// and returns their keys, in order, and values.
func (c *assumeCache[K, V]) Expire(now time.Time) ([]K, []V) {
	if c.ttl == 0 || c.keep {
		return nil, nil
	}
	var out []K
	for k, e := range c.m {
		if e.done && !e.flying && !now.Before(e.deadline) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	vs := make([]V, len(out))
	for i, k := range out {
		vs[i] = c.m[k].value
		delete(c.m, k)
	}
	return out, vs
}

// Get returns k's value: the call in flight's, else the last done one.
func (c *assumeCache[K, V]) Get(k K) (V, bool) {
	e := c.m[k]
	if e == nil {
		var zero V
		return zero, false
	}
	if e.flying {
		return e.inflight, true
	}
	return e.value, true
}

// InFlight returns the value of k's call in flight, if any.
func (c *assumeCache[K, V]) InFlight(k K) (V, bool) {
	e := c.m[k]
	if e == nil || !e.flying {
		var zero V
		return zero, false
	}
	return e.inflight, true
}

// Done returns k's last done value and whether the informer showed it.
func (c *assumeCache[K, V]) Done(k K) (v V, shown, ok bool) {
	e := c.m[k]
	if e == nil || !e.done {
		return v, false, false
	}
	return e.value, e.shown, true
}

// MarkShown marks k's done value as shown by the informer (keep).
func (c *assumeCache[K, V]) MarkShown(k K) {
	if e := c.m[k]; e != nil && e.done {
		e.shown = true
	}
}

// Keys returns the keys, in order.
func (c *assumeCache[K, V]) Keys() []K {
	out := make([]K, 0, len(c.m))
	for k := range c.m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Range calls f for every key with its value (as Get), in no particular
// order: for sums and searches whose result does not depend on it.
func (c *assumeCache[K, V]) Range(f func(K, V) bool) {
	for k, e := range c.m {
		v := e.value
		if e.flying {
			v = e.inflight
		}
		if !f(k, v) {
			return
		}
	}
}

// Len is the number of keys.
func (c *assumeCache[K, V]) Len() int { return len(c.m) }
