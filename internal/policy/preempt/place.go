package preempt

import (
	"fmt"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/place"
)

// Consolidated is YARN-CS's placement: the fewest servers of one domain,
// or wait. A suspended job goes back to the GPUs it left when they are all
// free and its state is still in their servers' host memory (the fast path).
type Consolidated struct{}

// Place implements Placer.
func (Consolidated) Place(pool *place.Pool, j *cluster.Job) []cluster.GPUID {
	if returning(j) && pool.AllFree(j.Last) {
		return j.Last
	}
	return pool.Place(j.Spec.GPUs, place.Packed)
}

// How says how Consolidated places a gang, for explanations.
func (Consolidated) How(*cluster.Job) string {
	return "consolidated: one server when the gang fits one, else the fewest servers of one domain"
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
	if returning(j) && pool.AllFree(j.Last) {
		return j.Last
	}
	if g := pool.Place(n, place.Packed); g != nil || p.Consolidate(j) {
		return g
	}
	if g := pool.Place(n, place.Domain); g != nil {
		return g
	}
	return pool.Place(n, place.Anywhere)
}

// How says how Profiled places j's gang, for explanations.
func (p Profiled) How(j *cluster.Job) string {
	if p.Consolidate(j) {
		return fmt.Sprintf("model tensor skew %.2f ≥ %.2f: consolidated only", j.Spec.Skew, p.Skew)
	}
	return "consolidated when it can be, else spread over one domain, then anywhere"
}

// Counted is the count scheme's placement (place.Count): a suspended job
// goes back to the GPUs it left when they are all free, else to as many
// free GPUs on each server it left; any other job takes any free GPUs,
// lowest first.
type Counted struct{}

// Place implements Placer.
func (Counted) Place(pool *place.Pool, j *cluster.Job) []cluster.GPUID {
	if g := returnTo(pool, j); g != nil {
		return g
	}
	return pool.Any(j.Spec.GPUs)
}

// How says how Counted places a gang, for explanations.
func (Counted) How(*cluster.Job) string { return "GPUs only counted" }

// returning reports whether j is a suspended job whose state waits for it
// on the servers it left (the engine's Home): it has a way back. The
// planner and the engine only read j.Last, so a placement may return it.
func returning(j *cluster.Job) bool {
	return j.State == cluster.Suspended && len(j.Last) == j.Spec.GPUs && j.Home != cluster.NoServer
}

// returnTo is a returning job's way back when preemption is free: the GPUs
// it left when all are free, else as many free GPUs on each of the servers
// it left (lowest first), else nil.
func returnTo(pool *place.Pool, j *cluster.Job) []cluster.GPUID {
	if !returning(j) {
		return nil
	}
	if pool.AllFree(j.Last) {
		return j.Last
	}
	return pool.Pick(place.SlotsOf(pool.Snapshot().Cluster, j.Last), nil)
}
