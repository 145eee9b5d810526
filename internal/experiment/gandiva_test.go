package experiment

import (
	"math"
	"strings"
	"testing"
)

// TestReproduceGandivaQuick is what CI runs: every figure of `gandiva
// reproduce gandiva --quick` meets its target, and the write-up has its plot.
func TestReproduceGandivaQuick(t *testing.T) {
	r, err := LookupReproduction("gandiva")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.Run(Options{Quick: true, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Checks) != 11 {
		t.Fatalf("%d checks, want 2 time-slicing, 4 packing, 3 AutoML and 2 cluster figures", len(rep.Checks))
	}
	for _, c := range rep.Checks {
		if !c.Pass {
			t.Errorf("%s: %s = %v, target %s (%s)", c.Name, c.Metric, c.Ours, c.Target, c.Note)
		}
	}
	if !strings.HasPrefix(string(rep.Files["gandiva-timeslice.svg"]), "<?xml") {
		t.Error("gandiva-timeslice.svg is not an SVG")
	}
	if !strings.Contains(rep.Markdown, "## AutoML") || !strings.Contains(rep.Markdown, "## All checks") {
		t.Error("the write-up lacks its sections")
	}
}

// TestAutomlCurve pins the written-down learning-curve model: the
// population has 15 configurations above 70%, one above 80% (which also
// passes 90%), curves rise monotonically to their final accuracy, and the
// same seed gives the same reports.
func TestAutomlCurve(t *testing.T) {
	c, jobs := newAutomlCurve(7, automlQuantiles)
	above := map[float64]int{}
	for _, a := range c.final {
		for _, th := range []float64{0.7, 0.8, 0.9} {
			if a > th {
				above[th]++
			}
		}
	}
	if above[0.7] != 15 || above[0.8] != 1 || above[0.9] != 1 {
		t.Errorf("population above 70/80/90%%: %d/%d/%d, want 15/1/1", above[0.7], above[0.8], above[0.9])
	}
	j := jobs[0]
	prev := -1.0
	for e := 0.0; e <= automlEpochs; e += 10 {
		acc := c.accuracy(j, e*automlPerEp)
		if acc < prev-0.02 {
			t.Errorf("accuracy fell from %.3f to %.3f at epoch %.0f", prev, acc, e)
		}
		prev = acc
	}
	if final := c.accuracy(j, automlEpochs*automlPerEp); math.Abs(final-c.final[0]) > 0.03 {
		t.Errorf("accuracy after 100 epochs %.3f, final accuracy %.3f", final, c.final[0])
	}
	c2, _ := newAutomlCurve(7, automlQuantiles)
	if c.accuracy(j, 1234) != c2.accuracy(j, 1234) {
		t.Error("the same seed gave different reports")
	}
}
