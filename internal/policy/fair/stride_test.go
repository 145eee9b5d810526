package fair

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// strideTable runs quanta of a Stride and renders the paper's table: the
// passes at the start of each quantum, then the schedule.
func strideTable(names []string, sizes []int, tickets []float64, gpus, quanta int) string {
	var s Stride
	for i := range names {
		s.Add(int64(i), sizes[i], tickets[i], 0)
	}
	var b strings.Builder
	for t := 0; t < quanta; t++ {
		fmt.Fprintf(&b, "%d", t)
		for i := range names {
			p, _ := s.Pass(int64(i))
			fmt.Fprintf(&b, " %g", p)
		}
		var sched []string
		for _, id := range s.Select(nil, gpus, 1, nil) {
			sched = append(sched, names[id])
		}
		slices.Sort(sched)
		fmt.Fprintf(&b, " %s\n", strings.Join(sched, ","))
	}
	return b.String()
}

// TestSeedStrideTable reproduces Gandiva_fair's stride-scheduling table: A with
// 4 tickets, B with 1, one GPU; ties go to the client submitted first, and
// B was (the table starts with B).
func TestSeedStrideTable(t *testing.T) {
	// columns: time, B's pass, A's pass, schedule (the paper lists A's pass first)
	got := strideTable([]string{"B", "A"}, []int{1, 1}, []float64{1, 4}, 1, 9)
	want := `0 0 0 B
1 1 0 A
2 1 0.25 A
3 1 0.5 A
4 1 0.75 A
5 1 1 B
6 2 1 A
7 2 1.25 A
8 2 1.5 A
`
	if got != want {
		t.Errorf("stride table:\n%s\nwant (Gandiva_fair's):\n%s", got, want)
	}
}

// TestSeedGangStrideTable reproduces Gandiva_fair's gang-aware stride table:
// A, B on 1 GPU, C, D on 2, E on 4, one ticket each, 4 GPUs. E was
// submitted first (the table starts with E when every pass is 0).
func TestSeedGangStrideTable(t *testing.T) {
	got := strideTable([]string{"E", "A", "B", "C", "D"}, []int{4, 1, 1, 2, 2}, []float64{1, 1, 1, 1, 1}, 4, 9)
	// columns: time, E, A, B, C, D passes, schedule
	want := `0 0 0 0 0 0 E
1 4 0 0 0 0 A,B,C
2 4 1 1 2 0 A,B,D
3 4 2 2 2 2 A,B,C
4 4 3 3 4 2 A,B,D
5 4 4 4 4 4 E
6 8 4 4 4 4 A,B,C
7 8 5 5 6 4 A,B,D
8 8 6 6 6 6 A,B,C
`
	if got != want {
		t.Errorf("gang-aware stride table:\n%s\nwant (Gandiva_fair's):\n%s", got, want)
	}
}

// TestStrideMatchesPlain checks the heap-based scheduler against the
// paper's pseudo-code on random clients over many quanta, with clients
// joining, leaving, changing tickets and being refused by ok.
func TestStrideMatchesPlain(t *testing.T) {
	for seed := uint64(0); seed < 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		var s Stride
		var plain []plainClient
		nextID := int64(0)
		add := func() {
			c := plainClient{ID: nextID, Size: 1 << rng.IntN(4), Tickets: float64(1 + rng.IntN(8))}
			// quarter tickets keep sums exact, so ties really tie
			c.Tickets /= 4
			c.Pass = s.Add(c.ID, c.Size, c.Tickets, s.VT())
			plain = append(plain, c)
			nextID++
		}
		for i := rng.IntN(20); i >= 0; i-- {
			add()
		}
		for q := 0; q < 60; q++ {
			switch r := rng.IntN(10); {
			case r == 0:
				add()
			case r == 1 && len(plain) > 1:
				k := rng.IntN(len(plain))
				p, ok := s.Remove(plain[k].ID)
				if !ok || p != plain[k].Pass {
					t.Fatalf("seed %d: remove %d: pass %v ok %v, plain %v", seed, plain[k].ID, p, ok, plain[k].Pass)
				}
				plain = slices.Delete(plain, k, k+1)
			case r == 2 && len(plain) > 0:
				k := rng.IntN(len(plain))
				plain[k].Tickets = float64(1+rng.IntN(8)) / 4
				s.SetTickets(plain[k].ID, plain[k].Tickets)
			}
			free := 1 + rng.IntN(16)
			charge := []float64{1, 0.5, 0.25}[rng.IntN(3)]
			refuse := int64(-1)
			if rng.IntN(3) == 0 && nextID > 0 {
				refuse = rng.Int64N(nextID)
			}
			ok := func(id int64, _ int) bool { return id != refuse }
			got := s.Select(nil, free, charge, ok)
			want := selectPlain(plain, free, charge, ok)
			if !slices.Equal(got, want) {
				t.Fatalf("seed %d quantum %d: heap chose %v, plain %v", seed, q, got, want)
			}
			for _, c := range plain {
				if p, _ := s.Pass(c.ID); p != c.Pass {
					t.Fatalf("seed %d quantum %d: client %d pass %v, plain %v", seed, q, c.ID, p, c.Pass)
				}
			}
		}
	}
}

