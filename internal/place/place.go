// Package place finds GPUs for gangs. A Pool is a copy-on-write view of the
// free GPUs in a snapshot, and the one record of a placement being planned:
// a policy takes GPUs from it as it decides (Find, Place, Any, Pick), gives
// back GPUs of jobs it plans to suspend, and can checkpoint and roll back a
// trial (try before you touch: nothing is committed until the whole gang fits). A pool reset as a
// plan's ledger (ResetPlan) also records which job holds each GPU in the
// plan and which GPUs jobs outside the plan keep. Placement never fails with
// an error: "does not fit" is a result, and Explain gives the reason per
// server.
package place

import (
	"math/bits"
	"slices"

	"github.com/gandiva-sched/gandiva/internal/cluster"
)

// Pool tracks free GPUs per server on top of a snapshot.
type Pool struct {
	snap *cluster.Snapshot
	c    *cluster.Cluster
	free []uint64 // per server; 0 for servers that are not schedulable
	idx  cluster.FreeIndex
	undo []undo
	led  ledger // holders, for a pool reset by ResetPlan
}

// undo is one change that Rollback reverts: a server's free mask, a GPU's
// holder or a GPU's keeper count, as it was before.
type undo struct {
	kind uint8
	i    int32 // server or GPU
	val  uint64
}

const (
	undoFree uint8 = iota
	undoHolder
	undoKept
)

// NewPool starts from the snapshot's free GPUs on schedulable servers.
func NewPool(s *cluster.Snapshot) *Pool {
	p := &Pool{}
	p.Reset(s)
	return p
}

// Reset makes the pool a fresh view of s, reusing its buffers (a policy
// can keep one Pool across rounds).
func (p *Pool) Reset(s *cluster.Snapshot) {
	p.snap, p.c = s, s.Cluster
	p.free = p.free[:0]
	for i := range s.Servers {
		m := uint64(0)
		if s.Servers[i].Schedulable() {
			m = s.Servers[i].Free
		}
		p.free = append(p.free, m)
	}
	if s.Free != nil {
		p.idx.CopyFrom(s.Free)
	} else {
		p.idx = cluster.FreeIndex{}
		for i := range p.free {
			p.idx.Set(cluster.ServerID(i), bits.OnesCount64(p.free[i]), p.c.Servers[i].NumGPUs)
		}
	}
	p.undo = p.undo[:0]
	p.led.on = false
}

// ResetMasks makes the pool a view of s in which server i's free GPUs are
// mask(i) (restricted to schedulable servers), for policies that plan on
// their own notion of "free" (such as GPUs with few time-sliced jobs).
func (p *Pool) ResetMasks(s *cluster.Snapshot, mask func(cluster.ServerID) uint64) {
	p.snap, p.c = s, s.Cluster
	p.free = p.free[:0]
	p.idx = cluster.FreeIndex{}
	for i := range s.Servers {
		m := uint64(0)
		if s.Servers[i].Schedulable() {
			m = mask(cluster.ServerID(i))
		}
		p.free = append(p.free, m)
		p.idx.Set(cluster.ServerID(i), bits.OnesCount64(m), p.c.Servers[i].NumGPUs)
	}
	p.undo = p.undo[:0]
	p.led.on = false
}

// ResetFrom makes the pool a copy of o's free GPUs (not of its holders),
// with nothing to roll back: a scratch view for trials that must not touch
// o.
func (p *Pool) ResetFrom(o *Pool) {
	p.snap, p.c = o.snap, o.c
	p.free = append(p.free[:0], o.free...)
	p.idx.CopyFrom(&o.idx)
	p.undo = p.undo[:0]
	p.led.on = false
}

// Snapshot returns the snapshot the pool was built on.
func (p *Pool) Snapshot() *cluster.Snapshot { return p.snap }

// Free is the number of free GPUs in the pool.
func (p *Pool) Free() int { return p.idx.Total() }

// FreeOn is the number of free GPUs on server s.
func (p *Pool) FreeOn(s cluster.ServerID) int { return bits.OnesCount64(p.free[s]) }

// Mask returns server s's free mask.
func (p *Pool) Mask(s cluster.ServerID) uint64 { return p.free[s] }

// IsFree reports whether GPU g is free in the pool.
func (p *Pool) IsFree(g cluster.GPUID) bool {
	s := p.c.ServerOf(g)
	return p.free[s]&(1<<uint(g-p.c.Servers[s].FirstGPU)) != 0
}

func (p *Pool) set(s cluster.ServerID, m uint64) {
	p.undo = append(p.undo, undo{kind: undoFree, i: int32(s), val: p.free[s]})
	p.assign(s, m)
}

func (p *Pool) assign(s cluster.ServerID, m uint64) {
	p.idx.Set(s, bits.OnesCount64(m), p.c.Servers[s].NumGPUs)
	p.free[s] = m
}

