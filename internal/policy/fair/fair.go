package fair

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/place"
	"github.com/gandiva-sched/gandiva/internal/policy"
)

// Name is the policy's registry name.
const Name = "gandiva-fair"

// Policy is Gandiva_fair. See the package comment for what it does.
type Policy struct {
	quantum, defTickets, imbalance float64
	trade, pack                    bool
	price                          string
	moves                          int
	memory, gain                   float64
	holes                          string
	tickets                        map[string]float64

	ready   bool
	now     float64
	c       *cluster.Cluster
	jobs    []*job // by JobID; nil when not tracked
	active  int
	users   map[string]*user
	pools   []*pool // by GPU type index; nil for types without servers
	servers []*server
	sp      *speeds
	// boundary is the next quantum boundary; started is false before the first.
	boundary float64
	started  bool
	dirty    bool
	touched  []cluster.ServerID
	trades   []Trade
	movesRun int // started jobs moved so far (for tests and reports)
	// acctAt is when service was last accounted (feedback); served is,
	// per GPU type, all users' received ÷ allocated GPU-seconds then.
	acctAt float64
	served []float64
	// wake is set when the next quantum boundary matters: some job waits
	// for GPUs of an up server and some job runs (time-slicing is on).
	wake bool

	pool   place.Pool // the round's free GPUs
	chosen []int64
	sizes  []int
	split  []float64
}

var (
	_ policy.Policy            = (*Policy)(nil)
	_ policy.SettingsValidator = (*Policy)(nil)
)

type user struct {
	name    string
	tickets float64
	jobs    []*job // active jobs, in ID order
	demand  int
	// per GPU type: entitlement after trades, demand target, assigned demand
	ent, target []float64
	assigned    []int
	// owed and got are, per GPU type, the GPU-seconds the user was
	// allocated and received (attained service), forgotten exponentially
	// (parameter memory); boost scales its jobs' stride tickets on that type
	// to close the gap.
	owed, got, boost []float64
	// held is, per GPU type, the GPU-seconds granted to the user's jobs in
	// holes since service was last accounted (not yet in got).
	held []float64
}

type job struct {
	id    cluster.JobID
	u     *user
	size  int
	model string
	typ   int              // GPU type (pool), -1 while unassigned
	home  cluster.ServerID // server of a job that fits one, -1 when none
	homes []cluster.ServerID
	multi bool    // spans servers: scheduled by the pool's central stride
	alloc float64 // fair GPU allocation = stride tickets
	solo  []float64
	run   bool    // chosen this quantum
	att   float64 // attained service when last accounted
}

type server struct {
	id        cluster.ServerID
	typ, gpus int
	domain    int
	up        bool
	local     Stride
	jobs      []*job // local jobs (homed here, not spanning), in ID order
	load      float64
	multiRefs int  // spanning jobs homed here
	inCentral bool // a client of the pool's central stride
}

type pool struct {
	typ       int
	servers   []cluster.ServerID
	gpus      int // on schedulable servers
	maxServer int
	central   Stride
	multis    []*job
}

// multiBase offsets spanning jobs' IDs in a central stride, above every server ID.
const multiBase = int64(1) << 40

// New builds the policy from its parameters (see the package comment).
func New(cfg policy.Config) (*Policy, error) {
	ps := policy.NewParams(cfg.Params)
	p := &Policy{
		quantum:    ps.Float("quantum", 60),
		defTickets: ps.Float("default", 1),
		trade:      ps.Bool("trade", true),
		price:      ps.String("price", "second"),
		pack:       ps.Bool("pack", false),
		memory:     ps.Float("memory", 900),
		gain:       ps.Float("gain", 4),
		holes:      ps.String("holes", "user"),
		moves:      ps.Int("moves", 8),
		imbalance:  ps.Float("imbalance", 0.05),
		users:      map[string]*user{},
	}
	spec := ps.String("tickets", "")
	if err := ps.Done(Name); err != nil {
		return nil, err
	}
	t, err := ParseTickets(spec)
	if err != nil {
		return nil, fmt.Errorf("policy %s: parameter tickets: %w", Name, err)
	}
	p.tickets = t
	switch {
	case !(p.quantum > 0) || math.IsInf(p.quantum, 0):
		return nil, fmt.Errorf("policy %s: quantum must be a positive number of seconds, got %v", Name, p.quantum)
	case !(p.defTickets >= 0) || math.IsInf(p.defTickets, 0):
		return nil, fmt.Errorf("policy %s: default tickets must be finite and not negative, got %v", Name, p.defTickets)
	case p.moves < 0:
		return nil, fmt.Errorf("policy %s: moves must not be negative, got %d", Name, p.moves)
	case !(p.imbalance >= 0):
		return nil, fmt.Errorf("policy %s: imbalance must not be negative, got %v", Name, p.imbalance)
	case !(p.memory >= 0) || !(p.gain >= 0):
		return nil, fmt.Errorf("policy %s: memory and gain must not be negative", Name)
	case p.price != "second" && p.price != "first" && p.price != "midpoint":
		return nil, fmt.Errorf("policy %s: price must be second, first or midpoint, got %q", Name, p.price)
	case p.holes != "user" && p.holes != "pass":
		return nil, fmt.Errorf("policy %s: holes must be user or pass, got %q", Name, p.holes)
	}
	return p, nil
}

