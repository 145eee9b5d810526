package timeline

import "github.com/gandiva-sched/gandiva/internal/cluster"

// Kind names what a segment or a lane span shows ("running", "packed", ...).
// Kinds are data: a new one needs a KindInfo (Options.Kinds), not code, here
// or in the front end.
type Kind string

// The built-in kinds.
const (
	// Running: the job holds the GPU alone.
	Running Kind = "running"
	// Packed: the job holds the GPU with another job.
	Packed Kind = "packed"
	// Migrating: the job holds its new GPUs while its state moves there.
	Migrating Kind = "migrating"
	// PreRun: an engine pre-run probe (the job's first mini-batch on one GPU).
	PreRun Kind = "pre-run"
	// StartUp: the job's processes are starting, before their first
	// mini-batch boundary. The engine does not report this phase yet; a
	// Classify that knows it returns this kind.
	StartUp Kind = "start-up"
	// Suspended: stopped at a mini-batch boundary, waiting for GPUs. On a
	// GPU row it marks a job whose state is parked in the host memory of
	// the GPU's server, from its last run on that GPU.
	Suspended Kind = "suspended"
	// Queued: waiting, never run or requeued (job lanes only).
	Queued Kind = "queued"
)

// Style is how a front end draws a kind. The dashboard and the report
// know these four; an unknown style is drawn as "fill".
type Style string

const (
	// Fill: a solid bar in the job's colour.
	Fill Style = "fill"
	// Hatch: the job's colour with diagonal stripes (a transition).
	Hatch Style = "hatch"
	// Light: the job's colour, faded (a probe, a warm-up).
	Light Style = "light"
	// Band: a thin band at the bottom of the row (not holding the GPU).
	Band Style = "band"
)

// KindInfo describes a kind for people and for drawing.
type KindInfo struct {
	Kind  Kind   `json:"kind"`
	Label string `json:"label"`
	// Color is a CSS colour: the kind's colour in the legend, and the
	// bar's colour when the front end colours by kind.
	Color string `json:"color"`
	Style Style  `json:"style"`
	// Holds is true for kinds in which the job holds GPUs: their time
	// counts in shares and utilisation.
	Holds bool   `json:"holds"`
	Doc   string `json:"doc"`
}

// DefaultKinds returns the built-in kinds, in legend order.
func DefaultKinds() []KindInfo {
	return []KindInfo{
		{Running, "running", "#2f7ed8", Fill, true, "holds the GPU alone"},
		{Packed, "packed", "#8e44ad", Fill, true, "holds the GPU with another job (each gets a sub-lane)"},
		{Migrating, "migrating", "#e67e22", Hatch, true, "holds its new GPUs while its state moves there"},
		{PreRun, "pre-run", "#16a085", Light, true, "a pre-run probe: the job's first mini-batch on one GPU"},
		{StartUp, "start-up", "#f1c40f", Light, true, "processes starting, before the first mini-batch boundary"},
		{Suspended, "suspended", "#95a5a6", Band, false, "stopped at a mini-batch boundary; on a GPU row: its state is parked on this GPU's server"},
		{Queued, "queued", "#d5dbe1", Band, false, "waiting for GPUs (job lanes)"},
	}
}

// Classify gives the kind of a job's segment. shared says whether another
// job holds the GPU (for a GPU row) or any of the job's GPUs (for its lane).
// It returns "" for a job that shows nothing (a terminal one). It must
// depend only on what changes with the job's Seq, its Home and shared, as
// those are what the Recorder watches.
type Classify func(j *cluster.Job, shared bool) Kind

// DefaultClassify is the Classify of the engine's states.
func DefaultClassify(j *cluster.Job, shared bool) Kind {
	switch j.State {
	case cluster.Queued:
		return Queued
	case cluster.Suspended:
		return Suspended
	case cluster.Migrating:
		return Migrating
	case cluster.Running:
		switch {
		case j.Probe:
			return PreRun
		case j.StartingUp:
			// its process has not reached its first boundary (engine
			// Options.StartUps): holding GPUs, not yet computing
			return StartUp
		case shared:
			return Packed
		}
		return Running
	}
	return ""
}
