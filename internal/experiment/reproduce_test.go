package experiment

import (
	"encoding/json"
	"math"
	"slices"
	"sort"
	"strings"
	"testing"
)

// checkRecordNames: the recorded outcomes (outcomes.json) name exactly the
// checks a reproduction reports, so CI compares every one of them.
func checkRecordNames(t *testing.T, rep *Report) {
	t.Helper()
	rec, err := LoadRecord()
	if err != nil {
		t.Fatal(err)
	}
	var recorded []string
	for name := range rec[rep.Name] {
		recorded = append(recorded, name)
	}
	names, _ := checkNames(rep)
	names = slices.Clone(names)
	sort.Strings(recorded)
	sort.Strings(names)
	if !slices.Equal(recorded, names) {
		t.Errorf("outcomes.json records %q for %s, the reproduction reports %q", recorded, rep.Name, names)
	}
}

// checkEveryCheckCanFail feeds every check of a report figures just outside
// its band, on every seed: each must be rejected (a check whose band
// contains everything cannot fail, which is a defect).
func checkEveryCheckCanFail(t *testing.T, rep *Report) {
	t.Helper()
	for _, c := range rep.Checks {
		var outside []float64
		switch {
		case !math.IsInf(c.Band.Lo, -1):
			outside = []float64{c.Band.Lo - 0.01*math.Max(1, math.Abs(c.Band.Lo)), c.Band.Lo - 1}
		case !math.IsInf(c.Band.Hi, 1):
			outside = []float64{c.Band.Hi + 0.01*math.Max(1, math.Abs(c.Band.Hi)), c.Band.Hi + 1}
		default:
			t.Errorf("%s: band %s contains every figure", c.Name, c.Band)
			continue
		}
		if !math.IsInf(c.Band.Hi, 1) && !math.IsInf(c.Band.Lo, -1) {
			outside = append(outside, c.Band.Hi+0.01*math.Max(1, math.Abs(c.Band.Hi)))
		}
		for _, v := range outside {
			vals := make([]float64, max(len(c.Seeds), 1))
			for i := range vals {
				vals[i] = v
			}
			if got := NewCheck(c.Name, c.Metric, c.Paper, c.Band, c.Seeds, vals); got.Passed() {
				t.Errorf("%s: %v on every seed passed its band %s", c.Name, v, c.Band)
			}
		}
	}
}

func TestSeedSets(t *testing.T) {
	dev := DevSeeds()
	if len(dev) != SeedsPerSet || dev[0] != 1 || dev[len(dev)-1] != 20 {
		t.Errorf("development seeds %v, want 1..20", dev)
	}
	ev := SeedSet(1, false)
	if ev[0] != 1001 || ev[len(ev)-1] != 1020 {
		t.Errorf("evaluation seeds %v, want 1001..1020", ev)
	}
	seven := SeedSet(7, false)
	for _, s := range seven {
		if slices.Contains(ev, s) || slices.Contains(dev, s) {
			t.Errorf("seed %d of set 7 is in set 1 or the development set", s)
		}
	}
	if q := SeedSet(7, true); len(q) != QuickSeeds || q[0] != 7001 {
		t.Errorf("quick set %v", q)
	}
	if got := describeSeeds(ev); got != "1001–1020" {
		t.Errorf("describeSeeds: %q", got)
	}
}

// TestCheckRejects: every way a figure can fail its check fails it.
func TestCheckRejects(t *testing.T) {
	seeds := []uint64{1, 2, 3, 4, 5}
	two := Between(2.25, 9)
	cases := []struct {
		name   string
		band   Band
		values []float64
		pass   bool
	}{
		{"inside", two, []float64{3, 4, 5, 6, 7}, true},
		{"above a two-sided band", two, []float64{300, 310, 315, 320, 330}, false},
		{"below a two-sided band", two, []float64{1, 1.1, 1.2, 1.3, 1.4}, false},
		{"median inside, most seeds outside", two, []float64{1, 1, 5, 50, 60}, false},
		{"passes on one seed only", AtLeastBand(0.15), []float64{0.04, 0.05, 0.06, 0.3, 0.05}, false},
		{"a seed without a figure", two, []float64{3, 4, math.NaN(), 5, 6}, false},
		{"at most: above", AtMostBand(0.05), []float64{0.054, 0.1, 0.04, 0.055, 0.06}, false},
		{"at most: inside, the edge included", AtMostBand(0.05), []float64{0.05, 0.01, 0.02, 0.03, 0.08}, true},
		{"exact: one miss in five", Between(1, 1), []float64{1, 1, 0, 1, 1}, true},
		{"exact: most miss", Between(1, 1), []float64{1, 0, 0, 1, 0}, false},
	}
	for _, c := range cases {
		ch := NewCheck(c.name, "m", 1, c.band, seeds, c.values)
		if ch.Passed() != c.pass {
			t.Errorf("%s: %v in %s: outcome %s (median %v, pass rate %v)", c.name, c.values, c.band, ch.Outcome, ch.Median, ch.PassRate)
		}
	}
	if ch := NewCheck("all", "m", 1, AtMostBand(0.02), seeds, []float64{0, 0, 0, 0, 0.3}).RequireAll(); ch.Passed() || ch.MinPassRate != 1 {
		t.Errorf("a check that needs every seed passed with one against it")
	}
	if ch := NewCheck("deterministic", "m", 1, Between(1, 1), nil, []float64{0}); ch.Passed() {
		t.Error("a deterministic check with a wrong figure passed")
	}
	if ch := NewCheck("nothing", "m", 1, AtLeastBand(0), nil, nil); ch.Passed() {
		t.Error("a check without figures passed")
	}
}

