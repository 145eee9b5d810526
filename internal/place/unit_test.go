package place_test

import (
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/place"
)

// minServersInPods is the plain reference for placement in whole pods: the
// fewest servers job j may run on whose free GPUs, counted in whole pods
// of u, cover n, by trying every subset; 0 when none does.
func minServersInPods(s *cluster.Snapshot, j cluster.JobID, n, u int) int {
	best := 0
	ns := len(s.Servers)
	for set := 1; set < 1<<ns; set++ {
		free, ok := 0, true
		for i := 0; i < ns && ok; i++ {
			if set&(1<<i) == 0 {
				continue
			}
			ok = s.Servers[i].Schedulable() && s.MayRun(j, cluster.ServerID(i))
			free += bits.OnesCount64(s.Servers[i].Free) / u * u
		}
		if k := bits.OnesCount(uint(set)); ok && free >= n && (best == 0 || k < best) {
			best = k
		}
	}
	return best
}

// checkInPods fails unless gpus is a placement of n GPUs for job j in
// whole pods of u: distinct free GPUs of servers j may run on, a multiple
// of u on each server.
func checkInPods(t *testing.T, s *cluster.Snapshot, j cluster.JobID, gpus []cluster.GPUID, n, u int, what string) {
	t.Helper()
	if len(gpus) != n {
		t.Fatalf("%s: %d GPUs %v, want %d", what, len(gpus), gpus, n)
	}
	per := map[cluster.ServerID]int{}
	seen := map[cluster.GPUID]bool{}
	for _, g := range gpus {
		sv := s.Cluster.ServerOf(g)
		if seen[g] || s.Servers[sv].Free&(1<<uint(g-s.Cluster.Servers[sv].FirstGPU)) == 0 || !s.Servers[sv].Schedulable() {
			t.Fatalf("%s: GPU %d of %v is not free or listed twice", what, g, gpus)
		}
		if !s.MayRun(j, sv) {
			t.Fatalf("%s: GPU %d of %v on server %d, where job %d may not run", what, g, gpus, sv, j)
		}
		seen[g] = true
		per[sv]++
	}
	for sv, k := range per {
		if k%u != 0 {
			t.Fatalf("%s: %d GPUs on server %d (%v), not whole pods of %d", what, k, sv, gpus, u)
		}
	}
}

// TestOnlyPlacesInWholePods: under Snapshot.Allowed and Snapshot.Unit,
// Place (any level) and Any on a pool restricted by Only return a
// placement in whole pods on allowed servers, and Place at level Anywhere
// finds one, on the fewest servers, exactly when one exists (brute force).
func TestOnlyPlacesInWholePods(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 23))
	found := 0
	for iter := 0; iter < 3000; iter++ {
		s := randomSnapshot(rng)
		u := []int{1, 2, 3, 4}[rng.IntN(4)]
		deny := rng.Uint64()
		if rng.IntN(3) == 0 {
			deny = 0
		}
		s.Allowed = func(j cluster.JobID, sv cluster.ServerID) bool { return deny&(1<<uint(sv)) == 0 }
		s.Unit = func(cluster.JobID) int { return u }
		const j = cluster.JobID(0)
		n := u * (1 + rng.IntN(8))
		p := place.NewPool(s)
		free := p.Free()
		m := p.Only(j)
		want := minServersInPods(s, j, n, u)
		got := p.Place(n, place.Anywhere)
		switch {
		case want == 0 && got != nil:
			t.Fatalf("iter %d: Place(%d) in pods of %d = %v, brute force finds none", iter, n, u, got)
		case want > 0 && got == nil:
			t.Fatalf("iter %d: Place(%d) in pods of %d = nil, brute force finds one on %d servers", iter, n, u, want)
		case got != nil:
			found++
			checkInPods(t, s, j, got, n, u, "Place anywhere")
			if k, _ := place.Spread(s.Cluster, got); k != want {
				t.Fatalf("iter %d: Place(%d) in pods of %d uses %d servers (%v), the fewest is %d", iter, n, u, k, got, want)
			}
		}
		for l := place.Packed; l < place.Anywhere; l++ {
			if g := p.Place(n, l); g != nil {
				checkInPods(t, s, j, g, n, u, "Place "+l.String())
			}
		}
		if g := p.Any(n); g != nil {
			checkInPods(t, s, j, g, n, u, "Any")
		} else if want > 0 {
			t.Fatalf("iter %d: Any(%d) in pods of %d = nil, a placement exists", iter, n, u)
		}
		p.Rollback(m)
		if p.Free() != free {
			t.Fatalf("iter %d: %d free after Rollback, %d before Only", iter, p.Free(), free)
		}
	}
	if found < 500 {
		t.Fatalf("only %d placements found: the test explores too little", found)
	}
}

// TestOnlyWithoutUnitChangesNothing: with Allowed and Unit nil, Only
// leaves the pool as it was (no trial step recorded), so policies place
// as before where no executor constrains them.
func TestOnlyWithoutUnitChangesNothing(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 200; iter++ {
		s := randomSnapshot(rng)
		p := place.NewPool(s)
		if m := p.Only(0); m != p.Mark() {
			t.Fatalf("iter %d: Only recorded %d changes with no constraints", iter, p.Mark()-m)
		}
		s.Unit = func(cluster.JobID) int { return 1 }
		if m := p.Only(0); m != p.Mark() {
			t.Fatalf("iter %d: Only recorded %d changes with pods of one GPU", iter, p.Mark()-m)
		}
	}
}
