package tiresias

import (
	"math"
	"slices"
	"sort"
)

// Index is the Gittins index of a distribution of job service (GPU-seconds),
// given as samples (Tiresias NSDI'19 §3.2, after Gittins' multi-armed
// bandit index): for a job that has attained a GPU-seconds and is given a
// service quantum Δ,
//
//	G(a) = P(S − a ≤ Δ | S > a) / E[min(S − a, Δ) | S > a]
//
// the chance that it finishes within the quantum per GPU-second it is
// expected to use. A higher index means higher priority. When no sample
// exceeds a, the distribution says nothing about the job and G(a) = 0
// (lowest priority), as in the Tiresias simulator.
//
// Rank answers in O(log n) from the sorted samples and their prefix sums;
// plainRank in the tests is the O(n) definition it is checked against. The
// prefix sums make Σ min(S − a, Δ) lose precision when samples lie within
// a tiny fraction of a GPU-second of a; service comes in GPU-seconds, and
// the test checks agreement to 1e-9 at half a GPU-second and more.
//
// In compat mode (NewCompatIndex) the index is the Tiresias simulator's
// table instead, with its quirks (see NewCompatIndex).
type Index struct {
	d      []float64 // samples, ascending
	prefix []float64 // prefix[i] = d[0] + ... + d[i-1]
	delta  float64
	// compat: the simulator's table gi[k] for sample d[k], plus a 0 sentinel.
	table []float64
	// buckets narrow firstGT's search (see buildBuckets); nil: none.
	bucket []int32
	shift  uint
	kmin   uint64
}

// NewIndex builds the index of the samples (GPU-seconds; non-positive and
// non-finite values are dropped) for quantum delta.
func NewIndex(samples []float64, delta float64) *Index {
	d := make([]float64, 0, len(samples))
	for _, v := range samples {
		if v > 0 && !math.IsInf(v, 0) && !math.IsNaN(v) {
			d = append(d, v)
		}
	}
	slices.Sort(d)
	x := &Index{d: d, delta: delta, prefix: make([]float64, len(d)+1)}
	for i, v := range d {
		x.prefix[i+1] = x.prefix[i] + v
	}
	x.buildBuckets()
	return x
}

// bucketKey is v's bucket: the top bits of a positive float64 (exponent
// and the first mantissa bits) grow with v, so they cut the line into
// buckets of equal width on a log scale, 2^(52−shift) per octave.
func bucketKey(v float64, shift uint) uint64 { return math.Float64bits(v) >> shift }

// maxBuckets bounds the bucket table of an index whose samples span many
// octaves; it then has fewer buckets per octave.
const maxBuckets = 1 << 14

// buildBuckets indexes the samples by bucketKey: bucket[k] is the number
// of samples whose key is below kmin+k. A search for v then only looks
// between bucket[k] and bucket[k+1] for v's key: service is heavy-tailed,
// and log-scale buckets hold a few samples each where a binary search over
// all of them took a dozen unpredictable steps (RankFrom runs for every
// holding job at every plan). Only for positive, finite samples, whose
// float64 bits are ordered as their values.
func (x *Index) buildBuckets() {
	n := len(x.d)
	if n == 0 || !(x.d[0] > 0) || math.IsInf(x.d[n-1], 1) {
		return
	}
	shift := uint(52 - 4) // 16 buckets per octave
	for bucketKey(x.d[n-1], shift)-bucketKey(x.d[0], shift)+2 > maxBuckets {
		shift++
	}
	x.shift, x.kmin = shift, bucketKey(x.d[0], shift)
	x.bucket = make([]int32, bucketKey(x.d[n-1], shift)-x.kmin+2)
	i := 0
	for k := range x.bucket {
		for i < n && bucketKey(x.d[i], shift) < x.kmin+uint64(k) {
			i++
		}
		x.bucket[k] = int32(i)
	}
}

// Len is the number of samples.
func (x *Index) Len() int { return len(x.d) }

// firstGT is the index of the first sample > a (len(d) if none).
func (x *Index) firstGT(a float64) int {
	d := x.d
	if x.bucket != nil && a >= d[0] && a < d[len(d)-1] {
		// d[:i] have smaller keys, so are < a; d[j:] larger ones, so > a
		k := bucketKey(a, x.shift) - x.kmin
		i, j := int(x.bucket[k]), int(x.bucket[k+1])
		return i + sort.Search(j-i, func(m int) bool { return d[i+m] > a })
	}
	return sort.Search(len(d), func(i int) bool { return d[i] > a })
}

// firstGTNear is firstGT(v) given a guess i (0 ≤ i ≤ n) such as an
// earlier answer: a running job's service crosses a sample or two between
// plans, so a few steps up from the guess find it, and firstGT the rest.
func (x *Index) firstGTNear(v float64, i int) int {
	d := x.d
	if i > 0 && d[i-1] > v { // below the guess
		return x.firstGT(v)
	}
	for end := min(i+8, len(d)); i < end; i++ { // d[:i] are all ≤ v
		if d[i] > v {
			return i
		}
	}
	if i == len(d) {
		return i
	}
	return x.firstGT(v)
}

// Rank is the Gittins index at attained service a.
func (x *Index) Rank(a float64) float64 {
	var pc Piece
	return x.RankFrom(a, &pc)
}