// ParseTickets reads "alice:4/bob:1": "/"-separated user:tickets pairs
// (tickets finite, not negative; each user once). The empty string is no
// users.
func ParseTickets(s string) (map[string]float64, error) {
	out := map[string]float64{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for i, part := range strings.Split(s, "/") {
		name, val, ok := strings.Cut(part, ":")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			return nil, fmt.Errorf("entry %d %q: want user:tickets", i+1, part)
		}
		n, err := parseTicketCount(val)
		if err != nil {
			return nil, fmt.Errorf("entry %d (user %q): %w", i+1, name, err)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("entry %d: user %q listed twice", i+1, name)
		}
		out[name] = n
	}
	return out, nil
}

func parseTicketCount(v string) (float64, error) {
	n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil {
		return 0, fmt.Errorf("tickets %q: %w", v, err)
	}
	if !(n >= 0) || math.IsInf(n, 0) {
		return 0, fmt.Errorf("tickets %q: must be finite and not negative", v)
	}
	return n, nil
}

// Name implements policy.Policy.
func (p *Policy) Name() string { return Name }

// Trades returns the trades of the current plan, in auction order.
func (p *Policy) Trades() []Trade { return slices.Clone(p.trades) }

// Entitlements returns each active user's entitlement (GPUs, after trades)
// of each GPU type, by type name.
func (p *Policy) Entitlements() map[string]map[string]float64 {
	out := map[string]map[string]float64{}
	for _, u := range p.sortedUsers() {
		m := map[string]float64{}
		for t, e := range u.ent {
			if p.pools[t] != nil {
				m[p.c.Types[t].Name] = e
			}
		}
		out[u.name] = m
	}
	return out
}

// Moves returns how many started jobs the policy has moved between servers.
func (p *Policy) Moves() int { return p.movesRun }

// Schedule implements policy.Policy.
func (p *Policy) Schedule(s *cluster.Snapshot) cluster.Decision {
	prev := p.now // the last round's time
	p.now = s.Now
	if !p.ready {
		p.setup(s)
	}
	p.syncServers(s)
	p.fold(s)
	p.refused(s, prev)
	if !p.dirty && s.Allowed != nil && p.dropStaleHomes(s) {
		p.dirty = true // where jobs may run changed (an executor's rules): re-home
	}
	if p.dirty {
		p.plan(s)
	}
	var d cluster.Decision
	if p.active == 0 {
		p.touched = p.touched[:0]
		return d
	}
	if !p.started || s.Now >= p.boundary {
		p.started = true
		p.rebalance(s)
		if p.dirty {
			p.plan(s)
		}
		p.account(s)
		p.quantumRound(s, &d)
		p.boundary = s.Now + p.quantum
	} else {
		p.fill(s, &d)
	}
	p.touched = p.touched[:0]
	if p.wake {
		d.WakeAt = p.boundary
	}
	return d
}

func (p *Policy) setup(s *cluster.Snapshot) {
	p.ready = true
	p.acctAt = s.Now
	p.c = s.Cluster
	p.sp = newSpeeds(s.Cluster.Types)
	for _, j := range s.Active() {
		p.addJob(j)
	}
}

