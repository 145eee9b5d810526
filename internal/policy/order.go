package policy

import (
	"cmp"
	"slices"

	"github.com/gandiva-sched/gandiva/internal/cluster"
)

// Order orders the waiting jobs (in ID order) as the policy does, from its
// explanations: each explanation of a job lists the jobs ahead of it. It
// explains the job of median ID among those not yet placed, appends the
// jobs ahead of it (and it) that are not yet placed, and goes on with the
// jobs after it: in expectation O(log n) explanations, at most max; the
// jobs still unplaced then, and those the policy has not seen yet
// (Position 0: submitted since its last round), follow in ID order. A
// policy whose order is several (gandiva-fair's, one per stride
// scheduler) gets its orders one after the other. The dashboards (the
// live server's and gandiva kube's) show their queues in this order.
func Order(snap *cluster.Snapshot, ex Explainer, waiting []cluster.JobID, max int) []cluster.JobID {
	placed := make(map[cluster.JobID]bool, len(waiting))
	isWaiting := make(map[cluster.JobID]bool, len(waiting))
	for _, id := range waiting {
		isWaiting[id] = true
	}
	out := make([]cluster.JobID, 0, len(waiting))
	var unseen []cluster.JobID
	rest := slices.Clone(waiting)
	for calls := 0; len(rest) > 0 && calls < max; calls++ {
		pick := rest[len(rest)/2]
		e := ex.Explain(snap, pick)
		if e.Position == 0 {
			unseen = append(unseen, pick)
			placed[pick] = true
		} else {
			for _, id := range append(e.Ahead, pick) {
				if isWaiting[id] && !placed[id] {
					placed[id] = true
					out = append(out, id)
				}
			}
		}
		rest = slices.DeleteFunc(rest, func(id cluster.JobID) bool { return placed[id] })
	}
	out = append(out, rest...)
	slices.SortFunc(unseen, cmp.Compare)
	return append(out, unseen...)
}