// Take marks GPUs as used. Taking a GPU that is not free is allowed (packing
// bookkeeping) and changes nothing for that GPU.
func (p *Pool) Take(gpus []cluster.GPUID) {
	for _, g := range gpus {
		s := p.c.ServerOf(g)
		bit := uint64(1) << uint(g-p.c.Servers[s].FirstGPU)
		if p.free[s]&bit != 0 {
			p.set(s, p.free[s]&^bit)
		}
	}
}

// Give marks GPUs as free (those of a job the policy will suspend or move),
// on schedulable servers only.
func (p *Pool) Give(gpus []cluster.GPUID) {
	for _, g := range gpus {
		s := p.c.ServerOf(g)
		if !p.snap.Servers[s].Schedulable() {
			continue
		}
		bit := uint64(1) << uint(g-p.c.Servers[s].FirstGPU)
		if p.free[s]&bit == 0 {
			p.set(s, p.free[s]|bit)
		}
	}
}

// Mark returns a checkpoint for Rollback.
func (p *Pool) Mark() int { return len(p.undo) }

// Rollback undoes every change since the mark: takes and gives, holds and
// releases, keeps and leaves.
func (p *Pool) Rollback(mark int) {
	for i := len(p.undo) - 1; i >= mark; i-- {
		u := p.undo[i]
		switch u.kind {
		case undoFree:
			p.assign(cluster.ServerID(u.i), u.val)
		case undoHolder:
			p.led.holder[u.i] = cluster.JobID(int64(u.val))
		case undoKept:
			p.led.kept[u.i] = uint8(u.val)
		}
	}
	p.undo = p.undo[:mark]
}

// pick returns up to n free GPUs of server s, lowest first, appended to dst.
func (p *Pool) pick(dst []cluster.GPUID, s cluster.ServerID, n int) []cluster.GPUID {
	first := p.c.Servers[s].FirstGPU
	for m := p.free[s]; m != 0 && n > 0; m &= m - 1 {
		dst = append(dst, first+cluster.GPUID(bits.TrailingZeros64(m)))
		n--
	}
	return dst
}

// Any returns n free GPUs anywhere, lowest IDs first, without regard to
// locality (the Tiresias simulator's "count" scheme), or nil.
func (p *Pool) Any(n int) []cluster.GPUID {
	if n > p.Free() {
		return nil
	}
	out := make([]cluster.GPUID, 0, n)
	for s := range p.free {
		if len(out) == n {
			break
		}
		out = p.pick(out, cluster.ServerID(s), n-len(out))
	}
	return out
}

// Strategy is how a policy chooses GPUs for a gang.
type Strategy int

const (
	// Locality (the default) keeps a gang together: on one server when it
	// fits one, else on the fewest servers of one InfiniBand domain, best
	// fit (Place, at the level the policy asks for).
	Locality Strategy = iota
	// Count only counts GPUs: any free GPUs, lowest IDs first, wherever
	// they are (Any; the Tiresias simulator's "count" scheme).
	Count
)

func (st Strategy) String() string {
	switch st {
	case Locality:
		return "locality"
	case Count:
		return "count"
	}
	return "strategy?"
}

// Find returns n free GPUs chosen by strategy st (under Locality at level
// l or better; Count ignores l), or nil. It takes none.
func (p *Pool) Find(n int, st Strategy, l Level) []cluster.GPUID {
	if st == Count {
		return p.Any(n)
	}
	return p.Place(n, l)
}

// Level is how much locality a placement insists on.
type Level int

// Locality levels, strictest first.
const (
	// Packed: the fewest servers possible for the gang (one server when it
	// fits one), all in one InfiniBand domain.
	Packed Level = iota
	// OneMore: one more server than the fewest, in one domain.
	OneMore
	// Domain: any number of servers in one domain.
	Domain
	// Anywhere: any servers, across domains.
	Anywhere
	// NumLevels counts the levels.
	NumLevels
)

var levelNames = [...]string{"packed", "packed+1", "domain", "anywhere"}

func (l Level) String() string {
	if l >= 0 && int(l) < len(levelNames) {
		return levelNames[l]
	}
	return "level?"
}

// Consolidated is YARN-CS's placement: the gang on one server when it fits
// one (best fit: the server with the fewest free GPUs that suffice), else
// on the fewest servers of one domain. It is Place at level Packed.
func (p *Pool) Consolidated(n int) []cluster.GPUID { return p.Place(n, Packed) }

