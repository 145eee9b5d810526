// Package server is the live scheduler's server: the same engine and
// policies as the simulator, driven by the API and by node agents instead
// of a trace and a performance model.
//
// # Shape
//
// Three parts, each in its file, with the simulator's shape (driver,
// engine, executor), which Kubernetes' executor (package kube) shares:
//
//   - The state machine (machine.go): replicated and deterministic. Its
//     only inputs are log entries (entry.go): a submission, a cancel, an
//     agent's registration or reports, a node declared lost, a setting, a
//     scheduling round, a retention (retain.go). Each becomes engine events or a round; the machine
//     keeps the engine with its policy, the jobs' records and histories
//     (the state changes it records), and the per-job records package
//     metrics summarises (Server.Records). No clock, no I/O: replaying the
//     log rebuilds it.
//   - The live executor (executor.go): the engine.Executor. It turns
//     applied actions into workers and per-node assignments, decides when
//     each may take effect, and turns the agents' reports into engine
//     events. It is driven by the machine and rebuilt by the same replay;
//     like the simulator's executor (internal/sim/exec.go) it never calls
//     the engine.
//   - The shell (server.go): the loop, the store, the API and the clock.
//     One goroutine (Run) owns the machine. It batches requests, validates
//     each and applies it as an entry, runs a round when events arrived or
//     the policy's wake-up time came, commits the batch (the entries, new
//     job records and the resulting state changes) to the store in one
//     synced transaction, and only then answers the callers and wakes the
//     agents' long polls. Readers (list, get) take a read lock and so see
//     committed state only. An entry is encoded before it is applied, so
//     what is applied is what is logged; an entry that fails to apply (the
//     caller gets the error; the server's own entries are logged) is
//     counted in gandiva_log_entries_failed_total and stays in the log,
//     where a replay fails the same way.
//
// Time: the engine's time is seconds since the store's epoch (persisted, so
// it never goes backwards across restarts), taken from the wall clock by the
// loop alone. A wake-up the policy asked for runs at exactly that time.
//
// # The live executor
//
// An applied action becomes workers: one per node of the gang (rank, world
// size, rank 0's node as the master), each with what the agent should do
// (run, suspend, checkpoint, kill). Attempts are numbered by the log entry
// that created them, so every process start has an identity no other start
// shares. The agents long-poll their node's assignments (level-triggered:
// the whole desired state) and report outcomes, which become engine events
// (profile, finish, fail, action done).
//
// Safety (no job runs twice at the same time): a worker that is to start a
// new process is published to its agent only when (1) its node has
// registered with this server process, (2) no other process of the job is
// alive anywhere (an earlier attempt being checkpointed or killed, its
// pre-run, a stray an agent reported), and (3) no process leaving its GPUs
// (being suspended, checkpointed or killed) is still on them. The rule is
// package handoff's fence, which the Kubernetes executor shares: the
// executor renders its workers and strays as the fence's occupants
// (wanted, told, acknowledged), with (2) as its kin fact. Suspends,
// checkpoints and kills are published at once. Agents kill processes no
// assignment names, and kill everything when they lose the server for
// longer than their lease, which is shorter than the node time-out after
// which the server restarts their jobs elsewhere.
//
// # Recovery
//
// The loop snapshots the whole replicated state (machine, executor,
// timeline, engine, the policy's own state) now and then: once the entries
// since the last snapshot took Config.SnapshotAfter to apply, or number
// Config.SnapshotEvery, and never spending more of its time on snapshots
// than on entries. The store keeps the two newest snapshots and the log
// entries after the older of them only (compaction; the change history is
// kept whole, and job records until retention replaces an ended job's
// with its summary: retain.go). Open reads the newest usable snapshot
// into a fresh machine and replays the entries after it: the engine, the
// policy's own state and the workers come back exactly as they were (the
// changes of the replayed entries are compared with the recorded history,
// and differences are logged and exported as gandiva_replay_divergences).
// A snapshot that cannot be read (CRC, or a build that cannot decode it)
// is logged and skipped for the older one; with neither, the whole log is
// replayed if the store still has it, and otherwise Open fails saying so.
// With OpenAsync the API answers what needs no state (whoami, health,
// tokens) during the recovery and holds the rest until it is done.
// Nothing new starts on a node until its agent registers again; the
// agent's registration carries the processes it runs
// and the reports the server never acknowledged, so an exit that happened
// while the server was down is applied once. A node that does not return
// within the node time-out is declared lost and its jobs restart elsewhere
// from their last checkpoints.
//
// # Security
//
// Authentication and per-user authorisation are in package api and here:
// tokens are checked against the store (hashed), users see and cancel only
// their own jobs unless they are admins, and a job is charged to its
// submitter's user, never to a name the request carries.
package server
