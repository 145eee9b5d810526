// Package eta estimates when jobs that wait for GPUs will start, and when
// every job will finish, by forking the cluster's state into the simulator
// and running it forward under the same policy: the same engine and policy
// code that schedules the live cluster decides the order, and the
// simulator's performance model the costs.
//
// What the fork knows is what a live system knows (State): each job's
// gang, its state, the mini-batches it has done, its measured seconds per
// mini-batch and how long it has run; its length when its submitter
// declared it (iters × iter_time). A job of unknown length has what
// remains of it drawn from a prior conditioned on how long it has already
// run: its user's own jobs when enough of them finished (UserHistory: a
// Kaplan–Meier estimate counting the user's running jobs as censored),
// else the run times of the Philly trace (PhillyPrior). Then Predict runs
// several forks, each with its own draw of the unknown lengths (the same
// draws for the same jobs at every call), and gives each job's start and
// finish as a median with its p10–p90 band. Every estimate says which
// assumption it rests on (Note).
// Nothing is known of jobs not yet submitted, so an estimate assumes none
// arrives; under a policy that lets newer jobs pass (time-slicing, LAS),
// that is the largest source of error. The forks' own bands leave it out,
// with the prior's mismatch and the fork's own error, and hold the truth
// far less than 80% of the time; Config.Widen widens them by a conformal
// calibration fitted per policy on the Philly trace (calibrate.go,
// WideningFor), which the live server and the Kubernetes scheduler use.
//
// The fork (fork.go) is the smallest one that needs nothing of the engine
// but its public API: the live jobs are submitted afresh, at the fork's
// time, with the work that remains to them, in their order of submission;
// jobs that held GPUs are resubmitted first. The policy's own state (a
// job's attained service under Tiresias, Gandiva's turn order) starts
// afresh, and running jobs are started again (paying the model's start-up
// cost). An exact fork would carry the engine's state and the policies' own
// over (engine.Export, Restore and Fork); Predict does not use them yet.
//
// Predict is pure: no clock, no goroutines. Its cost is a simulation of the
// live jobs up to the horizon (Config.Horizon), once, or Config.Samples
// times when a length is unknown; callers run it off their hot paths (the
// live server: in the background, at most every few seconds, cached) and
// Measure checks its accuracy and its bands' calibration in the
// simulator.
package eta
