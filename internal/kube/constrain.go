package kube

import (
	"cmp"
	"fmt"
	"math/bits"
	"slices"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/policy"
)

// Limits is what Kubernetes adds to the engine's view of the cluster, for
// Constrained. The scheduler implements it from its informers; tests with a
// table.
type Limits interface {
	// Blocked is the number of GPUs of server s that Gandiva cannot use now:
	// held by pods of other schedulers or by pods still leaving, or all of
	// them on a cordoned node.
	Blocked(s cluster.ServerID) int
	// Fits reports whether job j's pods may run on server s: its taints
	// are tolerated, its labels match the pods' node selector and required
	// node affinity.
	Fits(j cluster.JobID, s cluster.ServerID) bool
	// PodGPUs is the GPUs each pod of job j requests: j's GPUs on one
	// server must be a multiple of it.
	PodGPUs(j cluster.JobID) int
	// Movable reports whether job j may be suspended, migrated or resized.
	Movable(j cluster.JobID) bool
	// Current is where job j's pods run now, in GPUs per server, or nil;
	// only the recovery round asks.
	Current(j cluster.JobID) map[cluster.ServerID]int
	// Shared reports whether job j is a shared job (shared mode): it runs
	// on shared nodes only (Fits), is suspended and resumed in place (so
	// it may be suspended even when not Movable), and may be packed.
	Shared(j cluster.JobID) bool
	// Pinned is, for a shared job whose pods are alive on their GPUs
	// (suspended or running), those GPUs: a process is bound to the GPUs
	// it started on, so only a start or resume there is done in place
	// (elsewhere its pods are replaced). Nil otherwise.
	Pinned(j cluster.JobID) []cluster.GPUID
}

// Drop is an action Constrained removed from a decision, and why.
type Drop struct {
	Action cluster.Action
	Reason string
}

// Constrained runs a registered policy unchanged under Kubernetes' rules:
//
//   - the policy's view says where each job may run (Snapshot.Allowed:
//     Limits.Fits, and for a non-preemptible shared job alive on Pinned
//     GPUs, their servers), so that policies place jobs where they may;
//   - the policy sees GPUs of Limits.Blocked as taken (the highest-numbered
//     free GPUs of the server), so it plans around pods of other schedulers
//     and cordoned nodes;
//   - a placing action (start, resume, migrate, resize) must put the job on
//     servers it Fits, on free GPUs, in whole pods; one that does not is
//     re-placed on GPUs that qualify (best fit on one server, else the
//     fewest servers), or dropped when none do. Only a Shared job may be
//     packed (Action.Share kept): its target may be GPUs other jobs hold,
//     on servers it Fits, none Blocked, in whole pods;
//   - a start or resume of a Shared job whose pods are alive on Pinned
//     GPUs goes there when they are free (or the policy packs), whatever
//     GPUs the policy chose: there it is a resumption in place, elsewhere
//     a move by new pods;
//   - suspend of jobs that are neither Movable nor Shared, and migrate and
//     resize of jobs that are not Movable, are dropped, as are migrations
//     and resizes of exclusive jobs that change nothing Kubernetes can see
//     (the same GPU count on the same nodes: exclusive GPUs are not
//     addressable);
//   - in the recovery round after a restart (Recover), a job the policy
//     starts keeps the nodes its pods already run on when they qualify.
//
// The engine validates what is left as usual. A dropped action is one the
// engine would have rejected or one Kubernetes cannot carry out. A dropped
// start or resume of a job that still waits is reported to the inner
// policy as an EvActionFailed for the job, so that it considers the job
// again: in the next decision's view when the job could run on free GPUs
// then; otherwise the job is parked first (see Schedule).
//
// Not safe for concurrent use.
type Constrained struct {
	inner policy.Policy
	lim   Limits
	// allowed is mayRun, the view's Allowed; pinServers caches, for one
	// decision, the servers of a non-preemptible shared job's Pinned GPUs
	allowed    func(cluster.JobID, cluster.ServerID) bool
	pinServers map[cluster.JobID][]cluster.ServerID

	view    cluster.Snapshot
	servers []cluster.ServerState
	// simulation of the decision: free GPUs per server, and the GPUs each
	// job holds once the actions so far are applied
	free    []uint64
	blocked []uint64
	held    map[cluster.JobID][]cluster.GPUID
	snap    *cluster.Snapshot
	recover bool
	reserve map[cluster.JobID][]cluster.GPUID
	// droppedJob: jobs with an action dropped in this decision
	droppedJob map[cluster.JobID]bool
	// told: the events of the inner policy's view (the snapshot's, then
	// one EvActionFailed per start or resume the last decision dropped)
	told []cluster.Event
	// Dropped lists the last decision's dropped actions.
	Dropped []Drop
	// parked: the jobs held back from the inner policy, by ID
	parked []parked
	// the inner policy's Jobs and Active while jobs are parked, with
	// masked copies of the parked ones
	jobs, active []*cluster.Job
	masked       []cluster.Job
}

