package preempt

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
)

// naive is the plain model of Sorted: one slice, insertion by linear scan.
type naive []Item

func (n *naive) remove(id cluster.JobID) {
	*n = slices.DeleteFunc(*n, func(it Item) bool { return it.ID == id })
}

func (n *naive) insert(k Key, id cluster.JobID, after bool) {
	n.remove(id)
	i := 0
	for i < len(*n) && ((*n)[i].Key.Compare(k) < 0 || after && (*n)[i].Key.Compare(k) == 0) {
		i++
	}
	*n = slices.Insert(*n, i, Item{Key: k, ID: id})
}

// TestSortedMatchesNaive drives Sorted and the naive list with the same
// random operations (few distinct keys, so ties abound; enough items to
// split chunks) and compares their orders after each batch.
func TestSortedMatchesNaive(t *testing.T) {
	for seed := uint64(1); seed <= 10; seed++ {
		rng := rand.New(rand.NewPCG(seed, 3))
		var s Sorted
		var n naive
		ids := 1500
		if seed%2 == 0 {
			ids = 40
		}
		keys := 1 + rng.IntN(6)
		for step := range 4000 {
			id := cluster.JobID(rng.IntN(ids))
			k := Key{A: float64(rng.IntN(keys)), B: float64(rng.IntN(2))}
			switch r := rng.IntN(10); {
			case r < 4:
				s.InsertAfter(k, id)
				n.insert(k, id, true)
			case r < 7:
				s.InsertBefore(k, id)
				n.insert(k, id, false)
			case r < 9:
				had := slices.ContainsFunc(n, func(it Item) bool { return it.ID == id })
				if got := s.Remove(id); got != had {
					t.Fatalf("seed %d step %d: Remove(%d) = %v, want %v", seed, step, id, got, had)
				}
				n.remove(id)
			default:
				s.Rekey(func(id cluster.JobID) Key { return Key{A: float64(int(id) % 3)} })
				re := slices.Clone(n)
				for i := range re {
					re[i].Key = Key{A: float64(int(re[i].ID) % 3)}
				}
				slices.SortStableFunc(re, func(a, b Item) int { return a.Key.Compare(b.Key) })
				n = re
			}
			if step%97 == 0 || step == 3999 {
				var got []Item
				s.Each(func(it Item) { got = append(got, Item{Key: it.Key, ID: it.ID}) })
				if !slices.Equal(got, []Item(n)) || s.Len() != len(n) {
					t.Fatalf("seed %d step %d: Sorted has %d items %v\nwant %d items %v", seed, step, s.Len(), got, len(n), n)
				}
				for _, c := range s.Chunks() {
					if len(c) == 0 || len(c) > 2*chunk {
						t.Fatalf("seed %d step %d: chunk of %d items", seed, step, len(c))
					}
				}
			}
		}
	}
}

