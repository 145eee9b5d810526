package ui_test

import (
	"math"
	"sort"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/timeline"
)

// TestSharesOfPackedGPUs: under gandiva, which packs jobs two to a GPU,
// the users' shares of each window add up to the fraction of the
// cluster's GPU-time that some job held (computed here from the GPU rows,
// a packed GPU counted once), never more than 1: the dashboard once showed
// a user holding 123% of the cluster.
func TestSharesOfPackedGPUs(t *testing.T) {
	sc := runScenario(t, "gandiva", 3, 80, 0)
	d := sc.rec.Data(timeline.Query{})
	sh := sc.rec.Shares(timeline.ShareQuery{MaxWindows: 60})
	packed := 0
	for _, row := range d.GPUs {
		for _, s := range row {
			if d.Kinds[s.Kind].Kind == "packed" {
				packed++
			}
		}
	}
	if packed == 0 {
		t.Fatal("the scenario packs no job: it tests nothing")
	}
	for k, from := range sh.Times {
		to := min(from+sh.Window, sh.To)
		sum := 0.0
		for _, u := range sh.Users {
			sum += u.Share[k]
		}
		// the union of the holding segments of each GPU, within the window
		busy := 0.0
		for _, row := range d.GPUs {
			var iv [][2]float64
			for _, s := range row {
				if d.Kinds[s.Kind].Holds && s.Job >= 0 {
					if a, b := max(s.Start, from), min(s.End, to); b > a {
						iv = append(iv, [2]float64{a, b})
					}
				}
			}
			sort.Slice(iv, func(i, j int) bool { return iv[i][0] < iv[j][0] })
			end := math.Inf(-1)
			for _, x := range iv {
				if x[0] > end {
					busy += x[1] - x[0]
					end = x[1]
				} else if x[1] > end {
					busy += x[1] - end
					end = x[1]
				}
			}
		}
		want := busy / (float64(sh.GPUs) * (to - from))
		if sum > 1+1e-9 || math.Abs(sum-want) > 1e-9 {
			t.Fatalf("window %d [%g, %g): the users' shares add up to %.6f; the GPUs were held %.6f of the time", k, from, to, sum, want)
		}
	}
}