// syncServers registers servers added since the last round and notices
// servers that stopped or started being schedulable.
func (p *Policy) syncServers(s *cluster.Snapshot) {
	c := s.Cluster
	for len(p.pools) < len(c.Types) {
		p.pools = append(p.pools, nil)
		p.sp.types = c.Types
	}
	for len(p.servers) < len(c.Servers) {
		sv := &c.Servers[len(p.servers)]
		p.servers = append(p.servers, &server{id: sv.ID, typ: sv.Type, gpus: sv.NumGPUs, domain: sv.Domain})
		if p.pools[sv.Type] == nil {
			p.pools[sv.Type] = &pool{typ: sv.Type}
		}
		pl := p.pools[sv.Type]
		pl.servers = append(pl.servers, sv.ID)
		pl.maxServer = max(pl.maxServer, sv.NumGPUs)
		p.dirty = true
	}
	for i, sv := range p.servers {
		if up := s.Servers[i].Schedulable(); up != sv.up {
			sv.up = up
			p.dirty = true
			p.touched = append(p.touched, sv.id)
		}
	}
}

func (p *Policy) fold(s *cluster.Snapshot) {
	for _, ev := range s.Events {
		switch ev.Kind {
		case cluster.EvSubmit:
			p.addJob(s.Jobs[ev.Job])
			p.wake = true // it may have to wait for the next boundary
		case cluster.EvFinish, cluster.EvFail, cluster.EvCancel, cluster.EvActionFailed, cluster.EvNodeDown:
			if ev.Kind == cluster.EvNodeDown {
				p.touched = append(p.touched, ev.Node)
				p.dirty = true
				continue
			}
			j := s.Jobs[ev.Job]
			for _, g := range j.Last {
				if sv := s.Cluster.ServerOf(g); len(p.touched) == 0 || p.touched[len(p.touched)-1] != sv {
					p.touched = append(p.touched, sv)
				}
			}
			if j.State.Terminal() {
				if js := p.track(j); js != nil && js.typ >= 0 {
					js.u.grow(len(p.c.Types))
					js.u.got[js.typ] += j.Attained(s.Now) - js.att
				}
				p.removeJob(j.ID)
			} else {
				if p.track(j) == nil {
					p.addJob(j)
				}
				p.wake = true // requeued: it waits
			}
		case cluster.EvProfile:
			j := s.Jobs[ev.Job]
			if js := p.track(j); js != nil {
				changed, kept := p.sp.update(js.model, js.solo, j.Profile.Solo)
				js.solo = kept
				if changed && len(p.typesUp()) > 1 {
					p.dirty = true
				}
			}
		case cluster.EvSetting:
			p.setting(ev)
		case cluster.EvNodeUp:
			p.dirty = true
			p.touched = append(p.touched, ev.Node)
		}
	}
}

// setting applies "tickets/<user>" = "<n>"; other keys belong to other
// policies or to the server and are ignored, as are malformed values (the
// engine has already accepted the event; the live server refuses what
// CheckSetting refuses before it is logged).
func (p *Policy) setting(ev cluster.Event) {
	name, ok := strings.CutPrefix(ev.Key, "tickets/")
	if !ok || name == "" {
		return
	}
	n, err := parseTicketCount(ev.Value)
	if err != nil {
		return
	}
	p.tickets[name] = n
	if u := p.users[name]; u != nil {
		u.tickets = n
	}
	p.dirty = true
}

// userRE is the user names the live server accepts (store.ValidUserName).
var userRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// maxTickets bounds a user's tickets set at run time (so that sums of
// tickets stay far from overflowing).
const maxTickets = 1e6

// CheckSetting implements policy.SettingsValidator: gandiva-fair reads
// "tickets/<user>" = n, a number from 0 to 1e6.
func (p *Policy) CheckSetting(key, value string) (bool, error) {
	name, ok := strings.CutPrefix(key, "tickets/")
	if !ok {
		return false, nil
	}
	if !userRE.MatchString(name) {
		return true, fmt.Errorf("tickets/USER: %q is not a user name (1-63 of a-z, 0-9, '.', '_', '-')", name)
	}
	n, err := parseTicketCount(value)
	if err != nil {
		return true, err
	}
	if n > maxTickets {
		return true, fmt.Errorf("tickets %q: at most %g", value, float64(maxTickets))
	}
	return true, nil
}

