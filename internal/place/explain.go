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

// Explain reports, for each server, why a gang of n GPUs cannot be placed
// on it alone, the way `gandiva explain` shows it. It is not on any hot path.
func Explain(s *cluster.Snapshot, n int) []Reason {
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
		case sv.NumGPUs < n:
			r.Why = fmt.Sprintf("has %d GPUs, the gang needs %d (must span servers)", sv.NumGPUs, n)
			if st.NumFree() > 0 {
				r.Why += fmt.Sprintf("; %d free", st.NumFree())
			}
		case st.NumFree() < n:
			r.Why = fmt.Sprintf("%d of %d GPUs free, the gang needs %d", st.NumFree(), sv.NumGPUs, n)
		default:
			r.Fits = true
			r.Why = fmt.Sprintf("%d GPUs free: fits", st.NumFree())
		}
		out = append(out, r)
	}
	return out
}
