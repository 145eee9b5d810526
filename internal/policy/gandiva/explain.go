package gandiva

import (
	"fmt"
	"math"
	"slices"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/place"
	"github.com/gandiva-sched/gandiva/internal/policy"
)

var _ policy.Explainer = (*Policy)(nil)

// Explain implements policy.Explainer: the job's place in the turn order
// among the waiting jobs with a home (early-feedback priority, then least
// recently run first), and per server whether it is the job's home and has
// the GPUs the job needs there free now.
func (p *Policy) Explain(s *cluster.Snapshot, id cluster.JobID) policy.Explanation {
	var e policy.Explanation
	var order []*cluster.Job
	for _, w := range s.Active() {
		if w.State.Waiting() && int(w.ID) < len(p.st.Jobs) && p.st.Jobs[w.ID].Home != nil && !p.st.Jobs[w.ID].Dropped {
			order = append(order, w)
		}
	}
	p.sortTurns(s, order)
	ids := make([]cluster.JobID, len(order))
	for i, w := range order {
		ids[i] = w.ID
	}
	e.Rank(ids, id)
	j := s.Jobs[id]
	if int(id) >= len(p.st.Jobs) || p.st.Jobs[id].Home == nil {
		e.Queue = "turn order: no home GPUs yet (the policy gives a job a home at its next round, on free GPUs or the least loaded ones)"
		e.Servers = place.Explain(s, j.Spec.GPUs, place.Locality, place.Packed)
		return e
	}
	ji := &p.st.Jobs[id]
	ran := "never ran"
	if j.FirstStart >= 0 {
		ran = "last ran " + ago(s.Now-ji.LastRun)
	}
	e.Queue = fmt.Sprintf("turn order on its home GPUs (time-slicing in %.0f s quanta): least recently run first; this job %s", p.prm.Quantum, ran)
	if ji.Prio > 0 {
		e.Queue += fmt.Sprintf("; early-feedback priority %.2f", ji.Prio)
	}
	if g := stateGPUs(j); g != nil {
		e.Queue += fmt.Sprintf("; its state waits on GPUs %v: a turn on others costs its %.1f s start-up, given only when the wait it avoids is longer", g, j.StartUpEst)
	}
	e.Servers = p.homeReasons(s, ji.Home)
	return e
}

// ago is how long ago something happened, d seconds before now, as
// people read it ("1m45s ago", "just now"): an explanation is read live,
// where the engine's clock counts from the server's start, not the wall
// clock's.
func ago(d float64) string {
	if d < 0.5 {
		return "just now"
	}
	s := int64(math.Round(d))
	h, m, sec := s/3600, s/60%60, s%60
	switch { // as time.Duration prints whole seconds (a policy reads no clock)
	case h > 0:
		return fmt.Sprintf("%dh%dm%ds ago", h, m, sec)
	case m > 0:
		return fmt.Sprintf("%dm%ds ago", m, sec)
	}
	return fmt.Sprintf("%ds ago", sec)
}

// homeReasons says, per server, whether it is part of the job's home and
// whether the GPUs the job needs there are free now.
func (p *Policy) homeReasons(s *cluster.Snapshot, home []place.Slot) []place.Reason {
	return place.PerServer(s, func(sv *cluster.Server, st *cluster.ServerState) (bool, string) {
		k := slices.IndexFunc(home, func(sl place.Slot) bool { return sl.Server == sv.ID })
		if k < 0 {
			return false, fmt.Sprintf("not its home (%d of %d GPUs free): a job takes turns on its home GPUs and moves only onto idle ones", st.NumFree(), sv.NumGPUs)
		}
		n, free := home[k].N, st.NumFree()
		return free >= n, fmt.Sprintf("home for %d of its GPUs: %d of %d free now; the jobs homed here ask for %d GPUs and take turns", n, free, sv.NumGPUs, p.st.Demand[sv.ID])
	})
}