// TestStrideShares: clients that contend for the GPUs (none can use more
// than its share) receive GPU-time in proportion to their tickets, within one
// stride (the stride-scheduling guarantee).
func TestStrideShares(t *testing.T) {
	cases := []struct {
		gpus    int
		sizes   []int
		tickets []float64
	}{
		{3, []int{1, 1, 1, 1, 1, 1}, []float64{1, 1, 2, 2, 3, 3}},
		{4, []int{2, 2, 2, 2}, []float64{1, 1, 2, 4}},
		{8, []int{4, 4, 2, 2, 1, 1, 1, 1}, []float64{2, 1, 2, 1, 1, 1, 0.5, 0.5}},
	}
	for ci, c := range cases {
		var s Stride
		for i := range c.tickets {
			s.Add(int64(i), c.sizes[i], c.tickets[i], 0)
		}
		got := make([]float64, len(c.tickets))
		const quanta = 2400
		for q := 0; q < quanta; q++ {
			for _, id := range s.Select(nil, c.gpus, 1, nil) {
				got[id] += float64(c.sizes[id])
			}
		}
		sum := 0.0
		for _, x := range c.tickets {
			sum += x
		}
		for i := range got {
			share := float64(c.gpus) * c.tickets[i] / sum * quanta
			if d := got[i] - share; d > float64(2*c.sizes[i]) || d < -float64(2*c.sizes[i]) {
				t.Errorf("case %d client %d: %.0f GPU-quanta, proportional share %.1f", ci, i, got[i], share)
			}
		}
	}
}

// TestStrideNewcomer: a client that joins late starts at the virtual time
// and does not monopolise the GPUs to catch up.
func TestStrideNewcomer(t *testing.T) {
	var s Stride
	s.Add(1, 1, 1, 0)
	for q := 0; q < 100; q++ {
		s.Select(nil, 1, 1, nil)
	}
	if p := s.Add(2, 1, 1, 0); p != 100 {
		t.Fatalf("newcomer pass %v, want the virtual time 100", p)
	}
	runs := map[int64]int{}
	for q := 0; q < 10; q++ {
		for _, id := range s.Select(nil, 1, 1, nil) {
			runs[id]++
		}
	}
	if runs[1] != 5 || runs[2] != 5 {
		t.Errorf("after joining: %v, want 5 quanta each", runs)
	}
	// an empty scheduler remembers its virtual time
	s.Remove(1)
	s.Remove(2)
	if p := s.Add(3, 1, 1, 0); p < 100 {
		t.Errorf("joining an emptied scheduler: pass %v, want ≥ 100", p)
	}
}