// ParkFor is how long, in seconds, Constrained holds a job back from the
// inner policy at most (see Schedule).
const ParkFor = 30.0

// parked is a job held back from the inner policy.
type parked struct {
	id     cluster.JobID
	until  float64 // shown again then at the latest
	gpus   int     // the GPUs the dropped start or resume asked for
	reason string  // why it was dropped
}

var _ policy.Policy = (*Constrained)(nil)

// NewConstrained wraps inner.
func NewConstrained(inner policy.Policy, lim Limits) *Constrained {
	c := &Constrained{inner: inner, lim: lim}
	c.allowed = c.mayRun
	return c
}

// Name is the inner policy's name.
func (c *Constrained) Name() string { return c.inner.Name() }

// Inner returns the wrapped policy.
func (c *Constrained) Inner() policy.Policy { return c.inner }

// Recover makes the next decision a recovery round: jobs the policy starts
// keep the nodes their pods run on (Limits.Current) when they qualify.
func (c *Constrained) Recover() { c.recover = true }

// Schedule asks the inner policy on the constrained view and fixes its
// decision.
//
// A start or resume the last decision dropped, of a job still waiting,
// comes back to the inner policy as an EvActionFailed for the job (the
// reason: why it was dropped), as an executor reports an action it could
// not carry out: a policy that learns which jobs wait from the events
// (policy.Waiting) took the job off its list when it chose it, and would
// otherwise not look at it again (a non-preemptible shared job whose pods
// are pinned to GPUs other jobs hold, asked onto other GPUs by a new
// leader, waited forever once nothing else did).
//
// When such a job could not run on the free GPUs anyway (no placement on
// nodes it may run on, in whole pods, or its Pinned GPUs busy), it is
// parked first, as kube-scheduler parks a pod that fits no node: the inner
// policy sees it backing off (NotBefore at the end of the parking), so it
// plans the free GPUs for jobs that can use them instead of choosing the
// parked job again every round (under fjf, a shared job whose shared node
// was not reserved yet kept the exclusive node's GPUs from the exclusive
// job behind it). The EvActionFailed comes once the job is shown again: in
// the first decision in which it could run on free GPUs, or after ParkFor
// seconds (the decision's WakeAt asks for that round), so that a policy
// that preempts may choose to make room for it.
func (c *Constrained) Schedule(s *cluster.Snapshot) cluster.Decision {
	clear(c.pinServers)
	c.computeBlocked(s)
	c.resetFree(s)
	c.told = c.told[:0]
	for _, d := range c.Dropped {
		if d.Action.Kind != cluster.Start && d.Action.Kind != cluster.Resume {
			continue
		}
		j := s.Job(d.Action.Job)
		if j == nil || !j.State.Waiting() {
			continue
		}
		i, isParked := c.parkedAt(j.ID)
		switch {
		case isParked:
		case c.runnable(s, j, len(d.Action.GPUs)):
			c.tell(s, j.ID, "dropped under Kubernetes' rules: "+d.Reason)
		default:
			c.parked = slices.Insert(c.parked, i, parked{id: j.ID, until: s.Now + ParkFor, gpus: len(d.Action.GPUs), reason: d.Reason})
		}
	}
	c.Dropped = c.Dropped[:0]
	wake := 0.0
	kept := c.parked[:0]
	for _, p := range c.parked {
		j := s.Job(p.id)
		switch {
		case j == nil || !j.State.Waiting():
		case s.Now >= p.until || c.runnable(s, j, p.gpus):
			c.tell(s, p.id, "parked under Kubernetes' rules, shown again: "+p.reason)
		default:
			kept = append(kept, p)
			if wake == 0 || p.until < wake {
				wake = p.until
			}
		}
	}
	c.parked = kept
	view := c.constrainedView(s)
	d := c.inner.Schedule(view)
	c.fix(s, &d)
	c.recover = false
	if wake > 0 && (d.WakeAt <= s.Now || wake < d.WakeAt) {
		d.WakeAt = wake
	}
	return d
}

