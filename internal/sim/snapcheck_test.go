package sim_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/registry"
	"github.com/gandiva-sched/gandiva/internal/sim"
)

// scribbler is FIFO that, from its second round on, marks waiting jobs in
// the snapshot it is given, as a policy that keeps notes where it must not.
type scribbler struct {
	fifo   policy.Policy
	rounds int
}

func (p *scribbler) Name() string { return "scribbler" }

func (p *scribbler) Schedule(s *cluster.Snapshot) cluster.Decision {
	p.rounds++
	if p.rounds > 1 {
		for _, j := range s.Active() {
			if j.State == cluster.Queued {
				j.Reason = "seen by scribbler"
			}
		}
	}
	return p.fifo.Schedule(s)
}

// TestCheckCatchesSnapshotWrites: with Check (gandiva sim --check) a run
// under a policy that writes to its snapshot fails, naming the policy and
// what it changed; without it the run ends as if nothing happened.
func TestCheckCatchesSnapshotWrites(t *testing.T) {
	c, err := cluster.Load("tiresias-n2g4")
	if err != nil {
		t.Fatal(err)
	}
	var jobs []*cluster.JobSpec
	for i, g := range []int{4, 4, 2, 4, 1} {
		jobs = append(jobs, &cluster.JobSpec{Name: string(rune('a' + i)), User: "u", GPUs: g, Submit: float64(10 * i), Iters: 100, IterTime: 1})
	}
	for _, check := range []bool{false, true} {
		fifo, err := registry.New("fifo", policy.Config{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = sim.Run(sim.Config{Cluster: c, Jobs: jobs, Policy: &scribbler{fifo: fifo}, Perf: sim.CompatPerf(), Check: check})
		switch {
		case !check && err != nil:
			t.Fatalf("without check: %v", err)
		case check && !errors.Is(err, engine.ErrSnapshotWritten):
			t.Fatalf("with check: error %v, want ErrSnapshotWritten", err)
		case check && !strings.Contains(err.Error(), "policy scribbler changed job ") || check && !strings.Contains(err.Error(), "field Reason"):
			t.Fatalf("with check: %v does not name the policy and the field", err)
		}
	}
}
