package sim_test

import (
	"encoding/json"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/registry"
	"github.com/gandiva-sched/gandiva/internal/sim"
	"github.com/gandiva-sched/gandiva/internal/timeline"
	"github.com/gandiva-sched/gandiva/internal/trace"
)

// TestTimeline: Config.Timeline's noted recorder records the same
// timeline as a recorder that scans every live job after every round
// (which needs nothing from the driver), under policies that time-slice,
// pack and migrate, with pre-runs and failures.
func TestTimeline(t *testing.T) {
	c, err := cluster.NewBuilder("t", nil).
		Add(cluster.ServerGroup{Type: "V100", Count: 3, GPUs: 4, HostMemGiB: 64}).
		Add(cluster.ServerGroup{Type: "K80", Count: 2, GPUs: 4, Domain: 1, HostMemGiB: 64}).Build()
	if err != nil {
		t.Fatal(err)
	}
	jobs := trace.Synthetic(trace.SynthConfig{Jobs: 120, Seed: 7, Load: 30, MaxGPUs: 8, MaxDuration: 4000, Users: 3})
	for _, pol := range []string{"gandiva", "gandiva-fair", "tiresias-l", "fifo"} {
		t.Run(pol, func(t *testing.T) {
			p, err := registry.New(pol, policy.Config{Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			noted := timeline.NewRecorder(timeline.Options{Noted: true})
			scan := timeline.NewRecorder(timeline.Options{})
			var oerr error
			fm := sim.PhillyFailures()
			res, err := sim.Run(sim.Config{Cluster: c, Jobs: jobs, Policy: p, Seed: 1, Failures: &fm, Engine: engine.Options{PreRun: true},
				Timeline: noted, Observe: func(_ float64, e *engine.Engine) {
					if oerr == nil {
						oerr = scan.Observe(e.Snapshot())
					}
				}})
			if err != nil || oerr != nil {
				t.Fatal(err, oerr)
			}
			a, _ := json.Marshal(noted.Data(timeline.Query{}))
			b, _ := json.Marshal(scan.Data(timeline.Query{}))
			if string(a) != string(b) {
				t.Fatalf("the noted timeline differs from the scanning one (%d vs %d bytes)", len(a), len(b))
			}
			d := noted.Data(timeline.Query{})
			segs := 0
			for _, row := range d.GPUs {
				segs += len(row)
			}
			if len(d.Jobs) < len(jobs) || segs < len(jobs) {
				t.Fatalf("%d jobs, %d segments recorded for %d jobs", len(d.Jobs), segs, len(jobs))
			}
			t.Logf("%d jobs, %d GPU segments, %d suspends, %d migrations", len(d.Jobs), segs, res.Stats.Suspends, res.Stats.Migrations)
		})
	}
}
