package arena

import (
	"bytes"
	"fmt"
	"math"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/dataset"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/registry"
	"github.com/gandiva-sched/gandiva/internal/sim"
	"github.com/gandiva-sched/gandiva/internal/trace"
)

// TestStartLatencyStarvesLargeGangs is the simulator's side of the
// large-gang wait of docs/ARENA.md ("The target, and where Gandiva
// loses", point 3). tiresias-l charges a job GPU-seconds from the
// moment the engine starts it; in the arena at 10,000× the control
// plane's latency from that start to the job's pods running is
// thousands of trace-seconds, which the simulator models only as the
// start-up (10 s). A gang of 16 crosses the last queue threshold
// (7,200 GPU-seconds) 450 s after its start: with a start-up of
// 30,000 s it is demoted to the lowest queue before its first
// mini-batch, suspended there for the waiting jobs of the higher
// queues, and resumed only near the end of the trace, as in the arena;
// with 10 s it starts at submission and ends in under 5,000 s. With the
// start-up reported and not charged, as Kubernetes runs the engine
// (engine Options.StartUpGrace), no 16-GPU job is suspended during its
// start-up; in this model, where every resumption costs 30,000 s more,
// that alone does not shorten their wait (they leave queue 0 203 s after
// their start-up and are suspended then), which the arena's own replay
// measures instead (docs/ARENA.md). Run with -v for the figures.
func TestStartLatencyStarvesLargeGangs(t *testing.T) {
	data, err := dataset.ReadFile("philly-sample.csv")
	if err != nil {
		t.Fatal(err)
	}
	jobs, _, err := trace.Read(bytes.NewReader(data), "philly-sample.csv", trace.Auto, trace.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	c, err := cluster.Load("philly-sample")
	if err != nil {
		t.Fatal(err)
	}
	plan, err := NewPlan(c, jobs)
	if err != nil {
		t.Fatal(err)
	}
	specs := make([]*cluster.JobSpec, len(plan.Jobs))
	for i, j := range plan.Jobs {
		specs[i] = j.Spec
	}
	for _, run := range []struct {
		startup   float64
		uncharged bool
	}{{10, false}, {30000, false}, {30000, true}} {
		startup := run.startup
		p, err := registry.New("tiresias-l", policy.Config{Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		perf := sim.DefaultPerf()
		perf.Startup = startup
		var eo engine.Options
		if run.uncharged {
			// as on Kubernetes (kube.Options.StartUpGrace): the start-up
			// reported, and not charged
			perf.StartUps = true
			eo.StartUpGrace = 1e9
		}
		// when each 16-GPU job was first started and first suspended
		started, suspended := map[string]float64{}, map[string]float64{}
		big := map[string]bool{}
		for _, s := range specs {
			big[s.Name] = s.GPUs == 16
		}
		logf := func(line string) {
			var at float64
			var kind, name string
			if _, err := fmt.Sscanf(line, "t=%f act %s %s", &at, &kind, &name); err != nil || !big[name] {
				return
			}
			m := map[string]map[string]float64{"start": started, "suspend": suspended}[kind]
			if _, seen := m[name]; m != nil && !seen {
				m[name] = at
			}
		}
		res, err := sim.Run(sim.Config{Cluster: c, Jobs: specs, Policy: p, Perf: perf, Seed: 1, Log: logf, Engine: eo})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, j := range res.Jobs {
			if j.GPUs != 16 {
				continue
			}
			n++
			t.Logf("start-up %6.0f s (uncharged %v): %s (16 GPUs) submitted %.0f, started %.0f, first suspended %v, ended %.0f (JCT %.0f s, %d suspensions)",
				startup, run.uncharged, j.Name, j.Submit, j.FirstStart, orNone(suspended, j.Name), j.End, j.End-j.Submit, j.Suspends)
			if startup == 10 {
				if j.FirstStart != j.Submit || j.Suspends != 0 || j.End-j.Submit > 5000 {
					t.Errorf("start-up 10 s: %s started %v after submission, %d suspensions, JCT %v s; want 0, 0, under 5,000", j.Name, j.FirstStart-j.Submit, j.Suspends, j.End-j.Submit)
				}
				continue
			}
			if run.uncharged {
				// not charged, not demoted before its first mini-batch: its
				// first suspension, if any, comes after its start-up
				if at, ok := suspended[j.Name]; ok && at < started[j.Name]+startup {
					t.Errorf("start-up 30,000 s, uncharged: %s started at %v, suspended at %v, during its start-up",
						j.Name, started[j.Name], at)
				}
				continue
			}
			// demoted at 7,200 GPU-seconds, 450 s into its 30,000 s start-up,
			// and suspended then, before its first mini-batch
			at, ok := suspended[j.Name]
			if !ok || math.Abs(at-started[j.Name]-7200.0/16) > 0.01 || j.End < 2.5e6 {
				t.Errorf("start-up 30,000 s: %s started at %v, first suspended at %v, ended at %v; want suspended 450 s after its start and ended after 2.5M s",
					j.Name, started[j.Name], orNone(suspended, j.Name), j.End)
			}
		}
		if n != 3 {
			t.Fatalf("%d jobs of 16 GPUs in the Philly sample, want 3", n)
		}
	}
}

// orNone is m[k] as text, "never" when absent.
func orNone(m map[string]float64, k string) string {
	v, ok := m[k]
	if !ok {
		return "never"
	}
	return fmt.Sprintf("%.0f", v)
}
