// Package cluster holds the plain data that every other part of Gandiva
// shares: GPU types, servers grouped in racks and InfiniBand domains, job
// specifications, the runtime record of a job with its state machine, the
// actions a policy may ask for, the events that drive the engine, and the
// snapshot a policy reads.
//
// The package does no I/O except the cluster-spec readers in spec.go, which
// take an io.Reader, and it never reads a clock: every time is a float64 count
// of seconds since the epoch of the run (the first submission of a trace in
// the simulator, the server's start live).
//
// Ownership: the engine owns every *Job and the per-GPU and per-server state
// reachable from a Snapshot. Policies and placement code read them during a
// call to Schedule and must neither modify them nor keep pointers to them
// after the call returns. Digest fingerprints a snapshot so that a check
// (engine Options.CheckSnapshot) can tell whether, and where, a policy
// wrote to it.
package cluster
