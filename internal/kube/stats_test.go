package kube

import (
	"runtime"
	"testing"
	"time"
)

// TestStepDoesNotCopyBindHistory: the loop's step published its counters
// for Stats by copying the bind latencies it keeps (up to 100,000 of each
// kind: 1.6 MB) at every step, however little the step did; Stats copies
// them now, when asked. Stats still returns the history, as a copy.
func TestStepDoesNotCopyBindHistory(t *testing.T) {
	s, a := newStoreAPI(t, "fifo")
	a.addNode("node-0", 8)
	s.rebuild()
	s.step()
	const n = 99_999
	s.stats.BindLatency = make([]time.Duration, n)
	s.stats.BindCall = make([]time.Duration, n)
	s.stats.BindTimed = n
	s.step()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 10 {
		s.step()
	}
	runtime.ReadMemStats(&after)
	if d := after.TotalAlloc - before.TotalAlloc; d > 2<<20 {
		t.Errorf("10 steps with nothing to do allocated %d KiB with %d bind latencies kept, want < 2 MiB (no copy of them)", d>>10, n)
	}
	st := s.Stats()
	if len(st.BindLatency) != n || len(st.BindCall) != n {
		t.Fatalf("Stats shows %d and %d bind latencies, want %d", len(st.BindLatency), len(st.BindCall), n)
	}
	st.BindLatency[0] = time.Hour
	if s.Stats().BindLatency[0] != 0 {
		t.Error("Stats' bind latencies are not a copy")
	}
}
