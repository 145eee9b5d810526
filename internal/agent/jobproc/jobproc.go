package jobproc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"
)

// Spec says how to run one attempt of one job's workers on this node.
type Spec struct {
	// Job is the job's name (GANDIVA_JOB); Attempt its attempt number, from
	// 1 (GANDIVA_ATTEMPT). Both are for the job and for logs.
	Job     string
	Attempt int
	// Command is the program and its arguments. Command[0] is looked up in
	// the agent's PATH unless it contains a slash; a relative path with a
	// slash is relative to WorkDir.
	Command []string
	// Env is added to BaseEnv. GANDIVA_* variables are removed from
	// BaseEnv and Env may not set any (they are the protocol's), nor
	// CUDA_VISIBLE_DEVICES.
	Env map[string]string
	// BaseEnv is the environment the job starts from ("KEY=value"); nil
	// means the agent's own. An agent running jobs for others passes a
	// scrubbed one (internal/agent: no secret of its own reaches a job).
	BaseEnv []string
	// Credential, when set, runs the job's processes as that account
	// (uid, gid and supplementary groups; set Groups to an empty slice to
	// clear them); nil runs them as the caller. The caller must then have
	// prepared CheckpointDir (owned by that account), because it is not
	// created here.
	Credential *syscall.Credential
	// WorkDir is the job's working directory: it must exist (it is never
	// created; Start fails with a StartError naming work_dir, the job's
	// error). CheckpointDir is where its checkpoints go (shared storage
	// when jobs migrate between nodes), created (mode 0700) if missing when
	// Credential is nil. LogPath receives the job's stdout and stderr,
	// appended, after a header line per process; it is created mode 0600,
	// its directory 0700 (the logs are the agent's to serve, not the jobs'
	// to read).
	WorkDir, CheckpointDir, LogPath string
	// GPUs are the node-local device indices the job may use; they become
	// CUDA_VISIBLE_DEVICES (empty: no device visible) and GANDIVA_GPUS.
	GPUs []int
	// Rank, WorldSize, MasterAddr and MasterPort describe a gang spread over
	// several nodes: one Proc per node. When WorldSize > 1 they are passed
	// as RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT (the PyTorch
	// convention) and as GANDIVA_RANK, GANDIVA_WORLD_SIZE.
	Rank, WorldSize int
	MasterAddr      string
	MasterPort      int
	// Restore starts the job from the checkpoint in CheckpointDir, if there
	// is one (GANDIVA_RESTORE=1).
	Restore bool
	// PreRun marks the pre-run of a new job's first mini-batch
	// (GANDIVA_PRERUN=1): a job with the client stops by itself, with
	// status 0, once that mini-batch is done, and Exit.Reason says "pre-run
	// passed". A job without the client runs on; the caller decides when it
	// has passed and kills it.
	PreRun bool
	// Hold makes the job's first process hold itself at its first
	// mini-batch boundary (GANDIVA_HOLD=1), suspended as if Suspend had
	// been asked at its launch, until Resume: a warm start. A process
	// restarted later does not hold.
	Hold bool
	// CheckpointEvery asks the in-job client for a checkpoint this often
	// (at a mini-batch boundary), so that the job survives the loss of its
	// node; 0 means no periodic checkpoints.
	CheckpointEvery time.Duration
	// ReportEvery is how often the in-job client reports progress; 0 means
	// one second.
	ReportEvery time.Duration
	// UserErrorWindow classifies failures of jobs that do not use the
	// in-job client: a failure within this time of the start counts as a
	// user error (bad command, bad input). 0 means DefaultUserErrorWindow.
	// Jobs with the client are classified by progress instead: a failure
	// before the attempt's first mini-batch is a user error.
	UserErrorWindow time.Duration
	// StopGrace is how long a job may take to exit after it has committed
	// the checkpoint of a Checkpoint request before it is killed; 0 means
	// DefaultStopGrace.
	StopGrace time.Duration
	// ClientDeadline is how long a process may take to say hello before it
	// is taken to lack the in-job client; 0 means DefaultClientDeadline.
	// Until then a suspension waits for the hello and stops the process at
	// a mini-batch boundary (its first, when it is starting up), however
	// long the framework takes to start; after it, the process is ready
	// (EvReady with NoClient) and suspensions fall back to SIGSTOP.
	ClientDeadline time.Duration
}

// Defaults for the Spec fields left zero.
const (
	DefaultUserErrorWindow = 60 * time.Second
	DefaultStopGrace       = 10 * time.Second
	DefaultClientDeadline  = 10 * time.Minute
)

