package place

import (
	"math/bits"

	"github.com/gandiva-sched/gandiva/internal/cluster"
)

// ledger records, for a pool reset by ResetPlan, who holds each GPU in the
// plan being built. Its per-GPU entries are stamped with a generation, so a
// reset costs nothing for the GPUs a round does not touch.
type ledger struct {
	on     bool
	keep   bool // GPUs start kept by the jobs that hold them in the snapshot
	gen    uint32
	at     []uint32        // per GPU: the generation its entries belong to
	holder []cluster.JobID // per GPU: the job holding it in the plan, or NoJob
	kept   []uint8         // per GPU: jobs outside the plan that keep it
	// per server: the GPUs a plan may give out, those the snapshot shows
	// free or held by a job (a GPU its view hides is neither)
	plan []uint64
}

// ResetPlan makes the pool the ledger of a plan being built over s: a GPU
// is free when its server is schedulable, the snapshot shows it free or
// held by a job (not hidden: a view under an executor's constraints shows
// GPUs it may not place on, such as those of other schedulers' work, as
// neither), no job holds it in the plan (Hold, Share) and no job keeps it
// (Keep). Without keep, no GPU is held or kept at first (the plan
// re-decides everything); with keep, each GPU starts kept by as many jobs
// as hold it in s (the plan leaves running jobs where they are unless it
// moves them: Leave). Take and Give are not for such a pool.
func (p *Pool) ResetPlan(s *cluster.Snapshot, keep bool) {
	l := &p.led
	l.plan = l.plan[:0]
	for i := range s.Servers {
		l.plan = append(l.plan, Plannable(s, cluster.ServerID(i)))
	}
	if keep {
		p.Reset(s)
	} else {
		p.ResetMasks(s, func(sv cluster.ServerID) uint64 { return l.plan[sv] })
	}
	l.on, l.keep = true, keep
	l.gen++
	if l.gen == 0 { // wrapped: every stamp is stale again
		clear(l.at)
		l.gen = 1
	}
	for n := s.Cluster.NumGPUs(); len(l.at) < n; {
		l.at = append(l.at, 0)
		l.holder = append(l.holder, cluster.NoJob)
		l.kept = append(l.kept, 0)
	}
}

// Plannable is the mask of server sv's GPUs that s shows free or held by
// a job: those a plan may give out (ResetPlan), once their jobs leave
// them. A view under an executor's constraints hides GPUs it may not
// place on (other schedulers' work, a cordoned node) as neither; without
// hidden GPUs (a simulation, a live cluster) it is every GPU of the
// server, down or not.
func Plannable(s *cluster.Snapshot, sv cluster.ServerID) uint64 {
	m := s.Servers[sv].Free
	srv := &s.Cluster.Servers[sv]
	all := uint64(1)<<uint(srv.NumGPUs) - 1
	for rest := all &^ m; rest != 0; rest &= rest - 1 {
		i := bits.TrailingZeros64(rest)
		if len(s.GPUs[srv.FirstGPU+cluster.GPUID(i)].Jobs) > 0 {
			m |= 1 << uint(i)
		}
	}
	return m
}

// load brings GPU g's ledger entries to this plan.
func (p *Pool) load(g cluster.GPUID) {
	l := &p.led
	if l.at[g] == l.gen {
		return
	}
	l.at[g] = l.gen
	l.holder[g] = cluster.NoJob
	l.kept[g] = 0
	if l.keep {
		l.kept[g] = uint8(min(len(p.snap.GPUs[g].Jobs), 255))
	}
}

// Holder returns the job that holds GPU g in the plan (Hold, or Share on
// a GPU no job held), or NoJob.
func (p *Pool) Holder(g cluster.GPUID) cluster.JobID {
	if !p.led.on {
		return cluster.NoJob
	}
	p.load(g)
	return p.led.holder[g]
}

// Held reports whether GPU g is held in the plan or kept by a job outside
// it, on any server, schedulable or not.
func (p *Pool) Held(g cluster.GPUID) bool {
	if !p.led.on {
		return !p.IsFree(g)
	}
	p.load(g)
	return p.led.holder[g] != cluster.NoJob || p.led.kept[g] > 0
}

// refresh sets GPU g's free bit from its ledger entries.
func (p *Pool) refresh(g cluster.GPUID) {
	s, b := p.bit(g)
	m := p.free[s] &^ b
	if p.snap.Servers[s].Schedulable() && p.led.plan[s]&b != 0 && p.led.holder[g] == cluster.NoJob && p.led.kept[g] == 0 {
		m |= b
	}
	if m != p.free[s] {
		p.set(s, m)
	}
}

func (p *Pool) setHolder(g cluster.GPUID, id cluster.JobID) {
	p.load(g)
	if p.led.holder[g] == id {
		return
	}
	p.undo = append(p.undo, undo{kind: undoHolder, i: int32(g), val: uint64(int64(p.led.holder[g]))})
	p.led.holder[g] = id
	p.refresh(g)
}

func (p *Pool) setKept(g cluster.GPUID, n uint8) {
	p.undo = append(p.undo, undo{kind: undoKept, i: int32(g), val: uint64(p.led.kept[g])})
	p.led.kept[g] = n
	p.refresh(g)
}

// Hold records that job id holds gpus in the plan (it becomes their
// holder, whoever held them before).
func (p *Pool) Hold(id cluster.JobID, gpus []cluster.GPUID) {
	for _, g := range gpus {
		p.setHolder(g, id)
	}
}

// Share records that job id runs on gpus next to their holders (packing):
// it becomes the holder only of those no job holds.
func (p *Pool) Share(id cluster.JobID, gpus []cluster.GPUID) {
	for _, g := range gpus {
		if p.Holder(g) == cluster.NoJob {
			p.setHolder(g, id)
		}
	}
}

// Release records that job id no longer holds gpus in the plan; GPUs that
// another job holds stay held.
func (p *Pool) Release(id cluster.JobID, gpus []cluster.GPUID) {
	for _, g := range gpus {
		if p.Holder(g) == id {
			p.setHolder(g, cluster.NoJob)
		}
	}
}

// Keep records that one more job outside the plan keeps gpus (a running
// job the plan leaves alone).
func (p *Pool) Keep(gpus []cluster.GPUID) {
	for _, g := range gpus {
		p.load(g)
		if k := p.led.kept[g]; k < 255 {
			p.setKept(g, k+1)
		}
	}
}

// Leave records that one job that kept gpus left them to the plan (which
// now decides where it runs).
func (p *Pool) Leave(gpus []cluster.GPUID) {
	for _, g := range gpus {
		p.load(g)
		if k := p.led.kept[g]; k > 0 {
			p.setKept(g, k-1)
		}
	}
}
