package cluster

import (
	"cmp"
	"fmt"
	"math"
)

// JobID is the engine's dense index of a job, assigned in order of submission.
// It is the last key of every sort, which makes every order total.
type JobID int32

// NoJob is the zero JobID sentinel returned where no job applies.
const NoJob JobID = -1

// JobSpec is what a user (or a trace) submits. It never changes once the job
// is submitted.
type JobSpec struct {
	// Name is the external identifier (the trace's job ID, the API's job ID);
	// unique within a run.
	Name string `json:"name"`
	// User is the account the job is charged to.
	User string `json:"user"`
	// Group ties the jobs of one multi-job (a hyper-parameter search).
	Group string `json:"group,omitempty"`
	// VC is the virtual cluster (Philly).
	VC string `json:"vc,omitempty"`
	// GPUs is the gang size: all GPUs are held at once or none.
	GPUs int `json:"gpus"`
	// MinGPUs and MaxGPUs bound an elastic job's width; both zero means the
	// job always runs on exactly GPUs GPUs.
	MinGPUs int `json:"min_gpus,omitempty"`
	MaxGPUs int `json:"max_gpus,omitempty"`
	// Submit is the submission time in seconds.
	Submit float64 `json:"submit"`
	// Model names the model profile in the catalog ("" for a generic job).
	Model string `json:"model,omitempty"`
	// Iters is the total number of mini-batches; zero means unknown
	// (live jobs that stop by themselves).
	Iters float64 `json:"iters"`
	// IterTime is the seconds per mini-batch on GPUs reference GPUs,
	// consolidated, with no other job sharing them.
	IterTime float64 `json:"iter_time"`
	// MemGiB is the peak GPU memory per GPU, used to decide what may share a GPU.
	MemGiB float64 `json:"mem_gib,omitempty"`
	// Skew is the model's tensor-size skew as profiled: its largest tensor ÷
	// its model size, in [0, 1] (Tiresias' model profile; trace readers fill
	// it from the model catalog). 0 means unknown. Placement policies use it
	// to decide which gangs must be consolidated.
	Skew float64 `json:"skew,omitempty"`
	// Priority orders jobs inside a user's share where a policy honours it.
	Priority int `json:"priority,omitempty"`
	// Family groups jobs that start up alike (the same program): the
	// engine remembers the start-up last measured for a family and expects
	// it of the family's next jobs (Job.StartUpEst). Live it is derived from
	// the user and the command; in simulation it is the model. "" means
	// the job is its own family.
	Family string `json:"family,omitempty"`
}

// BySubmit orders specs by submission time, for stable sorts that keep
// the input order among equal times.
func BySubmit(a, b *JobSpec) int { return cmp.Compare(a.Submit, b.Submit) }

// Duration is the run time on reference GPUs (Iters × IterTime).
func (s *JobSpec) Duration() float64 { return s.Iters * s.IterTime }

// Work is the job's total work in reference-GPU-seconds (Duration × GPUs).
func (s *JobSpec) Work() float64 { return s.Duration() * float64(s.GPUs) }

// Elastic reports whether the job may run on a width other than GPUs.
func (s *JobSpec) Elastic() bool { return s.MinGPUs > 0 || s.MaxGPUs > 0 }

// WidthRange returns the allowed GPU counts.
func (s *JobSpec) WidthRange() (min, max int) {
	if !s.Elastic() {
		return s.GPUs, s.GPUs
	}
	min, max = s.MinGPUs, s.MaxGPUs
	if min == 0 {
		min = 1
	}
	if max == 0 {
		max = s.GPUs
	}
	return min, max
}

