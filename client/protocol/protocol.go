// Package protocol is the local protocol between a job process and the
// Gandiva agent that started it, and the on-disk checkpoint format. The Go
// client (package client), the Python client (python/gandiva) and the agent's
// process supervisor (internal/agent/jobproc) all speak it; docs/CLIENT.md
// describes it for other languages.
//
// # Transport
//
// The agent creates a connected pair of Unix stream sockets and passes one
// end to the job as an inherited file descriptor whose number is in the
// environment variable GANDIVA_FD (normally 3). Nobody else can connect to
// it, and it closes when the agent dies, which the client takes as the order
// to stop (the job will be restarted elsewhere from its last checkpoint, so
// it must not keep running). A job started without GANDIVA_FD runs
// standalone: the client only counts mini-batches and honours the checkpoint
// variables.
//
// # Attached (Kubernetes shared mode)
//
// In a pod of a shared node the kubelet, not the agent, starts the job, so
// there is no inherited descriptor. Instead GANDIVA_AGENT_SOCKET names a
// Unix socket that the node's agent listens on for this pod only, and
// GANDIVA_POD_UID, GANDIVA_POD_NAME and GANDIVA_POD_NAMESPACE (the downward
// API) name the pod. The client (when GANDIVA_FD is absent) dials it,
// retrying while it does not exist yet, for at most GANDIVA_ATTACH_TIMEOUT
// seconds (default DefaultAttachTimeout); its Hello also carries PodUID and
// Pod ("namespace/name"). The agent answers the Hello with Welcome: the
// GPUs the job may use (node-local indices, which the client puts in
// CUDA_VISIBLE_DEVICES and GANDIVA_GPUS before it returns to the program)
// and Hold (start held at the first boundary, as GANDIVA_HOLD=1 does); or
// with an Error, and closes, when it refuses the connection (another pod's
// UID, a second process of the same pod). Everything after the Welcome is
// the conversation below. The client also checkpoints on SIGTERM when
// attached, as standalone, because a moved pod is deleted.
//
// Messages are JSON objects, one per line ("\n"-terminated), in both
// directions. Unknown fields are ignored; an unknown Kind from the agent is
// answered with an Error message naming it.
//
// # Conversation
//
// Job to agent:
//   - Hello, once, first: Version, PID, Hooks (whether the job can save and
//     load its state) and Done (mini-batches restored from a checkpoint).
//   - Progress, on the first mini-batch and then at most every
//     GANDIVA_REPORT_EVERY seconds, and when the job closes the client: Done,
//     IterTime (mean seconds per mini-batch since the last Progress, counting
//     only the time the job spent between two calls of the client), Metric.
//   - Saved, whenever a checkpoint has been committed (periodic, asked for,
//     or as part of a Checkpoint command): Done, Bytes, Path, SaveSeconds.
//   - Error: Message; with Seq, a command that could not be carried out (the
//     job continues as before); without Seq, the job is about to die of an
//     error (the Python client sends it from its exception hook).
//
// Agent to job, each with a fresh Seq; the job answers each command with
// exactly one message carrying the same Seq (Suspended, Resumed, Saved or
// Error), carried out at a mini-batch boundary, that is inside the client's
// per-mini-batch call:
//   - Suspend: save the state to host memory (the Save hook into a buffer,
//     or the Offload hook), let the Release hook free the accelerator, answer
//     Suspended (Done, Bytes, SaveSeconds, Released) and wait for the next
//     command. At, when positive, delays the suspension to the first boundary
//     with Done >= At, so that the ranks of a gang stop at the same one.
//   - Resume: only while suspended. Restore the state (Load from the buffer,
//     or Reload), answer Resumed (Done, LoadSeconds) and continue.
//   - Checkpoint: write a checkpoint to GANDIVA_CHECKPOINT_DIR (from the
//     host-memory copy when suspended), answer Saved; with Exit, then end the
//     process with status 0 (the job is being migrated or suspended to disk),
//     otherwise continue (or stay suspended).
//
// The agent sends at most one command at a time and waits for its answer.
//
// # Leases (fencing)
//
// A job whose Hello sets Leases is also sent Lease messages (not commands:
// no Seq, no answer), the first right after its Hello and then at least
// every quarter of the lease: Lease is how many more seconds the agent's
// hold on the job stands (the agent's lease with the server, counted from
// the start of the last request the server answered). The client, counting
// on its own monotonic clock from when it read the message, stops at its
// next mini-batch boundary (or at once while suspended) with ErrAgentLost
// once that time has passed without a newer Lease: its agent is frozen or
// cut off, and the server restarts the job elsewhere after its node
// time-out, which is longer than the lease. The client reads Lease
// messages as they come, not only at boundaries, so they never queue up
// behind a long mini-batch. An agent sends none to a client whose Hello did
// not set Leases (an older client answers unknown kinds with an Error).
//
// # Epochs
//
// EnvAttempt is the attempt's epoch: the server numbers every new attempt
// of a job (a restart elsewhere, a migration) above all earlier ones, and
// keeps the numbers in its replicated state, so they grow across server
// restarts too. A checkpoint records the epoch of the attempt that wrote
// it (Meta.Attempt), and WriteCheckpoint refuses, under the directory's
// lock, to replace a checkpoint of a later epoch (ErrStaleCheckpoint):
// a copy of the job that has been superseded can never overwrite its
// successor's state.
package protocol

