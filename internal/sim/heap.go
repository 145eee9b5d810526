package sim

import (
	"math"
	"math/bits"

	"github.com/gandiva-sched/gandiva/internal/cluster"
)

type evKind uint8

const (
	evFinish evKind = iota
	evProfile
	evActionDone
	evFail
	evTick
	evNodeDown
	evNodeUp
	evSetting // Config.Settings[job]
	evReady   // a process's first mini-batch boundary (PerfModel.StartUps), keyed to truth.placements
)

// item is one scheduled simulator event. Items are ordered by (t, seq): a
// total order, so equal times resolve by the order of scheduling.
type item struct {
	t    float64
	seq  uint64
	job  cluster.JobID
	ver  uint32
	node cluster.ServerID
	kind evKind
	user bool
	// periodic marks a progress report at an epoch boundary (ReportEvery).
	periodic bool
}

func (a *item) less(b *item) bool {
	if a.t != b.t {
		return a.t < b.t
	}
	return a.seq < b.seq
}

// eventHeap is the queue of scheduled events, popped in (t, seq) order.
//
// A job's finish is keyed to its version (truth.ver): once the version
// moves (the job is suspended, moved, or its rate changes) the scheduled
// finish is stale and a new one, if any, is pushed. Under free preemption
// most finishes go stale (on the Philly trace, 250,000 of the 313,000
// items popped), so finishes are kept apart: at most one per job, in a
// heap that knows where each job's item is, and retire takes a stale one
// out at once.
//
// (Other kinds go stale too, more rarely, and are dropped when popped.
// The loop runs a round only at times when something happened or when the
// engine asked to be woken: not at a time when every item was stale.)
type eventHeap struct {
	items []item  // every kind but evFinish
	fin   []item  // evFinish items, at most one per job
	finAt []int32 // by JobID: 1 + the index of its item in fin, 0 if none
	seq   uint64
}

// Len is the number of queued items.
func (h *eventHeap) Len() int { return len(h.items) + len(h.fin) }

// push schedules it after every item already pushed for the same time. A
// finish replaces the job's earlier one (which is stale: see retire).
func (h *eventHeap) push(it item) {
	h.seq++
	it.seq = h.seq
	if it.kind != evFinish {
		h.items = append(h.items, it)
		siftUp(h.items, len(h.items)-1, nil)
		return
	}
	h.retire(it.job)
	for int(it.job) >= len(h.finAt) {
		h.finAt = append(h.finAt, 0)
	}
	h.fin = append(h.fin, it)
	i := len(h.fin) - 1
	h.finAt[it.job] = int32(i + 1)
	siftUp(h.fin, i, h.finAt)
}

// retire takes job's scheduled finish, if any, out of the queue. The
// executor calls it whenever the job's version moves, which makes that
// finish stale.
func (h *eventHeap) retire(job cluster.JobID) {
	if int(job) >= len(h.finAt) || h.finAt[job] == 0 {
		return
	}
	h.removeFin(int(h.finAt[job] - 1))
}

// next is the time of the earliest queued item; Len must be > 0.
func (h *eventHeap) next() float64 {
	t := 0.0
	have := false
	if len(h.items) > 0 {
		t, have = h.items[0].t, true
	}
	if len(h.fin) > 0 && (!have || h.fin[0].t < t) {
		t = h.fin[0].t
	}
	return t
}

// popAt pops the next item, in (t, seq) order, if it is due at t.
func (h *eventHeap) popAt(t float64) (item, bool) {
	a := len(h.items) > 0 && h.items[0].t == t
	b := len(h.fin) > 0 && h.fin[0].t == t
	switch {
	case a && (!b || h.items[0].seq < h.fin[0].seq):
		top := h.items[0]
		n := len(h.items) - 1
		h.items[0] = h.items[n]
		h.items = h.items[:n]
		siftDown(h.items, 0, nil)
		return top, true
	case b:
		top := h.fin[0]
		h.removeFin(0)
		return top, true
	}
	return item{}, false
}

