package tiresias

import (
	"fmt"
	"strings"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/preempt"
)

// Explain implements policy.Explainer: the job's queue (with its attained
// service, the thresholds and, for tiresias-g, its Gittins index), its
// place among the waiting jobs in the policy's order (queue by queue, each
// queue in its own order), and per server whether its gang fits now, as
// the policy places it.
func (p *Policy) Explain(s *cluster.Snapshot, id cluster.JobID) policy.Explanation {
	var e policy.Explanation
	j := s.Jobs[id]
	e.Servers = p.planner.Reasons(s, j)
	var order []cluster.JobID
	inQueue, ahead := 0, -1
	q := -1
	if int(id) < len(p.jobs) && p.jobs[id].in {
		q = p.jobs[id].q
	}
	for k := range p.queues {
		p.queues[k].pend.Each(func(it preempt.Item) {
			if k == q {
				if it.ID == id {
					ahead = inQueue
				}
				inQueue++
			}
			order = append(order, it.ID)
		})
	}
	e.Rank(order, id)
	if q < 0 || ahead < 0 {
		e.Queue = fmt.Sprintf("not in a queue yet: a new job joins the end of queue 1 of %d at the policy's next round", len(p.queues))
		return e
	}
	e.Queue = fmt.Sprintf("queue %d of %d (attained %s GPU·s; limits %s)", q+1, len(p.queues),
		policy.Thousands(p.service(j, s.Now)), p.limitsText())
	if r, ok := p.rank(j, s.Now); ok {
		e.Queue += fmt.Sprintf("; Gittins index %.4g", r)
	}
	e.Queue += fmt.Sprintf("; place %d of %d waiting in it", ahead+1, inQueue)
	return e
}

// limitsText is the queue thresholds as "3,250/7,200".
func (p *Policy) limitsText() string {
	parts := make([]string, len(p.limits))
	for i, l := range p.limits {
		parts[i] = policy.Thousands(l)
	}
	return strings.Join(parts, "/")
}

// rank is tiresias-g's Gittins index of j's service at now, computed
// without touching the policy's caches; ok is false for tiresias-l and
// while the index is not in use.
func (p *Policy) rank(j *cluster.Job, now float64) (float64, bool) {
	if !p.gittins || p.index == nil || (p.learn && p.index.Len() < p.minSamples) {
		return 0, false
	}
	a := p.service(j, now)
	if p.rules {
		r, _, _ := p.index.Step(a)
		return r, true
	}
	var piece Piece
	return p.index.RankFrom(a, &piece), true
}
