package fair

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/policy"
)

func TestParseTickets(t *testing.T) {
	got, err := ParseTickets(" alice:4 / bob:1.5/carol:0")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got["alice"] != 4 || got["bob"] != 1.5 || got["carol"] != 0 {
		t.Errorf("got %v", got)
	}
	if m, err := ParseTickets(""); err != nil || len(m) != 0 {
		t.Errorf("empty: %v %v", m, err)
	}
	for _, bad := range []string{"alice", "alice:", ":4", "alice:x", "alice:-1", "alice:NaN", "alice:Inf", "alice:1/alice:2", "alice:1//bob:2"} {
		if _, err := ParseTickets(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func FuzzParseTickets(f *testing.F) {
	for _, s := range []string{"alice:4/bob:1", "", "a:1e308", "x:0.5/y:2", "a:1/a:1", "::", "a:-0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseTickets(s)
		if err != nil {
			if !strings.Contains(err.Error(), "entry") {
				t.Errorf("error %q does not say which entry", err)
			}
			return
		}
		for u, n := range m {
			if u == "" || strings.ContainsAny(u, "/:") || !(n >= 0) || math.IsInf(n, 0) {
				t.Errorf("%q: accepted user %q with tickets %v", s, u, n)
			}
		}
	})
}

func TestNewParams(t *testing.T) {
	if _, err := New(policy.Config{Params: map[string]string{"tickets": "a:2", "quantum": "30", "default": "2", "trade": "false",
		"moves": "0", "imbalance": "0.1", "pack": "true", "memory": "0", "gain": "0", "holes": "pass"}}); err != nil {
		t.Fatalf("valid parameters rejected: %v", err)
	}
	for _, bad := range []map[string]string{
		{"quantum": "0"}, {"quantum": "-5"}, {"default": "-1"}, {"moves": "-1"}, {"imbalance": "-0.1"},
		{"gain": "-1"}, {"tickets": "a"}, {"nonsense": "1"}, {"trade": "maybe"}, {"holes": "job"},
	} {
		if _, err := New(policy.Config{Params: bad}); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// TestAuctionSeedExample is the paper's example: U1's speedup 1.2, U2's 6,
// U3's 2: U2 buys from U1 at U3's bid, 2.
func TestAuctionSeedExample(t *testing.T) {
	bids := []Bid{{"U1", 1.2}, {"U2", 6}, {"U3", 2}}
	buyer, seller, price, ok := auction(bids, func(string) bool { return true })
	if !ok || buyer.User != "U2" || seller.User != "U1" || price != 2 {
		t.Fatalf("got buyer %v seller %v price %v ok %v", buyer, seller, price, ok)
	}
	// the price does not depend on the buyer's or the seller's own bid
	for _, b := range []float64{3, 10, 100} {
		for _, s := range []float64{0.1, 1, 1.9} {
			_, _, p, ok := auction([]Bid{{"U1", s}, {"U2", b}, {"U3", 2}}, func(string) bool { return true })
			if !ok || p != 2 {
				t.Errorf("bids %v/%v: price %v ok %v, want 2", s, b, p, ok)
			}
		}
	}
}

func TestAuctionNoTrade(t *testing.T) {
	yes := func(string) bool { return true }
	cases := map[string][]Bid{
		"two bidders: no second price": {{"a", 1}, {"b", 5}},
		"top bids tie":                 {{"a", 1}, {"b", 5}, {"c", 5}},
		"everyone else bids the price": {{"a", 2}, {"b", 5}, {"c", 2}},
		"nobody":                       nil,
	}
	for name, bids := range cases {
		if _, _, _, ok := auction(bids, yes); ok {
			t.Errorf("%s: traded", name)
		}
	}
	// the lowest bidder holds no fast GPUs: the next lowest sells
	_, seller, _, ok := auction([]Bid{{"a", 1}, {"b", 1.5}, {"c", 3}, {"d", 9}}, func(u string) bool { return u != "a" })
	if !ok || seller.User != "b" {
		t.Errorf("seller %v ok %v, want b", seller, ok)
	}
	if _, _, _, ok := auction([]Bid{{"a", 1}, {"c", 3}, {"d", 9}}, func(u string) bool { return u != "a" }); ok {
		t.Error("traded with the price setter as seller")
	}
}

// refWaterfill is the textbook water-filling: raise a common level, cap
// users at their demand, repeat.
func refWaterfill(w, d []float64, capacity float64) []float64 {
	out := make([]float64, len(w))
	open := make([]bool, len(w))
	total := 0.0
	for i := range w {
		total += d[i]
		open[i] = d[i] > 0 && w[i] > 0
	}
	if total <= capacity {
		copy(out, d)
		return out
	}
	left := capacity
	for left > 1e-12 {
		ws := 0.0
		for i := range w {
			if open[i] {
				ws += w[i]
			}
		}
		if ws == 0 {
			break
		}
		level := left / ws
		capped := false
		for i := range w {
			if open[i] && d[i]-out[i] <= level*w[i] {
				left -= d[i] - out[i]
				out[i] = d[i]
				open[i] = false
				capped = true
			}
		}
		if !capped {
			for i := range w {
				if open[i] {
					out[i] += level * w[i]
				}
			}
			left = 0
		}
	}
	if left > 1e-12 { // only users without weight remain: in proportion to demand
		zd := 0.0
		for i := range w {
			if w[i] <= 0 {
				zd += d[i]
			}
		}
		for i := range w {
			if w[i] <= 0 && zd > 0 {
				out[i] = math.Min(d[i], left*d[i]/zd)
			}
		}
	}
	return out
}

func TestWaterfillMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	for iter := 0; iter < 5000; iter++ {
		n := 1 + rng.IntN(8)
		sh := make([]share, n)
		w, d := make([]float64, n), make([]float64, n)
		for i := range sh {
			w[i] = float64(rng.IntN(5))
			d[i] = float64(rng.IntN(20))
			sh[i] = share{weight: w[i], demand: d[i]}
		}
		capacity := float64(1 + rng.IntN(40))
		waterfill(sh, capacity)
		want := refWaterfill(w, d, capacity)
		sum := 0.0
		for i := range sh {
			if math.Abs(sh[i].alloc-want[i]) > 1e-9 {
				t.Fatalf("weights %v demands %v capacity %v: got %v, want %v", w, d, capacity, sh, want)
			}
			if sh[i].alloc > d[i]+1e-9 || sh[i].alloc < 0 {
				t.Fatalf("allocation %v outside [0, demand %v]", sh[i].alloc, d[i])
			}
			sum += sh[i].alloc
		}
		if sum > capacity+1e-9 {
			t.Fatalf("allocated %v of %v", sum, capacity)
		}
	}
}

func TestSplitJobs(t *testing.T) {
	cases := []struct {
		alloc float64
		sizes []int
		want  []float64
	}{
		{4, []int{4, 4}, []float64{2, 2}},             // equal split
		{5, []int{1, 4}, []float64{1, 4}},             // both capped
		{3, []int{1, 4}, []float64{1, 2}},             // the small job's excess goes to the big one
		{3, []int{4, 1, 4}, []float64{1, 1, 1}},       // all under their size
		{6, []int{2, 1, 8, 1}, []float64{2, 1, 2, 1}}, // capped ones keep their size
		{100, []int{2, 1}, []float64{2, 1}},           // more than they can use
		{0, []int{2, 1}, []float64{0, 0}},             // nothing
		{2.5, []int{1, 1, 1, 1}, []float64{.625, .625, .625, .625}},
	}
	for _, c := range cases {
		got := splitJobs(c.alloc, c.sizes, nil)
		if !slices.EqualFunc(got, c.want, func(a, b float64) bool { return math.Abs(a-b) < 1e-12 }) {
			t.Errorf("splitJobs(%v, %v) = %v, want %v", c.alloc, c.sizes, got, c.want)
		}
	}
}

// TestPricing: the second price is the auction's; first is the buyer's
// bid; midpoint halfway between the traders' bids.
func TestPricing(t *testing.T) {
	buyer, seller := Bid{"b", 6}, Bid{"s", 1}
	for rule, want := range map[string]float64{"second": 2, "first": 6, "midpoint": 3.5} {
		if got := pricing(rule, buyer, seller, 2); got != want {
			t.Errorf("%s: %v, want %v", rule, got, want)
		}
	}
	if _, err := New(policy.Config{Params: map[string]string{"price": "third"}}); err == nil {
		t.Error("price=third accepted")
	}
}