// TestMerge checks the walk order on ties (earlier list first) and that
// chunked lists are walked like flat ones.
func TestMerge(t *testing.T) {
	k := func(a float64) Key { return Key{A: a} }
	a := [][]Item{{{Key: k(1), ID: 1}, {Key: k(3), ID: 2}}, {}, {{Key: k(3), ID: 3}}}
	b := [][]Item{{{Key: k(1), ID: 4}, {Key: k(2), ID: 5}, {Key: k(3), ID: 6}}}
	var got []cluster.JobID
	var lists []int
	Merge(func(it Item, l int) bool { got = append(got, it.ID); lists = append(lists, l); return true }, b, a)
	if want := []cluster.JobID{4, 1, 5, 6, 2, 3}; !slices.Equal(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
	if want := []int{0, 1, 0, 0, 1, 1}; !slices.Equal(lists, want) {
		t.Errorf("lists %v, want %v", lists, want)
	}
	got = got[:0]
	Merge(func(it Item, l int) bool { got = append(got, it.ID); return len(got) < 2 }, a, b)
	if want := []cluster.JobID{1, 4}; !slices.Equal(got, want) {
		t.Errorf("stopped walk %v, want %v", got, want)
	}
}

// TestSortStable compares SortStable with the standard library's stable sort.
func TestSortStable(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	for range 200 {
		n := rng.IntN(80)
		items := make([]Item, n)
		for i := range items {
			items[i] = Item{Key: Key{A: float64(rng.IntN(5)), B: float64(rng.IntN(3))}, ID: cluster.JobID(i)}
		}
		want := slices.Clone(items)
		slices.SortStableFunc(want, func(a, b Item) int { return a.Key.Compare(b.Key) })
		SortStable(items)
		if !slices.Equal(items, want) {
			t.Fatalf("SortStable = %v, want %v", items, want)
		}
	}
}

// TestKeyLess: less is Compare < 0 for every pair of keys made of a few
// values, signed zeros, infinities and NaN included.
func TestKeyLess(t *testing.T) {
	vals := []float64{math.Inf(-1), -1, math.Copysign(0, -1), 0, 0.5, 1, math.Inf(1), math.NaN()}
	for _, a := range vals {
		for _, b := range vals {
			for _, c := range vals {
				for _, d := range vals {
					k, o := Key{a, b}, Key{c, d}
					if got, want := k.less(&o), k.Compare(o) < 0; got != want {
						t.Fatalf("%v.less(%v) = %v, Compare < 0 is %v", k, o, got, want)
					}
				}
			}
		}
	}
}

// plainMergeSkip is MergeSkip without its shortcuts: pick the smallest
// head (earlier list on ties), ask drop, yield.
func plainMergeSkip(yield func(it Item, list int) bool, drop func(list int) bool, lists ...[]Item) {
	pos := make([]int, len(lists))
	for {
		best := -1
		for l := range lists {
			if pos[l] < len(lists[l]) && (best < 0 || lists[l][pos[l]].Key.Compare(lists[best][pos[best]].Key) < 0) {
				best = l
			}
		}
		if best < 0 {
			return
		}
		if drop != nil && drop(best) {
			pos[best] = len(lists[best])
			continue
		}
		it := lists[best][pos[best]]
		pos[best]++
		if !yield(it, best) {
			return
		}
	}
}

// TestMergeSkipMatchesPlain compares MergeSkip with plainMergeSkip on
// random chunked lists (empty chunks included), with a drop that starts
// skipping one list after some items and a yield that may stop early.
func TestMergeSkipMatchesPlain(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 8))
	for trial := range 2000 {
		nl := 1 + rng.IntN(4)
		chunked := make([][][]Item, nl)
		flat := make([][]Item, nl)
		id := 0
		for l := range nl {
			var items []Item
			for range rng.IntN(12) {
				items = append(items, Item{Key: Key{A: float64(rng.IntN(4))}, ID: cluster.JobID(id)})
				id++
			}
			SortStable(items)
			flat[l] = items
			for rest := items; ; {
				n := min(len(rest), rng.IntN(4)) // 0: an empty chunk
				chunked[l] = append(chunked[l], rest[:n])
				rest = rest[n:]
				if len(rest) == 0 {
					break
				}
			}
		}
		dropList, dropAfter, stopAfter := rng.IntN(nl), rng.IntN(10), 1+rng.IntN(30)
		run := func(merge func(yield func(Item, int) bool, drop func(int) bool)) []Item {
			var got []Item
			merge(func(it Item, l int) bool {
				got = append(got, Item{Key: it.Key, ID: it.ID, seq: int64(l)})
				return len(got) < stopAfter
			}, func(l int) bool { return l == dropList && len(got) >= dropAfter })
			return got
		}
		got := run(func(y func(Item, int) bool, d func(int) bool) { MergeSkip(y, d, chunked...) })
		want := run(func(y func(Item, int) bool, d func(int) bool) { plainMergeSkip(y, d, flat...) })
		if !slices.Equal(got, want) {
			t.Fatalf("trial %d: MergeSkip %v\nplain %v", trial, got, want)
		}
	}
}