func (p *Policy) track(j *cluster.Job) *job {
	if int(j.ID) < len(p.jobs) {
		return p.jobs[j.ID]
	}
	return nil
}

func (p *Policy) ticketsOf(name string) float64 {
	if t, ok := p.tickets[name]; ok {
		return t
	}
	return p.defTickets
}

func (p *Policy) addJob(j *cluster.Job) {
	if j.State.Terminal() || p.track(j) != nil {
		return
	}
	for int(j.ID) >= len(p.jobs) {
		p.jobs = append(p.jobs, nil)
	}
	u := p.users[j.Spec.User]
	if u == nil {
		u = &user{name: j.Spec.User, tickets: p.ticketsOf(j.Spec.User)}
		p.users[u.name] = u
	}
	js := &job{id: j.ID, u: u, size: j.Spec.GPUs, model: j.Spec.Model, typ: -1, home: -1, att: j.Attained(p.now)}
	p.jobs[j.ID] = js
	u.jobs = append(u.jobs, js) // IDs only grow, so the list stays sorted
	p.active++
	p.dirty = true
}

func (p *Policy) removeJob(id cluster.JobID) {
	if int(id) >= len(p.jobs) || p.jobs[id] == nil {
		return
	}
	js := p.jobs[id]
	p.unhome(js)
	p.setType(js, -1)
	u := js.u
	if i := slices.Index(u.jobs, js); i >= 0 {
		u.jobs = slices.Delete(u.jobs, i, i+1)
	}
	if len(u.jobs) == 0 {
		delete(p.users, u.name)
	}
	p.sp.forget(js.model, js.solo)
	p.jobs[id] = nil
	p.active--
	p.dirty = true
}

// unhome takes a job off its server(s) and returns its lead over the
// virtual time of the scheduler it left (0 when it had none).
func (p *Policy) unhome(js *job) float64 {
	lead := 0.0
	if js.home >= 0 {
		sv := p.servers[js.home]
		if pass, ok := sv.local.Remove(int64(js.id)); ok {
			lead = math.Max(0, pass-sv.local.VT())
		}
		if i := slices.Index(sv.jobs, js); i >= 0 {
			sv.jobs = slices.Delete(sv.jobs, i, i+1)
		}
		sv.load -= js.alloc / float64(sv.gpus)
		js.home = -1
	}
	if js.multi && len(js.homes) > 0 {
		pl := p.pools[js.typ]
		if pass, ok := pl.central.Remove(multiBase + int64(js.id)); ok {
			lead = math.Max(0, pass-pl.central.VT())
		}
		if i := slices.Index(pl.multis, js); i >= 0 {
			pl.multis = slices.Delete(pl.multis, i, i+1)
		}
		f := js.alloc / float64(js.size)
		for _, h := range js.homes {
			p.servers[h].multiRefs--
			p.servers[h].load -= f
		}
		js.homes = nil
	}
	js.multi = false
	return lead
}

// typesUp lists the GPU types with schedulable GPUs, fastest first (by
// configured speed, ties by name).
func (p *Policy) typesUp() []int {
	var out []int
	for t, pl := range p.pools {
		if pl != nil && pl.gpus > 0 {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, b int) int {
		sa, sb := p.c.Types[a].Speed, p.c.Types[b].Speed
		switch {
		case sa > sb:
			return -1
		case sa < sb:
			return 1
		}
		return strings.Compare(p.c.Types[a].Name, p.c.Types[b].Name)
	})
	return out
}

func (p *Policy) sortedUsers() []*user {
	out := make([]*user, 0, len(p.users))
	for _, u := range p.users {
		out = append(out, u)
	}
	slices.SortFunc(out, func(a, b *user) int { return strings.Compare(a.name, b.name) })
	return out
}

// userSpeedup is a user's GPU-weighted speedup of type a over type b.
func (p *Policy) userSpeedup(u *user, a, b int) float64 {
	w, sum := 0.0, 0.0
	for _, js := range u.jobs {
		sp, _ := p.sp.speedup(js.model, a, b)
		sum += sp * float64(js.size)
		w += float64(js.size)
	}
	if w == 0 {
		r, _ := p.sp.speedup("", a, b)
		return r
	}
	return sum / w
}

