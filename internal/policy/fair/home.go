package fair

import (
	"math"
	"math/bits"
	"slices"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/place"
)

// home drops homes that are no longer valid, recomputes server loads and
// stride tickets, and homes the jobs that have none: on the least-loaded
// server of their type, or, for a job larger than any server, on the
// least-loaded server and the least-loaded others of its InfiniBand domain.
func (p *Policy) home(s *cluster.Snapshot, types []int) {
	p.dropStaleHomes(s)
	p.loads(types)
	var hp serverHeap
	for _, t := range types {
		pl := p.pools[t]
		hp.reset(p, pl)
		big := 0
		for _, sid := range pl.servers {
			if p.servers[sid].up {
				big = max(big, p.servers[sid].gpus)
			}
		}
		for _, js := range p.jobs {
			if js == nil || js.typ != t || js.home >= 0 || js.multi {
				continue
			}
			if js.size <= big {
				sv := hp.best(p, js.size, s, js.id)
				if sv == nil {
					continue
				}
				p.attach(js, sv, -1)
				hp.fix(p, sv.id)
			} else {
				p.attachMulti(s, js, pl, &hp)
			}
		}
		p.syncCentral(pl)
	}
}

// dropStaleHomes unhomes jobs without a type and jobs whose home server(s)
// went down, changed type, are too small (in all, or in the GPUs the view
// lets the policy give out: shown) or are no longer servers the job may
// run on (cluster.Snapshot.MayRun); it reports whether it unhomed any.
func (p *Policy) dropStaleHomes(s *cluster.Snapshot) bool {
	dropped := false
	for _, js := range p.jobs {
		if js == nil {
			continue
		}
		stale := false
		switch {
		case js.typ < 0:
			stale = js.home >= 0 || js.multi
		case js.home >= 0:
			sv := p.servers[js.home]
			stale = !sv.up || sv.typ != js.typ || sv.gpus < js.size || !s.MayRun(js.id, sv.id) || shown(s, sv.id) < js.size
		case js.multi:
			stale = slices.ContainsFunc(js.homes, func(h cluster.ServerID) bool {
				sv := p.servers[h]
				return !sv.up || sv.typ != js.typ || !s.MayRun(js.id, h)
			})
		}
		if stale {
			p.unhome(js)
			dropped = true
		}
	}
	return dropped
}

// loads recomputes every server's load (its jobs' allocations per GPU,
// plus the share of time spanning jobs claim it) and its jobs' stride
// tickets.
func (p *Policy) loads(types []int) {
	for _, sv := range p.servers {
		sv.load = 0
	}
	for _, t := range types {
		pl := p.pools[t]
		for _, sid := range pl.servers {
			sv := p.servers[sid]
			for _, js := range sv.jobs {
				sv.load += js.alloc / float64(sv.gpus)
				p.setTickets(js)
			}
		}
		for _, m := range pl.multis {
			f := m.alloc / float64(m.size)
			for _, h := range m.homes {
				p.servers[h].load += f
			}
		}
	}
}

// attach homes a local job on sv with the given lead over sv's virtual time.
// A negative lead means a newcomer (Stride.JoinPass).
func (p *Policy) attach(js *job, sv *server, lead float64) {
	js.home = sv.id
	t := p.strideTickets(js)
	pass := sv.local.JoinPass(js.size, t)
	if lead >= 0 {
		pass = sv.local.VT() + math.Min(lead, float64(js.size)/t)
	}
	sv.local.Add(int64(js.id), js.size, t, pass)
	i, _ := slices.BinarySearchFunc(sv.jobs, js.id, func(a *job, id cluster.JobID) int { return int(a.id - id) })
	sv.jobs = slices.Insert(sv.jobs, i, js)
	sv.load += js.alloc / float64(sv.gpus)
	p.touched = append(p.touched, sv.id)
}