// mayRun is the view's Allowed: the servers job j Fits, and of those, for
// a non-preemptible shared job whose whole gang is alive on Pinned GPUs,
// only the servers of those GPUs (it can resume nowhere else, so a policy
// that time-slices must give it its turns there).
func (c *Constrained) mayRun(j cluster.JobID, sv cluster.ServerID) bool {
	if !c.lim.Fits(j, sv) {
		return false
	}
	if !c.lim.Shared(j) || c.lim.Movable(j) {
		return true
	}
	pins, ok := c.pinServers[j]
	if !ok {
		if pin := c.lim.Pinned(j); pin != nil && len(pin) == c.snap.Jobs[j].Spec.GPUs {
			pins = cluster.ServersOf(c.snap.Cluster, pin)
		}
		if c.pinServers == nil {
			c.pinServers = map[cluster.JobID][]cluster.ServerID{}
		}
		c.pinServers[j] = pins
	}
	return pins == nil || slices.Contains(pins, sv)
}

// tell adds an EvActionFailed for job id to the inner policy's view.
func (c *Constrained) tell(s *cluster.Snapshot, id cluster.JobID, reason string) {
	if len(c.told) == 0 {
		c.told = append(c.told, s.Events...)
	}
	c.told = append(c.told, cluster.Event{Time: s.Now, Kind: cluster.EvActionFailed, Job: id, Node: cluster.NoServer, Reason: reason})
}

// parkedAt is where job id is, or would be, in c.parked (sorted by ID).
func (c *Constrained) parkedAt(id cluster.JobID) (int, bool) {
	return slices.BinarySearchFunc(c.parked, id, func(p parked, id cluster.JobID) int { return cmp.Compare(p.id, id) })
}

// Parked reports whether job id is held back from the inner policy now,
// until when at the latest, and why its last start or resume was dropped.
func (c *Constrained) Parked(id cluster.JobID) (until float64, reason string, ok bool) {
	i, ok := c.parkedAt(id)
	if !ok {
		return 0, "", false
	}
	return c.parked[i].until, c.parked[i].reason, true
}

// runnable reports whether job j could start on n GPUs of the free ones
// (c.free) under Kubernetes' rules: on its Pinned GPUs when it is not
// preemptible and its pods are alive there, else anywhere it qualifies.
func (c *Constrained) runnable(s *cluster.Snapshot, j *cluster.Job, n int) bool {
	if pin := c.lim.Pinned(j.ID); pin != nil && !c.lim.Movable(j.ID) {
		return c.qualifies(s, j, pin)
	}
	return n > 0 && c.place(s, j, n) != nil
}

// computeBlocked sets c.blocked: per server, the GPUs the view shows
// taken for Limits.Blocked (the highest-numbered free ones).
func (c *Constrained) computeBlocked(s *cluster.Snapshot) {
	n := len(s.Servers)
	c.blocked = slices.Grow(c.blocked[:0], n)[:n]
	for i := range s.Servers {
		c.blocked[i] = 0
		k := c.lim.Blocked(cluster.ServerID(i))
		// the k highest-numbered GPUs no job holds
		m := s.Servers[i].Free
		for k > 0 && m != 0 {
			top := uint64(1) << uint(63-bits.LeadingZeros64(m))
			c.blocked[i] |= top
			m &^= top
			k--
		}
	}
}

