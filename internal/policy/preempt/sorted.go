package preempt

import (
	"slices"

	"github.com/gandiva-sched/gandiva/internal/cluster"
)

// Key orders jobs: lower keys first, A before B. What they hold is the
// policy's business (remaining GPU-seconds, a negated Gittins index, ...).
type Key struct{ A, B float64 }

// Compare orders keys, A then B. Keys must not be NaN.
func (k Key) Compare(o Key) int {
	switch {
	case k.A < o.A:
		return -1
	case k.A > o.A:
		return 1
	case k.B < o.B:
		return -1
	case k.B > o.B:
		return 1
	}
	return 0
}

// less is k.Compare(*o) < 0 (NaN included), in fewer branches: the sorts
// of running jobs' keys at every plan compare mostly unequal A's.
func (k Key) less(o *Key) bool { return k.A < o.A || !(k.A > o.A) && k.B < o.B }

// Item is one job in a priority list.
type Item struct {
	Key Key
	ID  cluster.JobID
	seq int64 // order among equal keys, inside a Sorted
}

// before reports whether it comes before o in a Sorted: by key, then by
// seq (Compare of the keys, then of the seqs, below 0).
func (it *Item) before(o *Item) bool {
	return it.Key.less(&o.Key) || !o.Key.less(&it.Key) && it.seq < o.seq
}

// chunk bounds the slices a Sorted is split into, so an insertion moves
// at most 2×chunk items however long the list.
const chunk = 32

// Sorted is a list of jobs sorted by Key; equal keys keep the order in
// which the policy inserted them (before or after their equals), which is
// how policies reproduce the Tiresias simulator's stable sorts. It is kept
// in chunks of at most 2×chunk items, so inserting and removing cost
// O(log n + chunk) however long the list is.
type Sorted struct {
	chunks [][]Item
	spare  [][]Item // emptied chunks, for reuse
	n      int
	where  []Item // by JobID; seq 0 means absent
	lo, hi int64  // seq of the last InsertBefore (decreasing) / InsertAfter (increasing)
}

// Len is the number of jobs in the list.
func (s *Sorted) Len() int { return s.n }

// Chunks returns the list, in order, as consecutive slices; valid until
// the next change. Pass it to Merge.
func (s *Sorted) Chunks() [][]Item { return s.chunks }

// Each calls fn for every item in order.
func (s *Sorted) Each(fn func(Item)) {
	for _, c := range s.chunks {
		for _, it := range c {
			fn(it)
		}
	}
}

// Has reports whether id is in the list.
func (s *Sorted) Has(id cluster.JobID) bool { _, ok := s.get(id); return ok }

// KeyOf returns id's key, if it is in the list.
func (s *Sorted) KeyOf(id cluster.JobID) (Key, bool) { it, ok := s.get(id); return it.Key, ok }

func (s *Sorted) get(id cluster.JobID) (Item, bool) {
	if id < 0 || int(id) >= len(s.where) || s.where[id].seq == 0 {
		return Item{}, false
	}
	return s.where[id], true
}

// InsertAfter inserts id after every item whose key equals k (upper bound).
// An id already present is moved.
func (s *Sorted) InsertAfter(k Key, id cluster.JobID) {
	s.Remove(id)
	s.hi++
	s.insert(Item{Key: k, ID: id, seq: s.hi})
}

// InsertBefore inserts id before every item whose key equals k (lower bound).
// An id already present is moved.
func (s *Sorted) InsertBefore(k Key, id cluster.JobID) {
	s.Remove(id)
	s.lo--
	s.insert(Item{Key: k, ID: id, seq: s.lo})
}

