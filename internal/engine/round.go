package engine

import (
	"fmt"
	"slices"

	"github.com/gandiva-sched/gandiva/internal/cluster"
)

// Round asks the policy for a decision at time now, validates and applies
// its actions in order, hands the applied ones (after any the engine itself
// queued, such as kills for cancelled jobs) to the executor and returns them.
// Under Options.CheckSnapshot it fails, applying nothing, if the policy
// wrote to its snapshot (the engine's state may then be corrupt: stop).
func (e *Engine) Round(now float64) (Result, error) {
	if err := e.advance(now); err != nil {
		return Result{}, err
	}
	e.stats.Rounds++
	e.startUpsDue(now)
	snap := e.view(true)
	if e.check != nil {
		e.check.before.Take(snap)
	}
	dec := e.pol.Schedule(snap)
	if e.check != nil {
		if err := e.check.wrote(e.pol.Name(), now, snap); err != nil {
			return Result{}, err
		}
	}
	// the policy has heard of the refusals: from here on, the next
	// snapshot's are this round's and those reported after it
	clear(e.refused)
	e.refused, e.reported = e.refused[:0], 0
	// Result.Applied reuses one buffer across rounds (see Result): a round
	// can apply dozens of actions, and a fresh slice per round was most of
	// what a long simulation allocated.
	res := Result{Applied: append(e.applied[:0], e.pending...)}
	clear(e.pending)
	e.pending = e.pending[:0]
	e.events = e.events[:0]
	for i := range dec.Actions {
		a := &dec.Actions[i]
		// (filled in place: a composite literal appended is built on the stack
		// and copied, and the copy stalls on the stores just made)
		res.Applied = append(res.Applied, Applied{})
		ap := &res.Applied[len(res.Applied)-1]
		ap.Action = *a
		if err := e.apply(ap, a, now); err != nil {
			res.Applied = res.Applied[:len(res.Applied)-1]
			e.reject(&res, a, err)
			continue
		}
	}
	e.refused = append(e.refused, res.Rejected...)
	e.causes(res.Applied)
	// the warm starts cooled since the last round, then this round's warm starts
	res.Applied = append(res.Applied, e.cooled...)
	clear(e.cooled)
	e.cooled = e.cooled[:0]
	res.Applied = e.warm(now, res.Applied)
	if dec.WakeAt > now {
		res.WakeAt = dec.WakeAt
	}
	if w := e.nextRetry(now); w > 0 && (res.WakeAt == 0 || w < res.WakeAt) {
		res.WakeAt = w
	}
	if w := e.nextStartUpDue(now); w > 0 && (res.WakeAt == 0 || w < res.WakeAt) {
		res.WakeAt = w
	}
	if len(res.Applied) > 0 && e.exec != nil {
		e.exec.Execute(now, res.Applied)
	}
	e.applied = res.Applied
	e.wakeAt = res.WakeAt
	return res, nil
}

// reject records the refusal of action a with the error apply returned.
func (e *Engine) reject(res *Result, a *cluster.Action, err error) {
	r := Rejection{Action: *a, Code: classify(err, res.Applied), Reason: err.Error()}
	e.stats.Rejected++
	res.Rejected = append(res.Rejected, r)
	e.log.Warn("action rejected", "policy", e.pol.Name(), "action", a.String(), "code", r.Code.String(), "reason", r.Reason)
}

// nextRetry returns the earliest future back-off end of a queued job, or 0,
// dropping entries that no longer matter.
func (e *Engine) nextRetry(now float64) float64 {
	out := e.retries[:0]
	w := 0.0
	for _, id := range e.retries {
		j := e.jobs[id]
		if j.State != cluster.Queued || j.NotBefore <= now {
			continue
		}
		out = append(out, id)
		if w == 0 || j.NotBefore < w {
			w = j.NotBefore
		}
	}
	e.retries = out
	return w
}

