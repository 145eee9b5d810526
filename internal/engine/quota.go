package engine

import (
	"slices"

	"github.com/gandiva-sched/gandiva/internal/cluster"
)

// Quotas is an optional part of Constraints, for a world that caps the
// GPUs groups of jobs may hold at once (Kubernetes' queues: a GPU quota
// per GPU type). The engine finds it by a type assertion on
// Options.Constraints. Like the Constraints' answers, its answers must not
// change during a Round.
//
// Every policy is held by it, as by the other constraints, through its
// view and the validation of its actions:
//
//   - In the view, a waiting job (queued or suspended) may not run
//     (Snapshot.Allowed) on a server of a GPU type of which one of its
//     quotas has less room than the job's smallest width: the GPUs its
//     other jobs hold now, plus that width, would be more than its Max.
//   - A placing action (start, resume, migrate, resize) that would make a
//     quota's jobs hold more GPUs of a type than its Max, counting the
//     actions applied before it in the round, is refused with
//     cluster.RejectRetry (it may succeed once the group's jobs hold
//     fewer), with a reason naming the quota. An action that adds no GPU
//     of a capped type passes, also when the group holds more than its Max
//     already (a quota lowered under running jobs stops new starts; it
//     does not preempt).
//   - In a recovery round (Recover), a job that runs now (Current) is
//     neither hidden nor refused where it runs: a new driver takes over
//     what runs as it runs.
type Quotas interface {
	// Quotas is the quotas job j's GPUs count against (say, its queue and
	// the queues above it), or nil. Jobs naming a quota of the same Name
	// share it, and must agree on its Max.
	Quotas(j cluster.JobID) []Quota
}

// Quota caps the GPUs a group of jobs holds at once, per GPU type.
type Quota struct {
	// Name is the group; refusals name it ("queue team-a").
	Name string
	// Max is, by GPU type name (cluster.GPUType.Name), the most GPUs of
	// that type the group's jobs may hold; a type not listed is not
	// capped.
	Max map[string]int
}

// quotaKey indexes the GPUs a quota's jobs hold of one GPU type.
type quotaKey struct {
	name string
	typ  int
}

// quotaUse is what the jobs of each quota hold, per GPU type, in the
// engine's state now: every job holding GPUs counts its GPUs against each
// of its quotas.
func (c *constrained) quotaUse(q Quotas) map[quotaKey]int {
	use := map[quotaKey]int{}
	for _, j := range c.e.active {
		if len(j.GPUs) == 0 {
			continue
		}
		qs := q.Quotas(j.ID)
		if len(qs) == 0 {
			continue
		}
		for _, g := range j.GPUs {
			t := c.e.c.TypeOf(c.e.c.ServerOf(g))
			for _, qq := range qs {
				if _, capped := qq.Max[t.Name]; capped {
					use[quotaKey{qq.Name, c.e.c.Servers[c.e.c.ServerOf(g)].Type}]++
				}
			}
		}
	}
	return use
}

// quotaDenied reports whether, in the view, the waiting job j may not run
// on server sv because a quota of it has no room there for its smallest
// width (see Quotas). The answer is cached per job and GPU type for the
// view.
func (c *constrained) quotaDenied(j cluster.JobID, sv cluster.ServerID) bool {
	if c.quotas == nil || int(sv) >= len(c.e.c.Servers) {
		return false
	}
	job := c.e.Job(j)
	if job == nil || !job.State.Waiting() {
		return false
	}
	qs := c.quotas.Quotas(j)
	if len(qs) == 0 {
		return false
	}
	typ := c.e.c.Servers[sv].Type
	k := [2]int{int(j), typ}
	if d, ok := c.qdeny[k]; ok {
		return d
	}
	if c.qused == nil {
		c.qused = c.quotaUse(c.quotas)
	}
	need, _ := job.Spec.WidthRange()
	name := c.e.c.Types[typ].Name
	deny := false
	for _, q := range qs {
		if m, capped := q.Max[name]; capped && c.qused[quotaKey{q.Name, typ}]+need > m {
			deny = true
			break
		}
	}
	if c.qdeny == nil {
		c.qdeny = map[[2]int]bool{}
	}
	c.qdeny[k] = deny
	return deny
}

// checkQuota refuses a placing action of job j to the sorted GPUs gpus
// that would take a quota of j over its Max of some GPU type (RejectRetry).
func (c *constrained) checkQuota(j *cluster.Job, kind cluster.ActionKind, gpus []cluster.GPUID) error {
	if c.quotas == nil {
		return nil
	}
	qs := c.quotas.Quotas(j.ID)
	if len(qs) == 0 {
		return nil
	}
	cl := c.e.c
	if keep, now := c.keep[j.ID]; now && len(gpus) > 0 {
		there := true
		for _, g := range gpus {
			there = there && g >= 0 && int(g) < cl.NumGPUs() && slices.Contains(keep, cl.ServerOf(g))
		}
		if there {
			return nil // a recovery: it runs there now, whatever the quota
		}
	}
	// the GPUs of each type the job adds (its own held ones do not count twice)
	add := map[int]int{}
	for _, g := range gpus {
		if g < 0 || int(g) >= cl.NumGPUs() {
			return nil // apply refuses it
		}
		add[cl.Servers[cl.ServerOf(g)].Type]++
	}
	for _, g := range j.GPUs {
		add[cl.Servers[cl.ServerOf(g)].Type]--
	}
	use := c.quotaUse(c.quotas)
	types := make([]int, 0, len(add))
	for t := range add {
		types = append(types, t)
	}
	slices.Sort(types)
	for _, q := range qs {
		for _, t := range types {
			name := cl.Types[t].Name
			m, capped := q.Max[name]
			if !capped || add[t] <= 0 {
				continue
			}
			if held := use[quotaKey{q.Name, t}]; held+add[t] > m {
				return refuse(cluster.RejectRetry, "%s: %s allows %d %s GPUs at once; its jobs hold %d and this one would add %d",
					kind, q.Name, m, name, held, add[t])
			}
		}
	}
	return nil
}
