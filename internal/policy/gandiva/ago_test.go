package gandiva

import (
	"math"
	"testing"
	"time"
)

// ago reads as time.Duration prints whole seconds, without the policy
// importing a clock.
func TestAgo(t *testing.T) {
	if got := ago(0.2); got != "just now" {
		t.Errorf("ago(0.2) = %q", got)
	}
	for _, d := range []float64{0.5, 1, 44.6, 59.4, 60, 61, 3599, 3600, 3661, 86400 + 7, 1e6} {
		want := (time.Duration(math.Round(d)) * time.Second).String() + " ago"
		if got := ago(d); got != want {
			t.Errorf("ago(%g) = %q, want %q", d, got, want)
		}
	}
}