// Validate checks a spec and names the first bad field.
func (s *JobSpec) Validate() error {
	switch {
	case s.Name == "":
		return fmt.Errorf("name: required")
	case s.User == "":
		return fmt.Errorf("user: required")
	case s.GPUs <= 0:
		return fmt.Errorf("gpus: must be positive, got %d", s.GPUs)
	case bad(s.Submit) || s.Submit < 0:
		return fmt.Errorf("submit: must be a finite non-negative time, got %v", s.Submit)
	case bad(s.Iters) || s.Iters < 0:
		return fmt.Errorf("iters: must be finite and non-negative, got %v", s.Iters)
	case bad(s.IterTime) || s.IterTime < 0:
		return fmt.Errorf("iter_time: must be finite and non-negative, got %v", s.IterTime)
	case s.Iters > 0 && s.IterTime == 0:
		return fmt.Errorf("iter_time: must be positive when iters is set")
	case bad(s.MemGiB) || s.MemGiB < 0:
		return fmt.Errorf("mem_gib: must be finite and non-negative, got %v", s.MemGiB)
	case bad(s.Skew) || s.Skew < 0 || s.Skew > 1:
		return fmt.Errorf("skew: must be in [0, 1], got %v", s.Skew)
	case s.MinGPUs < 0 || s.MaxGPUs < 0:
		return fmt.Errorf("min_gpus/max_gpus: must not be negative")
	}
	if s.Elastic() {
		lo, hi := s.WidthRange()
		if lo > s.GPUs || hi < s.GPUs {
			return fmt.Errorf("min_gpus/max_gpus: range %d..%d must contain gpus=%d", lo, hi, s.GPUs)
		}
	}
	return nil
}

func bad(f float64) bool { return math.IsNaN(f) || math.IsInf(f, 0) }

// JobState is a job's place in its life cycle.
type JobState uint8

// The job states. Queued: waiting, never run or requeued for a retry.
// Running: holds GPUs (possibly shared with packed jobs). Suspended: stopped
// at a mini-batch boundary, its state in host memory or a checkpoint, waiting
// for GPUs. Migrating: moving to new GPUs, holding them. Warming: the engine
// started the job's process ahead of its turn (engine Options.Warm) on GPUs
// it does not hold, to hold it at its first mini-batch boundary; it neither
// holds GPUs nor waits for them (no policy places it), and becomes Suspended,
// on those GPUs, once the process is ready. The last three are terminal.
const (
	Queued JobState = iota
	Running
	Suspended
	Migrating
	Warming
	Finished
	Failed
	Cancelled
	numStates
)

var stateNames = [...]string{"queued", "running", "suspended", "migrating", "warming", "finished", "failed", "cancelled"}

func (s JobState) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("state(%d)", s)
}

// ParseJobState is the inverse of String.
func ParseJobState(s string) (JobState, error) {
	for i, n := range stateNames {
		if n == s {
			return JobState(i), nil
		}
	}
	return 0, fmt.Errorf("unknown job state %q", s)
}

// Terminal reports whether no transition leaves s.
func (s JobState) Terminal() bool { return s >= Finished }

// Holding reports whether a job in state s holds GPUs.
func (s JobState) Holding() bool { return s == Running || s == Migrating }

// Waiting reports whether a job in state s waits for GPUs (queued or suspended).
func (s JobState) Waiting() bool { return s == Queued || s == Suspended }

// transitions is the legal state machine; the comment on each row says
// which action or event causes it.
var transitions = [numStates][numStates]bool{
	Queued: {
		Running:   true, // Start
		Warming:   true, // the engine's warm start
		Cancelled: true, // Kill (cancel)
		Failed:    true, // Kill (failure policy), failed pre-run
	},
	Running: {
		Running:   true, // Resize (grow/shrink), Pack/unpack of a neighbour
		Suspended: true, // Suspend
		Warming:   true, // Suspend during its start-up: held at its first boundary
		Migrating: true, // Migrate
		Queued:    true, // attempt failed and will be retried; start failed
		Finished:  true, // completed its work
		Failed:    true, // failed with no retries left
		Cancelled: true, // Kill (cancel)
	},
	Suspended: {
		Running:   true, // Resume on the server holding its state
		Migrating: true, // Resume elsewhere: state moves first
		Failed:    true,
		Cancelled: true,
		Finished:  true, // live: the job ended its last mini-batch where it was to stop
	},
	Migrating: {
		Running:   true, // migration done
		Queued:    true, // migration failed: restart from the last checkpoint
		Failed:    true,
		Cancelled: true,
		Finished:  true, // live: the job finished before it could be moved
	},
	Warming: {
		Suspended: true, // its process reached its first boundary and is held there (EvReady)
		Queued:    true, // it failed and will be retried, its GPUs' memory was needed, its node was lost
		Failed:    true, // it failed with no retries left
		Cancelled: true,
		Finished:  true, // live: a job without the in-job client ran to its end while warming
	},
}

// CanTransition reports whether from → to is legal.
func CanTransition(from, to JobState) bool {
	if from >= numStates || to >= numStates {
		return false
	}
	return transitions[from][to]
}

