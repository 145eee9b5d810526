package engine

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gandiva-sched/gandiva/internal/cluster"
)

// Causes. Every transition the engine makes sets the job's Reason to what
// caused it, which the live server records in the job's history and
// `gandiva status` shows: "started (turn)", "packed with j3 (pack-trial)",
// "resumed its warm process", "preempted by j4 (turn over)", "migrating to
// GPUs [2] (consolidate)", "warm: start-up finished in 10.2 s", "pre-run
// passed", each with the policy's own reason for the action in
// parentheses. (Before, a transition without a reason of its own kept the
// previous one, so time-slicing could read "pre-run passed".)

// withReason appends a policy's reason for an action to a cause.
func withReason(cause, reason string) string {
	if reason == "" {
		return cause
	}
	return cause + " (" + reason + ")"
}

// placedCause is the cause of placing j (Start, Resume, Migrate, Resize)
// by action a: what happened, with whom it shares its GPUs.
func (e *Engine) placedCause(j *cluster.Job, what string, a *cluster.Action) string {
	var with []string
	for _, g := range j.GPUs {
		for _, o := range e.gpus[g].Jobs {
			if o != j.ID && !slices.Contains(with, e.jobs[o].Spec.Name) {
				with = append(with, e.jobs[o].Spec.Name)
			}
		}
	}
	if len(with) > 0 {
		what += ", packed with " + strings.Join(with, ",")
	}
	return withReason(what, a.Reason)
}

// causes names, for each job the round suspended, the jobs that took its
// GPUs in the same round ("preempted by ..."), once every action is applied.
func (e *Engine) causes(acts []Applied) {
	for i := range acts {
		a := &acts[i]
		if a.Kind != cluster.Suspend || a.Internal || a.StillStarting {
			continue
		}
		var by []string
		for k := range acts {
			b := &acts[k]
			switch b.Kind {
			case cluster.Start, cluster.Resume, cluster.Migrate, cluster.Resize:
			default:
				continue
			}
			if b.Job == a.Job || slices.Contains(by, e.jobs[b.Job].Spec.Name) {
				continue
			}
			if slices.ContainsFunc(b.GPUs, func(g cluster.GPUID) bool { return slices.Contains(a.Prev, g) }) {
				by = append(by, e.jobs[b.Job].Spec.Name)
			}
		}
		if j := e.jobs[a.Job]; len(by) > 0 && j.State == cluster.Suspended {
			j.Reason = withReason(fmt.Sprintf("preempted by %s", strings.Join(by, ",")), a.Reason)
		}
	}
}
