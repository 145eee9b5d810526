package cluster

import "fmt"

// EventKind names what happened.
type EventKind uint8

// The events the engine accepts.
const (
	// EvSubmit: Spec is a new job.
	EvSubmit EventKind = iota
	// EvCancel: the user cancelled Job.
	EvCancel
	// EvFinish: Job completed its work (Done holds the final count).
	EvFinish
	// EvFail: Job's attempt failed on Node; UserError says whether the
	// cause is the job's own code or input (not worth retrying forever) or
	// the infrastructure.
	EvFail
	// EvProfile: Job has done Done mini-batches; IterTime is the measured
	// seconds per mini-batch on its current GPUs; Metric, when HasMetric, is
	// its latest quality metric (e.g. accuracy); SavedAt, when Saved, is
	// the time of its last checkpoint (see cluster.Job.Saved).
	EvProfile
	// EvActionDone: the last Migrate or remote Resume of Job completed.
	EvActionDone
	// EvActionFailed: the last action on Job could not be carried out (Reason).
	EvActionFailed
	// EvNodeUp: Node is (again) available.
	EvNodeUp
	// EvNodeDown: Node is lost; jobs on it are requeued from their last checkpoint.
	EvNodeDown
	// EvTick: a wake-up requested by the policy; no state changes.
	EvTick
	// EvSetting: an operator changed a run-time setting (Key, Value), such
	// as a user's tickets ("tickets/alice" = "4"). The engine only passes it
	// to the policy, which documents the keys it reads.
	EvSetting
	// EvReady: Job's current process reached its first mini-batch boundary
	// (engine Options.StartUps): its start-up is over. StartUp is the
	// seconds it took from the process's launch (0: the engine counts
	// from when it placed or warmed the job); Done, when positive, the
	// mini-batches done; Reason how it was concluded when not by a
	// boundary ("no in-job client after 10m0s"). A warming job becomes
	// Suspended, held at that boundary.
	EvReady
	numEvents
)

var eventNames = [...]string{"submit", "cancel", "finish", "fail", "profile", "action-done", "action-failed", "node-up", "node-down", "tick", "setting", "ready"}

func (k EventKind) String() string {
	if int(k) < len(eventNames) {
		return eventNames[k]
	}
	return fmt.Sprintf("event(%d)", k)
}

// Event is one input to the engine. Time is in seconds and never decreases
// from one event to the next.
type Event struct {
	Time      float64
	Kind      EventKind
	Job       JobID
	Spec      *JobSpec
	Node      ServerID
	Done      float64
	IterTime  float64
	Metric    float64
	HasMetric bool
	UserError bool
	// StartUp is the measured start-up of an EvReady, in seconds; NoClient
	// says it was concluded without a boundary: the process said no in-job
	// client's hello within the agent's deadline.
	StartUp  float64
	NoClient bool
	// Saved and SavedAt: an EvProfile's last checkpoint of the job.
	Saved   bool
	SavedAt float64
	Reason  string
	// Key and Value are the setting of an EvSetting.
	Key, Value string
}

func (e Event) String() string {
	switch e.Kind {
	case EvSubmit:
		if e.Spec != nil {
			return fmt.Sprintf("t=%.3f submit %s gpus=%d", e.Time, e.Spec.Name, e.Spec.GPUs)
		}
	case EvNodeUp, EvNodeDown:
		return fmt.Sprintf("t=%.3f %s node=%d", e.Time, e.Kind, e.Node)
	case EvTick:
		return fmt.Sprintf("t=%.3f tick", e.Time)
	case EvSetting:
		return fmt.Sprintf("t=%.3f setting %s=%s", e.Time, e.Key, e.Value)
	case EvProfile:
		return fmt.Sprintf("t=%.3f profile job=%d done=%.1f iter=%.4fs", e.Time, e.Job, e.Done, e.IterTime)
	}
	s := fmt.Sprintf("t=%.3f %s job=%d", e.Time, e.Kind, e.Job)
	if e.Reason != "" {
		s += " (" + e.Reason + ")"
	}
	return s
}
