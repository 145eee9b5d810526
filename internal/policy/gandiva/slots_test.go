package gandiva

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/place"
)

// TestSlotsEqual checks slotsEqual against the simple comparison with
// place.SlotsOf, on random GPU lists (grouped by server or not) and slots
// that are theirs, another list's, or theirs changed a little.
func TestSlotsEqual(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 3))
	b := cluster.NewBuilder("slots", nil)
	b.Add(cluster.ServerGroup{Type: "V100", Count: 3, GPUs: 4})
	b.Add(cluster.ServerGroup{Type: "K80", Count: 2, GPUs: 2})
	c, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	list := func() []cluster.GPUID {
		var gs []cluster.GPUID
		for n := rng.IntN(6); len(gs) < n; {
			gs = append(gs, cluster.GPUID(rng.IntN(c.NumGPUs())))
		}
		if rng.IntN(2) == 0 {
			slices.Sort(gs)
		}
		return gs
	}
	seen := map[bool]int{}
	for i := 0; i < 20000; i++ {
		gpus := list()
		var slots []place.Slot
		switch rng.IntN(4) {
		case 0:
			slots = place.SlotsOf(c, list())
		case 1:
			slots = place.SlotsOf(c, gpus)
		default:
			slots = place.SlotsOf(c, gpus)
			if len(slots) > 0 {
				k := rng.IntN(len(slots))
				switch rng.IntN(4) {
				case 0:
					slots[k].N += rng.IntN(3) - 1
				case 1:
					slots[k].Server = cluster.ServerID(rng.IntN(len(c.Servers)))
				case 2:
					slots = slots[:k]
				case 3:
					slots = append(slots, place.Slot{Server: cluster.ServerID(rng.IntN(len(c.Servers))), N: rng.IntN(3)})
				}
			} else if rng.IntN(2) == 0 {
				slots = []place.Slot{} // empty, not nil
			}
		}
		before := slices.Clone(slots)
		want := slices.Equal(slots, place.SlotsOf(c, gpus))
		if got := slotsEqual(c, slots, gpus); got != want {
			t.Fatalf("slotsEqual(%v, %v) = %v; SlotsOf gives %v", slots, gpus, got, place.SlotsOf(c, gpus))
		}
		if !slices.Equal(slots, before) {
			t.Fatalf("slotsEqual changed its slots: %v, were %v", slots, before)
		}
		seen[want]++
	}
	if seen[true] < 1000 || seen[false] < 1000 {
		t.Fatalf("too few cases of one answer: %v", seen)
	}
}
