package engine

import (
	"errors"
	"fmt"

	"github.com/gandiva-sched/gandiva/internal/cluster"
)

// Rejection is an action the engine or its executor refused, with what the
// refusal means for the policy (Code) and why (Reason).
type Rejection = cluster.Rejection

// rejectError is a refusal found by the validation of an action: the
// message for people and the code for the policy. Validation returns it
// (possibly wrapped), so the code is carried, never parsed from the text.
type rejectError struct {
	code cluster.RejectCode
	// held is the GPU whose jobs stand in the way when the refusal is
	// about GPUs held now, -1 otherwise (refuse sets it; a literal must):
	// Round makes the refusal RejectStale when an action of the same round
	// placed a job on it.
	held cluster.GPUID
	err  error
}

func (r *rejectError) Error() string { return r.err.Error() }
func (r *rejectError) Unwrap() error { return r.err }

// refuse builds a refusal with code c and a formatted message.
func refuse(c cluster.RejectCode, format string, args ...any) error {
	return &rejectError{code: c, held: -1, err: fmt.Errorf(format, args...)}
}

// heldBy is the refusal of a target GPU g that the jobs on it stand in
// the way of: RejectRetry, or RejectStale when Round finds that one of
// them took it in the same round (classify).
func heldBy(g cluster.GPUID, format string, args ...any) error {
	return &rejectError{code: cluster.RejectRetry, held: g, err: fmt.Errorf(format, args...)}
}

// classify returns the code of a refusal returned by apply. placed are the
// actions applied so far in the round: a refusal over a GPU that one of
// them placed a job on is stale (the policy decided on a view where the
// GPU was free), not a reason to retry. An error without a code is a
// refusal that changes nothing by asking again (RejectNever).
func classify(err error, placed []Applied) cluster.RejectCode {
	var r *rejectError
	if !errors.As(err, &r) {
		return cluster.RejectNever
	}
	if r.held >= 0 {
		for i := range placed {
			for _, g := range placed[i].GPUs {
				if g == r.held {
					return cluster.RejectStale
				}
			}
		}
	}
	return r.code
}

// Refused reports an action that the executor could not carry out after
// the engine applied it (a node that refused a pod, say). It is queued and
// shown to the policy in the next round's snapshot (cluster.Snapshot.Rejected),
// after the refusals of the round before, in the order reported. It changes
// no job's state: the executor reports what became of the job as events
// (EvActionFailed to send it back to the queue, say), and Stats.Rejected
// does not count it (it counts the engine's own refusals).
//
// Refused neither reads a clock nor runs a round. Like Apply, it is called
// by the driver between rounds (never from Execute), and the driver must
// run a round soon after, as it does after applying an event, so that the
// policy hears of the refusal (Reported says whether one waits). The
// refusals not yet shown to the policy are part of the exported State
// (State.Refused, State.Reported): a restored or forked engine shows them
// to its policy in its next round, as the original would have.
func (e *Engine) Refused(r Rejection) {
	e.refused = append(e.refused, r)
	e.reported++
	e.log.Warn("action refused by the executor", "policy", e.pol.Name(), "action", r.Action.String(),
		"code", r.Code.String(), "reason", r.Reason)
}

// Reported is the number of refusals reported with Refused since the last
// round: a driver that finds it above zero owes the policy a round.
func (e *Engine) Reported() int { return e.reported }