// removeFin removes fin[i] and forgets its job's position.
func (h *eventHeap) removeFin(i int) {
	h.finAt[h.fin[i].job] = 0
	n := len(h.fin) - 1
	if i != n {
		h.fin[i] = h.fin[n]
		h.finAt[h.fin[i].job] = int32(i + 1)
	}
	h.fin = h.fin[:n]
	if i < n {
		siftDown(h.fin, i, h.finAt)
		siftUp(h.fin, i, h.finAt)
	}
}

// siftUp and siftDown restore the heap order of s around s[i]; with at,
// they keep at[job] = 1 + index of the job's item.
func siftUp(s []item, i int, at []int32) {
	for i > 0 {
		p := (i - 1) / 2
		if !s[i].less(&s[p]) {
			break
		}
		s[i], s[p] = s[p], s[i]
		if at != nil {
			at[s[i].job], at[s[p].job] = int32(i+1), int32(p+1)
		}
		i = p
	}
}

func siftDown(s []item, i int, at []int32) {
	n := len(s)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && s[r].less(&s[l]) {
			m = r
		}
		if !s[m].less(&s[i]) {
			return
		}
		s[i], s[m] = s[m], s[i]
		if at != nil {
			at[s[i].job], at[s[m].job] = int32(i+1), int32(m+1)
		}
		i = m
	}
}

// timeSet is a set of times, as a Go map of float64 keys would be (−0 and
// +0 are one key), but open addressing on their bits with linear probing:
// a Go map hashed float64 keys too slowly to pay for itself here. NaN is
// never kept: add reports true and keeps nothing.
type timeSet struct {
	slot []uint64 // a time's bits + 1 (bitsOf), 0 for an empty slot
	n    int
}

func (s *timeSet) home(b uint64) int {
	return int((b * 0x9e3779b97f4a7c15) >> (64 - bits.TrailingZeros(uint(len(s.slot)))))
}

// add inserts t and reports whether it was absent.
func (s *timeSet) add(t float64) bool {
	if t != t {
		return true
	}
	if 2*(s.n+1) > len(s.slot) {
		s.grow()
	}
	b := bitsOf(t)
	mask := len(s.slot) - 1
	for i := s.home(b); ; i = (i + 1) & mask {
		switch s.slot[i] {
		case 0:
			s.slot[i] = b
			s.n++
			return true
		case b:
			return false
		}
	}
}

// remove deletes t if present, shifting back the slots after it so that
// every key stays reachable from its home slot.
func (s *timeSet) remove(t float64) {
	if t != t || s.n == 0 {
		return
	}
	b := bitsOf(t)
	mask := len(s.slot) - 1
	i := s.home(b)
	for s.slot[i] != b {
		if s.slot[i] == 0 {
			return
		}
		i = (i + 1) & mask
	}
	for j := (i + 1) & mask; s.slot[j] != 0; j = (j + 1) & mask {
		// move slot j into the hole at i if its home is not in (i, j]
		if h := s.home(s.slot[j]); (j-h)&mask >= (j-i)&mask {
			s.slot[i] = s.slot[j]
			i = j
		}
	}
	s.slot[i] = 0
	s.n--
}

// bitsOf is t's slot value: its bits + 1, −0 taken as +0.
func bitsOf(t float64) uint64 {
	if t == 0 {
		t = 0 // (−0 == 0: one key)
	}
	return math.Float64bits(t) + 1
}

func (s *timeSet) grow() {
	old := s.slot
	s.slot = make([]uint64, max(64, 2*len(old)))
	s.n = 0
	mask := len(s.slot) - 1
	for _, b := range old {
		if b != 0 {
			i := s.home(b)
			for s.slot[i] != 0 {
				i = (i + 1) & mask
			}
			s.slot[i] = b
			s.n++
		}
	}
}