// plan recomputes entitlements, trades, targets, allocations and homes.
func (p *Policy) plan(s *cluster.Snapshot) {
	p.dirty = false
	p.countPools()
	types := p.typesUp()
	users := p.sortedUsers()
	p.entitle(users, types)
	p.trades = p.trades[:0]
	if p.trade && len(types) > 1 {
		p.runAuctions(users, types)
	}
	p.targets(users, types)
	p.assignTypes(s, users, types)
	p.allocate(users, types)
	p.home(s, types)
}

// countPools counts each pool's GPUs on schedulable servers.
func (p *Policy) countPools() {
	for _, pl := range p.pools {
		if pl == nil {
			continue
		}
		pl.gpus = 0
		for _, sid := range pl.servers {
			if p.servers[sid].up {
				pl.gpus += p.servers[sid].gpus
			}
		}
	}
}

// entitle sets each user's demand and its entitlement of each type, in
// proportion to tickets among the users with demand.
func (p *Policy) entitle(users []*user, types []int) {
	nt := len(p.c.Types)
	sumT := 0.0
	for _, u := range users {
		u.demand = 0
		for _, js := range u.jobs {
			if p.fits(js) {
				u.demand += js.size
			}
		}
		u.ent = resize(u.ent, nt)
		u.target = resize(u.target, nt)
		u.assigned = resizeInt(u.assigned, nt)
		if u.demand > 0 {
			sumT += u.tickets
		}
	}
	for _, u := range users {
		for _, t := range types {
			switch {
			case u.demand == 0:
			case sumT > 0:
				u.ent[t] = float64(p.pools[t].gpus) * u.tickets / sumT
			}
		}
	}
}

// assignTypes assigns jobs to GPU types (new jobs by chooseType) and
// counts each user's assigned demand per type; jobs on a type that can no
// longer hold them, or (without a home) none of whose servers they may run
// on any more, lose their type and home.
func (p *Policy) assignTypes(s *cluster.Snapshot, users []*user, types []int) {
	for _, u := range users {
		for _, js := range u.jobs {
			if js.typ >= 0 && (p.pools[js.typ] == nil || p.pools[js.typ].gpus < js.size ||
				js.home < 0 && !js.multi && !p.mayRunIn(s, js, js.typ)) {
				p.unhome(js)
				p.setType(js, -1)
			}
			if js.typ >= 0 {
				u.assigned[js.typ] += js.size
			}
		}
		for _, js := range u.jobs {
			if js.typ < 0 {
				if t := p.chooseType(s, u, js, types); t >= 0 {
					p.setType(js, t)
					u.assigned[t] += js.size
				}
			}
		}
	}
}

// allocate sets, per type, every job's allocation: the users water-filled
// by entitlement, each user's share split equally among its jobs there.
func (p *Policy) allocate(users []*user, types []int) {
	for _, t := range types {
		pl := p.pools[t]
		sh := make([]share, 0, len(users))
		for _, u := range users {
			if u.assigned[t] > 0 {
				sh = append(sh, share{user: u, weight: u.ent[t], demand: float64(u.assigned[t])})
			}
		}
		waterfill(sh, float64(pl.gpus))
		for _, x := range sh {
			p.sizes = p.sizes[:0]
			for _, js := range x.user.jobs {
				if js.typ == t {
					p.sizes = append(p.sizes, js.size)
				}
			}
			p.split = splitJobs(x.alloc, p.sizes, p.split)
			k := 0
			for _, js := range x.user.jobs {
				if js.typ == t {
					js.alloc = math.Max(p.split[k], 1e-3*float64(js.size))
					k++
				}
			}
		}
	}
}

func resize(x []float64, n int) []float64 {
	x = x[:0]
	for range n {
		x = append(x, 0)
	}
	return x
}

func resizeInt(x []int, n int) []int {
	x = x[:0]
	for range n {
		x = append(x, 0)
	}
	return x
}

// fits reports whether some GPU type has enough schedulable GPUs for the job.
func (p *Policy) fits(js *job) bool {
	for _, pl := range p.pools {
		if pl != nil && pl.gpus >= js.size {
			return true
		}
	}
	return false
}