// Transitions lists the legal transitions, for documentation and tests.
func Transitions() [][2]JobState {
	var out [][2]JobState
	for f := JobState(0); f < numStates; f++ {
		for t := JobState(0); t < numStates; t++ {
			if transitions[f][t] {
				out = append(out, [2]JobState{f, t})
			}
		}
	}
	return out
}

// NoServer marks a suspended job whose state lives in a checkpoint rather
// than in some server's host memory.
const NoServer ServerID = -1

// Job is the engine's record of a job. The engine owns it; everyone else reads.
type Job struct {
	ID    JobID
	Spec  *JobSpec
	State JobState
	// GPUs are the GPUs held while Running or Migrating (sorted), nil otherwise.
	GPUs []GPUID
	// Last are the GPUs the job held when it last ran (where a suspended
	// job's state lives), nil before it first ran.
	Last []GPUID
	// Home is the server whose host memory holds a suspended job's state,
	// or NoServer when it is checkpointed (or the job never ran).
	Home ServerID
	// Shared reports whether the job was placed on GPUs it shares with
	// another running job (packed).
	Shared bool

	// attained service in GPU-seconds up to attainedAt; attainedAt may lie
	// ahead of the engine's time while the job holds GPUs whose start-up is
	// not charged (ChargeFrom): nothing is charged before it
	attained   float64
	attainedAt float64
	// Executed is the wall time spent holding GPUs, up to AttainedAt.
	executed float64

	// Done is the mini-batches completed as of DoneAt (from profile events).
	Done   float64
	DoneAt float64
	// Profile is the job's measurement history.
	Profile Profile

	// Metric is the last quality metric the job reported (e.g. accuracy), and MetricAt when.
	Metric   float64
	MetricAt float64

	// Submitted is when the engine accepted the job.
	Submitted float64
	// FirstStart is when the job first got GPUs, -1 before.
	FirstStart float64
	// QueuedAt is when the job last started waiting (queued or suspended).
	QueuedAt float64
	// Ended is when it reached a terminal state, -1 before.
	Ended float64
	// NotBefore holds a retried job back until this time.
	NotBefore float64

	Starts, Suspends, Resumes, Migrations, Resizes, Packs, Attempts int
	// UserErrors counts failures caused by the job's own code or input.
	UserErrors int
	// Reason says why the job is in its terminal state, or why it was last requeued.
	Reason string
	// Seq counts the job's state changes, so readers can cache derived data.
	Seq uint64

	// Start-up (engine Options.StartUps): a job's current process is in its
	// start-up from its launch until its first mini-batch boundary, when
	// the executor reports it ready (EvReady). The phase is never charged
	// to a time-slice quantum: ReadyAt is when the quantum may start
	// counting. Without Options.StartUps every process is ready when it is
	// placed (the executor reports nothing), as before start-ups were known.
	//
	// StartingUp is set while the current process (Running, Migrating or
	// Warming) is in its start-up; ProcStart is when that process was
	// launched and ReadyAt when it reached its first boundary (-1 before,
	// and while the job has no process).
	StartingUp         bool
	ProcStart, ReadyAt float64
	// StartUp is the job's own last measured start-up in seconds (0 until
	// one was measured); StartUpEst is what the engine expects the next
	// one to take: StartUp, else the last one measured for its family
	// (JobSpec.Family), else 0 (unknown).
	StartUp, StartUpEst float64
	// Warmed is set while the job holds a warm process it never ran: a
	// warm start (state Warming) or its result, suspended at its first
	// boundary on Last's GPUs. A Resume there costs what a resume costs.
	Warmed bool

	// PreRun is the engine's pre-run of this job (engine Options.PreRun): a
	// one-GPU probe job that runs the job's first mini-batch to catch user
	// errors cheaply. NoJob when the job has none. While the probe has not
	// finished, the job is held: queued with NotBefore = +Inf.
	PreRun JobID
	// Probe marks a pre-run probe; Parent is the job it probes.
	Probe  bool
	Parent JobID

	// PreRunHere marks a job whose pre-run is its own first process's
	// first mini-batch (engine Options.PreRun with StartUps, for one-GPU
	// jobs): no probe is made, the process that passes it goes on as the
	// job's, and a failure before it is the pre-run's.
	PreRunHere bool

	// Saved is set once its executor reported a checkpoint of the job (an
	// EvProfile with Event.Saved: the trainer checkpoints on its own, and a
	// suspension loses what it did since). SavedAt is then when its work
	// was last safe: its last checkpoint, or its last start or resumption
	// (from that checkpoint), whichever is later. A job never reported is
	// one that saves when it is suspended (at a mini-batch boundary, or
	// on SIGTERM): a suspension loses none of its work.
	Saved   bool
	SavedAt float64
}

