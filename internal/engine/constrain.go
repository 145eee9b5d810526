package engine

import (
	"fmt"
	"math/bits"
	"slices"

	"github.com/gandiva-sched/gandiva/internal/cluster"
)

// Constraints is what an executor adds to the engine's view of the
// cluster: where each job may run and what may be done to it (Kubernetes'
// taints, node selectors, pods of other schedulers, pods of several GPUs,
// jobs that may not be preempted). The engine reads it when it builds the
// policy's view (Options.Constraints) and when it validates the policy's
// actions; policies never see it, only its effect on their snapshot.
//
// Its answers must not change during a Round (the driver updates what it
// reads between rounds), and must be deterministic given the driver's
// state.
type Constraints interface {
	// Blocked is the number of GPUs of server s that the engine may not
	// place on now although no job of its own holds them: held by work of
	// other schedulers or still leaving, or all of them on a cordoned
	// node. The view shows that many of the server's free GPUs (the
	// highest-numbered) taken.
	Blocked(s cluster.ServerID) int
	// Fits reports whether job j may run on server s at all (taints and
	// tolerations, node selectors and affinity, shared or exclusive
	// nodes).
	Fits(j cluster.JobID, s cluster.ServerID) bool
	// PodGPUs is the GPUs of one pod of job j (1 or less: any count): j's
	// GPUs on one server must be a multiple of it.
	PodGPUs(j cluster.JobID) int
	// Movable reports whether job j may be suspended, migrated or resized.
	Movable(j cluster.JobID) bool
	// Shared reports whether job j is a shared job: it may be packed onto
	// GPUs other jobs hold, and it is suspended and resumed in place, so
	// it may be suspended even when it is not Movable.
	Shared(j cluster.JobID) bool
	// Pinned is, for a shared job whose processes are alive on their GPUs
	// (suspended or running), those GPUs, possibly fewer than the job's
	// gang (a gang alive in part); nil otherwise. A job that is not
	// Movable can be resumed only on GPUs that include them.
	Pinned(j cluster.JobID) []cluster.GPUID
	// Current is where job j's processes run now, in GPUs per server, or
	// nil; asked only for the view after Recover.
	Current(j cluster.JobID) map[cluster.ServerID]int
}

// constrained is the engine's use of Options.Constraints: the policy's
// view of one round, and the rules of the actions it returns.
type constrained struct {
	lim Constraints
	e   *Engine
	// blocked are, per server, the GPUs the view shows taken for
	// Constraints.Blocked; servers and free are the view's server states
	// and free index
	blocked []uint64
	servers []cluster.ServerState
	free    cluster.FreeIndex
	// pins caches, for one view, the servers of the Pinned GPUs of a job
	// that may run only there (nil: anywhere it Fits); keep, after
	// Recover, the servers a job runs on now
	pins    map[cluster.JobID][]cluster.ServerID
	keep    map[cluster.JobID][]cluster.ServerID
	recover bool
	// allowed and unit are mayRun and podGPUs, bound once
	allowed func(cluster.JobID, cluster.ServerID) bool
	unit    func(cluster.JobID) int
	// quotas is lim as Quotas (nil: none); qused and qdeny cache, for one
	// view, the GPUs each quota's jobs hold and quotaDenied's answers
	quotas Quotas
	qused  map[quotaKey]int
	qdeny  map[[2]int]bool
}

func newConstrained(e *Engine, lim Constraints) *constrained {
	c := &constrained{lim: lim, e: e}
	c.quotas, _ = lim.(Quotas)
	c.allowed, c.unit = c.mayRun, c.podGPUs
	return c
}

// Recover makes the next round's view a recovery view (after a restart of
// the driver, when jobs found running are queued again): a job that runs
// now (Constraints.Current) may run only on the servers it runs on, when
// they can take it in the view (free GPUs on each, in whole pods, where it
// Fits), so that a policy that starts it starts it where it is. Without
// Options.Constraints it does nothing.
func (e *Engine) Recover() {
	if e.cons != nil {
		e.cons.recover = true
	}
}

