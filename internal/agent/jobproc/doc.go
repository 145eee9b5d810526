// Package jobproc runs one job's workers on one node and carries out the
// Gandiva mechanisms on them: start, suspend, resume, checkpoint (for
// migration) and kill. It is what the node agent (internal/agent) uses; it
// knows nothing of the server, the engine or the API.
//
// # What it owns
//
// A Proc is one job attempt on this node: the job's process (started in its
// own process group, with CUDA_VISIBLE_DEVICES, its working and checkpoint
// directories, its stdout and stderr appended to a log file, and killed if
// the agent dies), the local connection to the in-job client (package
// client, python/gandiva; protocol in client/protocol), and the state
// machine below. A Proc may run several OS processes over its life (a resume
// on other GPUs restarts the process from a checkpoint) but never two at
// once.
//
//	Start ──► running ◄──────── Resume ───────────┐
//	            │  │                              │
//	            │  └──────── Suspend ────────► suspended (memory, disk or signal)
//	            │                                 │
//	            │ exits, Checkpoint, Kill         │ Checkpoint, Kill, exits
//	            └──────────► exited ◄──────────────┘
//	               (finished, failed, killed, checkpointed)
//
// Save (a checkpoint that the job continues after) keeps the state. A
// Resume on other GPUs, or after a suspension to disk, restarts the process
// with Restore from a checkpoint.
//
// # With and without the in-job client
//
// A job that uses the client is suspended at a mini-batch boundary: the
// client saves its state to host memory through the job's hooks, frees the
// GPU and waits; on Resume it restores the state and continues. Checkpoint
// makes it write its state to the checkpoint directory and exit, so that
// another Proc, started with Restore, continues from there: that is
// migration. A job that has not (yet) said hello through the client is
// suspended with SIGSTOP sent to its process group and resumed with SIGCONT
// (its GPU memory stays allocated: Suspension.Mode says so), and
// Checkpoint kills it, so its migration is a restart from scratch
// (Exit.Outcome is Checkpointed with Exit.Restart set). Both fall-backs are
// reported as such, never disguised.
//
// # Contracts
//
//   - Every method is safe for concurrent use. Requests are carried out one
//     at a time; a request made while another is in progress fails with
//     ErrBusy, except Kill, which always goes through.
//   - A method's context bounds only how long the caller waits. When it ends
//     first, the method returns the context's error but the request stands:
//     the job still acts on it at its next boundary, and the Events channel
//     reports the outcome.
//   - Events delivers every state change, in order, and is closed after the
//     single Exited event. Progress events are coalesced (only the latest is
//     kept) when the reader falls behind; no other event is dropped. Reading
//     Events is optional.
//   - "The job failed" is a result (Exit), not an error: methods return
//     errors only for requests that could not be carried out.
//   - A Proc's process never outlives the agent: it is started with a
//     parent-death signal (SIGKILL), and the client stops the job when the
//     connection to the agent closes.
//   - No descendant outlives its job's process: where the node has cgroup
//     v2, each process starts in a cgroup of its own, killed as a whole
//     before its exit is reported (a child that left the process group,
//     with setsid or a double fork, included); what a dead agent's jobs
//     left is killed at the next agent's start (Containment). Elsewhere
//     the process group is killed. See contain.go.
//   - Files of the job's are hostile: the agent, maybe root, looks into
//     the job's checkpoint directory only through
//     protocol.ProbeCheckpoint, and off the loop, so that Kill never
//     waits for it (probe.go). It never looks at the working directory of
//     a job that runs as another account: the job enters it as itself.
//
// # Files
//
// jobproc.go holds the contract's types (Spec, State, Exit, Event, Info)
// and Start; attempt.go holds Proc, one attempt, and the loop that carries
// out its requests (the state machine above); spawn.go starts one OS
// process of an attempt (environment, socket pair, signals); contain.go
// keeps its descendants from outliving it (cgroups); probe.go looks at
// the checkpoint directory for a restart; access.go checks, as a job's
// account, that it can enter its working directory and run its command
// (CheckAccess: gandiva submit asks it before submitting); attach.go
// makes a Proc over a connection that a job started by someone else made
// to the agent (Kubernetes shared mode: no process to signal, the end is
// the connection closing; see Attach).
package jobproc