// TestPackChoiceMatchesBruteForce checks packChoice against enumerating
// every subset: the largest total (with item 0 when head), lexicographically
// first in priority order; and that it keeps the paper's walk when the walk
// fills the capacity.
func TestPackChoiceMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	for iter := 0; iter < 3000; iter++ {
		n := rng.IntN(10)
		sizes := make([]int, n)
		for i := range sizes {
			sizes[i] = []int{1, 2, 3, 4, 8}[rng.IntN(5)]
		}
		capacity := 1 + rng.IntN(12)
		head := rng.IntN(2) == 0 && n > 0 && sizes[0] <= capacity
		got := packChoice(sizes, capacity, head)
		// the paper's walk
		walk, left := make([]bool, n), capacity
		for k, sz := range sizes {
			if sz <= left {
				walk[k], left = true, left-sz
			}
		}
		var want []bool
		if left == 0 {
			want = walk
		} else {
			bestSum := -1
			for mask := 0; mask < 1<<n; mask++ {
				if head && mask&1 == 0 {
					continue
				}
				sum := 0
				for k := 0; k < n; k++ {
					if mask>>k&1 == 1 {
						sum += sizes[k]
					}
				}
				if sum > capacity {
					continue
				}
				cand := make([]bool, n)
				for k := range cand {
					cand[k] = mask>>k&1 == 1
				}
				// larger sum wins; equal sums: lexicographically first (earlier items taken)
				if sum > bestSum || sum == bestSum && lexFirst(cand, want) {
					bestSum, want = sum, cand
				}
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("sizes %v capacity %d head %v: got %v, want %v", sizes, capacity, head, got, want)
		}
	}
}

func lexFirst(a, b []bool) bool {
	for k := range a {
		if a[k] != b[k] {
			return a[k]
		}
	}
	return false
}

// TestSelectPackedKeepsSeedTables: where the paper's walk fills the GPUs,
// packing changes nothing: the gang-aware table comes out the same.
func TestSelectPackedKeepsSeedTables(t *testing.T) {
	names := []string{"E", "A", "B", "C", "D"}
	sizes := []int{4, 1, 1, 2, 2}
	var a, b Stride
	for i := range names {
		a.Add(int64(i), sizes[i], 1, 0)
		b.Add(int64(i), sizes[i], 1, 0)
	}
	for q := 0; q < 40; q++ {
		x := a.Select(nil, 4, 1, nil)
		y := b.SelectPacked(nil, 4, 1, true, nil)
		slices.Sort(x)
		slices.Sort(y)
		if !slices.Equal(x, y) {
			t.Fatalf("quantum %d: walk %v, packed %v", q, x, y)
		}
	}
}

// churnShares runs a stride scheduler under churn: four users (tickets 4,
// 3, 1, 1, per-job tickets = user tickets ÷ its jobs) whose jobs of sizes
// 1–4 arrive and leave at random on 64 GPUs, newcomers joining at join's
// pass; it returns each user's share of the GPU-quanta after a warm-up.
func churnShares(join func(s *Stride, size int, tickets float64) float64) []float64 {
	type cj struct {
		user, size int
		id         int64
	}
	tickets := []float64{4, 3, 1, 1}
	sizes := [][]int{{1, 2, 1, 4}, {2}, {4, 1}, {1, 1, 2}}
	rng := rand.New(rand.NewPCG(3, 3))
	var s Stride
	var jobs []*cj
	byID := map[int64]*cj{}
	count := make([]int, len(tickets))
	next := int64(0)
	retick := func() {
		for _, j := range jobs {
			s.SetTickets(j.id, tickets[j.user]/float64(count[j.user]))
		}
	}
	add := func(u int) {
		j := &cj{user: u, size: sizes[u][int(next)%len(sizes[u])], id: next}
		next++
		jobs = append(jobs, j)
		byID[j.id] = j
		count[u]++
		tk := tickets[u] / float64(count[u])
		s.Add(j.id, j.size, tk, join(&s, j.size, tk))
		retick()
	}
	for u := range tickets {
		for range 40 {
			add(u)
		}
	}
	got := make([]float64, len(tickets))
	for q := 0; q < 6000; q++ {
		for u := range tickets {
			if rng.IntN(3) == 0 { // ~40 jobs per user in equilibrium
				add(u)
			}
		}
		for _, id := range s.Select(nil, 64, 1, nil) {
			if q > 500 {
				got[byID[id].user] += float64(byID[id].size)
			}
		}
		left := jobs[:0]
		for _, j := range jobs {
			if rng.IntN(120) == 0 {
				s.Remove(j.id)
				count[j.user]--
				continue
			}
			left = append(left, j)
		}
		jobs = left
		retick()
	}
	total := 0.0
	for _, g := range got {
		total += g
	}
	for i := range got {
		got[i] /= total
	}
	return got
}

