package cluster

import "math/bits"

// GPUState is the engine's view of one GPU.
type GPUState struct {
	// Jobs are the running or migrating jobs that hold this GPU, in ID order.
	Jobs []JobID
	// MemGiB is the sum of their peak memory.
	MemGiB float64
}

// ServerState is the engine's view of one server.
type ServerState struct {
	// Free has bit i set when the server's i-th GPU is held by no job.
	Free uint64
	// Up is false while the node is lost (agent gone, simulated failure).
	Up bool
	// Drained is set when the failure policy blacklisted the node.
	Drained bool
	// Reason says why the node is down or drained.
	Reason string
	// SuspendedGiB is the host memory taken by suspended jobs' state.
	SuspendedGiB float64
}

// NumFree is the number of free GPUs.
func (s *ServerState) NumFree() int { return bits.OnesCount64(s.Free) }

// Schedulable reports whether new work may be placed on the server.
func (s *ServerState) Schedulable() bool { return s.Up && !s.Drained }

// Snapshot is what a policy sees in one call to Schedule. Everything reachable
// from it is owned by the engine, read-only for the policy, and valid only
// during the call.
type Snapshot struct {
	Now     float64
	Cluster *Cluster
	// Jobs holds every job ever submitted, indexed by JobID.
	Jobs []*Job
	// GPUs and Servers are indexed by GPUID and ServerID.
	GPUs    []GPUState
	Servers []ServerState
	// Events are those applied since the previous call, in order.
	Events []Event
	// Rejected are the actions of the previous call that the engine
	// refused, then those that an executor reported refused since, in
	// that order, each with its code (retry later, never, stale) and
	// reason. An action of the previous call not listed here was applied:
	// its effect is in the jobs' states. A policy that keeps its own
	// record of what it asked for (a job taken out of its queue when it
	// started it, say) sets a refused action's job back as the job's state
	// shows it.
	Rejected []Rejection
	// active lists non-terminal jobs in ID order.
	active []*Job
	// FreeGPUs is the number of free GPUs on schedulable servers.
	FreeGPUs int
	// Free indexes schedulable servers by free GPU count.
	Free *FreeIndex
	// Allowed, when not nil, reports whether job j may run on server sv:
	// an executor's own rules, such as Kubernetes' node selectors, taints
	// and shared nodes. Nil: anywhere. Policies place a job only where
	// MayRun (place.Pool.Only does it for a placement); the engine
	// refuses a placement elsewhere (engine.Options.Constraints).
	Allowed func(j JobID, sv ServerID) bool
	// Unit, when not nil, is the GPUs of one pod of job j (at least 1):
	// an executor that runs a job as pods of several GPUs each places it
	// in whole pods, so the job's GPUs on any one server must be a
	// multiple of Unit(j). Nil: 1 (any count). place.Pool.Only places in
	// whole pods; the engine refuses a placement that is not.
	Unit func(j JobID) int
}

// MayRun reports whether job j may run on server sv (see Allowed).
func (s *Snapshot) MayRun(j JobID, sv ServerID) bool { return s.Allowed == nil || s.Allowed(j, sv) }

// PodUnit is the GPUs of one pod of job j (see Unit): 1 without Unit.
func (s *Snapshot) PodUnit(j JobID) int {
	if s.Unit == nil {
		return 1
	}
	return max(s.Unit(j), 1)
}

// Fill sets a snapshot's fields; the engine reuses one Snapshot across
// rounds. active must hold the non-terminal jobs in ID order; free must
// index the servers' free GPUs (nil: computed here).
func (s *Snapshot) Fill(now float64, c *Cluster, jobs []*Job, gpus []GPUState, servers []ServerState, events []Event, active []*Job, free *FreeIndex) {
	// (field by field: the engine fills its snapshot at every round, and
	// *s = Snapshot{...} built the whole struct on the stack, then copied it;
	// every field is set here)
	s.Now, s.Cluster, s.Jobs, s.GPUs, s.Servers = now, c, jobs, gpus, servers
	s.Events, s.active, s.Free = events, active, free
	s.Rejected = nil // the engine sets its own after Fill
	s.Allowed, s.Unit = nil, nil
	if free == nil {
		s.Free = &FreeIndex{}
		for i := range servers {
			n := 0
			if servers[i].Schedulable() {
				n = servers[i].NumFree()
			}
			s.Free.Set(ServerID(i), n, c.Servers[i].NumGPUs)
		}
	}
	s.FreeGPUs = s.Free.Total()
}

// Active returns the non-terminal jobs in ID order. The slice is the engine's; do not modify it.
func (s *Snapshot) Active() []*Job { return s.active }

// Job returns the job with the given ID.
func (s *Snapshot) Job(id JobID) *Job { return s.Jobs[id] }

// IsFree reports whether no job holds GPU g.
func (s *Snapshot) IsFree(g GPUID) bool { return len(s.GPUs[g].Jobs) == 0 }

// FreeOn returns the free GPUs of server sv, in order, appended to dst.
func (s *Snapshot) FreeOn(dst []GPUID, sv ServerID) []GPUID {
	first := s.Cluster.Servers[sv].FirstGPU
	for m := s.Servers[sv].Free; m != 0; m &= m - 1 {
		dst = append(dst, first+GPUID(bits.TrailingZeros64(m)))
	}
	return dst
}