import (
	"encoding/json"
	"fmt"
	"math"
)

// Version is the protocol version a client announces in Hello.
const Version = 1

// The environment variables the agent sets for a job process. The agent
// removes every other GANDIVA_* variable it inherited, so a job never sees
// the agent's credentials.
const (
	// EnvFD is the number of the inherited socket's file descriptor.
	EnvFD = "GANDIVA_FD"
	// EnvJob is the job's name; EnvAttempt the attempt's epoch (a positive
	// integer, greater for every later attempt of the job: see Epochs).
	EnvJob     = "GANDIVA_JOB"
	EnvAttempt = "GANDIVA_ATTEMPT"
	// EnvCheckpointDir is the directory for checkpoints (shared storage
	// when jobs migrate between nodes).
	EnvCheckpointDir = "GANDIVA_CHECKPOINT_DIR"
	// EnvRestore is "1" when the job must start from the checkpoint in
	// EnvCheckpointDir if there is one.
	EnvRestore = "GANDIVA_RESTORE"
	// EnvCheckpointEvery is the number of seconds between periodic
	// checkpoints the client takes by itself; absent or 0: none.
	EnvCheckpointEvery = "GANDIVA_CHECKPOINT_EVERY"
	// EnvReportEvery is the number of seconds between Progress messages
	// (default DefaultReportEvery).
	EnvReportEvery = "GANDIVA_REPORT_EVERY"
	// EnvGPUs lists the node-local GPU indices given to the job, comma
	// separated (also in CUDA_VISIBLE_DEVICES, which frameworks read).
	EnvGPUs = "GANDIVA_GPUS"
	// EnvPreRun is "1" when this run is the pre-run of a new job's first
	// mini-batch (on one GPU, to catch user errors cheaply): the client
	// stops the job, with status 0, once that mini-batch is done and
	// reported.
	EnvPreRun = "GANDIVA_PRERUN"
	// EnvHold is "1" when the agent started the job ahead of its turn (a
	// warm start): the client holds the job at its first mini-batch
	// boundary, as if a Suspend with Seq 0 had come with the process (it
	// answers Suspended with Seq 0), and waits for a command (Resume).
	EnvHold = "GANDIVA_HOLD"

	// EnvAgentSocket is the agent's Unix socket for this pod (attached
	// mode; the same name as internal/kube/shared.EnvSocket).
	EnvAgentSocket = "GANDIVA_AGENT_SOCKET"
	// EnvPodUID, EnvPodName and EnvPodNamespace name the pod in an
	// attached Hello.
	EnvPodUID       = "GANDIVA_POD_UID"
	EnvPodName      = "GANDIVA_POD_NAME"
	EnvPodNamespace = "GANDIVA_POD_NAMESPACE"
	// EnvAttachTimeout is how many seconds an attached client tries to
	// reach its agent and be welcomed (default DefaultAttachTimeout).
	EnvAttachTimeout = "GANDIVA_ATTACH_TIMEOUT"
)

// DefaultAttachTimeout is the default of EnvAttachTimeout, in seconds.
const DefaultAttachTimeout = 120.0

// DefaultReportEvery is the Progress period when EnvReportEvery is absent.
const DefaultReportEvery = 1.0

// Kind is the type of a message.
type Kind string

// Messages from the job to the agent.
const (
	Hello     Kind = "hello"
	Progress  Kind = "progress"
	Suspended Kind = "suspended"
	Resumed   Kind = "resumed"
	Saved     Kind = "saved"
	Error     Kind = "error"
)

