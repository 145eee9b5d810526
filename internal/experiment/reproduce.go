package experiment

import (
	"encoding/json"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Seed sets. Every seeded experiment of every reproduction runs on a set of
// seeds; the checks are statistics over it (median, p10–p90, pass rate).
//
//   - Development seeds: 1 to 20 (DevSeeds). The models, workloads,
//     estimators, bands and policy parameters were built and looked at on
//     these (and, for some sensitivity studies the write-ups name, on seeds
//     up to 30). `--seed 0` runs them.
//   - Evaluation seeds for `--seed N` (N ≥ 1): N×1000+1 to N×1000+20
//     (EvalSeeds), disjoint from the development seeds and from those of any
//     other N. The committed write-ups use N = 1 (seeds 1001–1020). Nothing is
//     tuned on them: they are run once the experiment is fixed.
//   - `--quick` uses the first QuickSeeds of the same set (what CI runs: a
//     regression check, not a result).
const (
	// SeedsPerSet is how many seeds a full run uses.
	SeedsPerSet = 20
	// QuickSeeds is how many a --quick run uses.
	QuickSeeds = 5
	// seedStride separates the sets of two values of --seed.
	seedStride = 1000
)

// SeedSet returns the seeds of a run: the development seeds 1..20 for
// set 0, else set×1000+1 .. set×1000+20; the first QuickSeeds with quick.
func SeedSet(set uint64, quick bool) []uint64 {
	n := SeedsPerSet
	if quick {
		n = QuickSeeds
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = set*seedStride + uint64(i) + 1
	}
	return out
}

// DevSeeds are the development seeds (set 0).
func DevSeeds() []uint64 { return SeedSet(0, false) }

// describeSeeds writes a seed list compactly ("1001–1020").
func describeSeeds(seeds []uint64) string {
	if len(seeds) == 0 {
		return "none (deterministic)"
	}
	var parts []string
	for i := 0; i < len(seeds); {
		j := i
		for j+1 < len(seeds) && seeds[j+1] == seeds[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d–%d", seeds[i], seeds[j]))
		} else {
			parts = append(parts, fmt.Sprint(seeds[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}

// Band is the range a check's figure must fall in, both ends included; an
// infinite end is open (JSON null).
type Band struct{ Lo, Hi float64 }

// AtLeastBand is [lo, ∞); AtMostBand (−∞, hi]; Between [lo, hi].
func AtLeastBand(lo float64) Band      { return Band{lo, math.Inf(1)} }
func AtMostBand(hi float64) Band       { return Band{math.Inf(-1), hi} }
func Between(lo, hi float64) Band      { return Band{lo, hi} }
func (b Band) Contains(x float64) bool { return !math.IsNaN(x) && x >= b.Lo-1e-12 && x <= b.Hi+1e-12 }

// AroundPaper is the two-sided band 0.5× to 2× of a positive figure of the
// paper: the reproduction must land within a factor of two of it.
func AroundPaper(paper float64) Band { return Band{paper / 2, paper * 2} }

// String writes the band as a target ("≥ 3", "≤ 0.05", "2.25–9").
func (b Band) String() string {
	switch {
	case math.IsInf(b.Lo, -1) && math.IsInf(b.Hi, 1):
		return "any"
	case math.IsInf(b.Hi, 1):
		return "≥ " + fmtNum(b.Lo)
	case math.IsInf(b.Lo, -1):
		return "≤ " + fmtNum(b.Hi)
	case b.Lo == b.Hi:
		return "= " + fmtNum(b.Lo)
	}
	return fmtNum(b.Lo) + " to " + fmtNum(b.Hi)
}

// MarshalJSON writes [lo, hi], null for an open end.
func (b Band) MarshalJSON() ([]byte, error) {
	end := func(x float64) any {
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return nil
		}
		return x
	}
	return json.Marshal([]any{end(b.Lo), end(b.Hi)})
}

// UnmarshalJSON reads [lo, hi] with null for an open end.
func (b *Band) UnmarshalJSON(data []byte) error {
	var v [2]*float64
	if err := json.Unmarshal(data, &v); err != nil {
		return fmt.Errorf("band: %w", err)
	}
	b.Lo, b.Hi = math.Inf(-1), math.Inf(1)
	if v[0] != nil {
		b.Lo = *v[0]
	}
	if v[1] != nil {
		b.Hi = *v[1]
	}
	return nil
}

// Outcomes of a check.
const (
	Pass = "pass"
	Miss = "miss"
)

// MinPassRate is the share of seeds whose figure must lie in the band, on
// top of the median, for a check to pass (unless the check requires every
// seed): a check that holds on a minority of seeds is not a result.
const MinPassRate = 0.5

// Check is one figure of a paper reproduced, as a statistic over seeds:
// what the paper reports, the band we require, the median and p10–p90 of
// our figure over the seeds, the share of seeds inside the band, and the
// outcome: pass when the median lies in the band and at least MinPassRate
// of the seeds do, miss otherwise. The JSON field names are a contract
// (`gandiva reproduce NAME --format json`).
type Check struct {
	Name   string `json:"name"`
	Metric string `json:"metric"`
	// Paper is the paper's figure: a number, or text where it gives none.
	Paper    any     `json:"paper"`
	Band     Band    `json:"band"`
	Median   float64 `json:"median"`
	P10      float64 `json:"p10"`
	P90      float64 `json:"p90"`
	PassRate float64 `json:"pass_rate"`
	// MinPassRate is the share of seeds that must lie in the band for the
	// check to pass (MinPassRate, or 1 for a claim that must hold on every
	// seed: RequireAll).
	MinPassRate float64   `json:"min_pass_rate"`
	Seeds       []uint64  `json:"seeds"`
	Values      []float64 `json:"values"`
	Outcome     string    `json:"outcome"`
	// Baseline names the baseline a comparison is against, with its source.
	Baseline string `json:"baseline,omitempty"`
	// Reason explains a miss (why the model falls short), or how the
	// figure was obtained.
	Reason string `json:"reason,omitempty"`
	// Recorded is the outcome recorded in the repository for this check
	// (outcomes.json), set by Report.Compare.
	Recorded string `json:"recorded,omitempty"`
}

// NewCheck builds a check from one figure per seed (values[i] for
// seeds[i]; a deterministic check has no seeds and one value). NaN values
// (a seed where the figure does not exist) count as outside the band.
func NewCheck(name, metric string, paper any, band Band, seeds []uint64, values []float64) Check {
	c := Check{Name: name, Metric: metric, Paper: paper, Band: band, Seeds: slices.Clone(seeds), Values: make([]float64, len(values)), MinPassRate: MinPassRate}
	in := 0
	var ok []float64
	for i, v := range values {
		c.Values[i] = round(v)
		if band.Contains(v) {
			in++
		}
		if !math.IsNaN(v) {
			ok = append(ok, v)
		}
	}
	c.Median, c.P10, c.P90 = math.NaN(), math.NaN(), math.NaN()
	if len(ok) > 0 {
		c.Median, c.P10, c.P90 = round(quantile(ok, 0.5)), round(quantile(ok, 0.1)), round(quantile(ok, 0.9))
	}
	if len(ok) < len(values) {
		c.Median = math.NaN() // some seed has no figure: no median
	}
	if len(values) > 0 {
		c.PassRate = round(float64(in) / float64(len(values)))
	}
	c.decide()
	return c
}

func (c *Check) decide() {
	c.Outcome = Miss
	if len(c.Values) > 0 && c.Band.Contains(c.Median) && c.PassRate >= c.MinPassRate-1e-12 {
		c.Outcome = Pass
	}
}

// RequireAll makes a check pass only if every seed's figure lies in the
// band: for a claim that must hold whatever the workload (no user gains by
// gaming the auction), one seed against it refutes it.
func (c Check) RequireAll() Check {
	c.MinPassRate = 1
	c.decide()
	return c
}

// Passed reports whether the check's outcome is pass.
func (c *Check) Passed() bool { return c.Outcome == Pass }

// With sets the check's baseline and the reason given for a miss (or
// how the figure came about), returning it.
func (c Check) With(baseline, reason string) Check {
	c.Baseline, c.Reason = baseline, reason
	return c
}

// MarshalJSON writes NaN figures as null.
func (c Check) MarshalJSON() ([]byte, error) {
	type plain Check
	num := func(x float64) any {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil
		}
		return x
	}
	vals := make([]any, len(c.Values))
	for i, v := range c.Values {
		vals[i] = num(v)
	}
	seeds := c.Seeds
	if seeds == nil {
		seeds = []uint64{}
	}
	return json.Marshal(struct {
		plain
		Median any      `json:"median"`
		P10    any      `json:"p10"`
		P90    any      `json:"p90"`
		Values []any    `json:"values"`
		Seeds  []uint64 `json:"seeds"`
	}{plain(c), num(c.Median), num(c.P10), num(c.P90), vals, seeds})
}

// quantile is the q-quantile of x by linear interpolation between order
// statistics (type 7, as numpy's default); x must not be empty.
func quantile(x []float64, q float64) float64 {
	y := slices.Clone(x)
	slices.Sort(y)
	h := q * float64(len(y)-1)
	lo := int(math.Floor(h))
	if lo >= len(y)-1 {
		return y[len(y)-1]
	}
	return y[lo] + (h-float64(lo))*(y[lo+1]-y[lo])
}

func round(f float64) float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return f
	}
	return math.Round(f*10000) / 10000
}

func fmtNum(f float64) string {
	if math.IsNaN(f) {
		return "n/a"
	}
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.4f", f), "0"), ".")
}

// Options control a reproduction.
type Options struct {
	// Quick runs the reduced version CI uses: fewer seeds (QuickSeeds) and
	// shorter runs; the checks and their bands are the same.
	Quick bool
	// Seed selects the seed set (SeedSet): 0 the development seeds, N ≥ 1
	// the evaluation seeds N×1000+1 .. N×1000+20.
	Seed uint64
	// Progress, when set, receives one line per step.
	Progress func(msg string)
	// PhillyTrace is the public Philly trace for `reproduce philly`
	// (DefaultPhillyTrace when empty).
	PhillyTrace string
}

// Seeds returns the run's seed set.
func (o Options) Seeds() []uint64 { return SeedSet(o.Seed, o.Quick) }

func (o Options) progress(format string, args ...any) {
	if o.Progress != nil {
		o.Progress(fmt.Sprintf(format, args...))
	}
}

// Report is a reproduction's outcome: the checks, and a Markdown write-up
// with its figures (SVG files by name) for docs/results.
type Report struct {
	Name     string
	Quick    bool
	Seeds    []uint64
	Checks   []Check
	Markdown string
	Files    map[string][]byte
}

// Passed reports whether every check passed.
func (r *Report) Passed() bool {
	for _, c := range r.Checks {
		if !c.Passed() {
			return false
		}
	}
	return true
}

// Reproduction is one paper's set of experiments.
type Reproduction struct {
	Name string
	Doc  string
	Run  func(Options) (*Report, error)
}

// reproductions lists every registered reproduction. Each paper's file adds
// its entry here.
func reproductions() []Reproduction {
	return []Reproduction{gandivaRepro, tiresiasRepro, fairRepro, phillyRepro}
}

// Reproductions returns the reproductions sorted by name.
func Reproductions() []Reproduction {
	rs := reproductions()
	sort.Slice(rs, func(i, j int) bool { return rs[i].Name < rs[j].Name })
	return rs
}

// LookupReproduction finds one by name.
func LookupReproduction(name string) (Reproduction, error) {
	var names []string
	for _, r := range Reproductions() {
		if r.Name == name {
			return r, nil
		}
		names = append(names, r.Name)
	}
	return Reproduction{}, fmt.Errorf("unknown reproduction %q (known: %s)", name, strings.Join(names, ", "))
}

// ChecksTable renders checks as a Markdown table.
func ChecksTable(cs []Check) string {
	var b strings.Builder
	b.WriteString("| experiment | metric | paper | band | median | p10–p90 | pass rate | seeds | outcome |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range cs {
		out := c.Outcome
		if out == Miss {
			out = "**miss**"
		}
		spread := "–"
		if len(c.Seeds) > 1 {
			spread = fmtNum(c.P10) + "–" + fmtNum(c.P90)
		}
		rate := fmt.Sprintf("%.0f%%", 100*c.PassRate)
		if c.MinPassRate >= 1 && len(c.Seeds) > 0 {
			rate += " (all needed)"
		}
		fmt.Fprintf(&b, "| %s | %s | %v | %s | %s | %s | %s | %s | %s |\n", c.Name, c.Metric, c.Paper, c.Band, fmtNum(c.Median),
			spread, rate, describeSeeds(c.Seeds), out)
	}
	return b.String()
}

// MissesSection writes every miss with its reason (Markdown).
func MissesSection(cs []Check) string {
	var b strings.Builder
	n := 0
	for _, c := range cs {
		if c.Passed() {
			continue
		}
		n++
		reason := c.Reason
		if reason == "" {
			reason = "(no reason recorded)"
		}
		fmt.Fprintf(&b, "- **%s** (%s): median %s, band %s, %.0f%% of seeds in the band. %s\n", c.Name, c.Metric, fmtNum(c.Median), c.Band, 100*c.PassRate, reason)
	}
	if n == 0 {
		return "No check missed.\n"
	}
	return b.String()
}

// parallelSeeds runs f for every seed, at most GOMAXPROCS at a time, and
// returns the results in seed order. Each call must be independent of the
// others (its own policy and simulation), so the order of execution changes
// nothing but the wall time.
func parallelSeeds[T any](seeds []uint64, f func(seed uint64) (T, error)) ([]T, error) {
	return parallelMap(len(seeds), func(i int) (T, error) { return f(seeds[i]) })
}

// parallelMap runs f(0..n-1), at most GOMAXPROCS at a time.
func parallelMap[T any](n int, f func(i int) (T, error)) ([]T, error) {
	out := make([]T, n)
	errs := make([]error, n)
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out[i], errs[i] = f(i)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
