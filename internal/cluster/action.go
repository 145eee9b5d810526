package cluster

import (
	"fmt"
	"strings"
)

// ActionKind names a mechanism, a primitive every policy composes.
type ActionKind uint8

// The actions a policy may return.
const (
	// Start launches a queued job's gang on GPUs.
	Start ActionKind = iota
	// Suspend stops a running job at its next mini-batch boundary and frees
	// its GPUs; its state stays in its server's host memory when it fits.
	Suspend
	// Resume continues a suspended job on GPUs; on the server that holds its
	// state it is the fast path, elsewhere it is a migration.
	Resume
	// Migrate checkpoints a running job and restores it on other GPUs.
	Migrate
	// Resize changes an elastic job's GPUs (grow or shrink) at a mini-batch boundary.
	Resize
	// Kill ends a job for good: cancelled, or failed when Fail is set.
	Kill
	// Warm is the engine's own (engine Options.Warm; a policy may not ask
	// for it): start a queued job's process on GPUs it does not hold, where
	// it runs its start-up beside whatever runs there, and hold it
	// suspended at its first mini-batch boundary, so that its turn, when it
	// comes, is a resume.
	Warm
	numActions
)

var actionNames = [...]string{"start", "suspend", "resume", "migrate", "resize", "kill", "warm"}

func (k ActionKind) String() string {
	if int(k) < len(actionNames) {
		return actionNames[k]
	}
	return fmt.Sprintf("action(%d)", k)
}

// Action is one request from a policy to the engine.
type Action struct {
	Kind ActionKind
	Job  JobID
	// GPUs is the target of Start, Resume, Migrate and Resize. The engine
	// sorts it; duplicates are rejected.
	GPUs []GPUID
	// Share allows the target GPUs to be held by other running jobs as well
	// (packing), memory permitting. Without it every target GPU must be free.
	Share bool
	// Unaligned asks Suspend to stop at once rather than at the next
	// mini-batch boundary (about 50× dearer; used when a job must yield now).
	Unaligned bool
	// Fail makes Kill end the job Failed instead of Cancelled.
	Fail bool
	// Reason is free text for logs and explain ("quantum", "pack-trial", ...).
	Reason string
}

func (a Action) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s job=%d", a.Kind, a.Job)
	if len(a.GPUs) > 0 {
		fmt.Fprintf(&b, " gpus=%v", a.GPUs)
	}
	if a.Share {
		b.WriteString(" share")
	}
	if a.Unaligned {
		b.WriteString(" unaligned")
	}
	if a.Fail {
		b.WriteString(" fail")
	}
	if a.Reason != "" {
		fmt.Fprintf(&b, " (%s)", a.Reason)
	}
	return b.String()
}

// Decision is what a policy returns from one call to Schedule.
type Decision struct {
	// Actions are applied in order; each is validated against the state
	// that the earlier ones left. A rejected action does not stop the rest.
	Actions []Action
	// WakeAt asks for another call at this time even if nothing happens
	// (a time-slice quantum, a back-off); 0 means no request. Times not
	// after Now are ignored.
	WakeAt float64
}
