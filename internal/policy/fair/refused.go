package fair

import (
	"math"

	"github.com/gandiva-sched/gandiva/internal/cluster"
)

// refused hears the refusals of actions (cluster.Snapshot.Rejected); prev
// is the time of the last round, whose actions they are. A refused start
// or resume is undone in the policy's books as if the job had not been
// chosen: the pass its stride charged it for that round is refunded (else
// its user would lose up to a quantum of its share for service it never
// received), it is no longer counted as running this quantum, and the next
// boundary is woken for it (it waits). A job whose suspension was refused
// still runs. The charge is not stored: every start or resume the policy
// emits was chosen, in that round, by its server's stride (its pool's
// central one for a job that spans servers) at the round's charge, 1 at a
// boundary and the rest of the quantum in between (fill), which the
// boundary and prev give back. Only refusals of the last round's actions
// are refunded: the engine's own, and the executor's of a process launched
// then. GPU-seconds a hole granted the job (its
// user's held) stay booked until the next boundary forgets them.
func (p *Policy) refused(s *cluster.Snapshot, prev float64) {
	if len(s.Rejected) == 0 {
		return
	}
	charge := 1.0
	if p.boundary != prev+p.quantum { // the last round filled between quanta
		charge = math.Min(1, math.Max(0, (p.boundary-prev)/p.quantum))
	}
	for i := range s.Rejected {
		a := s.Rejected[i].Action
		if a.Job < 0 || int(a.Job) >= len(p.jobs) || p.jobs[a.Job] == nil {
			continue
		}
		js := p.jobs[a.Job]
		switch a.Kind {
		case cluster.Start, cluster.Resume:
			if j := s.Jobs[a.Job]; j.State.Holding() || failed(s, a.Job) && j.ProcStart != prev {
				// it runs after all, or the executor gave up on a
				// process launched before the last round: an older
				// action, whose charge bought service
				continue
			}
			st, key := p.strideOf(js)
			if st == nil {
				continue
			}
			if cost, ok := st.Cost(key, charge); ok {
				st.Refund(key, cost)
			}
			js.run = false
			p.wake = true
		case cluster.Suspend:
			js.run = true
		}
	}
}

// failed reports whether the snapshot's events include the executor's
// EvActionFailed for job id (it reports a refusal of an action the engine
// applied that way; the engine's own refusals come without one).
func failed(s *cluster.Snapshot, id cluster.JobID) bool {
	for i := range s.Events {
		if s.Events[i].Kind == cluster.EvActionFailed && s.Events[i].Job == id {
			return true
		}
	}
	return false
}

// strideOf is the stride scheduler that chooses js and its key there (nil
// when it has none).
func (p *Policy) strideOf(js *job) (*Stride, int64) {
	switch {
	case js.multi && js.typ >= 0 && len(js.homes) > 0:
		return &p.pools[js.typ].central, multiBase + int64(js.id)
	case !js.multi && js.home >= 0:
		return &p.servers[js.home].local, int64(js.id)
	}
	return nil, 0
}
