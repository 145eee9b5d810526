package experiment_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/experiment"
)

// TestReproduceTiresiasQuick runs `gandiva reproduce tiresias --quick`:
// every figure of the Tiresias simulator's table must be within 0.5%, the
// two heavy-tailed checks (medians over 20 samples) must pass, and the
// checks must encode as the JSON contract.
func TestReproduceTiresiasQuick(t *testing.T) {
	r, err := experiment.LookupReproduction("tiresias")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.Run(experiment.Options{Quick: true, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	compat, heavy := 0, 0
	for _, c := range rep.Checks {
		switch {
		case strings.HasPrefix(c.Name, "compat "):
			compat++
			if !c.Pass {
				t.Errorf("%s: ours %v, target %s", c.Name, c.Ours, c.Target)
			}
		case strings.HasPrefix(c.Name, "heavy-tail "):
			heavy++
			if !(c.Ours > 0) || !c.Pass {
				t.Errorf("%s: ours %v, target %s", c.Name, c.Ours, c.Target)
			}
		}
	}
	if compat != 12 || heavy != 2 {
		t.Errorf("%d compat and %d heavy-tail checks, want 12 and 2", compat, heavy)
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
	for _, k := range []string{"name", "metric", "paper", "target", "ours", "pass"} {
		if _, ok := back.Experiments[0][k]; !ok {
			t.Errorf("JSON check lacks %q: %s", k, data[:min(len(data), 200)])
		}
	}
	for _, f := range []string{"tiresias-heavytail.svg", "tiresias-heavytail-cdf.svg"} {
		if !strings.HasPrefix(string(rep.Files[f]), "<?xml") && !strings.Contains(string(rep.Files[f][:min(200, len(rep.Files[f]))]), "<svg") {
			t.Errorf("%s is not an SVG", f)
		}
	}
}