// Piece remembers where Rank's two searches landed for some attained
// service a: lo, the first sample > a, and hi, the first sample > a+Δ.
// The zero value is empty. A Piece belongs to one Index.
type Piece struct {
	lo, hi int32
	ok     bool
}

// RankFrom is Rank(a), bit for bit; for NewIndex's index it searches up
// from pc's answers and updates pc. A running job's service moves a little
// between rounds, so a policy that keeps one Piece per job finds the
// samples a and a+Δ fall between in a step or two (or none) from the
// last answers. (A compat index ignores pc.)
func (x *Index) RankFrom(a float64, pc *Piece) float64 {
	if x.table != nil {
		return x.compatRank(a)
	}
	d, n := x.d, len(x.d)
	t := a + x.delta
	lo, hi := int(pc.lo), int(pc.hi)
	switch {
	case !pc.ok:
		lo = x.firstGT(a)
		hi = max(x.firstGT(t), lo) // (max for Δ ≤ 0: Rank searches the samples above lo)
		*pc = Piece{lo: int32(lo), hi: int32(hi), ok: true}
	case (lo > 0 && !(d[lo-1] <= a)) || (lo < n && !(d[lo] > a)) || (hi > 0 && !(d[hi-1] <= t)) || (hi < n && !(d[hi] > t)):
		// a or a+Δ crossed a sample (or is NaN): search up from the last answers
		lo = x.firstGTNear(a, lo)
		hi = max(x.firstGTNear(t, max(hi, lo)), lo)
		pc.lo, pc.hi = int32(lo), int32(hi)
	}
	if lo == n {
		return 0
	}
	done := float64(hi - lo)                                    // samples that finish within the quantum
	rest := float64(n - hi)                                     // samples that need more than the quantum
	used := x.prefix[hi] - x.prefix[lo] - a*done + x.delta*rest // Σ min(S − a, Δ)
	return done / used
}

// NewCompatIndex builds the Tiresias simulator's Gittins table from its
// samples (integers, as its parse_job_dist reads them) for quantum delta,
// with the simulator's arithmetic, Python 2 semantics included:
//
//   - the table has one entry per sample d[k], computed at a = d[k] − 1;
//   - p = (#samples in (a, a+Δ]) ÷ (#samples > a), rounded half away from
//     zero to 5 decimals; when a+Δ ≥ the largest sample the upper index is
//     the last sample's, not past it (so the largest sample counts as
//     needing more than Δ);
//   - e = (Σ samples in (a, a+Δ] + Δ × #samples beyond) ÷ (#samples > a),
//     floor-divided (Python 2 int/int) and summing the samples themselves,
//     not the service left (S − a);
//   - rank = p × 10⁶ ÷ e, rounded to 4 decimals;
//   - lookup: 0 above the largest sample, else the entry of the first
//     sample strictly greater than a.
//
// The tests check the table bit for bit against the simulator's own
// (testdata/gittins_table_py2.csv). Outside compat mode NewIndex is the
// definition above.
func NewCompatIndex(samples []int64, delta int64) *Index {
	d := slices.Clone(samples)
	slices.Sort(d)
	n := len(d)
	x := &Index{d: make([]float64, n), table: make([]float64, n+1), delta: float64(delta)}
	prefix := make([]int64, n+1)
	for i, v := range d {
		x.d[i] = float64(v)
		prefix[i+1] = prefix[i] + v
	}
	firstGT := func(a int64) int { return sort.Search(n, func(i int) bool { return d[i] > a }) }
	for k := range d {
		a := d[k] - 1
		if a > d[n-1]-1 {
			continue
		}
		idx := firstGT(a)
		idxd := n - 1
		if a+delta <= d[n-1]-1 {
			idxd = firstGT(a + delta)
		}
		num, den := int64(idxd-idx), int64(n-idx)
		if num <= 0 {
			continue // p = 0: rank 0
		}
		q := (2*num*100000 + den) / (2 * den) // round half away from zero, 5 decimals
		p := float64(q) / 1e5
		e := (prefix[idxd] - prefix[idx] + delta*int64(n-idxd)) / den
		r := p * 1e6 / float64(e)
		x.table[k] = math.Round(r*1e4) / 1e4
	}
	x.buildBuckets()
	return x
}

func (x *Index) compatRank(a float64) float64 {
	n := len(x.d)
	if n == 0 || a > x.d[n-1] {
		return 0
	}
	return x.table[x.firstGT(a)]
}

// Step returns the rank at a and, for a compat index (a step function),
// the interval [lo, hi) of attained service over which it stays the same;
// for NewIndex's continuous index lo = hi = a.
func (x *Index) Step(a float64) (rank, lo, hi float64) {
	if x.table == nil {
		return x.Rank(a), a, a
	}
	n := len(x.d)
	k := x.firstGT(a) // table[n] is the 0 past the largest sample
	lo, hi = math.Inf(-1), math.Inf(1)
	if k > 0 {
		lo = x.d[k-1]
	}
	if k < n {
		hi = x.d[k]
	}
	if n == 0 {
		return 0, lo, hi
	}
	return x.table[k], lo, hi
}

// Table returns the compat table (one entry per sorted sample), or nil.
func (x *Index) Table() (samples, ranks []float64) {
	if x.table == nil {
		return nil, nil
	}
	return x.d, x.table[:len(x.d)]
}