// runAuctions trades each type faster than the slowest against the slowest.
func (p *Policy) runAuctions(users []*user, types []int) {
	slow := types[len(types)-1]
	for _, fast := range types[:len(types)-1] {
		var bids []Bid
		byName := map[string]*user{}
		for _, u := range users {
			if u.demand == 0 {
				continue
			}
			bids = append(bids, Bid{User: u.name, Speedup: p.userSpeedup(u, fast, slow)})
			byName[u.name] = u
		}
		buyer, seller, price, ok := auction(bids, func(name string) bool { return byName[name].ent[fast] > 1e-9 })
		if !ok {
			continue
		}
		price = pricing(p.price, buyer, seller, price)
		b, sl := byName[buyer.User], byName[seller.User]
		x := math.Min(sl.ent[fast], b.ent[slow]/price)
		x = math.Min(x, math.Max(0, float64(b.demand)-b.ent[fast]))
		if price > 1 {
			x = math.Min(x, math.Max(0, float64(sl.demand)-sum(sl.ent))/(price-1))
		}
		if x < 1e-6 {
			continue
		}
		sl.ent[fast] -= x
		b.ent[fast] += x
		b.ent[slow] -= x * price
		sl.ent[slow] += x * price
		p.trades = append(p.trades, Trade{Fast: p.c.Types[fast].Name, Slow: p.c.Types[slow].Name, Buyer: buyer.User, Seller: seller.User,
			BuyerBid: buyer.Speedup, SellerBid: seller.Speedup, Price: price, Amount: x})
	}
}

func sum(x []float64) float64 {
	s := 0.0
	for _, v := range x {
		s += v
	}
	return s
}

// targets sets how many GPUs of demand each user should have on each type:
// in proportion to its entitlements when its demand exceeds them (each type
// then time-slices), else its entitlements filled fastest type first (for
// its job type), up to its demand.
func (p *Policy) targets(users []*user, types []int) {
	order := make([]int, len(types))
	for _, u := range users {
		for i := range u.target {
			u.target[i] = 0
		}
		total := 0.0
		for _, t := range types {
			total += u.ent[t]
		}
		d := float64(u.demand)
		if total <= 0 || d == 0 {
			continue
		}
		if d >= total {
			for _, t := range types {
				u.target[t] = d * u.ent[t] / total
			}
			continue
		}
		copy(order, types)
		slow := types[len(types)-1]
		slices.SortStableFunc(order, func(a, b int) int {
			sa, sb := p.userSpeedup(u, a, slow), p.userSpeedup(u, b, slow)
			switch {
			case sa > sb:
				return -1
			case sa < sb:
				return 1
			}
			return 0
		})
		left := d
		for _, t := range order {
			x := math.Min(u.ent[t], left)
			u.target[t] = x
			left -= x
		}
	}
}

// chooseType picks a new job's GPU type: a type its job type was never
// measured on (transparent profiling), else the type where the user's
// demand is furthest below its target, ties to the faster type.
func (p *Policy) chooseType(s *cluster.Snapshot, u *user, js *job, types []int) int {
	if len(types) > 1 {
		for _, t := range types {
			if p.pools[t].gpus >= js.size && !p.sp.measured(js.model, t) && !p.anyOn(js.model, t) && p.mayRunIn(s, js, t) {
				return t
			}
		}
	}
	best, bestGap := -1, math.Inf(-1)
	for _, t := range types {
		if p.pools[t].gpus < js.size || !p.mayRunIn(s, js, t) {
			continue
		}
		gap := u.target[t] - float64(u.assigned[t])
		if gap > bestGap+1e-9 {
			best, bestGap = t, gap
		}
	}
	return best
}

// anyOn reports whether some active job of the type is assigned to GPU type t.
func (p *Policy) anyOn(model string, t int) bool {
	m := p.sp.models[model]
	return m != nil && t < len(m.on) && m.on[t] > 0
}

// setType assigns a job to GPU type t (-1: none), keeping the per-type counts.
func (p *Policy) setType(js *job, t int) {
	m := p.sp.model(js.model)
	for len(m.on) < len(p.c.Types) {
		m.on = append(m.on, 0)
	}
	if js.typ >= 0 {
		m.on[js.typ]--
	}
	js.typ = t
	if t >= 0 {
		m.on[t]++
	}
}

