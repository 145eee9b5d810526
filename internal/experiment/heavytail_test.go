package experiment_test

import (
	"bytes"
	"flag"
	"os"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/experiment"
	"github.com/gandiva-sched/gandiva/internal/trace"
)

var rewriteHeavyTail = flag.Bool("rewrite-heavytail", false, "rewrite testdata/tiresias/heavytail.csv from experiment.HeavyTail")

// TestHeavyTailRegenerates: the committed heavy-tailed trace is exactly
// what experiment.HeavyTail(DefaultHeavyTail()) generates, so the file and
// `gandiva reproduce tiresias` (which generates it afresh) agree.
func TestHeavyTailRegenerates(t *testing.T) {
	const path = "testdata/tiresias/heavytail.csv"
	got, err := experiment.HeavyTail(experiment.DefaultHeavyTail())
	if err != nil {
		t.Fatal(err)
	}
	if *rewriteHeavyTail {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from experiment.HeavyTail(DefaultHeavyTail()) (%d vs %d bytes); regenerate with -rewrite-heavytail and review", path, len(want), len(got))
	}
	jobs, _, err := trace.Read(bytes.NewReader(want), path, trace.Tiresias, trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != experiment.DefaultHeavyTail().Jobs {
		t.Fatalf("%d jobs, want %d", len(jobs), experiment.DefaultHeavyTail().Jobs)
	}
	// Another seed gives another sample: the seed is used.
	other, err := experiment.HeavyTail(experiment.HeavyTailConfig{Jobs: 1000, Seed: 2, GPUs: 64, Load: 0.8})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(other, got) {
		t.Fatal("seeds 1 and 2 gave the same trace")
	}
}
