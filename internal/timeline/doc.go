// Package timeline records what the scheduler did to every GPU and every job
// over time, for the dashboard (internal/ui), the simulator's HTML report and
// what-if comparisons: one row per GPU with the segments of the jobs that held
// it (running, packed, migrating, in their pre-run or start-up, and suspended
// jobs whose state is parked on it), and one lane per job with its state over
// time (queued, running, suspended, ...). Per-user shares of the cluster over
// time (Gandiva_fair's view) are computed from the same record.
//
// A Recorder is fed the engine's snapshot (cluster.Snapshot) after each
// engine call that may change state: it is what every driver of the engine
// has (the simulator, the live server, tests). It is pure: no clock, no I/O,
// no goroutines; the time of a change is the snapshot's Now. It is exact:
// a segment starts and ends at the Now of the first observation that sees the
// change, so a driver that observes after every event and every round (or,
// as the simulator does, after every round, each event being followed by a
// round at its own time) gets the engine's own times. It is bounded: memory
// grows with the number of changes, never with the number of observations,
// and unchanged state costs nothing to record.
//
// What a segment is, and how it is drawn, is data: a Kind is a name, and
// KindInfo gives its label, colour, drawing style and whether it holds GPUs.
// Classify maps a job's state to a kind; a driver with more to show (a
// start-up phase, say) passes its own.
//
// Ownership: a Recorder copies what it keeps from a snapshot and keeps no
// pointer into the engine's state. It is not safe for concurrent use; its
// owner serialises Observe and the readers (Data, Shares), as the live
// server does for its engine.
package timeline
