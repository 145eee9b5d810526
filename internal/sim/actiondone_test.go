package sim_test

import (
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/sim"
)

// moveOnce starts job 0 on GPU 0, suspends it at 100 and resumes it on GPU
// 5 (another server) at 200, and records its state at 300.
type moveOnce struct {
	step int
	at   cluster.JobState
}

func (m *moveOnce) Name() string { return "move-once" }

func (m *moveOnce) Schedule(s *cluster.Snapshot) cluster.Decision {
	switch {
	case m.step == 0:
		m.step++
		return cluster.Decision{Actions: []cluster.Action{{Kind: cluster.Start, Job: 0, GPUs: []cluster.GPUID{0}}}, WakeAt: 100}
	case m.step == 1 && s.Now >= 100:
		m.step++
		return cluster.Decision{Actions: []cluster.Action{{Kind: cluster.Suspend, Job: 0}}, WakeAt: 200}
	case m.step == 2 && s.Now >= 200:
		m.step++
		return cluster.Decision{Actions: []cluster.Action{{Kind: cluster.Resume, Job: 0, GPUs: []cluster.GPUID{5}}}, WakeAt: 300}
	case m.step == 3 && s.Now >= 300:
		m.step++
		m.at = s.Jobs[0].State
	}
	return cluster.Decision{}
}

// TestRemoteResumeCompletes: a resume on other servers is a migration; the
// executor must report it done (EvActionDone) so the job runs again (and
// can be suspended again). The completion event used to carry a version
// that the executor's own rescheduling had already invalidated.
func TestRemoteResumeCompletes(t *testing.T) {
	c, err := cluster.Load("tiresias-n4g4")
	if err != nil {
		t.Fatal(err)
	}
	for _, perf := range []sim.PerfModel{sim.CompatPerf(), sim.DefaultPerf()} {
		m := &moveOnce{}
		jobs := []*cluster.JobSpec{{Name: "a", User: "u", GPUs: 1, Iters: 1000, IterTime: 1}}
		if _, err := sim.Run(sim.Config{Cluster: c, Jobs: jobs, Policy: m, Perf: perf, Check: true}); err != nil {
			t.Fatal(err)
		}
		if m.at != cluster.Running {
			t.Errorf("%s: after a remote resume the job is %s, want running", perf.Name, m.at)
		}
	}
}
