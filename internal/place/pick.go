package place

import (
	"math/bits"
	"slices"

	"github.com/gandiva-sched/gandiva/internal/cluster"
)

// Slot is part of a gang's placement: N GPUs of one server.
type Slot struct {
	Server cluster.ServerID
	N      int
}

// SlotsOf turns a GPU list grouped by server (as a sorted list is) into
// slots, one per run of GPUs on one server, in order.
func SlotsOf(c *cluster.Cluster, gpus []cluster.GPUID) []Slot {
	var out []Slot
	for _, g := range gpus {
		s := c.ServerOf(g)
		if n := len(out); n > 0 && out[n-1].Server == s {
			out[n-1].N++
		} else {
			out = append(out, Slot{s, 1})
		}
	}
	return out
}

// bit returns g's server and its bit in the server's masks.
func (p *Pool) bit(g cluster.GPUID) (cluster.ServerID, uint64) {
	s := p.c.ServerOf(g)
	return s, 1 << uint(g-p.c.Servers[s].FirstGPU)
}

// AllFree reports whether every GPU of gpus is free in the pool (true for
// none).
func (p *Pool) AllFree(gpus []cluster.GPUID) bool {
	for _, g := range gpus {
		if !p.IsFree(g) {
			return false
		}
	}
	return true
}

// FreeAmong counts the GPUs of gpus on server s that are free in the pool.
func (p *Pool) FreeAmong(s cluster.ServerID, gpus []cluster.GPUID) int {
	n := 0
	for _, g := range gpus {
		if sv, b := p.bit(g); sv == s && p.free[s]&b != 0 {
			n++
		}
	}
	return n
}

// PickOn appends n free GPUs of server s to dst: the free GPUs of prefer
// on s first (a job's previous GPUs, say), in prefer's order, then the
// lowest free others. It reports false, with dst unchanged, if s has fewer
// than n free GPUs, and takes none (Take does).
func (p *Pool) PickOn(dst []cluster.GPUID, s cluster.ServerID, n int, prefer []cluster.GPUID) ([]cluster.GPUID, bool) {
	m := p.free[s]
	if bits.OnesCount64(m) < n {
		return dst, false
	}
	for _, g := range prefer {
		if n == 0 {
			break
		}
		if sv, b := p.bit(g); sv == s && m&b != 0 {
			dst = append(dst, g)
			m &^= b
			n--
		}
	}
	first := p.c.Servers[s].FirstGPU
	for ; n > 0; m &= m - 1 {
		dst = append(dst, first+cluster.GPUID(bits.TrailingZeros64(m)))
		n--
	}
	return dst, true
}

// Pick returns GPUs for a placement given by slots: on each slot's server
// its N free GPUs, chosen as PickOn chooses them (prefer's first), sorted.
// It returns nil when a server lacks the free GPUs or slots is empty, and
// takes none.
func (p *Pool) Pick(slots []Slot, prefer []cluster.GPUID) []cluster.GPUID {
	if len(slots) == 0 {
		return nil
	}
	var out []cluster.GPUID
	for _, sl := range slots {
		var ok bool
		if out, ok = p.PickOn(out, sl.Server, sl.N, prefer); !ok {
			return nil
		}
	}
	slices.Sort(out)
	return out
}

// Only restricts the placements that follow to the servers job id may run
// on (cluster.Snapshot.Allowed), in whole pods (cluster.Snapshot.Unit),
// and returns the mark to Rollback to when they are done: a placement
// found in between, taken after the Rollback, is one the job may use.
// In whole pods of u GPUs, each server keeps its lowest free GPUs in a
// multiple of u: a placement of a multiple of u GPUs then puts a multiple
// of u on every server it uses (Place and Any take whole servers but the
// last, and the last the remainder). Without Allowed and Unit it
// restricts nothing.
func (p *Pool) Only(id cluster.JobID) int {
	m := p.Mark()
	if a := p.snap.Allowed; a != nil {
		p.Restrict(func(sv cluster.ServerID) bool { return a(id, sv) })
	}
	if p.snap.Unit != nil {
		p.Whole(p.snap.PodUnit(id))
	}
	return m
}

// Whole keeps, on every server, its lowest free GPUs in a multiple of u
// and takes the others, so that the placements that follow put whole pods
// of u GPUs on each server. It is a trial, as Restrict.
func (p *Pool) Whole(u int) {
	if u <= 1 {
		return
	}
	for s := range p.free {
		m := p.free[s]
		extra := bits.OnesCount64(m) % u
		if extra == 0 {
			continue
		}
		// drop the extra highest free GPUs
		for ; extra > 0; extra-- {
			m &^= 1 << uint(63-bits.LeadingZeros64(m))
		}
		p.set(cluster.ServerID(s), m)
	}
}

// FindFor is Find on the servers job id may run on (Only), with nothing
// taken.
func (p *Pool) FindFor(id cluster.JobID, n int, st Strategy, l Level) []cluster.GPUID {
	m := p.Only(id)
	g := p.Find(n, st, l)
	p.Rollback(m)
	return g
}

// PlaceFor is Place on the servers job id may run on (Only), with nothing
// taken.
func (p *Pool) PlaceFor(id cluster.JobID, n int, l Level) []cluster.GPUID {
	m := p.Only(id)
	g := p.Place(n, l)
	p.Rollback(m)
	return g
}

// Restrict takes every free GPU of the servers that keep rejects, so that
// the placements that follow use only the others. It is a trial: Rollback
// to a mark taken before gives them back.
func (p *Pool) Restrict(keep func(cluster.ServerID) bool) {
	for s := range p.free {
		if p.free[s] != 0 && !keep(cluster.ServerID(s)) {
			p.set(cluster.ServerID(s), 0)
		}
	}
}
