package fair

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/place"
	"github.com/gandiva-sched/gandiva/internal/policy"
)

var _ policy.Explainer = (*Policy)(nil)

// Explain implements policy.Explainer: the job's user and tickets, its
// stride pass in the scheduler that decides when it runs (its home
// server's, or its GPU type's central one for a gang spanning servers),
// its place among the waiting jobs of that scheduler in (pass, ID) order,
// and per server whether it is the job's home and has the GPUs free now.
func (p *Policy) Explain(s *cluster.Snapshot, id cluster.JobID) policy.Explanation {
	var e policy.Explanation
	j := s.Jobs[id]
	var js *job
	if p.ready {
		js = p.track(j)
	}
	switch {
	case js == nil:
		e.Queue = "not tracked yet: the policy takes a new job in at its next round"
	case js.multi && len(js.homes) > 0:
		pl := p.pools[js.typ]
		e.Queue = p.strideOrder(s, &e, js, &pl.central, pl.multis, multiBase,
			fmt.Sprintf("the %s central scheduler of gangs spanning servers", p.c.Types[js.typ].Name))
	case js.home >= 0:
		sv := p.servers[js.home]
		e.Queue = p.strideOrder(s, &e, js, &sv.local, sv.jobs, 0, "server "+s.Cluster.Servers[sv.id].Name)
	default:
		e.Queue = fmt.Sprintf("user %s (%g tickets): no home server yet (none of its GPU type has room for the gang)", js.u.name, js.u.tickets)
	}
	if js == nil || (js.home < 0 && !js.multi) {
		e.Servers = place.Explain(s, j.Spec.GPUs, place.Locality, place.Packed)
		return e
	}
	homes := js.homes
	if !js.multi {
		homes = []cluster.ServerID{js.home}
	}
	e.Servers = p.homeReasons(s, js, homes)
	return e
}

// strideOrder ranks js among the waiting jobs of one stride scheduler
// (clients offset by base) in (pass, ID) order and describes its place.
func (p *Policy) strideOrder(s *cluster.Snapshot, e *policy.Explanation, js *job, st *Stride, jobs []*job, base int64, where string) string {
	type entry struct {
		id   cluster.JobID
		pass float64
	}
	var order []entry
	for _, x := range jobs {
		if pass, ok := st.Pass(base + int64(x.id)); ok && s.Jobs[x.id].State.Waiting() {
			order = append(order, entry{x.id, pass})
		}
	}
	slices.SortFunc(order, func(a, b entry) int {
		if c := cmp.Compare(a.pass, b.pass); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id)
	})
	ids := make([]cluster.JobID, len(order))
	for i, x := range order {
		ids[i] = x.id
	}
	e.Rank(ids, js.id)
	pass, _ := st.Pass(base + int64(js.id))
	return fmt.Sprintf("user %s (%g tickets), stride pass %.4g in %s (virtual time %.4g; lowest pass runs first, quantum %.0f s)",
		js.u.name, js.u.tickets, pass, where, st.VT(), p.quantum)
}

// homeReasons says, per server, whether it is one of the job's home
// servers and whether the GPUs the job needs there are free now.
func (p *Policy) homeReasons(s *cluster.Snapshot, js *job, homes []cluster.ServerID) []place.Reason {
	return place.PerServer(s, func(sv *cluster.Server, st *cluster.ServerState) (bool, string) {
		if !slices.Contains(homes, sv.ID) {
			return false, fmt.Sprintf("not its home (%d of %d GPUs free): a job runs only on its home server(s)", st.NumFree(), sv.NumGPUs)
		}
		need := js.size
		if js.multi {
			need = p.usesOn(js, sv.ID)
		}
		return st.NumFree() >= need, fmt.Sprintf("home for %d of its GPUs: %d of %d free now", need, st.NumFree(), sv.NumGPUs)
	})
}
