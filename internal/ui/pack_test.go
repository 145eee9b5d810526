package ui

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/timeline"
)

// randomTimeline has rows and lanes of segments whose times are hard to
// pack exactly: fractions that do not add back, jumps from near 0 to
// millions, equal starts and ends, open segments and negative (hidden)
// job references; a row's next segment may start before the previous
// one ended (jobs packed on a GPU).
func randomTimeline(rng *rand.Rand) *timeline.Data {
	d := &timeline.Data{From: 0, To: 1e7, Start: 0.1, Now: 3e6 + 1.0/3, Version: 7,
		Kinds: []timeline.KindInfo{{Kind: "running"}, {Kind: "packed"}, {Kind: "queued"}}}
	times := func(n int) []float64 {
		t := rng.Float64() * 10
		out := make([]float64, 0, 2*n)
		for range 2 * n {
			switch rng.IntN(6) {
			case 5: // back (packed jobs overlap on a row)
				t -= rng.Float64() * t
			case 0: // a quantum
				t += 60
			case 1: // an awkward fraction
				t += rng.Float64() * 1e-3
			case 2: // a jump
				t += rng.Float64() * 1e6
			case 3: // nothing
			default:
				t = math.Nextafter(t, math.Inf(1))
			}
			out = append(out, t)
		}
		return out
	}
	for g := range 1 + rng.IntN(6) {
		n := rng.IntN(40)
		ts := times(n)
		var row timeline.Row
		for i := range n {
			start, end := min(ts[2*i], ts[2*i+1]), max(ts[2*i], ts[2*i+1])
			row = append(row, timeline.Segment{Job: cluster.JobID(rng.IntN(20) - 1), Kind: rng.IntN(3), Start: start, End: end, Open: i == n-1 && g%2 == 0})
		}
		d.GPUs = append(d.GPUs, row)
	}
	for k := range rng.IntN(10) {
		j := timeline.JobInfo{ID: cluster.JobID(k), Name: "j", User: "u", GPUs: 1 + k%4, Parent: -1, Ended: -1, State: "running"}
		n := rng.IntN(30)
		ts := times(n)
		for i := range n {
			start, end := min(ts[2*i], ts[2*i+1]), max(ts[2*i], ts[2*i+1])
			j.Lane = append(j.Lane, timeline.Span{GPUs: rng.IntN(9), Kind: rng.IntN(3), Start: start, End: end, Open: i == n-1})
		}
		d.Jobs = append(d.Jobs, j)
	}
	return d
}

// TestPackRoundTrip: a report written packed (as JSON and compressed)
// reads back as exactly the report written, float64 for float64.
func TestPackRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 200 {
		rep := &Report{Title: "t", Runs: []ReportRun{{Label: "a", Timeline: randomTimeline(rng)}, {Label: "b", Epoch: 1.5e9, Timeline: randomTimeline(rng)}}}
		want, err := json.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		for _, above := range []int{1 << 30, 0} {
			old := compressAbove
			compressAbove = above
			var b bytes.Buffer
			err := WriteReport(&b, rep)
			compressAbove = old
			if err != nil {
				t.Fatal(err)
			}
			back, err := ReadReport(&b)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(back)
			if string(got) != string(want) {
				t.Fatalf("iteration %d (compress above %d): read back\n%s\nwrote\n%s", iter, above, got, want)
			}
		}
	}
}

// TestPackSmaller: a time-sliced row (one-minute turns, back to back)
// packs to a fraction of the plain encoding.
func TestPackSmaller(t *testing.T) {
	var row timeline.Row
	for i := range 1000 {
		row = append(row, timeline.Segment{Job: cluster.JobID(100 + i%3), Start: 250000 + 60*float64(i), End: 250060 + 60*float64(i)})
	}
	plain, _ := json.Marshal(row)
	packed := pack(&timeline.Data{GPUs: []timeline.Row{row}}).GPUs[0]
	if len(packed)*2 > len(plain) {
		t.Errorf("packed %d bytes, plain %d: want at most half", len(packed), len(plain))
	}
	if !strings.HasPrefix(string(packed), "[100,0,250000,60,101,0,0,60,") {
		t.Errorf("packed row starts %.40s", packed)
	}
}

// TestReadPlainReport: a report written before timelines were packed
// (plain JSON) still reads.
func TestReadPlainReport(t *testing.T) {
	rep := &Report{Title: "old", Runs: []ReportRun{{Label: "a", Timeline: randomTimeline(rand.New(rand.NewPCG(3, 4)))}}}
	data, _ := json.Marshal(rep)
	page := `<html><script type="application/json" id="report-data">` + string(data) + `</script></html>`
	back, err := ReadReport(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(back); string(got) != string(data) {
		t.Errorf("read back %d bytes, wrote %d", len(got), len(data))
	}
}
