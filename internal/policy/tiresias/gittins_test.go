package tiresias

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"math"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/dataset"
)

// yarn reads the embedded yarn-gput1000.csv: the Tiresias simulator's prior.
func yarn(t testing.TB) []int64 {
	data, err := dataset.ReadFile("yarn-gput1000.csv")
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Scan() // header
	for sc.Scan() {
		v, err := strconv.ParseInt(sc.Text(), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// TestCompatTableMatchesSimulator: the compat table equals, bit for bit,
// the Gittins table the Tiresias simulator builds under Python 2
// (testdata/gittins_table_py2.csv, dumped from its parse_job_dist).
func TestCompatTableMatchesSimulator(t *testing.T) {
	f, err := os.Open("testdata/gittins_table_py2.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	x := NewCompatIndex(yarn(t), DefaultDelta)
	d, ranks := x.Table()
	recs = recs[1 : len(recs)-1] // header; the simulator's sentinel row (maxint, 0) is our lookup past the end
	if len(recs) != len(d) {
		t.Fatalf("table has %d entries, the simulator's %d", len(d), len(recs))
	}
	for i, r := range recs {
		v, _ := strconv.ParseFloat(r[1], 64)
		want, _ := strconv.ParseFloat(r[2], 64)
		if d[i] != v || ranks[i] != want {
			t.Errorf("entry %d: sample %v rank %v, simulator %v %v", i, d[i], ranks[i], v, want)
		}
	}
	// The lookup: first sample strictly greater, 0 beyond the largest.
	for _, c := range []struct{ a, want float64 }{{0, ranks[0]}, {120, ranks[0]}, {121, ranks[1]}, {d[len(d)-1], 0}, {1e12, 0}} {
		if got := x.Rank(c.a); got != c.want {
			t.Errorf("Rank(%v) = %v, want %v", c.a, got, c.want)
		}
	}
}

// plainRank is the definition of the Gittins index, computed directly
// from the samples in O(n): P(S − a ≤ Δ | S > a) / E[min(S − a, Δ) | S > a].
func plainRank(samples []float64, delta, a float64) float64 {
	var above, done, used float64
	for _, s := range samples {
		if !(s > 0) || s <= a {
			continue
		}
		above++
		if s <= a+delta { // (the same float comparison as the index: a+Δ is rounded once)
			done++
			used += s - a
		} else {
			used += delta
		}
	}
	if above == 0 {
		return 0
	}
	return (done / above) / (used / above)
}

// TestIndexMatchesPlain checks the O(log n) index against plainRank on
// random distributions (heavy-tailed, discrete with ties, tiny), at
// random points and at every sample and its neighbours.
func TestIndexMatchesPlain(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 2))
	for trial := range 300 {
		n := 1 + rng.IntN(400)
		samples := make([]float64, n)
		for i := range samples {
			switch trial % 3 {
			case 0: // heavy-tailed (Pareto)
				samples[i] = 100 * math.Pow(1-rng.Float64(), -1/1.1)
			case 1: // few distinct values: ties
				samples[i] = float64(1 + rng.IntN(8)*500)
			default:
				samples[i] = rng.Float64() * 1e4
			}
		}
		delta := []float64{1, 500, 3250, 1e5}[rng.IntN(4)]
		x := NewIndex(samples, delta)
		points := []float64{0, -1, 1e300}
		for range 50 {
			points = append(points, rng.Float64()*2e4)
		}
		for _, s := range samples[:min(n, 40)] {
			// at samples and quantum boundaries, and half a GPU-second off
			// (nearer, Σ(S − a) over the prefix sums cancels catastrophically:
			// service is counted in GPU-seconds, not ulps)
			points = append(points, s, s-delta, s+delta, s-0.5, s+0.5, s-delta-0.5, s-delta+0.5)
		}
		for _, a := range points {
			got, want := x.Rank(a), plainRank(samples, delta, a)
			if math.Abs(got-want) > 1e-9*math.Max(math.Abs(want), 1e-300) {
				t.Fatalf("trial %d (n=%d, Δ=%v): Rank(%v) = %v, plain %v", trial, n, delta, a, got, want)
			}
		}
	}
}

// TestRankFrom: with a Piece kept across calls (as the policy keeps one
// per job), RankFrom equals Rank bit for bit, as service walks up in steps
// small and large and now and then back down (a promotion resets it); and
// firstGT, which searches buckets, and firstGTNear from any guess equal a
// binary search of all samples.
func TestRankFrom(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 3))
	yarnF := func() []float64 {
		var out []float64
		for _, v := range yarn(t) {
			out = append(out, float64(v))
		}
		return out
	}()
	for trial := range 60 {
		samples := yarnF
		if trial%2 == 1 { // ties and a short list
			samples = make([]float64, 1+rng.IntN(30))
			for i := range samples {
				samples[i] = float64(1 + rng.IntN(6)*700)
			}
		}
		x := NewIndex(samples, []float64{1, 500, 3250}[trial%3])
		var pc Piece
		a := 0.0
		for step := range 3000 {
			switch r := rng.IntN(20); {
			case r == 0:
				a = 0
			case r == 1:
				a = rng.Float64() * 1e6
			case r == 2 && step%7 == 0:
				a = math.NaN() // (Rank(NaN) is 0: no sample exceeds it)
			default:
				a += rng.ExpFloat64() * math.Pow(10, float64(rng.IntN(5)))
			}
			if got, want := x.RankFrom(a, &pc), x.Rank(a); got != want && !(math.IsNaN(got) && math.IsNaN(want)) {
				t.Fatalf("trial %d step %d: RankFrom(%v) = %v, Rank %v", trial, step, a, got, want)
			}
			d := x.d[rng.IntN(len(x.d))]
			v := []float64{a, -1, 0, d, math.Nextafter(d, 0), math.Nextafter(d, math.Inf(1)), 1e300, math.NaN()}[rng.IntN(8)]
			want := sort.Search(len(x.d), func(i int) bool { return x.d[i] > v })
			if got := x.firstGT(v); got != want {
				t.Fatalf("trial %d step %d: firstGT(%v) = %d, binary search %d", trial, step, v, got, want)
			}
			if got := x.firstGTNear(v, rng.IntN(len(x.d)+1)); got != want {
				t.Fatalf("trial %d step %d: firstGTNear(%v) = %d, binary search %d", trial, step, v, got, want)
			}
		}
	}
}

