package sim

import (
	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/model"
	"github.com/gandiva-sched/gandiva/internal/place"
)

// SoloIterTime is the seconds per mini-batch the simulator's executor
// charges job spec on gpus of c when no other job shares those GPUs and
// none is warming beside it: the iteration time on the reference GPU, times
// the slowest GPU type's factor for the job's model (cat resolves it; nil
// means model.Default()), times the locality factor of the servers and
// InfiniBand domains the gang spans, divided by the width factor of an
// elastic job on other than its requested GPUs. Other players of a trace
// (the Kubernetes arena) use it so that a job progresses at the rate the
// simulator would give it on the same placement.
func (p *PerfModel) SoloIterTime(cat *model.Catalog, c *cluster.Cluster, spec *cluster.JobSpec, gpus []cluster.GPUID) float64 {
	if p.Compat {
		return spec.IterTime
	}
	if cat == nil {
		cat = model.Default()
	}
	m := cat.Get(spec.Model)
	slow := 0.0
	for _, g := range gpus {
		slow = max(slow, typeFactor(m, c.GPUType(g)))
	}
	servers, domains := place.Spread(c, gpus)
	return spec.IterTime * slow * p.locality(m, servers, domains) / p.width(len(gpus), spec.GPUs)
}

// CheckpointSeconds is the time the simulator charges to write (or read)
// job spec's checkpoint (cat as for SoloIterTime).
func (p *PerfModel) CheckpointSeconds(cat *model.Catalog, spec *cluster.JobSpec) float64 {
	if cat == nil {
		cat = model.Default()
	}
	return p.checkpointSeconds(cat.Get(spec.Model), spec)
}
