package preempt

import (
	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/place"
)

// Consolidated is YARN-CS's placement: the fewest servers of one domain,
// or wait. A suspended job goes back to the GPUs it left when they are all
// free and its state is still in their servers' host memory (the fast path).
type Consolidated struct{}

// Place implements Placer.
func (Consolidated) Place(pool *place.Pool, j *cluster.Job) []cluster.GPUID {
	if g := home(pool, j); g != nil {
		return g
	}
	return pool.Place(j.Spec.GPUs, place.Packed)
}

// Profiled is Tiresias' model profile-based placement (NSDI'19 §4.3; seed
// 002: "consolidated placement is needed when the model is highly skewed in
// its tensor size"): a gang whose model's tensor skew is at least Skew is
// only ever consolidated (the fewest servers of one InfiniBand domain) and
// waits until that is possible; any other gang is consolidated when it can
// be, and otherwise spread (over one domain first, then anywhere) rather
// than kept waiting. A job of unknown skew (0) counts as not skewed.
// A suspended job resumes on the GPUs it left when they are all free and
// its state is still in their servers' host memory.
type Profiled struct {
	// Skew is the threshold; DefaultSkew separates the VGG and AlexNet
	// families (0.61 to 0.77 in model_tensors.csv) from ResNet, Inception
	// and the rest (at most 0.14).
	Skew float64
}

// DefaultSkew is Profiled's default threshold.
const DefaultSkew = 0.5

// Consolidate reports whether j's gang must be consolidated.
func (p Profiled) Consolidate(j *cluster.Job) bool { return j.Spec.Skew >= p.Skew && j.Spec.Skew > 0 }

// Place implements Placer.
func (p Profiled) Place(pool *place.Pool, j *cluster.Job) []cluster.GPUID {
	n := j.Spec.GPUs
	if pool.Free() < n {
		return nil
	}
	if g := home(pool, j); g != nil {
		return g
	}
	if g := pool.Place(n, place.Packed); g != nil || p.Consolidate(j) {
		return g
	}
	if g := pool.Place(n, place.Domain); g != nil {
		return g
	}
	return pool.Place(n, place.Anywhere)
}

// Counted is the count scheme's placement (place.Count): a suspended job
// goes back to the GPUs it left when they are all free, else to as many
// free GPUs on each server it left; any other job takes any free GPUs,
// lowest first.
type Counted struct{}

// Place implements Placer.
func (Counted) Place(pool *place.Pool, j *cluster.Job) []cluster.GPUID {
	if g := home(pool, j); g != nil {
		return g
	}
	if g := sameServers(pool, j); g != nil {
		return g
	}
	return pool.Any(j.Spec.GPUs)
}

// home returns the GPUs a suspended job last held when all are free: the
// job's own list, j.Last, which the planner and the engine only read.
func home(pool *place.Pool, j *cluster.Job) []cluster.GPUID {
	if j.State != cluster.Suspended || len(j.Last) != j.Spec.GPUs || j.Home == cluster.NoServer {
		return nil
	}
	for _, g := range j.Last {
		if !pool.IsFree(g) {
			return nil
		}
	}
	return j.Last
}