// TestJoinPassUnbiased: under churn, newcomers that join at JoinPass get
// the users their ticket shares; joining at the virtual time (the least
// pass) puts every newcomer ahead of the clients already there and favours
// the users whose jobs come and go.
func TestJoinPassUnbiased(t *testing.T) {
	want := []float64{4.0 / 9, 3.0 / 9, 1.0 / 9, 1.0 / 9}
	maxErr := func(got []float64) float64 {
		m := 0.0
		for i := range got {
			m = max(m, math.Abs(got[i]-want[i])/want[i])
		}
		return m
	}
	joined := churnShares(func(s *Stride, size int, tk float64) float64 { return s.JoinPass(size, tk) })
	atVT := churnShares(func(s *Stride, _ int, _ float64) float64 { return s.VT() })
	t.Logf("max relative error: JoinPass %.4f, at the virtual time %.4f", maxErr(joined), maxErr(atVT))
	if e := maxErr(joined); e > 0.01 {
		t.Errorf("JoinPass: shares %v, want %v (max relative error %.3f)", joined, want, e)
	}
	if maxErr(atVT) < 2*maxErr(joined) {
		t.Errorf("joining at the virtual time is not measurably worse: %.4f vs %.4f", maxErr(atVT), maxErr(joined))
	}
}

// selectFillPlain is SelectFill written plainly: sort every client by
// (pass, ID), walk as the paper does until a client that ok accepts does not
// fit, then fill what is left with the fitting, accepted clients after it in
// order of rank (ties in pass order), asking rank again after every choice.
func selectFillPlain(cl []plainClient, free int, charge float64, ok func(id int64, size int) bool,
	rank func(id int64) float64, took func(id int64, size int)) []int64 {
	order := make([]int, len(cl))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		if cl[a].Pass != cl[b].Pass {
			if cl[a].Pass < cl[b].Pass {
				return -1
			}
			return 1
		}
		return int(cl[a].ID - cl[b].ID)
	})
	accepts := func(c *plainClient) bool { return ok == nil || ok(c.ID, c.Size) }
	var out []int64
	k := 0
	for ; k < len(order) && free > 0; k++ {
		c := &cl[order[k]]
		if !accepts(c) {
			continue
		}
		if c.Size > free {
			break
		}
		free -= c.Size
		c.Pass += float64(c.Size) * charge / c.Tickets
		out = append(out, c.ID)
	}
	if k == len(order) || free == 0 {
		return out
	}
	rest := order[k+1:]
	taken := make([]bool, len(rest))
	for free > 0 {
		best := -1
		for j, i := range rest {
			c := &cl[i]
			if taken[j] || c.Size > free || !accepts(c) {
				continue
			}
			if best < 0 || rank(c.ID) < rank(cl[rest[best]].ID) {
				best = j
			}
		}
		if best < 0 {
			break
		}
		taken[best] = true
		c := &cl[rest[best]]
		free -= c.Size
		c.Pass += float64(c.Size) * charge / c.Tickets
		out = append(out, c.ID)
		took(c.ID, c.Size)
	}
	return out
}

