package policy

import (
	"fmt"
	"math"
	"strconv"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/place"
)

// Explainer is implemented by a policy that can say where a waiting job
// stands in its own order, so that `gandiva explain` and the simulator's
// trace of a job (`gandiva sim --explain`) show what the policy does, not
// a reconstruction beside it. Explain reads the snapshot and the state the
// policy's last Schedule left; it changes neither, and it may be called
// between any two calls to Schedule. A job the policy has not seen yet
// (submitted after its last Schedule) has Position 0.
type Explainer interface {
	Explain(s *cluster.Snapshot, id cluster.JobID) Explanation
}

// Explanation is a policy's account of one job that waits for GPUs.
type Explanation struct {
	// Queue names the order the job waits in, in the policy's terms:
	// "submission order", "queue 2 of 3 (attained 4,200 GPU·s; limits
	// 3,250/7,200)", "user alice, stride pass 12.5 on server s3".
	Queue string
	// Position is the job's place (1 = next) among the Waiting jobs that
	// the policy orders against each other (all its waiting jobs, or, for
	// gandiva-fair, those of one stride scheduler); 0 when the job does
	// not wait or the policy has not seen it yet.
	Position int
	Waiting  int
	// Ahead lists the waiting jobs before it in that order, first first.
	Ahead []cluster.JobID
	// Servers says, per server, whether the job's gang can be placed there
	// now and why not, computed the way the policy places it.
	Servers []place.Reason
}

// Rank sets Position, Waiting and Ahead from the waiting jobs in the
// policy's order: id's place among them (Position 0 when it is not there).
func (e *Explanation) Rank(order []cluster.JobID, id cluster.JobID) {
	e.Waiting = len(order)
	e.Position, e.Ahead = 0, nil
	for i, x := range order {
		if x == id {
			e.Position = i + 1
			e.Ahead = append([]cluster.JobID(nil), order[:i]...)
			return
		}
	}
}

// WaitingByID lists the snapshot's waiting jobs (queued or suspended) in
// ID order, that is in order of submission.
func WaitingByID(s *cluster.Snapshot) []cluster.JobID {
	var out []cluster.JobID
	for _, j := range s.Active() {
		if j.State.Waiting() {
			out = append(out, j.ID)
		}
	}
	return out
}

// Thousands formats v rounded to an integer, with thousands separated by
// commas ("4,200"), for explanations.
func Thousands(v float64) string {
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return fmt.Sprint(v)
	}
	s := strconv.FormatInt(int64(math.Round(math.Abs(v))), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if v <= -0.5 {
		s = "-" + s
	}
	return s
}