// attachMulti homes a job that spans servers, on servers it may run on.
func (p *Policy) attachMulti(s *cluster.Snapshot, js *job, pl *pool, hp *serverHeap) {
	first := hp.best(p, 1, s, js.id)
	if first == nil {
		return
	}
	homes := []cluster.ServerID{first.id}
	got := first.gpus
	// the least-loaded others of the same domain, then of any domain: a
	// few minimum scans (gangs span few servers), no sorting
	for _, cand := range [][]cluster.ServerID{p.c.Domains[first.domain], pl.servers} {
		for got < js.size {
			var best *server
			for _, sid := range cand {
				sv := p.servers[sid]
				if sv.typ != pl.typ || !sv.up || slices.Contains(homes, sid) || !s.MayRun(js.id, sid) {
					continue
				}
				if best == nil || sv.load < best.load || sv.load == best.load && sv.id < best.id {
					best = sv
				}
			}
			if best == nil {
				break
			}
			homes = append(homes, best.id)
			got += best.gpus
		}
	}
	if got < js.size {
		return
	}
	slices.Sort(homes)
	js.multi = true
	js.homes = homes
	f := js.alloc / float64(js.size)
	for _, h := range homes {
		p.servers[h].multiRefs++
		p.servers[h].load += f
		hp.fix(p, h)
	}
	i, _ := slices.BinarySearchFunc(pl.multis, js.id, func(a *job, id cluster.JobID) int { return int(a.id - id) })
	pl.multis = slices.Insert(pl.multis, i, js)
	t := p.multiTickets(js)
	pl.central.Add(multiBase+int64(js.id), got, t, pl.central.JoinPass(got, t))
}

// multiTickets are a spanning job's central tickets: it claims whole
// servers (size = their GPUs), and should hold them alloc/size of the time.
func (p *Policy) multiTickets(js *job) float64 {
	k := 0
	for _, h := range js.homes {
		k += p.servers[h].gpus
	}
	return float64(k) * js.alloc / float64(js.size)
}

// syncCentral keeps the pool's central stride's clients: its spanning jobs
// and the servers that host them and have local jobs too.
func (p *Policy) syncCentral(pl *pool) {
	for _, m := range pl.multis {
		pl.central.SetTickets(multiBase+int64(m.id), p.multiTickets(m))
	}
	for _, sid := range pl.servers {
		sv := p.servers[sid]
		want := sv.multiRefs > 0 && len(sv.jobs) > 0 && sv.up
		tickets := 0.0
		for _, js := range sv.jobs {
			tickets += js.alloc
		}
		switch {
		case want && !sv.inCentral:
			pl.central.Add(int64(sid), sv.gpus, tickets, pl.central.JoinPass(sv.gpus, tickets))
			sv.inCentral = true
		case !want && sv.inCentral:
			pl.central.Remove(int64(sid))
			sv.inCentral = false
		case want:
			pl.central.SetTickets(int64(sid), tickets)
		}
	}
}

// serverHeap orders a pool's schedulable servers by (load, ID).
type serverHeap struct {
	h   []cluster.ServerID
	pos []int // by ServerID; -1 when not in the heap
}

func (h *serverHeap) reset(p *Policy, pl *pool) {
	h.h = h.h[:0]
	h.pos = h.pos[:0]
	for range p.servers {
		h.pos = append(h.pos, -1)
	}
	for _, sid := range pl.servers {
		if p.servers[sid].up {
			h.pos[sid] = len(h.h)
			h.h = append(h.h, sid)
		}
	}
	for i := len(h.h)/2 - 1; i >= 0; i-- {
		h.down(p, i)
	}
}

func (h *serverHeap) less(p *Policy, i, j int) bool {
	a, b := p.servers[h.h[i]], p.servers[h.h[j]]
	if a.load != b.load {
		return a.load < b.load
	}
	return a.id < b.id
}

func (h *serverHeap) swap(i, j int) {
	h.h[i], h.h[j] = h.h[j], h.h[i]
	h.pos[h.h[i]] = i
	h.pos[h.h[j]] = j
}

func (h *serverHeap) down(p *Policy, i int) {
	for {
		l := 2*i + 1
		if l >= len(h.h) {
			return
		}
		m := l
		if r := l + 1; r < len(h.h) && h.less(p, r, l) {
			m = r
		}
		if !h.less(p, m, i) {
			return
		}
		h.swap(i, m)
		i = m
	}
}

