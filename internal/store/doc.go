// Package store is the live scheduler's embedded database, on bbolt: one
// file, one writer, every write transaction synced to disk before Commit
// returns. The server acknowledges nothing (a submission, a cancel, an
// agent's report) before the transaction that records it has committed.
//
// What it holds, one bucket each:
//
//   - meta: the epoch (the wall-clock instant that is time 0 of the engine,
//     so engine time never goes backwards across restarts), the policy the
//     log was written under, a boot counter;
//   - users and tokens: API tokens are stored as SHA-256 hashes, never in
//     clear; each token belongs to a user (or is an agent token);
//   - jobs: each job's record as submitted (spec and launch details), keyed
//     by job ID;
//   - log: the server's write-ahead log, the inputs of its deterministic
//     state machine (submissions, cancels, agent reports, node changes,
//     scheduling rounds) in order; replaying it rebuilds the engine, the
//     policy's own state and the executor exactly;
//   - changes: every job state change the log produced (job, time, from,
//     to, reason), for audit and to detect a replay that diverges;
//   - snapshots: the two newest snapshots of the server's state, each as of
//     a log entry and with a CRC of its data (snapshot.go). Saving one
//     deletes the log entries the older of the two includes (compaction),
//     so the log holds the entries after it only, and if the newest cannot
//     be read the older one and those entries still rebuild the state; job
//     records and changes are never deleted.
//
// The store does not interpret log entries, job records, changes or
// snapshots: they are opaque documents of package server. It does interpret users and
// tokens, because authentication must not depend on the server's state
// machine.
//
// A damaged file is never taken for a new store nor allowed to crash the
// process: Open refuses an empty, truncated, damaged or foreign file with an
// error wrapping ErrDamaged that names it and says what to do, after
// reading every page; damage met later fails the transaction (and every
// later one) with ErrDamaged instead of a panic (guard.go).
//
// A DB is safe for concurrent use. Only one process may open a database file
// at a time (bbolt takes a file lock); Open fails after Options.LockTimeout.
package store
