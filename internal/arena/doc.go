// Package arena replays a job trace through a real local Kubernetes control
// plane (package cplane: etcd, kube-apiserver, the Job controller and kwok
// GPU nodes), once per scheduler under test, each on a fresh plane with
// identical nodes, and measures what each scheduler made of it from the API
// server's record: job completion times, GPU utilisation, fairness between
// namespaces, preemptions and the work they lost, submission to first
// binding, and the scheduler's own CPU time and peak memory.
//
// The pure parts take trace time as an argument and do no I/O: the plan
// (plan.go: the trace's jobs as Kubernetes Jobs, the cluster as nodes), the
// progress tracker (progress.go: a job progresses only while all its pods
// run, at the simulator's rate for where they run, and keeps what its last
// checkpoint saved when they stop) and the metrics (metrics.go, from a
// Record). The player (player.go) and the schedulers' processes
// (schedulers.go) are the I/O around them. docs/ARENA.md says how to run it
// and what it measured.
package arena
