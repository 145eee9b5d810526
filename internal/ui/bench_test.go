package ui_test

import (
	"encoding/json"
	"io"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/timeline"
)

// BenchmarkTimelineAnswer is the dashboard's biggest answer at 1,000 GPUs
// and 10,000 jobs (the scale test's FIFO run): exporting the whole
// timeline from the recorder and encoding it as JSON.
func BenchmarkTimelineAnswer(b *testing.B) {
	sc := runScenarioP(b, "fifo", nil, 167, 10000, 22000, 1.3, false)
	b.Run("export", func(b *testing.B) {
		for b.Loop() {
			sc.rec.Data(timeline.Query{})
		}
	})
	d := sc.rec.Data(timeline.Query{})
	b.Run("encode", func(b *testing.B) {
		for b.Loop() {
			if err := json.NewEncoder(io.Discard).Encode(d); err != nil {
				b.Fatal(err)
			}
		}
	})
}