func (h *serverHeap) fix(p *Policy, sid cluster.ServerID) {
	i := h.pos[sid]
	if i < 0 {
		return
	}
	for i > 0 {
		q := (i - 1) / 2
		if !h.less(p, i, q) {
			break
		}
		h.swap(i, q)
		i = q
	}
	h.down(p, i)
}

// shown is the number of server sv's GPUs that the view lets the policy
// give out (place.Plannable): all of them but those a view under an
// executor's constraints hides (other schedulers' work, a cordoned node).
func shown(s *cluster.Snapshot, sv cluster.ServerID) int {
	return bits.OnesCount64(place.Plannable(s, sv))
}

// best returns the least-loaded server with at least size GPUs shown that
// job id may run on (s.MayRun), or nil.
func (h *serverHeap) best(p *Policy, size int, s *cluster.Snapshot, id cluster.JobID) *server {
	if len(h.h) == 0 {
		return nil
	}
	if sv := p.servers[h.h[0]]; sv.gpus >= size && s.MayRun(id, sv.id) && shown(s, sv.id) >= size {
		return sv
	}
	var best *server
	for _, sid := range h.h {
		sv := p.servers[sid]
		if sv.gpus >= size && s.MayRun(id, sid) && shown(s, sid) >= size && (best == nil || sv.load < best.load || sv.load == best.load && sv.id < best.id) {
			best = sv
		}
	}
	return best
}

// cost ranks what moving a job costs: nothing for a job that never ran,
// a remote resume for a suspended one, a migration for a running one.
func cost(j *cluster.Job) int {
	switch {
	case j.FirstStart < 0:
		return 0
	case j.State.Waiting():
		return 1
	}
	return 2
}

// rebalance runs at a quantum boundary: it moves jobs between GPU types
// towards each user's targets, then between servers of a type towards equal
// loads, moving at most p.moves jobs that have started.
func (p *Policy) rebalance(s *cluster.Snapshot) {
	if p.dirty {
		p.plan(s)
	}
	budget := p.moves
	types := p.typesUp()
	if len(types) > 1 {
		for _, u := range p.sortedUsers() {
			for budget >= 0 && p.moveType(s, u, types, &budget) {
				p.dirty = true
			}
		}
		if p.dirty {
			p.plan(s)
		}
	}
	for _, t := range types {
		pl := p.pools[t]
		for range 4*p.moves + 64 {
			if !p.moveServer(s, pl, &budget) {
				break
			}
		}
	}
}

// moveType moves one of u's jobs from a type where its demand is above its
// target to one where it is below, when that brings both closer; it
// reports whether it moved one.
func (p *Policy) moveType(s *cluster.Snapshot, u *user, types []int, budget *int) bool {
	var best *job
	bestTo, bestCost, bestGain := -1, 0, 0.0
	for _, js := range u.jobs {
		if js.typ < 0 || !p.moveable(s, js) {
			continue
		}
		c := cost(s.Jobs[js.id])
		if c > 0 && *budget <= 0 {
			continue
		}
		from := js.typ
		over := float64(u.assigned[from]) - u.target[from]
		if over <= 0 {
			continue
		}
		for _, to := range types {
			if to == from || p.pools[to].gpus < js.size || !p.mayRunIn(s, js, to) {
				continue
			}
			under := u.target[to] - float64(u.assigned[to])
			g := float64(js.size)
			gain := math.Abs(over) + math.Abs(under) - math.Abs(over-g) - math.Abs(under-g)
			if gain <= 1e-9 {
				continue
			}
			if best == nil || c < bestCost || c == bestCost && gain > bestGain+1e-9 {
				best, bestTo, bestCost, bestGain = js, to, c, gain
			}
		}
	}
	if best == nil {
		return false
	}
	p.unhome(best)
	u.assigned[best.typ] -= best.size
	p.setType(best, bestTo)
	u.assigned[bestTo] += best.size
	if bestCost > 0 {
		*budget--
		p.movesRun++
	}
	return true
}

