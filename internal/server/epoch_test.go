package server

import (
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
)

// TestAttemptEpochsGrow: a job's later attempt is numbered above every
// earlier one, even when the entry that made the earlier one made more
// than 256 attempts (the 8-bit low part saturates instead of running
// into the next entry's numbers). The number is the job's epoch, which
// fences its checkpoints.
func TestAttemptEpochsGrow(t *testing.T) {
	c := &cluster.Cluster{Types: cluster.KnownGPUTypes()}
	sid, err := c.AddServer("n1", "V100", 8, "r", 0, 64)
	if err != nil {
		t.Fatal(err)
	}
	x := newExecutor(c, "/ckpt", func(cluster.JobID) cluster.JobState { return cluster.Running }, func(cluster.Event) {})
	x.addNode("n1", sid, "V100")
	const many = 600
	runs := make([]*run, many)
	x.begin(10, 0)
	for i := range runs {
		runs[i] = x.addRun(&job{rec: &Record{ID: "j"}}, cluster.JobID(i), false)
		x.attempt(runs[i], []cluster.GPUID{0})
	}
	first := make([]int64, many)
	for i, r := range runs {
		first[i] = r.attempt
	}
	x.begin(11, 1) // the next entry restarts each of them
	for i, r := range runs {
		x.attempt(r, []cluster.GPUID{1})
		if r.attempt <= first[i] {
			t.Fatalf("run %d: attempt %d of entry 11 is not above its attempt %d of entry 10", i, r.attempt, first[i])
		}
	}
	if first[0] != 10<<8 || first[255] != 10<<8|255 {
		t.Errorf("attempts %d, %d: the numbers below 256 an entry changed (stores of earlier releases replay to them)", first[0], first[255])
	}
}