// Validate checks a Spec and names the first bad field.
func (s *Spec) Validate() error {
	switch {
	case s.Job == "":
		return errors.New("job: required")
	case s.Attempt < 0:
		return fmt.Errorf("attempt: must not be negative, got %d", s.Attempt)
	case len(s.Command) == 0 || s.Command[0] == "":
		return errors.New("command: required")
	case s.WorkDir == "":
		return errors.New("work_dir: required")
	case s.CheckpointDir == "":
		return errors.New("checkpoint_dir: required")
	case s.LogPath == "":
		return errors.New("log_path: required")
	case s.WorldSize < 0 || s.Rank < 0 || (s.WorldSize > 0 && s.Rank >= s.WorldSize):
		return fmt.Errorf("rank: %d is outside world size %d", s.Rank, s.WorldSize)
	case s.CheckpointEvery < 0 || s.ReportEvery < 0 || s.UserErrorWindow < 0 || s.StopGrace < 0 || s.ClientDeadline < 0:
		return errors.New("checkpoint_every/report_every/user_error_window/stop_grace/client_deadline: must not be negative")
	}
	seen := map[int]bool{}
	for _, g := range s.GPUs {
		if g < 0 || seen[g] {
			return fmt.Errorf("gpus: bad or repeated device index %d", g)
		}
		seen[g] = true
	}
	for k := range s.Env {
		switch {
		case k == "" || strings.ContainsAny(k, "=\x00"):
			return fmt.Errorf("env: bad variable name %q", k)
		case strings.HasPrefix(k, "GANDIVA_") || k == "CUDA_VISIBLE_DEVICES":
			return fmt.Errorf("env: %s is set by the agent", k)
		}
	}
	return nil
}

// Errors returned by Proc's methods (wrapped, with context).
var (
	// ErrBusy: another request on the same Proc is still in progress.
	ErrBusy = errors.New("another request is in progress")
	// ErrExited: the Proc has ended (see Wait for how).
	ErrExited = errors.New("job process has exited")
	// ErrState: the request does not apply in the Proc's state (Resume of a
	// running job onto other GPUs: use Checkpoint and a new Proc).
	ErrState = errors.New("not possible in this state")
	// ErrNoClient: the request needs the in-job client, which the job has
	// not connected (Save).
	ErrNoClient = errors.New("job does not use the in-job client")
)

// State is where a Proc is in its life.
type State uint8

// The states of a Proc.
const (
	Running State = iota
	Suspended
	Exited
)

func (s State) String() string {
	switch s {
	case Running:
		return "running"
	case Suspended:
		return "suspended"
	case Exited:
		return "exited"
	}
	return fmt.Sprintf("state(%d)", s)
}

// Mode says how a job was suspended.
type Mode uint8

// The ways to suspend a job.
const (
	// Memory: at a mini-batch boundary, by the in-job client, state in the
	// job's host memory, accelerator memory freed when the job has a
	// Release or Offload hook (Suspension.Released).
	Memory Mode = iota
	// Disk: at a mini-batch boundary, by the in-job client, state in a
	// checkpoint, process ended; resuming restarts it from the checkpoint.
	Disk
	// Signal: SIGSTOP to the process group, wherever the job was (not
	// aligned to a boundary); its accelerator memory stays allocated. The
	// fall-back for jobs without the client, and what Unaligned asks for.
	Signal
)

func (m Mode) String() string {
	switch m {
	case Memory:
		return "memory"
	case Disk:
		return "disk"
	case Signal:
		return "signal"
	}
	return fmt.Sprintf("mode(%d)", m)
}

// SuspendOptions refine Suspend.
type SuspendOptions struct {
	// Unaligned stops the job at once with SIGSTOP instead of at its next
	// mini-batch boundary.
	Unaligned bool
	// ToDisk saves the state to a checkpoint and ends the process instead
	// of keeping the state in host memory (for when host memory is short).
	// Ignored for jobs without the client, which are stopped with SIGSTOP.
	ToDisk bool
	// At, when positive, suspends at the first boundary where the job has
	// done at least At mini-batches (so that every rank of a gang stops at
	// the same one).
	At int64
}

// Suspension describes how a job was suspended.
type Suspension struct {
	Mode Mode
	// Done is the mini-batches done when it stopped (as last reported, for
	// Signal).
	Done int64
	// Bytes is the size of the saved state (host copy or checkpoint).
	Bytes int64
	// Released says the job freed its accelerator memory.
	Released bool
	// Took is the time from the request to the job being stopped,
	// including the wait for the boundary; Save is the part the job's
	// hooks took (as the client measured it).
	Took, Save time.Duration
	// Reason says why Mode is Signal ("no in-job client", "unaligned").
	Reason string
	// Waited is set when the job was still starting up: the suspension
	// waited for its hello and stopped it at its first boundary.
	Waited bool
}

// Resumption describes how a job was resumed.
type Resumption struct {
	// From is how it had been suspended.
	From Mode
	// Restarted says a new process was started (from a checkpoint when the
	// job has the client; from scratch otherwise, see FromScratch).
	Restarted, FromScratch bool
	// Done is the mini-batches done when it continued.
	Done int64
	// GPUs are the devices it now runs on.
	GPUs []int
	// Took is the time from the request to the job running again (for a
	// restart of a job with the client: until it has loaded its state);
	// Load is the part the job's hooks took.
	Took, Load time.Duration
}

// Checkpoint describes a committed checkpoint.
type Checkpoint struct {
	// Done is the mini-batches done when the state was saved.
	Done int64
	// Bytes is the payload's size; Path the metadata file's path.
	Bytes int64
	Path  string
	// Save is the time the job's hooks took to write it.
	Save time.Duration
}

