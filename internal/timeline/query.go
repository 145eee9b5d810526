package timeline

import (
	"cmp"
	"slices"

	"github.com/gandiva-sched/gandiva/internal/cluster"
)

// Waiting is a job waiting for GPUs as of the latest observation.
type Waiting struct {
	ID        cluster.JobID
	Name      string
	User      string
	State     string // "queued" or "suspended"
	GPUs      int
	Submitted float64
	// Since is when its current wait began.
	Since  float64
	Reason string
}

// Waiting returns the jobs queued or suspended as of Now, in ID order
// (pre-run probes left out: they wait with their job).
func (r *Recorder) Waiting() []Waiting {
	var out []Waiting
	for id := range r.njobs {
		rec := r.job(cluster.JobID(id))
		if !rec.state.Waiting() || rec.probe || len(rec.lane) == 0 {
			continue
		}
		last := rec.lane[len(rec.lane)-1]
		out = append(out, Waiting{ID: cluster.JobID(id), Name: rec.name, User: rec.user, State: rec.state.String(),
			GPUs: rec.gang, Submitted: rec.submitted, Since: last.start, Reason: rec.reason})
	}
	return out
}

// States counts the jobs by state as of Now (probes left out), of the
// users visible reports true for (nil: all).
func (r *Recorder) States(visible func(user string) bool) map[string]int {
	out := map[string]int{}
	for id := range r.njobs {
		rec := r.job(cluster.JobID(id))
		if rec.probe || !rec.seen || visible != nil && !visible(rec.user) {
			continue
		}
		out[rec.state.String()]++
	}
	return out
}

// Busy returns the number of GPUs some job holds as of Now, and the
// number of GPU rows.
func (r *Recorder) Busy() (busy, gpus int) {
	for g := range r.rows {
		for _, o := range r.rows[g].open {
			if r.kinds[o.kind].Holds {
				busy++
				break
			}
		}
	}
	return busy, len(r.rows)
}

// OnServer returns the jobs holding GPUs of server s as of Now, in ID
// order, without repeats.
func (r *Recorder) OnServer(s cluster.ServerID) []JobInfo {
	if s < 0 || int(s) >= len(r.servers) {
		return nil
	}
	sv := r.servers[s]
	seen := map[cluster.JobID]bool{}
	var ids []cluster.JobID
	for g := sv.first; g < sv.first+sv.n && g < len(r.rows); g++ {
		for _, o := range r.rows[g].open {
			if r.kinds[o.kind].Holds && !seen[o.job] {
				seen[o.job] = true
				ids = append(ids, o.job)
			}
		}
	}
	out := make([]JobInfo, 0, len(ids))
	for _, id := range ids {
		out = append(out, r.jobInfo(id, r.now, r.now, false))
	}
	slices.SortFunc(out, func(a, b JobInfo) int { return cmp.Compare(a.ID, b.ID) })
	return out
}
