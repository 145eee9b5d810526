package sim_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/registry"
	"github.com/gandiva-sched/gandiva/internal/sim"
)

// TestJobTrace follows one job of a busy run: it shows the job's state
// changes in order, and while it waits the policy's explanation; the run
// with the trace is the run without it, event for event.
func TestJobTrace(t *testing.T) {
	c, err := cluster.Load("tiresias-n2g4")
	if err != nil {
		t.Fatal(err)
	}
	jobs := randomJobs(3, 60)
	for _, name := range []string{"tiresias-l", "gandiva", "gandiva-fair"} {
		runLog := func(observe *sim.JobTrace) (string, error) {
			p, err := registry.New(name, policy.Config{Seed: 3})
			if err != nil {
				return "", err
			}
			var log strings.Builder
			cfg := sim.Config{Cluster: c, Jobs: jobs, Policy: p, Seed: 3, Log: func(l string) { log.WriteString(l + "\n") }}
			if observe != nil {
				cfg.Observe = observe.Observe
			}
			_, err = sim.Run(cfg)
			return log.String(), err
		}
		plain, err := runLog(nil)
		if err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		tr := &sim.JobTrace{Name: jobs[40].Name, Out: &out}
		traced, err := runLog(tr)
		if err != nil {
			t.Fatal(err)
		}
		if traced != plain {
			t.Fatalf("%s: tracing a job changed the run", name)
		}
		text := out.String()
		if !tr.Found() || !strings.HasPrefix(text, fmt.Sprintf("t=%.3f %s queued (submitted at", jobs[40].Submit, jobs[40].Name)) ||
			!strings.Contains(text, " running on GPUs ") || !strings.Contains(text, " finished") {
			t.Errorf("%s: trace of %s:\n%s", name, jobs[40].Name, text)
		}
		if !strings.Contains(text, "   waits: ") || !strings.Contains(text, "place ") {
			t.Errorf("%s: the trace of a waiting job shows no explanation:\n%s", name, text)
		}
	}
}