// TestStep: the compat index's rank is constant over the interval Step
// reports, and changes at its ends.
func TestStep(t *testing.T) {
	x := NewCompatIndex(yarn(t), DefaultDelta)
	rng := rand.New(rand.NewPCG(1, 1))
	for range 2000 {
		a := math.Floor(math.Exp(rng.Float64() * 18))
		r, lo, hi := x.Step(a)
		if r != x.Rank(a) || a < lo || a >= hi {
			t.Fatalf("Step(%v) = %v [%v, %v), Rank %v", a, r, lo, hi, x.Rank(a))
		}
		if !math.IsInf(lo, -1) && x.Rank(lo) != r {
			t.Fatalf("Step(%v): rank at lo %v is %v, not %v", a, lo, x.Rank(lo), r)
		}
	}
}

// TestLearn: with prior=none and learn=true the index is built from the
// GPU-time of finished jobs once minsamples have finished, and rebuilt as
// they grow by a tenth.
func TestLearn(t *testing.T) {
	p, err := build(policyConfig(map[string]string{"learn": "true", "minsamples": "5"}), true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.index != nil {
		t.Fatal("an index before any job finished")
	}
	runLearn(t, p)
	if p.index == nil || p.index.Len() < 5 || p.builtAt != len(p.samples) && float64(len(p.samples)) >= 1.1*float64(p.builtAt) {
		t.Fatalf("index %v of %d samples, %d collected", p.index != nil, p.builtAt, len(p.samples))
	}
}

// TestFirstGTBuckets: firstGT equals a binary search of all samples for
// samples spanning more octaves than the bucket table covers at 16 per
// octave, and for a compat index with samples ≤ 0 (no buckets).
func TestFirstGTBuckets(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 9))
	wide := make([]float64, 500)
	for i := range wide {
		wide[i] = math.Exp(rng.Float64()*1400 - 700)
	}
	compat := NewCompatIndex([]int64{-5, 0, 0, 3, 3, 9, 700, 700, 40000}, DefaultDelta)
	for _, x := range []*Index{NewIndex(wide, DefaultDelta), compat} {
		if x == compat && x.bucket != nil {
			t.Fatal("buckets over samples ≤ 0")
		}
		if x != compat && (x.bucket == nil || len(x.bucket) > maxBuckets) {
			t.Fatalf("%d buckets for samples over many octaves", len(x.bucket))
		}
		for range 5000 {
			v := x.d[rng.IntN(len(x.d))]
			v = []float64{v, math.Nextafter(v, math.Inf(-1)), math.Nextafter(v, math.Inf(1)), v * (0.5 + rng.Float64()), -v, 0}[rng.IntN(6)]
			want := sort.Search(len(x.d), func(i int) bool { return x.d[i] > v })
			if got := x.firstGT(v); got != want {
				t.Fatalf("firstGT(%v) = %d, binary search %d", v, got, want)
			}
		}
	}
}
