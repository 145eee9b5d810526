package cluster

// RejectCode says what a refusal of an action means for the policy that
// asked for it, so that code (not a reader of the reason) can tell "try
// again later" from "never" (kube-scheduler's Status codes, for actions).
type RejectCode uint8

const (
	// RejectRetry: the action may succeed later, unchanged, once the
	// cluster changes (GPUs busy, a node not ready, pods still leaving).
	RejectRetry RejectCode = iota + 1
	// RejectNever: the action cannot be carried out for this job as it is
	// (a job that may not be suspended or moved, a placement it may never
	// use, GPUs that do not exist); asking again changes nothing.
	RejectNever
	// RejectStale: the action was decided on a view that no longer holds
	// (the job ended or changed state, the GPUs were taken by an action
	// applied before it); decide again on the next view.
	RejectStale
)

// String names the code as it appears in logs and the API.
func (c RejectCode) String() string {
	switch c {
	case RejectRetry:
		return "retry"
	case RejectNever:
		return "never"
	case RejectStale:
		return "stale"
	}
	return "unknown"
}

// Rejection is an action refused by the engine or its executor, with what
// the refusal means (Code) and why (Reason, for people).
type Rejection struct {
	Action Action
	Code   RejectCode
	Reason string
}
