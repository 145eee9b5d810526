// Package agent is the node agent: it registers its node's GPUs with the
// server, long-polls the assignments the server wants on the node, and makes
// its job processes match them through package jobproc (start, suspend at a
// mini-batch boundary, resume, checkpoint for a migration, kill), reporting
// every outcome and the jobs' progress back.
//
// # Contracts
//
//   - Level-triggered: an assignment list is the whole desired state of the
//     node. A process no assignment names is a stray (an older attempt) and
//     is killed. An attempt is started at most once: a restart always has a
//     new attempt number from the server.
//   - Every outcome is reported, and reports are kept until the server has
//     recorded them (re-sent with the next registration after a server
//     restart), so none is lost. The server ignores reports it has seen
//     (by sequence number per agent process).
//   - The lease: an agent that cannot reach the server for longer than the
//     lease the server gave it kills its jobs, because after a longer
//     silence the server restarts them elsewhere and a job must never run
//     twice at the same time. The lease runs from the sending of the last
//     request the server answered. Job processes also die with the agent
//     (jobproc's parent-death signal); a restarted agent registers with a
//     new incarnation and the server restarts its jobs from their
//     checkpoints.
//   - Fencing when the agent cannot act (stopped, hung): while the lease
//     stands the agent renews it to each job's in-job client
//     (jobproc.Proc.Renew), which stops the job at its next boundary once
//     the lease has passed unrenewed, and to each job process's guard
//     (guard.go), a process outside the agent that then kills the job's
//     process group (and cgroup). Programs that run agents call GuardMain
//     first in main.
//   - Pre-runs: an assignment with PreRun runs the job until its first
//     mini-batch (a progress report from the in-job client) and is then
//     stopped and reported finished; a job without the client passes once
//     it has run PreRunWindow without failing.
//   - Logs stay on the node (WORK/logs/JOB/ATTEMPT-rRANK.log); the server
//     fetches them from the agent's log server with a per-registration key.
//   - Jobs never run as root nor as the agent: each runs as the OS account
//     its user maps to (RunAs), with no supplementary group, a scrubbed
//     environment, and working and checkpoint directories private to that
//     account; a job's own working directory is never created. An agent
//     that is not root runs as itself only the jobs of RunAs.SelfUsers.
//   - Identity: the agent token only enrols the node; the agent keeps the
//     node's credential (CredentialFile, 0600) and uses it for every other
//     call, across restarts. A refused credential stops the agent.
//   - Leaving: when Run's context ends (SIGTERM), the agent checkpoints its
//     jobs within Config.Grace and tells the server it leaves, so that
//     their work is requeued at once. It keeps polling (starting nothing)
//     until then, so the lease holds for the whole grace while the server
//     can be reached.
//
// agent.go holds the agent's loop (enrol, register, poll, reconcile,
// report, leave); worker.go one assignment's worker, which drives a
// jobproc.Proc; runas.go the accounts jobs run as and their environment;
// dirs.go the directories and who may read them; gpu.go GPU discovery;
// logs.go the log server.
package agent
