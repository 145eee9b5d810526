package place_test

import (
	"maps"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/place"
)

// withHolders gives a random snapshot's GPUs holders consistent with its
// free masks (one or two jobs on each GPU that is not free).
func withHolders(rng *rand.Rand, s *cluster.Snapshot) {
	for i, sv := range s.Cluster.Servers {
		for k := 0; k < sv.NumGPUs; k++ {
			g := sv.FirstGPU + cluster.GPUID(k)
			if s.Servers[i].Free&(1<<uint(k)) == 0 {
				s.GPUs[g].Jobs = []cluster.JobID{cluster.JobID(rng.IntN(6))}
				if rng.IntN(4) == 0 {
					s.GPUs[g].Jobs = append(s.GPUs[g].Jobs, cluster.JobID(6+rng.IntN(3)))
				}
			}
		}
	}
}

// withHidden is withHolders, but leaves some GPUs that are not free
// without a holder: GPUs a constrained view hides (other schedulers'
// work), which a plan may not give out.
func withHidden(rng *rand.Rand, s *cluster.Snapshot) {
	withHolders(rng, s)
	for g := range s.GPUs {
		if rng.IntN(3) == 0 {
			s.GPUs[g].Jobs = nil
		}
	}
}

// model is the plain ledger the Pool is checked against: maps, recomputed
// from scratch.
type model struct {
	s      *cluster.Snapshot
	holder map[cluster.GPUID]cluster.JobID
	kept   map[cluster.GPUID]int
}

func newModel(s *cluster.Snapshot, keep bool) *model {
	m := &model{s: s, holder: map[cluster.GPUID]cluster.JobID{}, kept: map[cluster.GPUID]int{}}
	if keep {
		for g := range s.GPUs {
			m.kept[cluster.GPUID(g)] = len(s.GPUs[g].Jobs)
		}
	}
	return m
}

func (m *model) clone() *model {
	return &model{s: m.s, holder: maps.Clone(m.holder), kept: maps.Clone(m.kept)}
}

func (m *model) held(g cluster.GPUID) bool {
	_, h := m.holder[g]
	return h || m.kept[g] > 0
}

// free: on a schedulable server, shown free or held by a job in the
// snapshot (not hidden), and neither held nor kept in the plan.
func (m *model) free(g cluster.GPUID) bool {
	sv := m.s.Cluster.ServerOf(g)
	shown := m.s.Servers[sv].Free&(1<<uint(g-m.s.Cluster.Servers[sv].FirstGPU)) != 0 || len(m.s.GPUs[g].Jobs) > 0
	return m.s.Servers[sv].Schedulable() && shown && !m.held(g)
}

// masks are the model's free GPUs per server.
func (m *model) masks() []uint64 {
	out := make([]uint64, len(m.s.Cluster.Servers))
	for g := range m.s.GPUs {
		if m.free(cluster.GPUID(g)) {
			sv := m.s.Cluster.ServerOf(cluster.GPUID(g))
			out[sv] |= 1 << uint(cluster.GPUID(g)-m.s.Cluster.Servers[sv].FirstGPU)
		}
	}
	return out
}

