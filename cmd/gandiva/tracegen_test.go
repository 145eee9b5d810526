package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTraceHeavyTail: `gandiva trace heavytail` writes the committed seed-1
// trace byte for byte, to stdout and to a file, another sample for another
// seed, and names the bad flag in its error.
func TestTraceHeavyTail(t *testing.T) {
	want, err := os.ReadFile("../../internal/experiment/testdata/tiresias/heavytail.csv")
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := run(t, "trace", "heavytail")
	if err != nil {
		t.Fatal(err)
	}
	if out != string(want) {
		t.Fatalf("stdout differs from heavytail.csv (%d vs %d bytes)", len(out), len(want))
	}
	path := filepath.Join(t.TempDir(), "h7.csv")
	if _, _, err := run(t, "trace", "heavytail", "--seed", "7", "-o", path); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) == string(want) || !strings.HasPrefix(string(got), strings.SplitN(string(want), "\n", 2)[0]) {
		t.Fatalf("seed 7 wrote %d bytes, the same trace or another header", len(got))
	}
	if _, _, err := run(t, "trace", "heavytail", "--load", "0"); err == nil || !strings.Contains(err.Error(), "load") {
		t.Fatalf("--load 0: err %v, want one naming the load", err)
	}
}
