package engine

import (
	"math"

	"github.com/gandiva-sched/gandiva/internal/cluster"
)

// Pre-run (Options.PreRun), Philly's first failure-handling lesson (seed
// 002: "user errors in code or configuration → pre-run the first iteration
// on a single GPU (cheap)"): a new job first runs one mini-batch on one GPU,
// as a probe, before its whole gang may start.
//
// The probe is an ordinary job to everyone but the engine: a one-GPU copy of
// the job's spec with one mini-batch of work, named NAME/prerun, submitted
// right after the job (so its ID is the job's + 1). Policies place it as they
// place any one-GPU job, executors run it as they run any job (the live
// agent stops it after its first mini-batch), and the failure policy retries
// it like any job. Meanwhile the job itself is queued but held: NotBefore is
// +Inf, which every policy already honours as "not eligible yet".
//
// When the probe ends, the engine settles the job:
//   - probe finished: the job is released (NotBefore = now) and starts
//     normally; its Reason says "pre-run passed";
//   - probe failed (a user error that repeated, or attempts exhausted): the
//     job fails without its gang ever having started; an EvFail for the job
//     is added to the events the policy sees next;
//   - probe cancelled (by a policy's kill): the job is released unprobed.
//
// A job that ends while its probe is still alive (cancelled by its user)
// takes the probe with it: the engine cancels it and queues a Kill for the
// executor.
//
// With start-ups reported (Options.StartUps) a one-GPU job needs no probe:
// its own first process is its pre-run (Job.PreRunHere). The first
// mini-batch boundary it reaches passes it, and the process goes on as the
// job's (warm starts hold it there), so its start-up is paid once; a
// failure before that boundary is the pre-run's failure, handled by the
// failure policy as the probe's was (a user error that repeats ends the
// job). A gang still gets a probe: a process started as one rank of
// world size 1 cannot become rank 0 of the gang (its process group is
// formed), so the gang starts its own processes after the probe, and
// those start-ups can be warmed.

func probeName(spec *cluster.JobSpec) string { return spec.Name + "/prerun" }

// addProbe creates j's pre-run probe and holds j until it ends.
func (e *Engine) addProbe(j *cluster.Job, now float64) {
	ps := *j.Spec
	ps.Name = probeName(j.Spec)
	ps.GPUs, ps.MinGPUs, ps.MaxGPUs = 1, 0, 0
	if ps.Iters > 1 {
		ps.Iters = 1
	}
	pid := e.add(&ps, now)
	p := e.jobs[pid]
	p.Probe, p.Parent = true, j.ID
	j.PreRun = pid
	j.NotBefore = math.Inf(1)
	j.Reason = "waiting for its pre-run"
	e.stats.PreRuns++
}

// preRunEnded settles the other side of a pre-run pair when j reaches a
// terminal state (setState calls it).
func (e *Engine) preRunEnded(j *cluster.Job, now float64) {
	switch {
	case j.Probe:
		p := e.jobs[j.Parent]
		if p.State != cluster.Queued || p.PreRun != j.ID || !math.IsInf(p.NotBefore, 1) {
			return
		}
		switch j.State {
		case cluster.Finished:
			p.NotBefore = now
			p.Reason = "pre-run passed"
			p.Seq++
		case cluster.Failed:
			e.stats.PreRunFailures++
			e.setState(p, cluster.Failed, now, "pre-run failed: "+j.Reason)
			e.events = append(e.events, cluster.Event{Time: now, Kind: cluster.EvFail, Job: p.ID, Node: cluster.NoServer,
				UserError: j.UserErrors > 0, Reason: "pre-run failed"})
		default:
			p.NotBefore = now
			p.Reason = "pre-run skipped: " + j.Reason
			p.Seq++
		}
	case j.PreRun != cluster.NoJob:
		pr := e.jobs[j.PreRun]
		if pr.State.Terminal() {
			return
		}
		prev := e.release(pr, now)
		e.setState(pr, cluster.Cancelled, now, "its job ended: "+j.Reason)
		e.pending = append(e.pending, Applied{Action: cluster.Action{Kind: cluster.Kill, Job: pr.ID, Reason: "pre-run of an ended job"}, Prev: prev, Internal: true})
	}
}

// PreRunStatus describes j's pre-run: "" (none), "pending", "running",
// "passed", "failed" or "skipped".
func (e *Engine) PreRunStatus(j *cluster.Job) string {
	if j.PreRunHere {
		switch {
		case j.StartUp > 0 || j.ReadyAt >= 0 || j.State == cluster.Finished:
			return "passed"
		case j.State == cluster.Failed:
			return "failed"
		case j.State == cluster.Cancelled:
			return "cancelled"
		case j.StartingUp:
			return "running"
		}
		return "pending"
	}
	if j.PreRun == cluster.NoJob {
		return ""
	}
	pr := e.jobs[j.PreRun]
	switch pr.State {
	case cluster.Finished:
		return "passed"
	case cluster.Failed:
		return "failed"
	case cluster.Cancelled:
		if j.State == cluster.Cancelled {
			return "cancelled"
		}
		return "skipped"
	case cluster.Queued:
		return "pending"
	}
	return "running"
}