// View is the snapshot as the policy would see it in a round now:
// Snapshot, under Options.Constraints with Allowed and Unit set and the
// Blocked GPUs shown taken (a recovery view after Recover). Valid until
// the next call into the engine.
func (e *Engine) View() *cluster.Snapshot { return e.view(false) }

// view is View; in a round (round set) it ends a recovery: Recover
// applies to one round's view.
func (e *Engine) view(round bool) *cluster.Snapshot {
	s := e.Snapshot()
	if e.cons != nil {
		e.cons.view(s)
		if round {
			e.cons.recover = false
		}
	}
	return s
}

// view turns the engine's snapshot s into the policy's view.
func (c *constrained) view(s *cluster.Snapshot) {
	n := len(s.Servers)
	c.blocked = slices.Grow(c.blocked[:0], n)[:n]
	hidden := false
	for i := range s.Servers {
		c.blocked[i] = 0
		m := s.Servers[i].Free
		// the k highest-numbered GPUs no job holds
		for k := c.lim.Blocked(cluster.ServerID(i)); k > 0 && m != 0; k-- {
			top := uint64(1) << uint(63-bits.LeadingZeros64(m))
			c.blocked[i] |= top
			m &^= top
		}
		hidden = hidden || c.blocked[i] != 0
	}
	if hidden {
		c.servers = append(c.servers[:0], s.Servers...)
		for i := range c.servers {
			c.servers[i].Free &^= c.blocked[i]
			k := 0
			if c.servers[i].Schedulable() {
				k = c.servers[i].NumFree()
			}
			c.free.Set(cluster.ServerID(i), k, s.Cluster.Servers[i].NumGPUs)
		}
		s.Servers, s.Free, s.FreeGPUs = c.servers, &c.free, c.free.Total()
	}
	clear(c.pins)
	clear(c.keep)
	c.qused, c.qdeny = nil, nil
	if c.recover {
		c.recovery(s)
	}
	s.Allowed, s.Unit = c.allowed, c.unit
}

// recovery sets c.keep: for each queued job that runs now on servers that
// can take it in the view s, those servers.
func (c *constrained) recovery(s *cluster.Snapshot) {
	for _, j := range s.Active() {
		if j.State != cluster.Queued {
			continue
		}
		cur := c.lim.Current(j.ID)
		if len(cur) == 0 {
			continue
		}
		servers := make([]cluster.ServerID, 0, len(cur))
		ok := true
		for sv, k := range cur {
			ok = ok && int(sv) < len(s.Servers) && s.Servers[sv].Schedulable() && s.Servers[sv].NumFree() >= k &&
				k%c.podGPUs(j.ID) == 0 && c.lim.Fits(j.ID, sv)
			servers = append(servers, sv)
		}
		if !ok {
			continue
		}
		slices.Sort(servers)
		if c.keep == nil {
			c.keep = map[cluster.JobID][]cluster.ServerID{}
		}
		c.keep[j.ID] = servers
	}
}

// podGPUs is the view's Unit: Constraints.PodGPUs, at least 1.
func (c *constrained) podGPUs(j cluster.JobID) int { return max(c.lim.PodGPUs(j), 1) }

// mayRun is the view's Allowed: the servers job j Fits; of those, for a
// shared job that is not Movable and whose whole gang is alive on Pinned
// GPUs, only the servers of those GPUs (it can be resumed nowhere else, so
// a policy that time-slices must give it its turns there); and in a
// recovery view, only the servers a job runs on (Recover).
func (c *constrained) mayRun(j cluster.JobID, sv cluster.ServerID) bool {
	if !c.lim.Fits(j, sv) {
		return false
	}
	if k, ok := c.keep[j]; ok {
		return slices.Contains(k, sv) // (quotas aside: it runs there now)
	}
	if c.quotaDenied(j, sv) {
		return false
	}
	if !c.lim.Shared(j) || c.lim.Movable(j) {
		return true
	}
	pins, ok := c.pins[j]
	if !ok {
		job := c.e.Job(j)
		if pin := c.lim.Pinned(j); pin != nil && job != nil && len(pin) == job.Spec.GPUs {
			pins = cluster.ServersOf(c.e.c, pin)
		}
		if c.pins == nil {
			c.pins = map[cluster.JobID][]cluster.ServerID{}
		}
		c.pins[j] = pins
	}
	return pins == nil || slices.Contains(pins, sv)
}

