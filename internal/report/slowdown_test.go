package report

import (
	"strings"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/metrics"
)

// TestSlowdownNotComputed: a row with no slowdown (no finished job whose
// run time alone is known) shows "-", not a figure of 0.
func TestSlowdownNotComputed(t *testing.T) {
	var b strings.Builder
	if err := Write(&b, "table", Run{}, []metrics.Summary{{Policy: "live", AvgSlowdown: 0}, {Policy: "what-if", AvgSlowdown: 1.25}}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	col := func(line string) string { // the slowdown column, the 10th
		return strings.Fields(line)[9]
	}
	if len(lines) < 3 || col(lines[1]) != "-" || col(lines[2]) != "1.250" {
		t.Fatalf("table:\n%s", b.String())
	}
}