// TestSelectFillMatchesPlain checks SelectFill against the plain version
// on random clients over many quanta (clients joining, leaving, changing
// tickets, refused by ok), with ranks per group of clients (a user) that
// rise as the group is granted holes; every other quantum it fills with a
// constant rank and must then choose exactly what the paper's walk
// (selectPlain) chooses.
func TestSelectFillMatchesPlain(t *testing.T) {
	for seed := uint64(0); seed < 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, 9))
		var s Stride
		var plain []plainClient
		nextID := int64(0)
		add := func() {
			c := plainClient{ID: nextID, Size: 1 << rng.IntN(4), Tickets: float64(1+rng.IntN(8)) / 4}
			c.Pass = s.Add(c.ID, c.Size, c.Tickets, s.VT())
			plain = append(plain, c)
			nextID++
		}
		for i := rng.IntN(20); i >= 0; i-- {
			add()
		}
		holes := 0
		for q := 0; q < 60; q++ {
			switch r := rng.IntN(10); {
			case r == 0:
				add()
			case r == 1 && len(plain) > 1:
				k := rng.IntN(len(plain))
				s.Remove(plain[k].ID)
				plain = slices.Delete(plain, k, k+1)
			case r == 2 && len(plain) > 0:
				k := rng.IntN(len(plain))
				plain[k].Tickets = float64(1+rng.IntN(8)) / 4
				s.SetTickets(plain[k].ID, plain[k].Tickets)
			}
			free := 1 + rng.IntN(16)
			charge := []float64{1, 0.5, 0.25}[rng.IntN(3)]
			refuse := int64(-1)
			if rng.IntN(3) == 0 && nextID > 0 {
				refuse = rng.Int64N(nextID)
			}
			ok := func(id int64, _ int) bool { return id != refuse }
			var got, want []int64
			if q%2 == 0 {
				// four groups; a group's rank rises with what it is granted in holes
				granted := make([]float64, 4)
				start := []float64{rng.Float64(), rng.Float64(), rng.Float64(), rng.Float64()}
				rank := func(id int64) float64 { return start[id%4] + granted[id%4] }
				took := func(id int64, size int) { granted[id%4] += float64(size) / 8 }
				got = s.SelectFill(nil, free, charge, ok, rank, took)
				gotGranted := slices.Clone(granted)
				clear(granted)
				want = selectFillPlain(plain, free, charge, ok, rank, took)
				if !slices.Equal(gotGranted, granted) {
					t.Fatalf("seed %d quantum %d: granted %v, plain %v", seed, q, gotGranted, granted)
				}
				if sum(granted) > 0 {
					holes++
				}
			} else {
				got = s.SelectFill(nil, free, charge, ok, func(int64) float64 { return 0 }, nil)
				want = selectPlain(plain, free, charge, ok)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("seed %d quantum %d (constant rank: %v): heap chose %v, plain %v", seed, q, q%2 == 1, got, want)
			}
			for _, c := range plain {
				if p, _ := s.Pass(c.ID); p != c.Pass {
					t.Fatalf("seed %d quantum %d: client %d pass %v, plain %v", seed, q, c.ID, p, c.Pass)
				}
			}
		}
		if seed == 0 && holes == 0 {
			t.Fatal("no quantum filled a hole: the test exercises nothing")
		}
	}
}

// TestSelectFillHole: on 8 GPUs, a 1-GPU and a 4-GPU client of user x are
// furthest behind; the next, x's 4-GPU client, does not fit the 3 GPUs left.
// The paper's walk gives the hole to the next clients in pass order (x's
// 1-GPU clients first). By rank it goes first to user y, furthest behind;
// once y's rank, risen with the grant, passes x's, to x; y's 2-GPU client
// no longer fits.
func TestSelectFillHole(t *testing.T) {
	build := func() *Stride {
		var s Stride
		// x has the even IDs, y the odd ones
		for _, c := range []struct {
			id   int64
			size int
			pass float64
		}{{0, 1, 0}, {2, 4, 1}, {4, 4, 2}, {6, 1, 3}, {8, 1, 4}, {1, 1, 5}, {3, 2, 6}} {
			s.Add(c.id, c.size, 1, c.pass)
		}
		return &s
	}
	if got := build().Select(nil, 8, 1, nil); !slices.Equal(got, []int64{0, 2, 6, 8, 1}) {
		t.Errorf("the paper's walk: %v, want [0 2 6 8 1]", got)
	}
	rank := map[bool]float64{true: 1.1, false: 0.9} // by "is user x"
	got := build().SelectFill(nil, 8, 1, nil, func(id int64) float64 { return rank[id%2 == 0] },
		func(id int64, size int) { rank[id%2 == 0] += 0.25 * float64(size) })
	if want := []int64{0, 2, 1, 6, 8}; !slices.Equal(got, want) {
		t.Errorf("by rank: %v, want %v", got, want)
	}
}
