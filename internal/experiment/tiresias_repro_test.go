package experiment_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/experiment"
)

// TestReproduceTiresiasQuick runs `gandiva reproduce tiresias --quick` on
// the development seeds: every figure of the Tiresias simulator's table must
// be within 0.5%, the heavy-tailed checks are statistics over the quick
// seeds, and the checks encode as the JSON contract.
func TestReproduceTiresiasQuick(t *testing.T) {
	r, err := experiment.LookupReproduction("tiresias")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.Run(experiment.Options{Quick: true, Seed: 0})
	if err != nil {
		t.Fatal(err)
	}
	compat, heavy := 0, 0
	for _, c := range rep.Checks {
		switch {
		case strings.HasPrefix(c.Name, "compat "):
			compat++
			if !c.Passed() || len(c.Seeds) != 0 {
				t.Errorf("%s: median %v, band %s, seeds %v", c.Name, c.Median, c.Band, c.Seeds)
			}
		case strings.HasPrefix(c.Name, "heavy-tail "):
			heavy++
			if !(c.Median > 0) || len(c.Seeds) != experiment.QuickSeeds {
				t.Errorf("%s: median %v, seeds %v", c.Name, c.Median, c.Seeds)
			}
		}
	}
	if compat != 12 || heavy != 3 {
		t.Errorf("%d compat and %d heavy-tail checks, want 12 and 3", compat, heavy)
	}
	data, err := json.Marshal(map[string]any{"experiments": rep.Checks})
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Experiments []map[string]any `json:"experiments"`
	}
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"name", "metric", "paper", "band", "median", "p10", "p90", "pass_rate", "seeds", "outcome"} {
		if _, ok := back.Experiments[0][k]; !ok {
			t.Errorf("JSON check lacks %q: %s", k, data[:min(len(data), 200)])
		}
	}
	for _, f := range []string{"tiresias-heavytail.svg", "tiresias-heavytail-cdf.svg"} {
		if !strings.HasPrefix(string(rep.Files[f]), "<?xml") && !strings.Contains(string(rep.Files[f][:min(200, len(rep.Files[f]))]), "<svg") {
			t.Errorf("%s is not an SVG", f)
		}
	}
	rec, err := experiment.LoadRecord()
	if err != nil {
		t.Fatal(err)
	}
	if reg, _ := rep.Compare(rec); len(reg) > 0 {
		for _, r := range reg {
			if strings.Contains(r, "no outcome is recorded") || strings.Contains(r, "no longer reports") {
				t.Error(r)
			}
		}
	}
}
