package experiment_test

import (
	"bytes"
	"crypto/sha256"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/experiment"
	"github.com/gandiva-sched/gandiva/internal/trace"
)

var rewriteHeavyTail = flag.Bool("rewrite-heavytail", false, "rewrite testdata/tiresias/heavytail.csv and heavytail-seeds.sha256 from experiment.HeavyTail")

// TestHeavyTailSeedsRegenerate: the 20 samples the reproduction's checks
// use (seeds 1 to 20, the default configuration otherwise) are exactly the
// ones whose SHA-256 sums are committed, in sha256sum's format for files
// named heavytail-seedN.csv (`gandiva trace heavytail --seed N -o
// heavytail-seedN.csv`, then `sha256sum -c --ignore-missing`).
func TestHeavyTailSeedsRegenerate(t *testing.T) {
	const path = "testdata/tiresias/heavytail-seeds.sha256"
	var b strings.Builder
	for seed := uint64(1); seed <= 20; seed++ {
		c := experiment.DefaultHeavyTail()
		c.Seed = seed
		data, err := experiment.HeavyTail(c)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%x  heavytail-seed%d.csv\n", sha256.Sum256(data), seed)
	}
	got := b.String()
	if *rewriteHeavyTail {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Fatalf("%s differs from the sums of experiment.HeavyTail for seeds 1-20:\n%s\nregenerate with -rewrite-heavytail and review", path, got)
	}
}

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

// TestHeavyTailGangsFollowGPUTime: gang sizes are drawn given the GPU-time
// (Philly's sizes in the same decade), so they are the sizes that fit the
// 64-GPU cluster, no job of 10^7 GPU-seconds or more runs on fewer than 4
// GPUs (Philly has none), and small jobs are mostly 1-GPU.
func TestHeavyTailGangsFollowGPUTime(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		data, err := experiment.HeavyTail(experiment.HeavyTailConfig{Jobs: 5000, Seed: seed, GPUs: 64, Load: 0.8})
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")[1:]
		small, smallOne := 0, 0
		for _, l := range lines {
			f := strings.Split(l, ",")
			g, err1 := strconv.Atoi(f[1])
			d, err2 := strconv.ParseFloat(f[5], 64)
			if err1 != nil || err2 != nil {
				t.Fatalf("seed %d: bad row %q", seed, l)
			}
			switch g {
			case 1, 2, 4, 8, 16:
			default:
				t.Fatalf("seed %d: gang of %d GPUs in %q", seed, g, l)
			}
			x := float64(g) * d
			if x >= 1.0001e7 && g < 4 {
				t.Errorf("seed %d: %.0f GPU-seconds on %d GPU(s): %q", seed, x, g, l)
			}
			if x < 1e4 {
				small++
				if g == 1 {
					smallOne++
				}
			}
		}
		if small == 0 || float64(smallOne) < 0.9*float64(small) {
			t.Errorf("seed %d: %d of %d jobs below 10^4 GPU-seconds are 1-GPU, want ≥ 90%% (Philly: 96%%)", seed, smallOne, small)
		}
	}
}
