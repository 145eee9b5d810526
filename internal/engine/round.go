package engine

import (
	"fmt"
	"slices"

	"github.com/gandiva-sched/gandiva/internal/cluster"
)

// Round asks the policy for a decision at time now, validates and applies
// its actions in order, hands the applied ones (after any the engine itself
// queued, such as kills for cancelled jobs) to the executor and returns them.
func (e *Engine) Round(now float64) (Result, error) {
	if err := e.advance(now); err != nil {
		return Result{}, err
	}
	e.stats.Rounds++
	snap := e.Snapshot()
	dec := e.pol.Schedule(snap)
	res := Result{Applied: e.pending}
	if res.Applied == nil && len(dec.Actions) > 0 {
		res.Applied = make([]Applied, 0, len(dec.Actions)) // one allocation, not a doubling series
	}
	e.pending = nil
	e.events = e.events[:0]
	for _, a := range dec.Actions {
		ap, err := e.apply(a, now)
		if err != nil {
			e.stats.Rejected++
			res.Rejected = append(res.Rejected, Rejection{Action: a, Reason: err.Error()})
			e.log.Warn("action rejected", "policy", e.pol.Name(), "action", a.String(), "reason", err.Error())
			continue
		}
		res.Applied = append(res.Applied, ap)
	}
	if dec.WakeAt > now {
		res.WakeAt = dec.WakeAt
	}
	if w := e.nextRetry(now); w > 0 && (res.WakeAt == 0 || w < res.WakeAt) {
		res.WakeAt = w
	}
	if len(res.Applied) > 0 && e.exec != nil {
		e.exec.Execute(now, res.Applied)
	}
	return res, nil
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

// apply validates one action against the current state and applies it.
func (e *Engine) apply(a cluster.Action, now float64) (Applied, error) {
	j := e.Job(a.Job)
	if j == nil {
		return Applied{}, fmt.Errorf("no job %d", a.Job)
	}
	ap := Applied{Action: a}
	switch a.Kind {
	case cluster.Start:
		if j.State != cluster.Queued {
			return ap, fmt.Errorf("start: job is %s, not queued", j.State)
		}
		if now < j.NotBefore {
			return ap, fmt.Errorf("start: job is backing off until %.3f", j.NotBefore)
		}
		gpus, err := e.checkTarget(j, a, nil)
		if err != nil {
			return ap, fmt.Errorf("start: %w", err)
		}
		ap.GPUs = gpus
		ap.Checkpointed = j.Starts > 0 // a retried job restores its last checkpoint
		ap.Packed = e.take(j, gpus, now)
		e.setState(j, cluster.Running, now, "")
		if j.FirstStart < 0 {
			j.FirstStart = now
		}
		j.Starts++
		j.Attempts++
		e.stats.Starts++
	case cluster.Suspend:
		if j.State != cluster.Running {
			return ap, fmt.Errorf("suspend: job is %s, not running", j.State)
		}
		ap.Prev = e.release(j, now)
		ap.Checkpointed = !e.keepHome(j)
		if ap.Checkpointed {
			e.stats.Checkpoints++
		}
		e.setState(j, cluster.Suspended, now, "")
		j.Suspends++
		e.stats.Suspends++
	case cluster.Resume:
		if j.State != cluster.Suspended {
			return ap, fmt.Errorf("resume: job is %s, not suspended", j.State)
		}
		gpus, err := e.checkTarget(j, a, nil)
		if err != nil {
			return ap, fmt.Errorf("resume: %w", err)
		}
		ap.GPUs = gpus
		ap.Prev = j.Last
		inMemory := j.Home != cluster.NoServer
		ap.Remote = !inMemory || !slices.Equal(cluster.ServersOf(e.c, gpus), cluster.ServersOf(e.c, j.Last)) || len(gpus) != len(j.Last)
		ap.Checkpointed = !inMemory
		e.dropHome(j)
		ap.Packed = e.take(j, gpus, now)
		if ap.Remote {
			e.setState(j, cluster.Migrating, now, "")
			j.Migrations++
			e.stats.Migrations++
		} else {
			e.setState(j, cluster.Running, now, "")
		}
		j.Resumes++
		e.stats.Resumes++
	case cluster.Migrate, cluster.Resize:
		if j.State != cluster.Running {
			return ap, fmt.Errorf("%s: job is %s, not running", a.Kind, j.State)
		}
		if a.Kind == cluster.Resize && !j.Spec.Elastic() {
			return ap, fmt.Errorf("resize: job is not elastic")
		}
		gpus, err := e.checkTarget(j, a, j.GPUs)
		if err != nil {
			return ap, fmt.Errorf("%s: %w", a.Kind, err)
		}
		if slices.Equal(gpus, j.GPUs) {
			return ap, fmt.Errorf("%s: target GPUs are the ones the job holds", a.Kind)
		}
		ap.GPUs = gpus
		ap.Prev = e.release(j, now)
		ap.Packed = e.take(j, gpus, now)
		if a.Kind == cluster.Migrate {
			ap.Remote = true
			e.setState(j, cluster.Migrating, now, "")
			j.Migrations++
			e.stats.Migrations++
		} else {
			e.setState(j, cluster.Running, now, "")
			j.Resizes++
			e.stats.Resizes++
		}
	case cluster.Kill:
		if j.State.Terminal() {
			return ap, fmt.Errorf("kill: job is already %s", j.State)
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
	default:
		return ap, fmt.Errorf("unknown action kind %d", a.Kind)
	}
	if ap.Packed {
		j.Packs++
		e.stats.Packs++
	}
	return ap, nil
}

// keepHome decides whether a job being suspended keeps its state in its
// servers' host memory, and books the memory if so.
func (e *Engine) keepHome(j *cluster.Job) bool {
	need := stateGiB(j)
	servers := cluster.ServersOf(e.c, j.Last)
	if need > 0 {
		for _, s := range servers {
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
	if len(servers) == 0 {
		j.Home = cluster.NoServer
		return false
	}
	j.Home = servers[0]
	return true
}

// checkTarget validates the target GPUs of a placing action and returns them
// sorted. own are GPUs the job holds now and may keep.
func (e *Engine) checkTarget(j *cluster.Job, a cluster.Action, own []cluster.GPUID) ([]cluster.GPUID, error) {
	gpus := slices.Clone(a.GPUs)
	slices.Sort(gpus)
	lo, hi := j.Spec.WidthRange()
	if len(gpus) < lo || len(gpus) > hi {
		if lo == hi {
			return nil, fmt.Errorf("gang needs exactly %d GPUs, got %d", lo, len(gpus))
		}
		return nil, fmt.Errorf("elastic job needs %d..%d GPUs, got %d", lo, hi, len(gpus))
	}
	for i, g := range gpus {
		if g < 0 || int(g) >= len(e.gpus) {
			return nil, fmt.Errorf("no GPU %d", g)
		}
		if i > 0 && gpus[i-1] == g {
			return nil, fmt.Errorf("GPU %d listed twice", g)
		}
		s := e.c.ServerOf(g)
		if !e.servers[s].Schedulable() {
			return nil, fmt.Errorf("server %s is not schedulable (%s)", e.c.Servers[s].Name, e.servers[s].Reason)
		}
		if _, mine := slices.BinarySearch(own, g); mine {
			continue
		}
		gs := &e.gpus[g]
		if len(gs.Jobs) == 0 {
			continue
		}
		if !a.Share {
			return nil, fmt.Errorf("GPU %d is held by job %d (set Share to pack)", g, gs.Jobs[0])
		}
		if len(gs.Jobs) >= e.opts.MaxJobsPerGPU {
			return nil, fmt.Errorf("GPU %d already holds %d jobs (limit %d)", g, len(gs.Jobs), e.opts.MaxJobsPerGPU)
		}
		if mem := e.c.GPUType(g).MemGiB; gs.MemGiB+j.Spec.MemGiB > mem {
			return nil, fmt.Errorf("GPU %d: %.1f GiB used + %.1f GiB needed > %.1f GiB", g, gs.MemGiB, j.Spec.MemGiB, mem)
		}
	}
	return gpus, nil
}