// account is the user-level feedback of split-stride scheduling: per-server
// strides give each job its allocation only as well as the server's jobs
// pack (gangs leave holes that smaller jobs fill) and balance. At each
// quantum boundary, per GPU type, every user's allocated and received
// GPU-seconds (attained service, which a live system observes) are brought
// up to date, both forgotten with time constant memory, and the user's
// jobs' stride tickets on that type are scaled by boost = 1 + gain × (owed
// share − received share) ÷ owed share, clamped to [1/2, 2]: a user behind
// its share is chosen more often on every server of the type until it
// catches up. gain=0 turns the boost off; the books are kept either way, for
// the hole rule (standing), whose grants since the last boundary (held) are
// dropped here, now that attained service includes them.
func (p *Policy) account(s *cluster.Snapshot) {
	dt := s.Now - p.acctAt
	p.acctAt = s.Now
	decay := 1.0
	if p.memory > 0 {
		decay = math.Exp(-dt / p.memory)
	}
	nt := len(p.c.Types)
	owed, got := make([]float64, nt), make([]float64, nt)
	for _, u := range p.users {
		u.grow(nt)
		for t := range nt {
			u.owed[t] *= decay
			u.got[t] *= decay
			u.held[t] = 0
		}
		for _, js := range u.jobs {
			a := s.Jobs[js.id].Attained(s.Now)
			if js.typ >= 0 {
				u.owed[js.typ] += js.alloc * dt
				u.got[js.typ] += a - js.att
			}
			js.att = a
		}
		for t := range nt {
			owed[t] += u.owed[t]
			got[t] += u.got[t]
		}
	}
	p.served = p.served[:0]
	for t := range nt {
		r := 1.0
		if owed[t] > 0 && got[t] > 0 {
			r = got[t] / owed[t]
		}
		p.served = append(p.served, r)
	}
	for _, u := range p.users {
		changed := false
		for t := range nt {
			b := 1.0
			if p.gain > 0 && owed[t] > 0 && got[t] > 0 && u.owed[t] > 0 {
				want := u.owed[t] / owed[t]
				b = 1 + p.gain*(want-u.got[t]/got[t])/want
				b = math.Min(2, math.Max(0.5, b))
			}
			if b != u.boost[t] {
				u.boost[t] = b
				changed = true
			}
		}
		if changed {
			for _, js := range u.jobs {
				p.setTickets(js)
			}
		}
	}
}

// grow sizes the per-type feedback state (boost 1 for new types).
func (u *user) grow(n int) {
	for len(u.owed) < n {
		u.owed = append(u.owed, 0)
		u.got = append(u.got, 0)
		u.boost = append(u.boost, 1)
		u.held = append(u.held, 0)
	}
}

// standing is how well the user of job id has been served on the job's GPU
// type, the quantity that decides holes (Stride.SelectFill): the
// GPU-seconds it received there (attained service, forgotten as the
// feedback forgets) plus those granted to it in holes since, over those it
// was allocated, relative to all users' received over allocated: 1 is
// exactly its share, below 1 behind it. A user with nothing allocated yet
// stands at 1.
func (p *Policy) standing(id int64) float64 {
	js := p.jobs[id]
	u := js.u
	u.grow(len(p.c.Types))
	t := js.typ
	if t < 0 || t >= len(p.served) || u.owed[t] <= 0 {
		return 1
	}
	return (u.got[t] + u.held[t]) / u.owed[t] / p.served[t]
}

// holeTaker returns SelectFill's took for holes that last secs seconds: it
// records the grant in the user's held, so that the round's later holes
// see it.
func (p *Policy) holeTaker(secs float64) func(id int64, size int) {
	return func(id int64, size int) {
		js := p.jobs[id]
		if js.typ >= 0 {
			js.u.grow(len(p.c.Types))
			js.u.held[js.typ] += float64(size) * secs
		}
	}
}

// strideTickets is a job's stride tickets: its allocation, scaled by its user's
// feedback boost on its GPU type.
func (p *Policy) strideTickets(js *job) float64 {
	js.u.grow(len(p.c.Types))
	if js.typ < 0 {
		return js.alloc
	}
	return js.alloc * js.u.boost[js.typ]
}

// setTickets gives a job's scheduler its current stride tickets.
func (p *Policy) setTickets(js *job) {
	t := p.strideTickets(js)
	if js.home >= 0 {
		p.servers[js.home].local.SetTickets(int64(js.id), t)
	}
}