// resetFree sets c.free to the free GPUs of schedulable servers, less
// those blocked.
func (c *Constrained) resetFree(s *cluster.Snapshot) {
	n := len(s.Servers)
	c.free = slices.Grow(c.free[:0], n)[:n]
	for i := range s.Servers {
		c.free[i] = 0
		if s.Servers[i].Schedulable() {
			c.free[i] = s.Servers[i].Free &^ c.blocked[i]
		}
	}
	c.snap = s
}

// constrainedView returns s with Allowed set to mayRun, blocked GPUs
// taken, the events told and the parked jobs masked.
func (c *Constrained) constrainedView(s *cluster.Snapshot) *cluster.Snapshot {
	any := slices.ContainsFunc(c.blocked, func(m uint64) bool { return m != 0 })
	events := s.Events
	if len(c.told) > 0 {
		events = c.told
	}
	jobs, active := s.Jobs, s.Active()
	if len(c.parked) > 0 {
		// a parked job is shown backing off until it is shown again
		c.jobs = append(c.jobs[:0], s.Jobs...)
		c.active = append(c.active[:0], active...)
		c.masked = slices.Grow(c.masked[:0], len(c.parked))[:len(c.parked)]
		for i, p := range c.parked {
			c.masked[i] = *s.Jobs[p.id]
			c.masked[i].NotBefore = max(c.masked[i].NotBefore, p.until)
			c.jobs[p.id] = &c.masked[i]
			if k, ok := slices.BinarySearchFunc(c.active, p.id, func(j *cluster.Job, id cluster.JobID) int { return cmp.Compare(j.ID, id) }); ok {
				c.active[k] = &c.masked[i]
			}
		}
		jobs, active = c.jobs, c.active
	}
	if !any {
		c.view.Fill(s.Now, s.Cluster, jobs, s.GPUs, s.Servers, events, active, s.Free)
	} else {
		c.servers = append(c.servers[:0], s.Servers...)
		for i := range c.servers {
			c.servers[i].Free &^= c.blocked[i]
		}
		c.view.Fill(s.Now, s.Cluster, jobs, s.GPUs, c.servers, events, active, nil)
	}
	c.view.Allowed = c.allowed
	return &c.view
}

// fix applies Kubernetes' rules to d in place (see Constrained), starting
// from the free GPUs Schedule set (c.free: nothing since took or gave).
func (c *Constrained) fix(s *cluster.Snapshot, d *cluster.Decision) {
	cl := s.Cluster
	clear(c.held)
	if c.held == nil {
		c.held = map[cluster.JobID][]cluster.GPUID{}
	}
	clear(c.reserve)
	if c.recover {
		c.reserveCurrent(s, d)
	}
	out := d.Actions[:0]
	clear(c.droppedJob)
	if c.droppedJob == nil {
		c.droppedJob = map[cluster.JobID]bool{}
	}
	for _, a := range d.Actions {
		j := s.Job(a.Job)
		if j == nil {
			out = append(out, a) // the engine rejects it
			continue
		}
		why := ""
		switch {
		case c.droppedJob[a.Job]:
			// the policy planned this on the state an earlier, dropped
			// action of the same job would have made
			why = "an earlier action on the job in the same decision was dropped"
		case a.Kind == cluster.Suspend:
			if !c.lim.Movable(a.Job) && !c.lim.Shared(a.Job) {
				why = "not preemptible (see docs/KUBERNETES.md: plain pods, or a Job without a pod failure policy that ignores DisruptionTarget)"
				break
			}
			c.give(cl, c.holding(j))
			c.held[a.Job] = nil
		case a.Kind == cluster.Kill:
			c.give(cl, c.holding(j))
			c.held[a.Job] = nil
		case a.Kind == cluster.Start || a.Kind == cluster.Resume:
			if h, ok := c.held[a.Job]; !j.State.Waiting() && !(ok && h == nil) {
				out = append(out, a) // the engine rejects it
				continue
			}
			var gpus []cluster.GPUID
			if c.lim.Shared(a.Job) {
				gpus = c.sharedTarget(s, j, &a)
			}
			if gpus == nil {
				a.Share = false
				var w string
				if gpus, w = c.target(s, j, a.GPUs, nil); gpus == nil {
					why = w
					break
				}
			}
			if pin := c.lim.Pinned(a.Job); pin != nil && !c.lim.Movable(a.Job) && !containsAll(gpus, pin) {
				why = fmt.Sprintf("its pods are alive on other GPUs and it is not preemptible: it can resume only on GPUs %v", pin)
				break
			}
			a.GPUs = gpus
			c.take(cl, gpus)
			c.held[a.Job] = gpus
		case a.Kind == cluster.Migrate || a.Kind == cluster.Resize:
			if !c.lim.Movable(a.Job) {
				why = "not preemptible: it cannot be moved or resized"
				break
			}
			own := c.holding(j)
			sh := c.lim.Shared(a.Job)
			var gpus []cluster.GPUID
			if sh && a.Share && c.shareable(s, j, a.GPUs) {
				gpus = sortedClone(a.GPUs)
			} else {
				a.Share = false
				var w string
				if gpus, w = c.target(s, j, a.GPUs, own); gpus == nil {
					why = w
					break
				}
			}
			if !sh && sameCounts(cl, gpus, own) {
				why = "changes nothing Kubernetes can see (same GPU count on the same nodes)"
				break
			}
			c.give(cl, own)
			c.take(cl, gpus)
			a.GPUs = gpus
			c.held[a.Job] = gpus
		}
		if why != "" {
			c.Dropped = append(c.Dropped, Drop{Action: a, Reason: why})
			c.droppedJob[a.Job] = true
			continue
		}
		out = append(out, a)
	}
	d.Actions = out
}