// Outcome is how a Proc ended.
type Outcome uint8

// The outcomes.
const (
	// Finished: the job exited with status 0 by itself.
	Finished Outcome = iota
	// Failed: it exited with another status or was killed by a signal it
	// was not sent by this package.
	Failed
	// Killed: Kill ended it.
	Killed
	// Checkpointed: Checkpoint ended it; see Exit.Checkpoint and Exit.Restart.
	Checkpointed
	// Disconnected: an attached job (see Attach) closed its connection;
	// how its process ended is not known here.
	Disconnected
)

func (o Outcome) String() string {
	switch o {
	case Finished:
		return "finished"
	case Failed:
		return "failed"
	case Killed:
		return "killed"
	case Checkpointed:
		return "checkpointed"
	case Disconnected:
		return "disconnected"
	}
	return fmt.Sprintf("outcome(%d)", o)
}

// Exit says how a Proc ended.
type Exit struct {
	Outcome Outcome
	// Code is the last process's exit status, -1 when a signal ended it
	// (Signal names it), and also -1 when no process was left to wait for
	// (a job suspended to disk and then killed or checkpointed).
	Code   int
	Signal string
	// Done is the mini-batches done, as last reported by the client (0 for
	// a job without it); Steps is how many of them this attempt did.
	Done, Steps int64
	// Client says the job used the in-job client.
	Client bool
	// UserError classifies a Failed exit: the job's own code or input is to
	// blame (not worth retrying forever). See Spec.UserErrorWindow.
	UserError bool
	// Reason is a one-line explanation ("exit status 3 before the first
	// mini-batch: ValueError: ...").
	Reason string
	// Checkpoint is the checkpoint to restore from, for Checkpointed (nil
	// when Restart is set).
	Checkpoint *Checkpoint
	// Restart says a Checkpointed job could not save its state (no in-job
	// client, or its save failed) and will start again from its previous
	// checkpoint, or from scratch if it has none.
	Restart bool
	// Ran is the time from Start to the end.
	Ran time.Duration
	// LogTail is the end of the log file (at most 4 KiB).
	LogTail string
}

// EventKind is what an Event reports.
type EventKind uint8

// The events, in the order they typically occur.
const (
	// EvStarted: a process was launched (PID). Again after a restart.
	EvStarted EventKind = iota
	// EvConnected: the in-job client said hello (Done: restored mini-batches).
	EvConnected
	// EvProgress: Done, IterTime and maybe Metric.
	EvProgress
	// EvSuspended: see Suspension.
	EvSuspended
	// EvResumed: see Resumption.
	EvResumed
	// EvSaved: a checkpoint was committed (periodic, Save, Checkpoint or
	// ToDisk); see Checkpoint.
	EvSaved
	// EvExited: the Proc has ended; see Exit. Always the last event.
	EvExited
	// EvReady: the current process finished its start-up: it reached its
	// first mini-batch boundary (StartUp after its launch), or it said no
	// hello within Spec.ClientDeadline (NoClient). Once per process.
	EvReady
)

func (k EventKind) String() string {
	names := [...]string{"started", "connected", "progress", "suspended", "resumed", "saved", "exited", "ready"}
	if int(k) < len(names) {
		return names[k]
	}
	return fmt.Sprintf("event(%d)", k)
}

// Event is one report from a Proc. Only the fields of its Kind are set.
type Event struct {
	Kind    EventKind
	At      time.Time
	Job     string
	Attempt int
	PID     int
	// Done is the mini-batches done (Connected, Progress and the others).
	Done int64
	// IterTime is the mean seconds per mini-batch since the last Progress.
	IterTime  float64
	Metric    float64
	HasMetric bool
	// Load is, for EvConnected, the time the client took to load the
	// checkpoint it restored (0 if none).
	Load time.Duration
	// StartUp is, for EvReady, the time from the process's launch to its
	// first mini-batch boundary (to the deadline, with NoClient); NoClient
	// says the process said no hello within Spec.ClientDeadline.
	StartUp  time.Duration
	NoClient bool

	Suspension *Suspension
	Resumption *Resumption
	Checkpoint *Checkpoint
	Exit       *Exit
}

// Info is a snapshot of a Proc, for an agent re-registering with its server.
type Info struct {
	Job     string
	Attempt int
	// PID is the current process's id (0 when none: suspended to disk or
	// exited).
	PID   int
	State State
	// Mode is how it is suspended, when State is Suspended.
	Mode Mode
	GPUs []int
	// Done is the mini-batches done as last reported.
	Done int64
	// Client says the job has connected the in-job client.
	Client  bool
	Started time.Time
	// Busy names the request in progress ("" if none).
	Busy string
}

// Start launches the job's process and returns its Proc. ctx bounds only the
// launch, not the job. The error names the Spec field at fault, or says why
// the process could not be started (wrapping the os/exec error).
func Start(ctx context.Context, s Spec) (*Proc, error) {
	return start(ctx, s)
}