func TestCheckStatistics(t *testing.T) {
	var vals []float64
	var seeds []uint64
	for i := 1; i <= 20; i++ {
		vals = append(vals, float64(i))
		seeds = append(seeds, uint64(i))
	}
	c := NewCheck("s", "m", 10, AtMostBand(15), seeds, vals)
	if c.Median != 10.5 || c.P10 != 2.9 || c.P90 != 18.1 || c.PassRate != 0.75 || !c.Passed() {
		t.Errorf("median %v p10 %v p90 %v pass rate %v outcome %s", c.Median, c.P10, c.P90, c.PassRate, c.Outcome)
	}
}

// TestCheckJSON: the contract's fields, with an open band end as null.
func TestCheckJSON(t *testing.T) {
	c := NewCheck("n", "m", 4.5, AtLeastBand(3), []uint64{1, 2}, []float64{4, math.NaN()})
	data, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"name", "metric", "paper", "band", "median", "p10", "p90", "pass_rate", "seeds", "outcome", "values"} {
		if _, ok := back[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, data)
		}
	}
	if b, _ := back["band"].([]any); len(b) != 2 || b[0] != 3.0 || b[1] != nil {
		t.Errorf("band %v, want [3, null]", back["band"])
	}
	if back["median"] != nil || back["outcome"] != Miss {
		t.Errorf("median %v outcome %v, want null and miss (a seed had no figure)", back["median"], back["outcome"])
	}
	var band Band
	if err := json.Unmarshal([]byte("[null, 2]"), &band); err != nil || !math.IsInf(band.Lo, -1) || band.Hi != 2 {
		t.Errorf("band %v err %v", band, err)
	}
}

// TestCompareWithRecord: CI fails on a regression, not on a documented miss.
func TestCompareWithRecord(t *testing.T) {
	pass := NewCheck("a", "m", 1, AtLeastBand(0), nil, []float64{1})
	miss := NewCheck("b", "m", 1, AtLeastBand(2), nil, []float64{1})
	newMiss := NewCheck("c", "m", 1, AtLeastBand(2), nil, []float64{1})
	rec := Record{"r": {"a": {Pass, Pass}, "b": {Miss, Miss}, "gone": {Pass, Pass}}}
	rep := &Report{Name: "r", Checks: []Check{pass, miss, newMiss}}
	reg, imp := rep.Compare(rec)
	if len(reg) != 2 || !strings.HasPrefix(reg[0], "c:") || !strings.HasPrefix(reg[1], "gone:") || len(imp) != 0 {
		t.Errorf("regressions %q improvements %q", reg, imp)
	}
	// a recorded pass that misses is a regression; a recorded miss that passes an improvement
	rec = Record{"r": {"a": {Miss, Miss}, "b": {Pass, Miss}}}
	rep = &Report{Name: "r", Checks: []Check{pass, miss}}
	if reg, imp := rep.Compare(rec); len(reg) != 1 || !strings.HasPrefix(reg[0], "b:") || len(imp) != 1 {
		t.Errorf("full: regressions %q improvements %q", reg, imp)
	}
	rep.Quick = true
	if reg, _ := rep.Compare(rec); len(reg) != 0 {
		t.Errorf("quick: regressions %q (the quick record says miss)", reg)
	}
	if rep.Checks[1].Recorded != Miss {
		t.Errorf("recorded %q", rep.Checks[1].Recorded)
	}
}

func TestRecordLoads(t *testing.T) {
	rec, err := LoadRecord()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range Reproductions() {
		if r.Name != "philly" && len(rec[r.Name]) == 0 { // philly has a table, no checks
			t.Errorf("no outcomes recorded for %s", r.Name)
		}
	}
}

// TestTiresiasChecksCanFail: every check of the quick Tiresias
// reproduction rejects figures outside its band, and its record lists
// exactly its checks.
func TestTiresiasChecksCanFail(t *testing.T) {
	r, err := LookupReproduction("tiresias")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.Run(Options{Quick: true, Seed: 0})
	if err != nil {
		t.Fatal(err)
	}
	checkEveryCheckCanFail(t, rep)
	checkRecordNames(t, rep)
}