// sharedTarget is the target of a start or resume of a Shared job, or nil
// to place it as an exclusive one: its Pinned GPUs when they are free or
// shareable as the policy asked; else the policy's target when it packs
// (a.Share) on GPUs that may be shared. It clears a.Share when the target
// is free.
func (c *Constrained) sharedTarget(s *cluster.Snapshot, j *cluster.Job, a *cluster.Action) []cluster.GPUID {
	if r, ok := c.reserve[j.ID]; ok && len(r) == len(a.GPUs) {
		// reserved in the recovery round: free then, or packed as the
		// policy asked (Share allows free GPUs too)
		delete(c.reserve, j.ID)
		c.give(s.Cluster, r)
		a.Share = true
		return r
	}
	if pin := c.lim.Pinned(j.ID); len(pin) > 0 && len(pin) < len(a.GPUs) && c.qualifies(s, j, pin) {
		// a gang bound in part: its bound pods stay, the rest is placed
		c.take(s.Cluster, pin)
		rest := c.place(s, j, len(a.GPUs)-len(pin))
		c.give(s.Cluster, pin)
		if rest != nil {
			a.Share = false
			return sortedClone(append(slices.Clone(pin), rest...))
		}
	}
	if pin := c.lim.Pinned(j.ID); len(pin) == len(a.GPUs) {
		if c.qualifies(s, j, pin) {
			a.Share = false
			return sortedClone(pin)
		}
		if a.Share && c.shareable(s, j, pin) {
			return sortedClone(pin)
		}
	}
	if a.Share && c.shareable(s, j, a.GPUs) {
		out := sortedClone(a.GPUs)
		a.Share = !c.qualifies(s, j, out)
		return out
	}
	return nil
}

// containsAll reports whether every GPU of sub is in gpus.
func containsAll(gpus, sub []cluster.GPUID) bool {
	for _, g := range sub {
		if !slices.Contains(gpus, g) {
			return false
		}
	}
	return true
}

func sortedClone(g []cluster.GPUID) []cluster.GPUID {
	out := slices.Clone(g)
	slices.Sort(out)
	return out
}

