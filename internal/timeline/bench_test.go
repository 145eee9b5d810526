package timeline_test

import (
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/registry"
	"github.com/gandiva-sched/gandiva/internal/sim"
	"github.com/gandiva-sched/gandiva/internal/timeline"
	"github.com/gandiva-sched/gandiva/internal/trace"
)

const phillyCSV = "../../../shared/data/philly/philly.csv"

// BenchmarkPhilly replays the whole Philly CSV (82,247 jobs) on the
// Philly-sized preset (2,816 GPUs) with a recorder beside the simulator,
// observing after every round: rec=none is the simulator alone, rec=noted
// the recorder told what changed (O(changes)), rec=scan the one that
// compares every live job's Seq. It reports the GPU segments and lane spans
// recorded, the heap the recorder holds at the end, and the time spent in
// Observe (the recorder's own cost, less noisy than the difference of two
// whole runs on a shared machine).
func BenchmarkPhilly(b *testing.B) {
	if _, err := os.Stat(phillyCSV); err != nil {
		b.Skip("philly.csv not found beside the checkout")
	}
	jobs, _, err := trace.ReadFile(phillyCSV, trace.Auto, trace.Options{Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	c, err := cluster.Load("philly")
	if err != nil {
		b.Fatal(err)
	}
	for _, pol := range []string{"fifo", "gandiva"} {
		for _, mode := range []string{"none", "noted", "scan"} {
			b.Run("policy="+pol+"/rec="+mode, func(b *testing.B) {
				var rec *timeline.Recorder
				var inRec time.Duration
				for b.Loop() {
					p, err := registry.New(pol, policy.Config{Seed: 1})
					if err != nil {
						b.Fatal(err)
					}
					cfg := sim.Config{Cluster: c, Jobs: jobs, Policy: p, Seed: 1}
					if mode != "none" {
						rec = timeline.NewRecorder(timeline.Options{Noted: mode == "noted"})
						if mode == "noted" {
							cfg.Policy = noting{p, rec}
						}
						cfg.Observe = func(_ float64, e *engine.Engine) {
							t0 := time.Now()
							if err := rec.Observe(e.Snapshot()); err != nil {
								b.Fatal(err)
							}
							inRec += time.Since(t0)
						}
					}
					if _, err := sim.Run(cfg); err != nil {
						b.Fatal(err)
					}
				}
				if rec == nil {
					return
				}
				b.ReportMetric(inRec.Seconds()/float64(b.N), "s-observing/op")
				segs, spans := count(rec.Data(timeline.Query{}))
				b.ReportMetric(float64(segs), "segments")
				b.ReportMetric(float64(spans), "lane-spans")
				var m0, m1 runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&m1)
				rec = nil
				runtime.GC()
				runtime.ReadMemStats(&m0)
				b.ReportMetric(float64(m1.HeapAlloc-m0.HeapAlloc)/(1<<20), "recorder-MiB")
			})
		}
	}
}

func count(d *timeline.Data) (segs, spans int) {
	for _, row := range d.GPUs {
		segs += len(row)
	}
	for _, j := range d.Jobs {
		spans += len(j.Lane)
	}
	return segs, spans
}
