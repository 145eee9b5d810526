package place

import (
	"fmt"

	"github.com/gandiva-sched/gandiva/internal/cluster"
)

// Reason says why one server cannot (or can) take part in a job's placement.
type Reason struct {
	Server cluster.ServerID
	Name   string
	Fits   bool
	Why    string
}

// Explain reports, for each server, whether a gang of n GPUs can be placed
// there now and why not, the way Find places it with strategy st at level
// l. It is not on any hot path.
func Explain(s *cluster.Snapshot, n int, st Strategy, l Level) []Reason {
	how := "consolidated: one server when the gang fits one, else the fewest servers of one domain"
	switch {
	case st == Count:
		how = "GPUs only counted"
	case l > Packed:
		how = "locality relaxed to " + l.String()
	}
	return Reasons(s, n, NewPool(s).Find(n, st, l), st, how)
}

// Reasons reports, for each server, whether a gang of n GPUs can be placed
// there now and why not, given the GPUs the policy's own placement found
// on the free GPUs (found; nil when none) and how it places (how, for the
// servers a gang larger than one server would span). Under Count every
// server's free GPUs count toward the gang; under Locality a server fits
// when it has n free GPUs, and for a gang larger than a server, when the
// placement found uses it.
func Reasons(s *cluster.Snapshot, n int, found []cluster.GPUID, strategy Strategy, how string) []Reason {
	on := map[cluster.ServerID]int{}
	for _, g := range found {
		on[s.Cluster.ServerOf(g)]++
	}
	total := 0
	for i := range s.Servers {
		if s.Servers[i].Schedulable() {
			total += s.Servers[i].NumFree()
		}
	}
	return PerServer(s, func(sv *cluster.Server, st *cluster.ServerState) (bool, string) {
		free := st.NumFree()
		switch {
		case len(on) > 1 && on[sv.ID] > 0:
			return true, fmt.Sprintf("%d of its %d free GPUs: part of a placement over %d servers now (%s)", on[sv.ID], free, len(on), how)
		case strategy == Count && found != nil:
			return on[sv.ID] > 0, fmt.Sprintf("%d of %d GPUs free; the gang takes the lowest free GPUs (%s)", free, sv.NumGPUs, how)
		case strategy == Count:
			return false, fmt.Sprintf("%d of %d GPUs free; %d free in all, the gang needs %d (%s)", free, sv.NumGPUs, total, n, how)
		case sv.NumGPUs < n:
			why := fmt.Sprintf("has %d GPUs, the gang needs %d (must span servers)", sv.NumGPUs, n)
			if free > 0 {
				why += fmt.Sprintf("; %d free", free)
			}
			return false, why
		case free < n:
			return false, fmt.Sprintf("%d of %d GPUs free, the gang needs %d", free, sv.NumGPUs, n)
		}
		return true, fmt.Sprintf("%d GPUs free: fits", free)
	})
}

// PerServer gives one reason per server, in server order: a server that
// is down or drained says so, and judge decides for the others.
func PerServer(s *cluster.Snapshot, judge func(sv *cluster.Server, st *cluster.ServerState) (fits bool, why string)) []Reason {
	out := make([]Reason, 0, len(s.Servers))
	for i := range s.Servers {
		sv := &s.Cluster.Servers[i]
		st := &s.Servers[i]
		r := Reason{Server: sv.ID, Name: sv.Name}
		switch {
		case !st.Up:
			r.Why = "node down: " + st.Reason
		case st.Drained:
			r.Why = "node drained: " + st.Reason
		default:
			r.Fits, r.Why = judge(sv, st)
		}
		out = append(out, r)
	}
	return out
}