// shareable reports whether gpus may take job j packed: distinct, on
// schedulable servers it Fits, none blocked, in whole pods (held by other
// jobs or not).
func (c *Constrained) shareable(s *cluster.Snapshot, j *cluster.Job, gpus []cluster.GPUID) bool {
	cl := s.Cluster
	if len(gpus) == 0 {
		return false
	}
	gpus = sortedClone(gpus)
	g := c.podGPUs(j.ID)
	var last cluster.ServerID = -1
	count := 0
	for i, x := range gpus {
		if x < 0 || int(x) >= cl.NumGPUs() || (i > 0 && gpus[i-1] == x) {
			return false
		}
		sv := cl.ServerOf(x)
		if !s.Servers[sv].Schedulable() || c.blocked[sv]&(1<<uint(x-cl.Servers[sv].FirstGPU)) != 0 {
			return false
		}
		if sv != last {
			if count%g != 0 || !c.lim.Fits(j.ID, sv) {
				return false
			}
			last, count = sv, 0
		}
		count++
	}
	return count%g == 0
}

// holding returns the GPUs job j holds given the actions so far.
func (c *Constrained) holding(j *cluster.Job) []cluster.GPUID {
	if g, ok := c.held[j.ID]; ok {
		return g
	}
	return j.GPUs
}

// target checks want as a placement of j (own: GPUs j holds and may keep)
// and returns it, or another placement of the same size that qualifies, or
// nil and why none does.
func (c *Constrained) target(s *cluster.Snapshot, j *cluster.Job, want, own []cluster.GPUID) ([]cluster.GPUID, string) {
	cl := s.Cluster
	if r, ok := c.reserve[j.ID]; ok && len(r) == len(want) {
		delete(c.reserve, j.ID)
		c.give(cl, r)
		return r, ""
	}
	if len(want) == 0 {
		return nil, "no GPUs"
	}
	// own GPUs count as free for the check
	c.give(cl, own)
	defer c.take(cl, own)
	if c.qualifies(s, j, want) {
		out := slices.Clone(want)
		slices.Sort(out)
		return out, ""
	}
	gpus := c.place(s, j, len(want))
	if gpus == nil {
		return nil, fmt.Sprintf("no placement of %d GPUs in whole pods of %d on free GPUs of nodes it may run on", len(want), c.podGPUs(j.ID))
	}
	return gpus, ""
}

func (c *Constrained) podGPUs(j cluster.JobID) int { return max(c.lim.PodGPUs(j), 1) }

// qualifies reports whether gpus are free, on servers j fits, in whole pods.
func (c *Constrained) qualifies(s *cluster.Snapshot, j *cluster.Job, gpus []cluster.GPUID) bool {
	cl := s.Cluster
	g := c.podGPUs(j.ID)
	var last cluster.ServerID = -1
	count := 0
	sorted := slices.IsSorted(gpus)
	if !sorted {
		gpus = slices.Clone(gpus)
		slices.Sort(gpus)
	}
	for i, x := range gpus {
		if x < 0 || int(x) >= cl.NumGPUs() || (i > 0 && gpus[i-1] == x) {
			return false
		}
		sv := cl.ServerOf(x)
		if c.free[sv]&(1<<uint(x-cl.Servers[sv].FirstGPU)) == 0 {
			return false
		}
		if sv != last {
			if count%g != 0 || !c.lim.Fits(j.ID, sv) {
				return false
			}
			last, count = sv, 0
		}
		count++
	}
	return count%g == 0
}

// place finds n free GPUs for j in whole pods on servers it fits: the
// smallest server that takes all of them, else the fewest servers, most
// free first; nil if none.
func (c *Constrained) place(s *cluster.Snapshot, j *cluster.Job, n int) []cluster.GPUID {
	cl := s.Cluster
	g := c.podGPUs(j.ID)
	if n%g != 0 {
		return nil
	}
	type cand struct {
		s      cluster.ServerID
		usable int
	}
	var cands []cand
	best := cand{s: -1}
	total := 0
	for i := range c.free {
		k := bits.OnesCount64(c.free[i])
		u := k / g * g
		if u == 0 || !c.lim.Fits(j.ID, cluster.ServerID(i)) {
			continue
		}
		cands = append(cands, cand{cluster.ServerID(i), u})
		total += u
		if u >= n && (best.s < 0 || u < best.usable) {
			best = cand{cluster.ServerID(i), u}
		}
	}
	if best.s >= 0 {
		return c.pick(cl, nil, best.s, n)
	}
	if total < n {
		return nil
	}
	slices.SortFunc(cands, func(a, b cand) int {
		return cmp.Or(cmp.Compare(b.usable, a.usable), cmp.Compare(a.s, b.s))
	})
	var out []cluster.GPUID
	for _, x := range cands {
		k := min(x.usable, n-len(out))
		out = c.pick(cl, out, x.s, k)
		if len(out) == n {
			break
		}
	}
	slices.Sort(out)
	return out
}

