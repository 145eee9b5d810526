package kube

import (
	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
)

// table is engine.Constraints from maps, for benchmarks without a control
// plane (the engine's own tests have theirs).
type table struct {
	blocked map[cluster.ServerID]int
	nofit   map[[2]int]bool // {job, server}
	podGPUs map[cluster.JobID]int
	fixed   map[cluster.JobID]bool
}

var _ engine.Constraints = (*table)(nil)

func (t *table) Blocked(s cluster.ServerID) int { return t.blocked[s] }
func (t *table) Fits(j cluster.JobID, s cluster.ServerID) bool {
	return !t.nofit[[2]int{int(j), int(s)}]
}
func (t *table) PodGPUs(j cluster.JobID) int {
	if g := t.podGPUs[j]; g > 0 {
		return g
	}
	return 1
}
func (t *table) Movable(j cluster.JobID) bool                     { return !t.fixed[j] }
func (t *table) Current(j cluster.JobID) map[cluster.ServerID]int { return nil }
func (t *table) Shared(j cluster.JobID) bool                      { return false }
func (t *table) Pinned(j cluster.JobID) []cluster.GPUID           { return nil }
