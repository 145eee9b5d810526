package experiment

import (
	"math"
	"strings"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
)

// TestReproduceFairQuick runs `gandiva reproduce fair --quick` on the
// development seeds: every check is reported, with its statistics, and the
// plots are SVG.
func TestReproduceFairQuick(t *testing.T) {
	r, err := LookupReproduction("fair")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.Run(Options{Quick: true, Seed: 0})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"fair/stride table", "fair/gang-aware stride table", "fair/homogeneous worst window", "fair/homogeneous windows within 5%",
		"fair/trading user1", "fair/trading user2", "fair/trading user3", "fair/trading user4", "fair/gaming buyer side", "fair/gaming seller side"}
	names, dup := checkNames(rep)
	if dup != "" || strings.Join(names, "|") != strings.Join(want, "|") {
		t.Fatalf("checks %q (duplicate %q), want %q", names, dup, want)
	}
	for _, c := range rep.Checks[:2] {
		if !c.Passed() || len(c.Seeds) != 0 {
			t.Errorf("%s: %s, seeds %v: the paper's tables must be reproduced exactly", c.Name, c.Outcome, c.Seeds)
		}
	}
	for _, c := range rep.Checks[2:] {
		if len(c.Seeds) != QuickSeeds || len(c.Values) != QuickSeeds || math.IsNaN(c.Median) {
			t.Errorf("%s: %d seeds, %d values, median %v", c.Name, len(c.Seeds), len(c.Values), c.Median)
		}
	}
	checkRecordNames(t, rep)
	checkEveryCheckCanFail(t, rep)
	for _, f := range []string{"fair-shares.svg", "fair-trading.svg"} {
		if !strings.HasPrefix(string(rep.Files[f]), "<?xml") {
			t.Errorf("%s is not an SVG", f)
		}
	}
}

// TestFairCombinations: the trading workloads are every combination of four
// of the paper's table's seven job types, users in order of speedup.
func TestFairCombinations(t *testing.T) {
	cs := FairCombinations()
	if len(cs) != 35 {
		t.Fatalf("%d combinations, want 35", len(cs))
	}
	seen := map[[4]string]bool{}
	rank := map[string]int{}
	for i, m := range FairSeedTypes {
		rank[m] = i
	}
	for _, c := range cs {
		if seen[c] {
			t.Errorf("%v twice", c)
		}
		seen[c] = true
		for k := 1; k < 4; k++ {
			if rank[c[k-1]] >= rank[c[k]] {
				t.Errorf("%v: not in order of speedup", c)
			}
		}
	}
	// the same seed gives the same users; another seed other gang sizes
	a, b := FairHeteroUsers(cs[0], 3), FairHeteroUsers(cs[0], 3)
	if len(a) != 4 || a[0].Model != cs[0][0] || a[3].Model != cs[0][3] {
		t.Fatalf("users %+v for %v", a, cs[0])
	}
	same, other := true, false
	c := FairHeteroUsers(cs[0], 4)
	for i := range a {
		for k := range a[i].Sizes {
			same = same && a[i].Sizes[k] == b[i].Sizes[k]
			other = other || a[i].Sizes[k] != c[i].Sizes[k]
		}
	}
	if !same || !other {
		t.Errorf("gang sizes: same seed same %v, other seed differs %v", same, other)
	}
}

// TestGamingCheckRejectsFirstAndMidpointPrices: the gaming check must tell
// the paper's second-price auction from auctions that are not
// incentive-compatible. Under the first price (the buyer pays its own bid)
// the buyer gains by shading its bid; under the midpoint price the price
// setter gains by overbidding into the buyer's place. On the same
// workloads the second price gives the buyer side no gain. (Development
// seeds, and combinations whose high speedups are spread out.)
func TestGamingCheckRejectsFirstAndMidpointPrices(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates 3 × 3 × 17 runs")
	}
	c, err := cluster.Load("fair-hetero")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		types [4]string
		seed  uint64
	}{{[4]string{"vae", "gru", "resnet50", "dcgan"}, 2}, {[4]string{"vae", "superresolution", "gru", "lstm"}, 5},
		{[4]string{"superresolution", "gru", "lstm", "resnext50"}, 3}}
	seeds := []uint64{1, 2, 3}
	side := map[string][]float64{}
	for _, price := range []string{"second", "first", "midpoint"} {
		for _, tc := range cases {
			r, err := gamingOutcome(c, tc.types, tc.seed, price)
			if err != nil {
				t.Fatal(err)
			}
			side[price] = append(side[price], r.buyer)
		}
	}
	for _, price := range []string{"first", "midpoint"} {
		buyer, _ := gamingChecks(seeds, side[price], side[price])
		if buyer.Passed() {
			t.Errorf("price=%s: the buyer-side gaming check passed (best gains %v): it cannot tell this rule from a second price", price, side[price])
		}
	}
	buyer, _ := gamingChecks(seeds, side["second"], side["second"])
	if !buyer.Passed() {
		t.Errorf("price=second: buyer side gained %v by misreporting", side["second"])
	}
}

// TestGamingCheckRejectsGains: a gain above the tolerance on most seeds
// fails the check, on either side.
func TestGamingCheckRejectsGains(t *testing.T) {
	seeds := []uint64{1, 2, 3}
	b, s := gamingChecks(seeds, []float64{0, 0.05, 0.06}, []float64{0, 0, 0.3})
	if b.Passed() || s.Passed() {
		t.Errorf("buyer %s, seller %s: want both to miss (a gain on one seed in three refutes incentive-compatibility)", b.Outcome, s.Outcome)
	}
	if b, _ := gamingChecks(seeds, []float64{0, 0.01, -0.2}, nil); !b.Passed() {
		t.Errorf("gains within the tolerance missed: %s", b.Outcome)
	}
}

func TestEntitled(t *testing.T) {
	users := []string{"a", "b", "c"}
	// plenty of demand: ticket shares
	e := entitled(users, map[string]float64{"a": 2, "b": 1, "c": 1}, map[string]float64{"a": 100, "b": 100, "c": 100}, 64)
	if math.Abs(e["a"]-0.5) > 1e-12 || math.Abs(e["b"]-0.25) > 1e-12 {
		t.Errorf("uncapped: %v", e)
	}
	// a capped at 8 of its 32: the rest split 1:1
	e = entitled(users, map[string]float64{"a": 2, "b": 1, "c": 1}, map[string]float64{"a": 8, "b": 100, "c": 100}, 64)
	if math.Abs(e["a"]-0.125) > 1e-12 || math.Abs(e["b"]-0.4375) > 1e-12 {
		t.Errorf("capped: %v", e)
	}
	// inactive user: nothing; less demand than capacity: shares of demand
	e = entitled(users, map[string]float64{"a": 1, "b": 1, "c": 1}, map[string]float64{"a": 3, "b": 1}, 64)
	if e["c"] != 0 || math.Abs(e["a"]-0.75) > 1e-12 {
		t.Errorf("light load: %v", e)
	}
}