// pick appends the k lowest free GPUs of server s.
func (c *Constrained) pick(cl *cluster.Cluster, dst []cluster.GPUID, s cluster.ServerID, k int) []cluster.GPUID {
	first := cl.Servers[s].FirstGPU
	for m := c.free[s]; m != 0 && k > 0; m &= m - 1 {
		dst = append(dst, first+cluster.GPUID(bits.TrailingZeros64(m)))
		k--
	}
	return dst
}

func (c *Constrained) take(cl *cluster.Cluster, gpus []cluster.GPUID) {
	for _, x := range gpus {
		sv := cl.ServerOf(x)
		c.free[sv] &^= 1 << uint(x-cl.Servers[sv].FirstGPU)
	}
}

// give frees GPUs, on schedulable servers only.
func (c *Constrained) give(cl *cluster.Cluster, gpus []cluster.GPUID) {
	for _, x := range gpus {
		sv := cl.ServerOf(x)
		if c.snap.Servers[sv].Schedulable() {
			c.free[sv] |= 1 << uint(x-cl.Servers[sv].FirstGPU)
		}
	}
}

// reserveCurrent, in the recovery round, sets aside for each job the
// decision starts the GPUs of the nodes its pods run on, when they qualify,
// so that no earlier action takes them and its own start uses them.
func (c *Constrained) reserveCurrent(s *cluster.Snapshot, d *cluster.Decision) {
	if c.reserve == nil {
		c.reserve = map[cluster.JobID][]cluster.GPUID{}
	}
	cl := s.Cluster
	for _, a := range d.Actions {
		if a.Kind != cluster.Start && a.Kind != cluster.Resume {
			continue
		}
		j := s.Job(a.Job)
		if j == nil || !j.State.Waiting() {
			continue
		}
		if pin := c.lim.Pinned(a.Job); pin != nil {
			// a shared job's pods hold exactly these GPUs: keep them if
			// they are free, or if the policy packs it anyway
			if len(pin) == len(a.GPUs) && (c.qualifies(s, j, pin) || (a.Share && c.shareable(s, j, pin))) {
				c.take(cl, pin)
				c.reserve[a.Job] = sortedClone(pin)
			}
			continue
		}
		cur := c.lim.Current(a.Job)
		if len(cur) == 0 {
			continue
		}
		servers := make([]cluster.ServerID, 0, len(cur))
		sum := 0
		for sv, k := range cur {
			servers = append(servers, sv)
			sum += k
		}
		if sum != len(a.GPUs) {
			continue
		}
		slices.Sort(servers)
		var gpus []cluster.GPUID
		ok := true
		for _, sv := range servers {
			if int(sv) >= len(c.free) || bits.OnesCount64(c.free[sv]) < cur[sv] || cur[sv]%c.podGPUs(a.Job) != 0 || !c.lim.Fits(a.Job, sv) {
				ok = false
				break
			}
			gpus = c.pick(cl, gpus, sv, cur[sv])
		}
		if !ok {
			continue
		}
		c.take(cl, gpus)
		c.reserve[a.Job] = gpus
	}
}

// sameCounts reports whether two GPU lists have the same count per server.
func sameCounts(cl *cluster.Cluster, a, b []cluster.GPUID) bool {
	if len(a) != len(b) {
		return false
	}
	ca, cb := map[cluster.ServerID]int{}, map[cluster.ServerID]int{}
	for _, g := range a {
		ca[cl.ServerOf(g)]++
	}
	for _, g := range b {
		cb[cl.ServerOf(g)]++
	}
	if len(ca) != len(cb) {
		return false
	}
	for k, v := range ca {
		if cb[k] != v {
			return false
		}
	}
	return true
}
