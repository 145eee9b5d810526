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
//     twice at the same time. Job processes also die with the agent
//     (jobproc's parent-death signal); a restarted agent registers with a
//     new incarnation and the server restarts its jobs from their
//     checkpoints.
//   - Pre-runs: an assignment with PreRun runs the job until its first
//     mini-batch (a progress report from the in-job client) and is then
//     stopped and reported finished; a job without the client passes once
//     it has run PreRunWindow without failing.
//   - Logs stay on the node (WORK/logs/JOB/ATTEMPT-rRANK.log); the server
//     fetches them from the agent's log server with a per-registration key.
//
// agent.go holds the agent's loop (register, poll, reconcile, report);
// worker.go one assignment's worker, which drives a jobproc.Proc; gpu.go
// GPU discovery; logs.go the log server.
package agent
