package sim_test

import (
	"os"
	"syscall"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/registry"
	"github.com/gandiva-sched/gandiva/internal/sim"
	"github.com/gandiva-sched/gandiva/internal/trace"
)

const phillyCSV = "../../../shared/data/philly/philly.csv"

// BenchmarkPhillyReplay replays the whole Philly CSV (82,247 jobs) on the
// Philly-sized preset (2,816 GPUs). It reports simulated events per second
// and the process's peak resident memory (run it alone for a clean figure).
func BenchmarkPhillyReplay(b *testing.B) {
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
		b.Run("policy="+pol+"/jobs=82247/gpus=2816", func(b *testing.B) {
			events := 0
			for b.Loop() {
				p, err := registry.New(pol, policy.Config{Seed: 1})
				if err != nil {
					b.Fatal(err)
				}
				res, err := sim.Run(sim.Config{Cluster: c, Jobs: jobs, Policy: p, Seed: 1})
				if err != nil {
					b.Fatal(err)
				}
				events = res.Events
			}
			b.ReportMetric(float64(events)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(maxRSSMiB(), "peak-RSS-MiB")
		})
	}
}

func maxRSSMiB() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Maxrss) / 1024
}