// mayRunIn reports whether js may run on some server of GPU type t
// (cluster.Snapshot.MayRun).
func (p *Policy) mayRunIn(s *cluster.Snapshot, js *job, t int) bool {
	if s.Allowed == nil {
		return true
	}
	return slices.ContainsFunc(p.pools[t].servers, func(sid cluster.ServerID) bool { return s.MayRun(js.id, sid) })
}

// moveable reports whether a job may be moved now: not while it migrates.
func (p *Policy) moveable(s *cluster.Snapshot, js *job) bool {
	j := s.Jobs[js.id]
	return !pinned(j)
}

// pinned reports whether a job keeps its GPUs this quantum whatever the
// strides say: it is migrating, or its process is starting up (engine
// Options.StartUps: stopping it would waste its start-up, and it has not
// computed anything a quantum is for yet).
func pinned(j *cluster.Job) bool {
	return j.State == cluster.Migrating || j.State == cluster.Running && j.StartingUp
}

// moveServer moves one local job from the most to the least loaded server
// of a pool when their loads differ by more than the imbalance allowed and
// the most loaded is over-committed; it reports whether it moved one.
func (p *Policy) moveServer(s *cluster.Snapshot, pl *pool, budget *int) bool {
	var hi, lo *server
	for _, sid := range pl.servers {
		sv := p.servers[sid]
		if !sv.up {
			continue
		}
		if hi == nil || sv.load > hi.load+1e-12 {
			hi = sv
		}
		if lo == nil || sv.load < lo.load-1e-12 {
			lo = sv
		}
	}
	if hi == nil || hi == lo || hi.load-lo.load <= p.imbalance || hi.load <= 1+1e-9 {
		return false
	}
	var best *job
	bestCost, bestAfter := 0, 0.0
	for _, js := range hi.jobs {
		if js.size > lo.gpus || !p.moveable(s, js) || !s.MayRun(js.id, lo.id) {
			continue
		}
		c := cost(s.Jobs[js.id])
		if c > 0 && *budget <= 0 {
			continue
		}
		a := js.alloc
		after := math.Max(hi.load-a/float64(hi.gpus), lo.load+a/float64(lo.gpus))
		if after >= hi.load-1e-9 {
			continue
		}
		if best == nil || c < bestCost || c == bestCost && after < bestAfter-1e-12 {
			best, bestCost, bestAfter = js, c, after
		}
	}
	if best == nil {
		return false
	}
	lead := p.unhome(best)
	p.attach(best, lo, lead)
	if bestCost > 0 {
		*budget--
		p.movesRun++
	}
	return true
}

// quantumRound decides the next quantum: the central strides pick which
// spanning jobs run (claiming their servers), every server's local stride
// picks its jobs, then jobs that stop are suspended and jobs that run are
// started or resumed on their home servers.
func (p *Policy) quantumRound(s *cluster.Snapshot, d *cluster.Decision) {
	p.pool.Reset(s)
	for _, js := range p.jobs {
		if js != nil {
			js.run = false
		}
	}
	claim := make(map[cluster.ServerID]*job)
	rank, took := p.standing, p.holeTaker(p.quantum)
	for _, t := range p.typesUp() {
		pl := p.pools[t]
		if len(pl.multis) > 0 {
			p.central(s, pl, claim)
		}
		for _, sid := range pl.servers {
			sv := p.servers[sid]
			if !sv.up || len(sv.jobs) == 0 {
				continue
			}
			capacity := sv.gpus - p.migratingOn(s, sid)
			if m := claim[sid]; m != nil && !pinned(s.Jobs[m.id]) {
				capacity -= p.usesOn(m, sid)
			}
			// local jobs still migrating home (or starting up there) hold
			// their GPUs this quantum
			for _, js := range sv.jobs {
				if pinned(s.Jobs[js.id]) && p.atHome(s, js) {
					js.run = true
					sv.local.Charge(int64(js.id), 1)
				}
			}
			if capacity <= 0 {
				continue
			}
			ok := func(id int64, _ int) bool { return p.runnable(s, p.jobs[id]) }
			switch {
			case p.pack:
				p.chosen = sv.local.SelectPacked(p.chosen[:0], capacity, 1, true, ok)
			case p.holes == "user":
				p.chosen = sv.local.SelectFill(p.chosen[:0], capacity, 1, ok, rank, took)
			default:
				p.chosen = sv.local.Select(p.chosen[:0], capacity, 1, ok)
			}
			for _, id := range p.chosen {
				p.jobs[id].run = true
			}
		}
	}
	p.emit(s, d)
}