// check validates action a of job j under the constraints, before the
// engine's own checks (apply), and returns a refusal with its code or nil.
// It judges only actions that are otherwise legal for the job's state (a
// start of a queued job, and so on): apply refuses the others.
//
//   - A suspend of a job that is neither Movable nor Shared, and a
//     migrate or resize of one that is not Movable: RejectNever.
//   - A placing action (start, resume, migrate, resize) must put the job
//     on servers it Fits, a multiple of its PodGPUs on each (RejectNever),
//     on no GPU of the view's Blocked ones that it does not hold
//     (RejectRetry), and on no GPU another job holds unless it is Shared
//     (RejectNever: only shared jobs are packed).
//   - A start or resume of a Shared job whose processes are alive on
//     Pinned GPUs goes there (the one change the engine makes to an
//     action, see pinnedTarget): a resumption in place rather than a move
//     by new processes. One of a job that is not Movable must then include
//     them (RejectNever).
//   - A migrate or resize of a job that is not Shared must change its GPU
//     count on some server (RejectNever): its GPUs are not addressable, so
//     the same counts on the same servers change nothing.
//   - A placing action that would take a quota of the job over its Max
//     for some GPU type (Constraints implementing Quotas): RejectRetry
//     (quota.go).
func (c *constrained) check(j *cluster.Job, a *cluster.Action) error {
	switch a.Kind {
	case cluster.Suspend:
		if j.State == cluster.Running && !c.lim.Movable(j.ID) && !c.lim.Shared(j.ID) {
			return refuse(cluster.RejectNever, "suspend: the job may not be preempted (its executor cannot stop and resume it)")
		}
		return nil
	case cluster.Migrate, cluster.Resize:
		if j.State != cluster.Running {
			return nil
		}
		if !c.lim.Movable(j.ID) {
			return refuse(cluster.RejectNever, "%s: the job may not be preempted, so it cannot be moved or resized", a.Kind)
		}
		gpus := slices.Clone(a.GPUs)
		slices.Sort(gpus)
		if err := c.validate(j, a.Kind, gpus, j.GPUs); err != nil {
			return err
		}
		if !c.lim.Shared(j.ID) && sameCounts(c.e.c, gpus, j.GPUs) {
			return refuse(cluster.RejectNever, "%s: the same GPU count on the same servers changes nothing for a job whose GPUs are not addressable", a.Kind)
		}
		return c.checkQuota(j, a.Kind, gpus)
	case cluster.Start, cluster.Resume:
		if (a.Kind == cluster.Start) != (j.State == cluster.Queued) || (a.Kind == cluster.Resume) != (j.State == cluster.Suspended) {
			return nil
		}
	default:
		return nil
	}
	pin := c.lim.Pinned(j.ID)
	if t := c.pinnedTarget(j, a, pin); t != nil {
		a.GPUs = t
	}
	gpus := slices.Clone(a.GPUs)
	slices.Sort(gpus)
	if err := c.validate(j, a.Kind, gpus, nil); err != nil {
		return err
	}
	if pin != nil && !c.lim.Movable(j.ID) {
		for _, g := range pin {
			if _, ok := slices.BinarySearch(gpus, g); !ok {
				return refuse(cluster.RejectNever, "%s: the job's processes are alive on GPUs %v and it may not be moved: it can resume only on GPUs that include them", a.Kind, pin)
			}
		}
	}
	return c.checkQuota(j, a.Kind, gpus)
}