// Commands from the agent to the job.
const (
	// Welcome answers an attached Hello (it is not a command: no Seq, no
	// answer).
	Welcome    Kind = "welcome"
	Suspend    Kind = "suspend"
	Resume     Kind = "resume"
	Checkpoint Kind = "checkpoint"
	// Lease renews the agent's hold on the job (see Leases); it is not a
	// command: no Seq, no answer.
	Lease Kind = "lease"
)

// Msg is one message, in either direction. Which fields are meaningful
// depends on Kind (see the package comment); the others are zero.
type Msg struct {
	Kind Kind `json:"kind"`
	// Seq numbers a command; the answer carries the same Seq.
	Seq uint64 `json:"seq,omitempty"`

	// Hello.
	Version int  `json:"version,omitempty"`
	PID     int  `json:"pid,omitempty"`
	Hooks   bool `json:"hooks,omitempty"`
	// Leases says the client understands Lease messages.
	Leases bool `json:"leases,omitempty"`
	// PodUID and Pod ("namespace/name") identify an attached job's pod.
	PodUID string `json:"pod_uid,omitempty"`
	Pod    string `json:"pod,omitempty"`

	// Welcome: the node-local GPU indices the job may use, and whether it
	// holds at its first boundary.
	GPUs []int `json:"gpus,omitempty"`
	Hold bool  `json:"hold,omitempty"`

	// Done is the job's mini-batches done so far, counting those restored
	// from a checkpoint.
	Done int64 `json:"done"`
	// IterTime is the mean seconds per mini-batch since the last Progress.
	IterTime float64 `json:"iter_time,omitempty"`
	// Metric is the job's latest quality metric, when it reports one.
	Metric *float64 `json:"metric,omitempty"`

	// At: see Suspend.
	At int64 `json:"at,omitempty"`
	// Exit: see Checkpoint.
	Exit bool `json:"exit,omitempty"`

	// Bytes is the size of the saved state (host copy or checkpoint).
	Bytes int64 `json:"bytes,omitempty"`
	// Released says the accelerator memory was freed (a Release or
	// Offload hook ran).
	Released bool `json:"released,omitempty"`
	// SaveSeconds and LoadSeconds time the job's hooks.
	SaveSeconds float64 `json:"save_s,omitempty"`
	LoadSeconds float64 `json:"load_s,omitempty"`
	// LeaseSeconds (Lease): how many more seconds the agent's hold on the
	// job stands, from when the message is read.
	LeaseSeconds float64 `json:"lease_s,omitempty"`
	// Path is the committed checkpoint's metadata file.
	Path string `json:"path,omitempty"`
	// Message explains an Error.
	Message string `json:"message,omitempty"`
}

// MaxLine bounds one encoded message; longer lines are a protocol error.
const MaxLine = 1 << 16

// Encode returns m as one line of JSON, newline included. Non-finite
// numbers, which JSON cannot carry, are dropped (a diverging loss is NaN):
// Metric becomes absent and the other floats 0.
func Encode(m Msg) []byte {
	if m.Metric != nil && !finite(*m.Metric) {
		m.Metric = nil
	}
	for _, f := range []*float64{&m.IterTime, &m.SaveSeconds, &m.LoadSeconds, &m.LeaseSeconds} {
		if !finite(*f) {
			*f = 0
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		// Only plain, finite fields are left: Marshal cannot fail.
		panic(fmt.Sprintf("protocol: encoding %s: %v", m.Kind, err))
	}
	return append(b, '\n')
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// Decode parses one line (with or without its newline).
func Decode(line []byte) (Msg, error) {
	var m Msg
	if len(line) > MaxLine {
		return m, fmt.Errorf("message of %d bytes exceeds %d", len(line), MaxLine)
	}
	if err := json.Unmarshal(line, &m); err != nil {
		return m, fmt.Errorf("decoding message: %w", err)
	}
	if m.Kind == "" {
		return m, fmt.Errorf("message without kind")
	}
	if m.Done < 0 || m.Bytes < 0 || m.At < 0 || m.LeaseSeconds < 0 {
		return m, fmt.Errorf("%s message with a negative count", m.Kind)
	}
	for _, g := range m.GPUs {
		if g < 0 {
			return m, fmt.Errorf("%s message with a negative GPU index %d", m.Kind, g)
		}
	}
	return m, nil
}