// central runs a pool's central stride: spanning jobs against the servers
// they share with local jobs.
func (p *Policy) central(s *cluster.Snapshot, pl *pool, claim map[cluster.ServerID]*job) {
	local := map[cluster.ServerID]bool{}
	// a spanning job that is migrating (or starting up) holds its servers
	// this quantum
	for _, m := range pl.multis {
		if pinned(s.Jobs[m.id]) {
			m.run = true
			for _, h := range m.homes {
				claim[h] = m
			}
			pl.central.Charge(multiBase+int64(m.id), 1)
		}
	}
	free := 0
	for _, sid := range pl.servers {
		if p.servers[sid].inCentral {
			free += p.servers[sid].gpus
		}
	}
	for _, m := range pl.multis {
		for _, h := range m.homes {
			if !p.servers[h].inCentral {
				free += p.servers[h].gpus
			}
		}
	}
	p.chosen = pl.central.Select(p.chosen[:0], free, 1, func(id int64, _ int) bool {
		if id < multiBase {
			sid := cluster.ServerID(id)
			if claim[sid] != nil || local[sid] {
				return false
			}
			local[sid] = true
			return true
		}
		m := p.jobs[id-multiBase]
		if m.run || !p.runnable(s, m) {
			return false
		}
		for _, h := range m.homes {
			if claim[h] != nil || local[h] || p.migratingOn(s, h) > 0 {
				return false
			}
		}
		for _, h := range m.homes {
			claim[h] = m
		}
		m.run = true
		return true
	})
}

// usesOn is how many of a spanning job's GPUs fall on server sid when it
// fills its home servers in order.
func (p *Policy) usesOn(m *job, sid cluster.ServerID) int {
	left := m.size
	for _, h := range m.homes {
		n := min(left, p.servers[h].gpus)
		if h == sid {
			return n
		}
		left -= n
	}
	return 0
}

// migratingOn counts the GPUs of server sid held by migrating jobs and jobs
// starting up (pinned): they are not suspended this quantum.
func (p *Policy) migratingOn(s *cluster.Snapshot, sid cluster.ServerID) int {
	n := 0
	first := s.Cluster.Servers[sid].FirstGPU
	for i := 0; i < s.Cluster.Servers[sid].NumGPUs; i++ {
		for _, id := range s.GPUs[first+cluster.GPUID(i)].Jobs {
			if pinned(s.Jobs[id]) {
				n++
			}
		}
	}
	return n
}

// runnable reports whether a job may be chosen to run this quantum.
func (p *Policy) runnable(s *cluster.Snapshot, js *job) bool {
	j := s.Jobs[js.id]
	switch j.State {
	case cluster.Running:
		return true
	case cluster.Queued, cluster.Suspended:
		return j.NotBefore <= s.Now
	}
	return false
}

// atHome reports whether a holding job's GPUs are on its home server(s).
func (p *Policy) atHome(s *cluster.Snapshot, js *job) bool {
	j := s.Jobs[js.id]
	if len(j.GPUs) == 0 {
		return false
	}
	for _, g := range j.GPUs {
		sv := s.Cluster.ServerOf(g)
		if js.multi {
			if !slices.Contains(js.homes, sv) {
				return false
			}
		} else if sv != js.home {
			return false
		}
	}
	return true
}

