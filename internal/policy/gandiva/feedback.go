package gandiva

import (
	"fmt"
	"math"
	"slices"

	"github.com/gandiva-sched/gandiva/internal/cluster"
)

// report is a metric a job reported at a rung.
type report struct {
	job    cluster.JobID
	metric float64
}

// feedback applies early feedback to a job of a multi-job (a group) that
// just reported a metric, successive-halving style: at each rung of
// progress (rung × eta^k of its mini-batches) the job's metric is recorded
// with those of its group at that rung, and every job whose latest rung is
// that one is re-ranked among the n recorded there:
//
//   - once n ≥ eta, the top ⌈n/eta⌉ are raised: priority 1 + their
//     percentile (so a job that looks best early is not starved by
//     mediocre ones further along), unpacked, and never packed again;
//   - once n ≥ 2·eta, jobs below the median are dropped;
//   - the others keep the neutral priority of jobs with no feedback.
func (p *Policy) feedback(s *cluster.Snapshot, j *cluster.Job) {
	ji := &p.st.Jobs[j.ID]
	if ji.Dropped || j.Spec.Iters <= 0 || j.Probe {
		return // a pre-run probe's first mini-batch says nothing of the search
	}
	frac := j.Done / j.Spec.Iters
	for !ji.Dropped {
		r := p.prm.Rung * math.Pow(p.prm.Eta, float64(ji.rung))
		if r >= 1 || frac < r {
			return
		}
		rungs := p.groups[j.Spec.Group]
		for len(rungs) <= ji.rung {
			rungs = append(rungs, nil)
		}
		rungs[ji.rung] = append(rungs[ji.rung], report{j.ID, j.Metric})
		p.groups[j.Spec.Group] = rungs
		k := ji.rung
		ji.rung++
		p.rerank(s, rungs[k], k)
	}
}

// rerank re-ranks the jobs whose latest rung is k.
func (p *Policy) rerank(s *cluster.Snapshot, at []report, k int) {
	n := len(at)
	eta := p.prm.Eta
	if float64(n) < eta {
		return
	}
	sorted := make([]float64, n)
	for i, r := range at {
		sorted[i] = r.metric
	}
	slices.Sort(sorted)
	top := sorted[n-int(math.Ceil(float64(n)/eta))]
	median := sorted[n/2]
	for _, r := range at {
		ji := &p.st.Jobs[r.job]
		if ji.Dropped || ji.rung != k+1 || s.Jobs[r.job].State.Terminal() {
			continue // gone, or already further along
		}
		switch {
		case r.metric >= top:
			below, _ := slices.BinarySearch(sorted, r.metric)
			ji.Prio = 1 + float64(below+1)/float64(n)
			if ji.Partner != cluster.NoJob {
				p.st.Unpack(r.job) // a promising job runs alone, as fast as it can
			}
		case float64(n) >= 2*eta && r.metric < median:
			ji.Dropped = true
			p.st.SetHome(r.job, nil)
			p.st.Unpack(r.job)
			p.plan.Kill(r.job, fmt.Sprintf("early feedback: metric %.4g below the median %.4g of group %s at rung %d",
				r.metric, median, s.Jobs[r.job].Spec.Group, k))
		default:
			ji.Prio = 0
		}
	}
}