// locate returns the chunk and offset of the first item not less than it.
// Policies mostly insert and remove near the front (the jobs next in
// line), so the chunk search gallops from the front before bisecting.
func (s *Sorted) locate(it Item) (int, int) {
	lo, hi := 0, len(s.chunks)
	for step := 1; lo < hi; step *= 2 { // gallop: find a chunk whose last item is not less than it
		k := min(lo+step, hi) - 1
		if ch := s.chunks[k]; !ch[len(ch)-1].before(&it) {
			hi = k + 1
			break
		}
		lo = k + 1
	}
	for lo < hi { // first chunk whose last item is not less than it
		m := int(uint(lo+hi) >> 1)
		ch := s.chunks[m]
		if ch[len(ch)-1].before(&it) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == len(s.chunks) {
		if lo == 0 {
			return 0, 0
		}
		return lo - 1, len(s.chunks[lo-1])
	}
	ch := s.chunks[lo]
	i, j := 0, len(ch)
	for i < j {
		m := int(uint(i+j) >> 1)
		if ch[m].before(&it) {
			i = m + 1
		} else {
			j = m
		}
	}
	return lo, i
}

func (s *Sorted) insert(it Item) {
	for int(it.ID) >= len(s.where) {
		s.where = append(s.where, Item{})
	}
	s.where[it.ID] = it
	s.n++
	if len(s.chunks) == 0 {
		s.chunks = append(s.chunks, append(s.newChunk(), it))
		return
	}
	c, i := s.locate(it)
	s.chunks[c] = slices.Insert(s.chunks[c], i, it)
	if len(s.chunks[c]) > 2*chunk { // split in halves
		ch := s.chunks[c]
		right := append(s.newChunk(), ch[chunk:]...)
		s.chunks[c] = ch[:chunk] // keeps its array: room for 2×chunk+1
		s.chunks = slices.Insert(s.chunks, c+1, right)
	}
}

func (s *Sorted) newChunk() []Item {
	if n := len(s.spare); n > 0 {
		c := s.spare[n-1]
		s.spare = s.spare[:n-1]
		return c[:0]
	}
	return make([]Item, 0, 2*chunk+1)
}

// Remove takes id out of the list; it reports whether it was there.
func (s *Sorted) Remove(id cluster.JobID) bool {
	it, ok := s.get(id)
	if !ok {
		return false
	}
	s.where[id] = Item{}
	c, i := 0, 0
	if s.chunks[0][0].ID != id { // (policies mostly remove the first job: the next in line)
		c, i = s.locate(it)
	}
	if c >= len(s.chunks) || i >= len(s.chunks[c]) || s.chunks[c][i].ID != id {
		panic("preempt: Sorted index out of step with its items")
	}
	s.chunks[c] = slices.Delete(s.chunks[c], i, i+1)
	if len(s.chunks[c]) == 0 {
		s.spare = append(s.spare, s.chunks[c])
		s.chunks = slices.Delete(s.chunks, c, c+1)
	}
	s.n--
	return true
}

// Rekey gives every item a new key and re-sorts the list stably (equal new
// keys keep their current order). For rare global changes, such as a new
// Gittins table.
func (s *Sorted) Rekey(key func(id cluster.JobID) Key) {
	all := make([]Item, 0, s.n)
	s.Each(func(it Item) { all = append(all, Item{Key: key(it.ID), ID: it.ID}) })
	slices.SortStableFunc(all, func(a, b Item) int { return a.Key.Compare(b.Key) })
	*s = Sorted{}
	for _, it := range all {
		s.InsertAfter(it.Key, it.ID)
	}
}

// Merge walks sorted lists in one order: by key, and on equal keys the
// earlier list first, each list in its own order. A list is given as
// consecutive slices (Sorted.Chunks, or a plain slice as [][]Item{s}). It
// stops when yield returns false. Lists must each be sorted by key.
func Merge(yield func(it Item, list int) bool, lists ...[][]Item) {
	MergeSkip(yield, nil, lists...)
}

// MergeSkip is Merge, except that once drop(l) reports true, the rest of
// list l is left out (a scan that can no longer use waiting jobs skips them).
func MergeSkip(yield func(it Item, list int) bool, drop func(list int) bool, lists ...[][]Item) {
	type cursor struct{ c, i int }
	var buf [4]cursor
	pos := buf[:0]
	for range lists {
		pos = append(pos, cursor{})
	}
	// skip empty chunks up front and as cursors advance
	norm := func(l int) {
		for pos[l].c < len(lists[l]) && pos[l].i >= len(lists[l][pos[l].c]) {
			pos[l].c++
			pos[l].i = 0
		}
	}
	for l := range lists {
		norm(l)
	}
	for {
		best, active := -1, 0
		var bk Key
		for l, chunks := range lists {
			if pos[l].c >= len(chunks) {
				continue
			}
			active++
			k := chunks[pos[l].c][pos[l].i].Key
			if best < 0 || k.less(&bk) {
				best, bk = l, k
			}
		}
		if best < 0 {
			return
		}
		if active == 1 { // one list left: walk it without comparing keys
			for c, i := pos[best].c, pos[best].i; c < len(lists[best]); c, i = c+1, 0 {
				for _, it := range lists[best][c][i:] {
					if drop != nil && drop(best) || !yield(it, best) {
						return
					}
				}
			}
			return
		}
		if drop != nil && drop(best) {
			pos[best].c = len(lists[best])
			continue
		}
		it := lists[best][pos[best].c][pos[best].i]
		pos[best].i++
		norm(best)
		if !yield(it, best) {
			return
		}
	}
}

// SortStable sorts items by key, equal keys keeping their order. It is an
// insertion sort: the policies' short lists are nearly sorted already
// (running jobs' keys move a little between rounds), which it handles in
// linear time.
func SortStable(items []Item) {
	for i := 1; i < len(items); i++ {
		if !items[i].Key.less(&items[i-1].Key) {
			continue // in place (most items are)
		}
		x := items[i]
		j := i
		for j > 0 && x.Key.less(&items[j-1].Key) {
			items[j] = items[j-1]
			j--
		}
		items[j] = x
	}
}