// validate checks the sorted target gpus of a placing action of job j
// (own: the GPUs j holds and keeps): servers it Fits, whole pods, no
// Blocked GPU, no GPU another job holds unless j is Shared. Invalid GPU
// IDs pass: apply refuses them.
func (c *constrained) validate(j *cluster.Job, kind cluster.ActionKind, gpus, own []cluster.GPUID) error {
	cl := c.e.c
	unit := c.podGPUs(j.ID)
	shared := c.lim.Shared(j.ID)
	for i := 0; i < len(gpus); {
		if gpus[i] < 0 || int(gpus[i]) >= cl.NumGPUs() {
			return nil
		}
		sv := cl.ServerOf(gpus[i])
		name := cl.Servers[sv].Name
		if !c.lim.Fits(j.ID, sv) {
			return refuse(cluster.RejectNever, "%s: the job may not run on server %s", kind, name)
		}
		k := 0
		for ; i < len(gpus) && cl.ServerOf(gpus[i]) == sv; i++ {
			g := gpus[i]
			k++
			if _, mine := slices.BinarySearch(own, g); mine {
				continue
			}
			if c.isBlocked(g) {
				return refuse(cluster.RejectRetry, "%s: GPU %d of server %s is not available to the scheduler now (held by other work, or its node is cordoned)", kind, g, name)
			}
			if !shared && len(c.e.gpus[g].Jobs) > 0 {
				// never, or stale when an action of the same round took it
				return &rejectError{code: cluster.RejectNever, held: g,
					err: fmt.Errorf("%s: GPU %d is held by job %d, and only shared jobs may be packed", kind, g, c.e.gpus[g].Jobs[0])}
			}
		}
		if k%unit != 0 {
			return refuse(cluster.RejectNever, "%s: %d GPUs on server %s, not whole pods of %d GPUs", kind, k, name, unit)
		}
	}
	return nil
}

// isBlocked reports whether GPU g is one of the view's Blocked GPUs.
func (c *constrained) isBlocked(g cluster.GPUID) bool {
	sv := c.e.c.ServerOf(g)
	return int(sv) < len(c.blocked) && c.blocked[sv]&(1<<uint(g-c.e.c.Servers[sv].FirstGPU)) != 0
}

// pinnedTarget is the engine's rule for a start or resume of a Shared job
// whose processes are alive on GPUs pin (Constraints.Pinned), as many as
// the action asks for or fewer: the target becomes pin, then the action's
// other GPUs in order up to its size, when every GPU of pin is free and
// not Blocked, or may be packed (the action has Share), and the result
// passes validate. Nil otherwise: the action stays as the policy gave it
// (for a job that is not Movable, check then refuses it unless it
// includes pin). A process is bound to the GPUs it started on, so there
// the job resumes in place, elsewhere its processes are replaced: the
// policy's view does not say which GPUs a job's processes hold, so the
// engine, which validates the GPUs anyway, chooses them.
func (c *constrained) pinnedTarget(j *cluster.Job, a *cluster.Action, pin []cluster.GPUID) []cluster.GPUID {
	if len(pin) == 0 || len(pin) > len(a.GPUs) || !c.lim.Shared(j.ID) {
		return nil
	}
	for _, g := range pin {
		if g < 0 || int(g) >= c.e.c.NumGPUs() || c.isBlocked(g) || (len(c.e.gpus[g].Jobs) > 0 && !a.Share) {
			return nil
		}
	}
	out := slices.Clone(pin)
	slices.Sort(out)
	if slices.Equal(out, sortedCopy(a.GPUs)) {
		return nil // already there
	}
	for _, g := range a.GPUs {
		if len(out) == len(a.GPUs) {
			break
		}
		if !slices.Contains(pin, g) {
			out = append(out, g)
		}
	}
	slices.Sort(out)
	if len(out) != len(a.GPUs) || len(slices.Compact(slices.Clone(out))) != len(out) {
		return nil
	}
	if c.validate(j, a.Kind, out, nil) != nil {
		return nil
	}
	return out
}

func sortedCopy(g []cluster.GPUID) []cluster.GPUID {
	out := slices.Clone(g)
	slices.Sort(out)
	return out
}

// sameCounts reports whether two sorted GPU lists have the same count per
// server.
func sameCounts(cl *cluster.Cluster, a, b []cluster.GPUID) bool {
	if len(a) != len(b) {
		return false
	}
	count := func(gpus []cluster.GPUID) map[cluster.ServerID]int {
		m := map[cluster.ServerID]int{}
		for _, g := range gpus {
			m[cl.ServerOf(g)]++
		}
		return m
	}
	ca, cb := count(a), count(b)
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
