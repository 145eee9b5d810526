package experiment_test

import (
	"os"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/registry"
	"github.com/gandiva-sched/gandiva/internal/sim"
	"github.com/gandiva-sched/gandiva/internal/trace"
)

// phillyVC is the 7,400-job virtual cluster of the Philly trace that the
// Tiresias simulator takes 30 to 120 s to replay (under Python 2).
const phillyVC = "b436b2"

// BenchmarkTiresiasPhilly replays virtual cluster b436b2 of the Philly CSV
// (7,423 jobs over 92 days, 57 GPUs of average demand) on 64 GPUs
// (tiresias-n8g8) under each policy of the Tiresias comparison, in both
// the Tiresias-compatible model (count placement, free preemption: what
// the Python simulator computes) and Gandiva's default model. One
// iteration is one whole replay. Skips when ../shared/data is absent.
func BenchmarkTiresiasPhilly(b *testing.B) {
	const path = "../../../shared/data/philly/philly.csv"
	if _, err := os.Stat(path); err != nil {
		b.Skipf("%s: %v", path, err)
	}
	jobs, _, err := trace.ReadFile(path, trace.PhillyCSV, trace.Options{VC: []string{phillyVC}})
	if err != nil {
		b.Fatal(err)
	}
	c, err := cluster.Load("tiresias-n8g8")
	if err != nil {
		b.Fatal(err)
	}
	for _, mode := range []string{"compat", "default"} {
		for _, name := range []string{"fifo", "fjf", "sjf", "srsf", "srtf", "tiresias-l", "tiresias-g", "optimus"} {
			b.Run("policy="+name+"/model="+mode, func(b *testing.B) {
				perf := sim.DefaultPerf()
				if mode == "compat" {
					perf = sim.CompatPerf()
				}
				var events, suspends int
				for b.Loop() {
					cfg := policy.Config{}
					if mode == "compat" {
						cfg = policy.TiresiasCompat(cfg)
					}
					pol, err := registry.New(name, cfg)
					if err != nil {
						b.Fatal(err)
					}
					res, err := sim.Run(sim.Config{Cluster: c, Jobs: jobs, Policy: pol, Perf: perf})
					if err != nil {
						b.Fatal(err)
					}
					events, suspends = res.Events, res.Stats.Suspends
				}
				b.ReportMetric(float64(len(jobs)), "jobs")
				b.ReportMetric(float64(events), "events")
				b.ReportMetric(float64(suspends), "preemptions")
			})
		}
	}
}
