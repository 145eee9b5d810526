package sim

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
)

// refQueue is the plain version of eventHeap: one unordered list, searched
// whole, from which retire deletes the job's finish.
type refQueue struct {
	items []item
	seq   uint64
}

func (q *refQueue) push(it item) {
	q.seq++
	it.seq = q.seq
	if it.kind == evFinish {
		q.retire(it.job)
	}
	q.items = append(q.items, it)
}

func (q *refQueue) retire(job cluster.JobID) {
	q.items = slices.DeleteFunc(q.items, func(it item) bool { return it.kind == evFinish && it.job == job })
}

func (q *refQueue) next() float64 {
	t := math.Inf(1)
	for _, it := range q.items {
		t = min(t, it.t)
	}
	return t
}

// popAt pops the first item due at t by seq.
func (q *refQueue) popAt(t float64) (item, bool) {
	best := -1
	for i, it := range q.items {
		if it.t == t && (best < 0 || it.seq < q.items[best].seq) {
			best = i
		}
	}
	if best < 0 {
		return item{}, false
	}
	it := q.items[best]
	q.items = slices.Delete(q.items, best, best+1)
	return it, true
}

// TestEventHeap: the loop sees the same instants and the same items, in
// the same order, from eventHeap as from the plain queue, as items are
// pushed and finishes retired before and during each instant's pass.
func TestEventHeap(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	popped, retired := 0, 0
	for trial := range 1000 {
		h := &eventHeap{}
		ref := &refQueue{}
		now := 0.0
		jobs := 1 + rng.IntN(12)
		at := func() float64 { // times with many ties, as rounding to seconds gives
			if rng.IntN(4) == 0 {
				return now
			}
			return now + float64(rng.IntN(20))
		}
		act := func() {
			switch r := rng.IntN(10); {
			case r < 5:
				it := item{t: at(), kind: evFinish, job: cluster.JobID(rng.IntN(jobs)), ver: uint32(rng.IntN(9))}
				h.push(it)
				ref.push(it)
			case r < 8:
				it := item{t: at(), kind: []evKind{evProfile, evTick, evFail}[rng.IntN(3)], job: cluster.JobID(rng.IntN(jobs))}
				h.push(it)
				ref.push(it)
			default:
				job := cluster.JobID(rng.IntN(jobs))
				n := h.Len()
				h.retire(job)
				ref.retire(job)
				retired += n - h.Len()
			}
		}
		for range 5 + rng.IntN(30) {
			act()
		}
		for step := 0; h.Len() > 0 || len(ref.items) > 0; step++ {
			if step > 10000 {
				t.Fatalf("trial %d: no end", trial)
			}
			if h.Len() != len(ref.items) {
				t.Fatalf("trial %d step %d: eventHeap holds %d, the reference %d", trial, step, h.Len(), len(ref.items))
			}
			tt, want := h.next(), ref.next()
			if tt != want {
				t.Fatalf("trial %d step %d: next instant %v, want %v", trial, step, tt, want)
			}
			now = tt
			for {
				got, ok := h.popAt(now)
				r, rok := ref.popAt(now)
				if ok != rok || got != r {
					t.Fatalf("trial %d step %d t=%v: eventHeap popped %+v (%v), the reference %+v (%v)", trial, step, now, got, ok, r, rok)
				}
				if !ok {
					break
				}
				popped++
				if rng.IntN(3) == 0 && step < 200 {
					act() // handling an event schedules or voids others
				}
			}
			if step < 200 {
				for range rng.IntN(5) {
					act() // the round's actions
				}
			}
		}
	}
	if popped < 10000 || retired < 2000 {
		t.Fatalf("%d items popped and %d finishes retired: too few to test", popped, retired)
	}
	t.Logf("%d items popped, %d finishes retired", popped, retired)
}

// TestTimeSet: timeSet agrees with a map of float64 keys under adds and
// removes, with signed zeros (one key), infinities and NaN (never kept).
func TestTimeSet(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	pool := []float64{0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), math.NaN(), 1, -1, 1e300}
	for range 300 {
		pool = append(pool, float64(rng.IntN(1000)), rng.Float64()*1e7)
	}
	var s timeSet
	ref := map[float64]bool{}
	for i := range 200000 {
		v := pool[rng.IntN(len(pool))]
		if rng.IntN(2) == 0 {
			if got, want := s.add(v), math.IsNaN(v) || !ref[v]; got != want {
				t.Fatalf("op %d: add(%v) = %v, want %v", i, v, got, want)
			}
			if !math.IsNaN(v) {
				ref[v] = true
			}
		} else {
			s.remove(v)
			delete(ref, v)
		}
		if s.n != len(ref) {
			t.Fatalf("op %d: %d times, want %d", i, s.n, len(ref))
		}
	}
}
