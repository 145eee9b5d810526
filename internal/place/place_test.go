package place_test

import (
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/place"
)

// randomSnapshot builds a small random cluster and random free masks.
func randomSnapshot(rng *rand.Rand) *cluster.Snapshot {
	b := cluster.NewBuilder("rand", nil)
	nd := 1 + rng.IntN(3)
	for d := 0; d < nd; d++ {
		for k := 1 + rng.IntN(3); k > 0; k-- {
			b.Add(cluster.ServerGroup{Type: "V100", Count: 1, GPUs: []int{2, 4, 8}[rng.IntN(3)], Domain: d})
		}
	}
	c, err := b.Build()
	if err != nil {
		panic(err)
	}
	servers := make([]cluster.ServerState, len(c.Servers))
	for i, s := range c.Servers {
		servers[i] = cluster.ServerState{Up: rng.IntN(8) > 0, Free: rng.Uint64() & (1<<uint(s.NumGPUs) - 1)}
	}
	snap := &cluster.Snapshot{}
	snap.Fill(0, c, nil, make([]cluster.GPUState, c.NumGPUs()), servers, nil, nil, nil)
	return snap
}

// minServers is the plain reference: the fewest servers of one domain (or
// of the whole cluster when anyDomain) whose free GPUs cover n, by trying
// every subset; 0 when none does.
func minServers(s *cluster.Snapshot, n int, anyDomain bool) int {
	best := 0
	ns := len(s.Servers)
	for set := 1; set < 1<<ns; set++ {
		free, dom, ok := 0, -1, true
		for i := 0; i < ns; i++ {
			if set&(1<<i) == 0 {
				continue
			}
			if !s.Servers[i].Schedulable() {
				ok = false
				break
			}
			if d := s.Cluster.Servers[i].Domain; dom >= 0 && d != dom && !anyDomain {
				ok = false
				break
			} else {
				dom = d
			}
			free += bits.OnesCount64(s.Servers[i].Free)
		}
		if k := bits.OnesCount(uint(set)); ok && free >= n && (best == 0 || k < best) {
			best = k
		}
	}
	return best
}

// TestPlaceAgainstBruteForce checks Place against the exhaustive search on
// random clusters: it finds a placement exactly when one exists within the
// level's server limit, it uses the fewest servers possible, and it only
// uses free GPUs of schedulable servers, each once.
func TestPlaceAgainstBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for iter := 0; iter < 3000; iter++ {
		s := randomSnapshot(rng)
		maxSize := 0
		for _, sv := range s.Cluster.Servers {
			maxSize = max(maxSize, sv.NumGPUs)
		}
		n := 1 + rng.IntN(16)
		for _, lvl := range []place.Level{place.Packed, place.OneMore, place.Domain, place.Anywhere} {
			got := place.NewPool(s).Place(n, lvl)
			want := minServers(s, n, lvl == place.Anywhere)
			single := minServers(s, n, false) == 1
			limit := 1 << 30
			switch {
			case single:
				limit = 1
			case lvl == place.Packed:
				limit = (n + maxSize - 1) / maxSize
			case lvl == place.OneMore:
				limit = (n+maxSize-1)/maxSize + 1
			}
			if lvl == place.Anywhere && single {
				want = 1
			}
			feasible := want > 0 && want <= limit
			if (got != nil) != feasible {
				t.Fatalf("iter %d n=%d level %s: got %v, brute force needs %d servers (limit %d)", iter, n, lvl, got, want, limit)
			}
			if got == nil {
				continue
			}
			if len(got) != n || !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != n {
				t.Fatalf("iter %d: bad GPU list %v for n=%d", iter, got, n)
			}
			for _, g := range got {
				sv := s.Cluster.ServerOf(g)
				if !s.Servers[sv].Schedulable() || s.Servers[sv].Free&(1<<uint(g-s.Cluster.Servers[sv].FirstGPU)) == 0 {
					t.Fatalf("iter %d: GPU %d is not free", iter, g)
				}
			}
			if servers, _ := place.Spread(s.Cluster, got); servers != want {
				t.Fatalf("iter %d n=%d level %s: %d servers used, fewest possible %d", iter, n, lvl, servers, want)
			}
		}
	}
}

// TestRollback: a trial's takes and gives are undone exactly.
func TestRollback(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for iter := 0; iter < 200; iter++ {
		s := randomSnapshot(rng)
		p := place.NewPool(s)
		before := p.Free()
		mark := p.Mark()
		if g := p.Place(1+rng.IntN(4), place.Anywhere); g != nil {
			p.Take(g)
			p.Give(g[:1])
		}
		p.Rollback(mark)
		if p.Free() != before {
			t.Fatalf("iter %d: free %d after rollback, want %d", iter, p.Free(), before)
		}
		if fresh := place.NewPool(s); fresh.Place(2, place.Domain) == nil != (p.Place(2, place.Domain) == nil) {
			t.Fatalf("iter %d: rolled-back pool places differently from a fresh one", iter)
		}
	}
}

// TestSpread checks Spread against plain counting with maps, including
// sets spanning more domains than its inline table holds.
func TestSpread(t *testing.T) {
	b := cluster.NewBuilder("wide", nil)
	for d := 0; d < 12; d++ {
		b.Add(cluster.ServerGroup{Type: "V100", Count: 2, GPUs: 2, Domain: d})
	}
	c, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(9, 9))
	for iter := 0; iter < 2000; iter++ {
		var gpus []cluster.GPUID
		for g := 0; g < c.NumGPUs(); g++ {
			if rng.IntN(3) == 0 {
				gpus = append(gpus, cluster.GPUID(g))
			}
		}
		servers, domains := map[cluster.ServerID]bool{}, map[int]bool{}
		for _, g := range gpus {
			servers[c.ServerOf(g)] = true
			domains[c.Servers[c.ServerOf(g)].Domain] = true
		}
		if s, d := place.Spread(c, gpus); s != len(servers) || d != len(domains) {
			t.Fatalf("Spread(%v) = %d servers, %d domains; want %d, %d", gpus, s, d, len(servers), len(domains))
		}
	}
}