// apply validates action a against the current state and applies it,
// completing ap (whose Action is a); on an error ap is to be dropped.
func (e *Engine) apply(ap *Applied, a *cluster.Action, now float64) error {
	j := e.Job(a.Job)
	if j == nil {
		return refuse(cluster.RejectStale, "no job %d", a.Job)
	}
	if e.cons != nil {
		if err := e.cons.check(j, a); err != nil {
			return err
		}
	}
	switch a.Kind {
	case cluster.Start:
		if j.State != cluster.Queued {
			return refuse(cluster.RejectStale, "start: job is %s, not queued", j.State)
		}
		if now < j.NotBefore {
			return refuse(cluster.RejectRetry, "start: job is backing off until %.3f", j.NotBefore)
		}
		gpus, err := e.checkTarget(j, a, nil)
		if err != nil {
			return fmt.Errorf("start: %w", err)
		}
		ap.GPUs = gpus
		ap.Checkpointed = j.Starts > 0 // a retried job restores its last checkpoint
		e.makeRoom(j, gpus, nil, now)
		ap.Packed = e.take(j, gpus, now)
		e.setState(j, cluster.Running, now, e.placedCause(j, "started", a))
		ap.NewProcess = e.newProcess(j, now)
		if j.FirstStart < 0 {
			j.FirstStart = now
		}
		j.Starts++
		j.Attempts++
		e.stats.Starts++
	case cluster.Suspend:
		if j.State != cluster.Running {
			return refuse(cluster.RejectStale, "suspend: job is %s, not running", j.State)
		}
		if j.StartingUp && e.opts.StartUpGrace <= 0 {
			e.suspendStarting(ap, j, now)
			break
		}
		ap.Prev = e.release(j, now)
		ap.Checkpointed = !e.keepHome(j)
		if ap.Checkpointed {
			e.stats.Checkpoints++
		}
		e.setState(j, cluster.Suspended, now, withReason("suspended", a.Reason)) // causes names who took its GPUs
		j.Suspends++
		e.stats.Suspends++
	case cluster.Resume:
		if j.State != cluster.Suspended {
			return refuse(cluster.RejectStale, "resume: job is %s, not suspended", j.State)
		}
		gpus, err := e.checkTarget(j, a, nil)
		if err != nil {
			return fmt.Errorf("resume: %w", err)
		}
		ap.GPUs = gpus
		ap.Prev = j.Last
		inMemory := j.Home != cluster.NoServer
		ap.Remote = !inMemory || !sameServers(e.c, gpus, j.Last) || len(gpus) != len(j.Last)
		if e.opts.StartUps && e.opts.StartUpGrace <= 0 && !slices.Equal(gpus, j.Last) {
			// a process is bound to the GPUs it started on (its CUDA
			// context): on others it is a move, with a new process
			ap.Remote = true
		}
		ap.Checkpointed = !inMemory
		e.dropHome(j)
		e.makeRoom(j, gpus, nil, now)
		ap.Packed = e.take(j, gpus, now)
		what := "resumed"
		switch {
		case ap.Remote:
			what = "resumed elsewhere: its state moves (migrating)"
		case j.Warmed:
			what = "resumed its warm process"
		}
		j.Warmed = false
		if ap.Remote {
			e.setState(j, cluster.Migrating, now, e.placedCause(j, what, a))
			j.Migrations++
			e.stats.Migrations++
		} else {
			e.setState(j, cluster.Running, now, e.placedCause(j, what, a))
		}
		if ap.Remote || ap.Checkpointed || e.opts.StartUpGrace > 0 {
			ap.NewProcess = e.newProcess(j, now)
		} else {
			e.goesOn(j, now)
		}
		if j.FirstStart < 0 {
			j.FirstStart = now // a warm start's first turn
		}
		j.Resumes++
		e.stats.Resumes++
	case cluster.Migrate, cluster.Resize:
		if j.State != cluster.Running {
			return refuse(cluster.RejectStale, "%s: job is %s, not running", a.Kind, j.State)
		}
		if a.Kind == cluster.Resize && !j.Spec.Elastic() {
			return refuse(cluster.RejectNever, "resize: job is not elastic")
		}
		gpus, err := e.checkTarget(j, a, j.GPUs)
		if err != nil {
			return fmt.Errorf("%s: %w", a.Kind, err)
		}
		if slices.Equal(gpus, j.GPUs) {
			return refuse(cluster.RejectNever, "%s: target GPUs are the ones the job holds", a.Kind)
		}
		ap.GPUs = gpus
		e.makeRoom(j, gpus, j.GPUs, now)
		ap.Prev = e.release(j, now)
		ap.Packed = e.take(j, gpus, now)
		ap.NewProcess = e.newProcess(j, now)
		if a.Kind == cluster.Migrate {
			ap.Remote = true
			e.setState(j, cluster.Migrating, now, e.placedCause(j, fmt.Sprintf("migrating to GPUs %v", gpus), a))
			j.Migrations++
			e.stats.Migrations++
		} else {
			e.setState(j, cluster.Running, now, e.placedCause(j, fmt.Sprintf("resized to %d GPUs", len(gpus)), a))
			j.Resizes++
			e.stats.Resizes++
		}
	case cluster.Kill:
		if j.State.Terminal() {
			return refuse(cluster.RejectStale, "kill: job is already %s", j.State)
		}
		ap.Prev = e.release(j, now)
		to, why := cluster.Cancelled, "killed by policy"
		if a.Fail {
			to, why = cluster.Failed, "failed by policy"
		}
		if a.Reason != "" {
			why = a.Reason
		}
		e.setState(j, to, now, why)
		e.stats.Kills++
	case cluster.Warm:
		return refuse(cluster.RejectNever, "warm: the engine's own action, not a policy's")
	default:
		return refuse(cluster.RejectNever, "unknown action kind %d", a.Kind)
	}
	if ap.Packed {
		j.Packs++
		e.stats.Packs++
	}
	return nil
}