func randomGPUs(rng *rand.Rand, c *cluster.Cluster) []cluster.GPUID {
	var out []cluster.GPUID
	for k := 1 + rng.IntN(4); k > 0; k-- {
		out = append(out, cluster.GPUID(rng.IntN(c.NumGPUs())))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TestLedgerAgainstModel applies random sequences of Hold, Share, Release,
// Keep, Leave, Take, Mark and Rollback to a pool reset as a plan's ledger
// and to the plain model, and checks after each step that they agree on
// every GPU's holder and freedom, and that the pool's free-GPU index
// places exactly as a pool built afresh from the model's masks.
func TestLedgerAgainstModel(t *testing.T) {
	ledgerAgainstModel(t, rand.New(rand.NewPCG(7, 8)), withHolders)
}

// A plan never gives out a GPU the snapshot hides (neither free nor held
// by a job), whatever the plan holds, releases, keeps or leaves there.
func TestLedgerHiddenGPUs(t *testing.T) {
	ledgerAgainstModel(t, rand.New(rand.NewPCG(9, 10)), withHidden)
}

func ledgerAgainstModel(t *testing.T, rng *rand.Rand, holders func(*rand.Rand, *cluster.Snapshot)) {
	t.Helper()
	p := &place.Pool{} // reused across iterations, as policies reuse theirs
	for iter := 0; iter < 400; iter++ {
		s := randomSnapshot(rng)
		holders(rng, s)
		keep := rng.IntN(2) == 0
		p.ResetPlan(s, keep)
		m := newModel(s, keep)
		type mark struct {
			at int
			m  *model
		}
		var marks []mark
		for step := 0; step < 40; step++ {
			id := cluster.JobID(rng.IntN(5))
			gpus := randomGPUs(rng, s.Cluster)
			switch op := rng.IntN(8); op {
			case 0:
				p.Hold(id, gpus)
				for _, g := range gpus {
					m.holder[g] = id
				}
			case 1:
				p.Share(id, gpus)
				for _, g := range gpus {
					if _, ok := m.holder[g]; !ok {
						m.holder[g] = id
					}
				}
			case 2:
				p.Release(id, gpus)
				for _, g := range gpus {
					if h, ok := m.holder[g]; ok && h == id {
						delete(m.holder, g)
					}
				}
			case 3:
				p.Keep(gpus)
				for _, g := range gpus {
					m.kept[g]++
				}
			case 4:
				p.Leave(gpus)
				for _, g := range gpus {
					m.kept[g] = max(0, m.kept[g]-1)
				}
			case 5:
				marks = append(marks, mark{p.Mark(), m.clone()})
			case 6:
				if len(marks) > 0 {
					k := rng.IntN(len(marks))
					p.Rollback(marks[k].at)
					m = marks[k].m.clone()
					marks = marks[:k]
				}
			case 7: // a placement on the ledger's free GPUs, held by a job
				if g := p.Place(1+rng.IntN(3), place.Anywhere); g != nil {
					p.Hold(id, g)
					for _, x := range g {
						m.holder[x] = id
					}
				}
			}
			checkLedger(t, iter, step, p, m)
		}
	}
}

func checkLedger(t *testing.T, iter, step int, p *place.Pool, m *model) {
	t.Helper()
	total := 0
	for g := range m.s.GPUs {
		id := cluster.GPUID(g)
		want, ok := m.holder[id]
		if !ok {
			want = cluster.NoJob
		}
		if got := p.Holder(id); got != want {
			t.Fatalf("iter %d step %d: Holder(%d) = %d, model %d", iter, step, id, got, want)
		}
		if p.Held(id) != m.held(id) || p.IsFree(id) != m.free(id) {
			t.Fatalf("iter %d step %d: GPU %d held %v free %v, model held %v free %v", iter, step, id, p.Held(id), p.IsFree(id), m.held(id), m.free(id))
		}
		if m.free(id) {
			total++
		}
	}
	masks := m.masks()
	for sv, mk := range masks {
		if p.Mask(cluster.ServerID(sv)) != mk || p.FreeOn(cluster.ServerID(sv)) != bits.OnesCount64(mk) {
			t.Fatalf("iter %d step %d: server %d mask %b, model %b", iter, step, sv, p.Mask(cluster.ServerID(sv)), mk)
		}
	}
	if p.Free() != total {
		t.Fatalf("iter %d step %d: Free() = %d, model %d", iter, step, p.Free(), total)
	}
	fresh := &place.Pool{}
	fresh.ResetMasks(m.s, func(sv cluster.ServerID) uint64 { return masks[sv] })
	for n := 1; n <= 9; n += 4 {
		if a, b := p.Place(n, place.Packed), fresh.Place(n, place.Packed); !slices.Equal(a, b) {
			t.Fatalf("iter %d step %d: Place(%d) = %v, a fresh pool over the same GPUs %v", iter, step, n, a, b)
		}
	}
}

// pickPlain is Pick written plainly: per slot, the free GPUs of the slot's
// server, those listed in prefer first (in prefer's order, each once),
// then by ID; nil when a slot cannot be filled.
func pickPlain(s *cluster.Snapshot, free func(cluster.GPUID) bool, slots []place.Slot, prefer []cluster.GPUID) []cluster.GPUID {
	if len(slots) == 0 {
		return nil
	}
	var out []cluster.GPUID
	for _, sl := range slots {
		var cand []cluster.GPUID
		for _, g := range prefer {
			if s.Cluster.ServerOf(g) == sl.Server && free(g) && !slices.Contains(cand, g) {
				cand = append(cand, g)
			}
		}
		sv := s.Cluster.Servers[sl.Server]
		for k := 0; k < sv.NumGPUs; k++ {
			if g := sv.FirstGPU + cluster.GPUID(k); free(g) && !slices.Contains(cand, g) {
				cand = append(cand, g)
			}
		}
		if len(cand) < sl.N {
			return nil
		}
		out = append(out, cand[:sl.N]...)
	}
	slices.Sort(out)
	return out
}

// TestPickAgainstPlain checks Pick (and so PickOn) against pickPlain on
// random pools, slots and preferences, and that it takes nothing.
func TestPickAgainstPlain(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for iter := 0; iter < 3000; iter++ {
		s := randomSnapshot(rng)
		p := place.NewPool(s)
		var slots []place.Slot
		for k := rng.IntN(3); k >= 0; k-- {
			slots = append(slots, place.Slot{Server: cluster.ServerID(rng.IntN(len(s.Servers))), N: 1 + rng.IntN(4)})
		}
		slices.SortFunc(slots, func(a, b place.Slot) int { return int(a.Server - b.Server) })
		slots = slices.CompactFunc(slots, func(a, b place.Slot) bool { return a.Server == b.Server })
		var prefer []cluster.GPUID
		if rng.IntN(3) > 0 {
			prefer = randomGPUs(rng, s.Cluster)
			rng.Shuffle(len(prefer), func(i, j int) { prefer[i], prefer[j] = prefer[j], prefer[i] })
		}
		before := p.Free()
		got := p.Pick(slots, prefer)
		if want := pickPlain(s, p.IsFree, slots, prefer); !slices.Equal(got, want) {
			t.Fatalf("iter %d: Pick(%v, prefer %v) = %v, plain %v", iter, slots, prefer, got, want)
		}
		if p.Free() != before {
			t.Fatalf("iter %d: Pick took GPUs", iter)
		}
	}
}

// TestRestrictAndResetFrom: a restricted pool offers only the servers
// kept, a rollback gives the others back, and a copy places as the
// original does without changing it.
func TestRestrictAndResetFrom(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for iter := 0; iter < 1000; iter++ {
		s := randomSnapshot(rng)
		p := place.NewPool(s)
		var cp place.Pool
		cp.ResetFrom(p)
		n := 1 + rng.IntN(8)
		if a, b := cp.Place(n, place.Domain), p.Place(n, place.Domain); !slices.Equal(a, b) {
			t.Fatalf("iter %d: the copy places %v, the original %v", iter, a, b)
		}
		if g := cp.Any(2); g != nil {
			cp.Take(g)
			if !p.AllFree(g) {
				t.Fatalf("iter %d: taking from the copy took from the original", iter)
			}
		}
		before := p.Free()
		keep := func(sv cluster.ServerID) bool { return s.Cluster.Servers[sv].Domain == 0 }
		mark := p.Mark()
		p.Restrict(keep)
		want := 0
		for sv := range s.Servers {
			if keep(cluster.ServerID(sv)) && s.Servers[sv].Schedulable() {
				want += bits.OnesCount64(s.Servers[sv].Free)
			}
		}
		if p.Free() != want {
			t.Fatalf("iter %d: restricted pool has %d free, want %d", iter, p.Free(), want)
		}
		if g := p.Place(n, place.Anywhere); g != nil && !keep(s.Cluster.ServerOf(g[0])) {
			t.Fatalf("iter %d: restricted pool placed on server %d", iter, s.Cluster.ServerOf(g[0]))
		}
		p.Rollback(mark)
		if p.Free() != before {
			t.Fatalf("iter %d: %d free after rollback, want %d", iter, p.Free(), before)
		}
	}
}

// TestFreeAmong checks FreeAmong and AllFree against counting.
func TestFreeAmong(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	for iter := 0; iter < 1000; iter++ {
		s := randomSnapshot(rng)
		p := place.NewPool(s)
		gpus := randomGPUs(rng, s.Cluster)
		all := true
		for sv := range s.Servers {
			n := 0
			for _, g := range gpus {
				if s.Cluster.ServerOf(g) == cluster.ServerID(sv) && p.IsFree(g) {
					n++
				}
			}
			if got := p.FreeAmong(cluster.ServerID(sv), gpus); got != n {
				t.Fatalf("iter %d: FreeAmong(%d, %v) = %d, want %d", iter, sv, gpus, got, n)
			}
		}
		for _, g := range gpus {
			all = all && p.IsFree(g)
		}
		if p.AllFree(gpus) != all {
			t.Fatalf("iter %d: AllFree(%v) = %v", iter, gpus, !all)
		}
	}
}