// StartKind is the action that gives a waiting job GPUs: Resume for a
// suspended job (its state is kept), Start for a queued one.
func (j *Job) StartKind() ActionKind {
	if j.State == Suspended {
		return Resume
	}
	return Start
}

// Attained returns the attained service in GPU-seconds at time now: GPUs held
// × time held, summed over the job's life, less the start-ups the engine
// does not charge (ChargeFrom; none but under engine Options.StartUpGrace).
// It never decreases.
func (j *Job) Attained(now float64) float64 {
	if j.State.Holding() && now > j.attainedAt {
		return j.attained + float64(len(j.GPUs))*(now-j.attainedAt)
	}
	return j.attained
}

// Unsaved is the seconds of work a suspension at now would lose: since
// SavedAt for a job whose checkpoints are reported (Saved) while it holds
// GPUs, else 0.
func (j *Job) Unsaved(now float64) float64 {
	if !j.Saved || !j.State.Holding() {
		return 0
	}
	return max(0, now-j.SavedAt)
}

// Executed returns the wall time the job has held GPUs, up to now, less
// the start-ups not charged (as Attained).
func (j *Job) Executed(now float64) float64 {
	if j.State.Holding() && now > j.attainedAt {
		return j.executed + (now - j.attainedAt)
	}
	return j.executed
}

// Carry adds service the job attained as another job (attained
// GPU-seconds, executed seconds) to a job that holds no GPUs. Engine use
// only (Engine.CarryService).
func (j *Job) Carry(attained, executed float64) {
	j.attained += max(0, attained)
	j.executed += max(0, executed)
}

// Settle folds service up to now into the record. Engine use only.
func (j *Job) Settle(now float64) {
	if j.State.Holding() && now > j.attainedAt {
		d := now - j.attainedAt
		j.attained += float64(len(j.GPUs)) * d
		j.executed += d
	}
	if now > j.attainedAt {
		j.attainedAt = now
	}
}

// ChargeFrom settles the job's service up to now and charges it from t
// (>= now) on: while it holds GPUs before t, neither Attained nor Executed
// grows. Engine use only: a start-up that is not charged (engine
// Options.StartUpGrace) defers the charge to its deadline, and its end
// (the job ready) brings it back to now.
func (j *Job) ChargeFrom(now, t float64) {
	j.Settle(now)
	j.attainedAt = max(now, t)
}

// Uncharged returns how long from now the job holds GPUs without being
// charged service (an uncharged start-up, at most until its deadline; see
// ChargeFrom): 0 for a job that does not hold GPUs or is charged now.
func (j *Job) Uncharged(now float64) float64 {
	if !j.State.Holding() || j.attainedAt <= now {
		return 0
	}
	return j.attainedAt - now
}

// StartUpDone returns how long the current process has been starting up
// at now (0 when it is not starting up).
func (j *Job) StartUpDone(now float64) float64 {
	if !j.StartingUp || now < j.ProcStart {
		return 0
	}
	return now - j.ProcStart
}

// Ready reports whether the job holds GPUs with a process past its
// start-up: the time it may be charged to a quantum.
func (j *Job) Ready() bool { return j.State.Holding() && !j.StartingUp }

// Waited returns how long the job has been waiting in its current wait (0 if holding GPUs).
func (j *Job) Waited(now float64) float64 {
	if !j.State.Waiting() {
		return 0
	}
	return now - j.QueuedAt
}

// Servers returns the distinct servers of the job's GPUs, in order.
func (j *Job) Servers(c *Cluster) []ServerID {
	return ServersOf(c, j.GPUs)
}

// ServersOf returns the distinct servers of a sorted GPU list, in order.
func ServersOf(c *Cluster, gpus []GPUID) []ServerID {
	var out []ServerID
	for _, g := range gpus {
		s := c.ServerOf(g)
		if len(out) == 0 || out[len(out)-1] != s {
			out = append(out, s)
		}
	}
	return out
}
