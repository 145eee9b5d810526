package experiment

import (
	"math"
	"strings"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
)

// TestReproduceFairQuick is what CI runs: every figure of `gandiva
// reproduce fair --quick` meets its target.
func TestReproduceFairQuick(t *testing.T) {
	r, err := LookupReproduction("fair")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.Run(Options{Quick: true, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Checks) < 11 {
		t.Fatalf("%d checks, want the 2 tables, the shares, 4 trading and 4 gaming figures", len(rep.Checks))
	}
	for _, c := range rep.Checks {
		if !c.Pass {
			t.Errorf("%s: %s = %v, target %s (%s)", c.Name, c.Metric, c.Ours, c.Target, c.Note)
		}
	}
	for _, f := range []string{"fair-shares.svg", "fair-trading.svg"} {
		if !strings.HasPrefix(string(rep.Files[f]), "<?xml") {
			t.Errorf("%s is not an SVG", f)
		}
	}
}

// TestUnderReportingDoesNotPay: a user who slows its jobs on K80s (so that
// its measured speedup, its bid, is inflated) ends up with less true
// throughput than when it runs honestly, whichever user it is.
func TestUnderReportingDoesNotPay(t *testing.T) {
	c, err := cluster.Load("fair-hetero")
	if err != nil {
		t.Fatal(err)
	}
	setup := func(us []HeteroUser) HeteroSetup {
		return HeteroSetup{Cluster: c, Users: us, Trade: true, From: 3600, To: 2.5 * 3600, Seed: 3}
	}
	honest, err := RunHetero(setup(FairHeteroUsers()))
	if err != nil {
		t.Fatal(err)
	}
	for i := range FairHeteroUsers() {
		us := FairHeteroUsers()
		us[i].SlowK80 = 3
		g, err := RunHetero(setup(us))
		if err != nil {
			t.Fatal(err)
		}
		n := us[i].Name
		if g.Rate[n] >= honest.Rate[n] {
			t.Errorf("%s gained by slowing its K80 jobs: %.3f vs %.3f honest (trades %+v)", n, g.Rate[n], honest.Rate[n], g.Trades)
		}
		// user3's inflated bid wins the auction: it must pay the runner-up's bid
		if n == "user3" && (len(g.Trades) == 0 || g.Trades[0].Buyer != "user3" || math.Abs(g.Trades[0].Price-6.42) > 0.1) {
			t.Errorf("user3 gaming: trades %+v, want user3 buying V100s at user4's bid 6.42", g.Trades)
		}
	}
	// honest bids are the measured speedups; the price is the second highest
	if len(honest.Trades) != 2 {
		t.Fatalf("trades %+v, want one per fast type", honest.Trades)
	}
	v := honest.Trades[0]
	if v.Fast != "V100" || v.Buyer != "user4" || v.Seller != "user1" || math.Abs(v.BuyerBid-6.42) > 0.05 ||
		math.Abs(v.SellerBid-1.25) > 0.05 || math.Abs(v.Price-3.03) > 0.05 {
		t.Errorf("V100 trade %+v, want user4 (6.42) buying from user1 (1.25) at user3's 3.03", v)
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