// emit turns the choices into actions: suspends first (they free GPUs),
// then starts and resumes, each in job ID order. It also decides whether
// the next boundary needs a wake-up.
func (p *Policy) emit(s *cluster.Snapshot, d *cluster.Decision) {
	running, waiting := false, false
	for _, js := range p.jobs {
		if js == nil {
			continue
		}
		j := s.Jobs[js.id]
		switch {
		case js.run || j.State == cluster.Migrating:
			running = true
		case j.State == cluster.Running: // suspended now: it will wait
			waiting = true
		case j.State.Waiting() && !math.IsInf(j.NotBefore, 1) && p.homed(js):
			waiting = true
		}
	}
	p.wake = running && waiting
	for _, js := range p.jobs {
		if js == nil {
			continue
		}
		j := s.Jobs[js.id]
		if j.State != cluster.Running || js.run && p.atHome(s, js) {
			continue
		}
		d.Actions = append(d.Actions, cluster.Action{Kind: cluster.Suspend, Job: js.id, Reason: "quantum"})
		p.pool.Give(j.GPUs)
	}
	for _, js := range p.jobs {
		if js == nil || !js.run {
			continue
		}
		j := s.Jobs[js.id]
		if j.State == cluster.Running && p.atHome(s, js) || j.State == cluster.Migrating {
			continue
		}
		p.place(s, js, d, "quantum")
	}
}

// homed reports whether a job has a home on schedulable servers.
func (p *Policy) homed(js *job) bool {
	if js.multi {
		return len(js.homes) > 0
	}
	return js.home >= 0 && p.servers[js.home].up
}

// place starts or resumes a chosen job on free GPUs of its home server(s):
// on each, its previous GPUs there when exactly as many as it needs there
// are free (a resume in place), else the lowest free ones. It does nothing
// if they are not enough (the engine state moved under the plan).
func (p *Policy) place(s *cluster.Snapshot, js *job, d *cluster.Decision, why string) {
	j := s.Jobs[js.id]
	homes := js.homes
	if !js.multi {
		if js.home < 0 {
			return
		}
		homes = []cluster.ServerID{js.home}
	}
	var gpus []cluster.GPUID
	for _, h := range homes {
		need := js.size
		if js.multi {
			need = p.usesOn(js, h)
		}
		prefer := j.Last
		if p.pool.FreeAmong(h, j.Last) != need {
			prefer = nil
		}
		var ok bool
		if gpus, ok = p.pool.PickOn(gpus, h, need, prefer); !ok {
			return
		}
	}
	p.pool.Take(gpus)
	kind := cluster.Start
	if j.State == cluster.Suspended || j.State == cluster.Running {
		kind = cluster.Resume
	}
	d.Actions = append(d.Actions, cluster.Action{Kind: kind, Job: js.id, GPUs: gpus, Reason: why})
}

// fill gives GPUs that freed up between quanta to the waiting jobs of their
// servers, in stride order with holes filled by the hole rule, charged for
// the rest of the quantum.
func (p *Policy) fill(s *cluster.Snapshot, d *cluster.Decision) {
	if len(p.touched) == 0 {
		return
	}
	slices.Sort(p.touched)
	p.touched = slices.Compact(p.touched)
	p.pool.Reset(s)
	charge := math.Min(1, math.Max(0, (p.boundary-s.Now)/p.quantum))
	rank, took := p.standing, p.holeTaker(charge*p.quantum)
	for _, sid := range p.touched {
		if int(sid) >= len(p.servers) {
			continue
		}
		sv := p.servers[sid]
		n := p.pool.FreeOn(sid)
		if !sv.up || n == 0 || len(sv.jobs) == 0 {
			continue
		}
		ok := func(id int64, _ int) bool {
			j := s.Jobs[id]
			return j.State.Waiting() && j.NotBefore <= s.Now
		}
		switch {
		case p.pack:
			p.chosen = sv.local.SelectPacked(p.chosen[:0], n, charge, false, ok)
		case p.holes == "user":
			p.chosen = sv.local.SelectFill(p.chosen[:0], n, charge, ok, rank, took)
		default:
			p.chosen = sv.local.Select(p.chosen[:0], n, charge, ok)
		}
		for _, id := range p.chosen {
			js := p.jobs[id]
			js.run = true
			p.place(s, js, d, "fill")
		}
	}
}