// suspendStarting suspends a job whose process is still starting up: the
// GPUs are freed, and the process goes on to its first boundary, where it
// is held (the job is Warming until EvReady).
func (e *Engine) suspendStarting(ap *Applied, j *cluster.Job, now float64) {
	start := j.ProcStart
	ap.Prev = e.release(j, now)
	e.setState(j, cluster.Warming, now, withReason("suspended during its start-up: its process goes on to its first mini-batch boundary and is held there", ap.Reason))
	j.StartingUp, j.ProcStart, j.ReadyAt = true, start, -1
	e.starting = insertID(e.starting, j.ID)
	e.warmAt(j)
	j.Warmed = true
	ap.StillStarting = true
	j.Suspends++
	e.stats.Suspends++
}

// keepHome decides whether a job being suspended keeps its state in its
// servers' host memory, and books the memory if so.
func (e *Engine) keepHome(j *cluster.Job) bool {
	if len(j.Last) == 0 {
		j.Home = cluster.NoServer
		return false
	}
	need := stateGiB(j)
	if need > 0 {
		// each of the job's servers (cluster.ServersOf, without building
		// the list: this runs at every suspend) must hold its workers' state
		prev := cluster.NoServer
		for _, g := range j.Last {
			s := e.c.ServerOf(g)
			if s == prev {
				continue
			}
			prev = s
			n := 0
			for _, g := range j.Last {
				if e.c.ServerOf(g) == s {
					n++
				}
			}
			st := &e.servers[s]
			if !st.Up || st.SuspendedGiB+need*float64(n) > e.c.Servers[s].HostMemGiB {
				j.Home = cluster.NoServer
				return false
			}
		}
		for _, g := range j.Last {
			e.servers[e.c.ServerOf(g)].SuspendedGiB += need
		}
	}
	j.Home = e.c.ServerOf(j.Last[0])
	return true
}

// sameServers reports whether two GPU lists span the same servers in the
// same order: slices.Equal of their cluster.ServersOf, without building them.
func sameServers(c *cluster.Cluster, a, b []cluster.GPUID) bool {
	i, k := 0, 0
	for i < len(a) && k < len(b) {
		s := c.ServerOf(a[i])
		if c.ServerOf(b[k]) != s {
			return false
		}
		for i < len(a) && c.ServerOf(a[i]) == s {
			i++
		}
		for k < len(b) && c.ServerOf(b[k]) == s {
			k++
		}
	}
	return i == len(a) && k == len(b)
}

// checkTarget validates the target GPUs of a placing action and returns them
// sorted. own are GPUs the job holds now and may keep.
func (e *Engine) checkTarget(j *cluster.Job, a *cluster.Action, own []cluster.GPUID) ([]cluster.GPUID, error) {
	var gpus []cluster.GPUID
	if slices.Equal(a.GPUs, j.Last) {
		// a resume in place: j.Last is the engine's own sorted list, which
		// nothing modifies (Applied), so it serves as is
		gpus = j.Last
	} else {
		gpus = slices.Clone(a.GPUs)
		slices.Sort(gpus)
	}
	lo, hi := j.Spec.WidthRange()
	if len(gpus) < lo || len(gpus) > hi {
		if lo == hi {
			return nil, refuse(cluster.RejectNever, "gang needs exactly %d GPUs, got %d", lo, len(gpus))
		}
		return nil, refuse(cluster.RejectNever, "elastic job needs %d..%d GPUs, got %d", lo, hi, len(gpus))
	}
	for i, g := range gpus {
		if g < 0 || int(g) >= len(e.gpus) {
			return nil, refuse(cluster.RejectNever, "no GPU %d", g)
		}
		if i > 0 && gpus[i-1] == g {
			return nil, refuse(cluster.RejectNever, "GPU %d listed twice", g)
		}
		s := e.c.ServerOf(g)
		if !e.servers[s].Schedulable() {
			return nil, refuse(cluster.RejectRetry, "server %s is not schedulable (%s)", e.c.Servers[s].Name, e.servers[s].Reason)
		}
		if _, mine := slices.BinarySearch(own, g); mine {
			continue
		}
		gs := &e.gpus[g]
		if len(gs.Jobs) == 0 {
			continue
		}
		if !a.Share {
			return nil, heldBy(g, "GPU %d is held by job %d (set Share to pack)", g, gs.Jobs[0])
		}
		if len(gs.Jobs) >= e.opts.MaxJobsPerGPU {
			return nil, heldBy(g, "GPU %d already holds %d jobs (limit %d)", g, len(gs.Jobs), e.opts.MaxJobsPerGPU)
		}
		if mem := e.c.GPUType(g).MemGiB; gs.MemGiB+j.Spec.MemGiB > mem {
			if j.Spec.MemGiB > mem {
				return nil, refuse(cluster.RejectNever, "GPU %d: %.1f GiB used + %.1f GiB needed > %.1f GiB", g, gs.MemGiB, j.Spec.MemGiB, mem)
			}
			return nil, heldBy(g, "GPU %d: %.1f GiB used + %.1f GiB needed > %.1f GiB", g, gs.MemGiB, j.Spec.MemGiB, mem)
		}
	}
	return gpus, nil
}