// Place finds n GPUs at locality level l or better, or returns nil. Among
// choices it prefers fewer servers, then fuller servers (best fit, to keep
// whole servers free for large gangs), then lower IDs: a total order.
func (p *Pool) Place(n int, l Level) []cluster.GPUID {
	if n <= 0 || n > p.Free() {
		return nil
	}
	// One server, if some server can host the whole gang.
	if best := p.idx.BestFit(n); best >= 0 {
		return p.pick(make([]cluster.GPUID, 0, n), best, n)
	}
	// Several servers: the fewest servers possible for this gang is
	// ceil(n / largest server size).
	maxSize := p.idx.MaxSize()
	minServers := (n + maxSize - 1) / maxSize
	limit := 1 << 30
	switch l {
	case Packed:
		limit = minServers
	case OneMore:
		limit = minServers + 1
	}
	if l <= Domain {
		best, bestN := -1, 0
		for d, dom := range p.c.Domains {
			if k := p.serversNeeded(dom, n); k > 0 && k <= limit && (best < 0 || k < bestN) {
				best, bestN = d, k
			}
		}
		if best < 0 {
			return nil
		}
		return p.take(p.fewest(p.c.Domains[best], n), n)
	}
	all := make([]cluster.ServerID, len(p.free))
	for i := range all {
		all[i] = cluster.ServerID(i)
	}
	if p.serversNeeded(all, n) == 0 {
		return nil
	}
	return p.take(p.fewest(all, n), n)
}

// serversNeeded is how many of cand's servers, fullest first, it takes to
// cover n free GPUs; 0 if they cannot. It counts without sorting.
func (p *Pool) serversNeeded(cand []cluster.ServerID, n int) int {
	var hist [cluster.MaxGPUsPerServer + 1]int
	sum := 0
	for _, s := range cand {
		f := p.idx.Count(s)
		hist[f]++
		sum += f
	}
	if sum < n {
		return 0
	}
	k := 0
	for f := cluster.MaxGPUsPerServer; f > 0 && n > 0; f-- {
		for c := hist[f]; c > 0 && n > 0; c-- {
			n -= f
			k++
		}
	}
	return k
}

// fewest chooses the fewest servers among cand that together have n free
// GPUs: the servers with the most free GPUs, ties by ID, the last one
// replaced by the fullest server that still covers the remainder (best fit,
// so larger free blocks stay whole); nil if they cannot.
func (p *Pool) fewest(cand []cluster.ServerID, n int) []cluster.ServerID {
	type sf struct {
		s cluster.ServerID
		f int
	}
	var fs []sf
	sum := 0
	for _, s := range cand {
		if f := p.idx.Count(s); f > 0 {
			fs = append(fs, sf{s, f})
			sum += f
		}
	}
	if sum < n {
		return nil
	}
	slices.SortFunc(fs, func(a, b sf) int {
		if a.f != b.f {
			return b.f - a.f
		}
		return int(a.s - b.s)
	})
	var out []cluster.ServerID
	got := 0
	for _, x := range fs {
		out = append(out, x.s)
		got += x.f
		if got >= n {
			break
		}
	}
	need := n - (got - fs[len(out)-1].f)
	best := len(out) - 1
	for i := len(out); i < len(fs); i++ {
		if fs[i].f >= need && fs[i].f < fs[best].f {
			best = i
		}
	}
	out[len(out)-1] = fs[best].s
	slices.Sort(out)
	return out
}

func (p *Pool) take(servers []cluster.ServerID, n int) []cluster.GPUID {
	// Fill the fullest servers first so the remainder lands on one.
	order := slices.Clone(servers)
	slices.SortStableFunc(order, func(a, b cluster.ServerID) int { return p.FreeOn(b) - p.FreeOn(a) })
	out := make([]cluster.GPUID, 0, n)
	for _, s := range order {
		out = p.pick(out, s, n-len(out))
	}
	slices.Sort(out)
	return out
}

// Spread reports how many servers and how many InfiniBand domains a GPU set
// spans, exactly (0, 0 for none). The GPUs must be grouped by server, as a
// sorted list is: a server is counted at each change of server. It is what
// the simulator's performance model charges a gang for (a locality penalty
// when servers > 1, more when domains > 1) and what policies compare when
// they consolidate a gang (the fewest servers).
func Spread(c *cluster.Cluster, gpus []cluster.GPUID) (servers, domains int) {
	lastS := cluster.ServerID(-1)
	var seen [8]int // the domains seen, most gangs span few
	more := map[int]bool(nil)
	for _, g := range gpus {
		s := c.ServerOf(g)
		if s == lastS {
			continue
		}
		servers++
		lastS = s
		d := c.Servers[s].Domain
		found := false
		for i := 0; i < min(domains, len(seen)); i++ {
			if seen[i] == d {
				found = true
			}
		}
		if !found && domains >= len(seen) {
			if more == nil {
				more = map[int]bool{}
			}
			found = more[d]
			more[d] = true
		}
		if !found {
			if domains < len(seen) {
				seen[domains] = d
			}
			domains++
		}
	}
	return servers, domains
}
