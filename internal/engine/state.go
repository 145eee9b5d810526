package engine

import (
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/codec"
	"github.com/gandiva-sched/gandiva/internal/policy"
)

// State is a copy of an engine's state, what Restore needs to build an
// engine that behaves exactly as the original from then on: given the same
// events and rounds, the same actions, the same decisions by the policy,
// the same job records. It is plain data, independent of the engine it
// came from (changing one changes nothing in the other), and encodes with
// package codec (the live server's snapshots; unexported fields of the job
// records included).
//
// It holds no configuration: the cluster, the executor, Options (and so
// the failure policy) are given to Restore again, and must be the same for
// an exact continuation. Nor does it hold what the engine derives from it
// (the index of names, the list of active jobs, the index of free GPUs).
type State struct {
	// Now is the engine's time: of the last event or round.
	Now float64
	// Jobs are every job record, by JobID: copies, every field (the
	// attained service the engine keeps unexported included). Their specs
	// are shared with the engine's: a spec never changes once submitted.
	Jobs []cluster.Job
	// GPUs and Servers are the per-GPU and per-server states, by ID.
	GPUs    []cluster.GPUState
	Servers []cluster.ServerState
	// Events are those applied since the last round, which the next
	// round's snapshot shows the policy.
	Events []cluster.Event
	// Pending are the engine's own actions for the next round (kills of
	// cancelled jobs and their pre-runs).
	Pending []Applied
	// Refused are the refusals the next round's snapshot shows the policy
	// (Snapshot.Rejected): the last round's own, then those reported with
	// Refused since, in order. Reported is how many of them, at the end,
	// were reported with Refused (Engine.Reported): a driver of a restored
	// engine with Reported above zero owes the policy a round. A state
	// written before refusals were kept has none.
	Refused  []Rejection
	Reported int
	// Retries are the jobs backing off after a failure (Round's wake-up).
	Retries []cluster.JobID
	// NodeFailures are, per server, the times of its recent infrastructure
	// failures (blacklisting counts them over FailurePolicy.NodeWindow).
	NodeFailures [][]float64
	Stats        Stats
	// WakeAt is the wake-up the last round asked for (Result.WakeAt), 0
	// if none: a driver of a restored engine calls Round then.
	WakeAt float64
	// StartUps is the start-up bookkeeping that the job records do not
	// hold (startup.go, warm.go).
	StartUps StartUpState
	// Policy names the engine's policy and PolicyState is its own state
	// (policy.MarshalState; nil for a policy that keeps none).
	Policy      string
	PolicyState []byte
}

// StartUpState is the engine's start-up state beyond the jobs': the last
// start-up measured per family, the families without the in-job client,
// the counters, and the kills of warm starts cooled since the last round.
// The jobs starting up and the warming jobs per GPU are derived from the
// job records.
type StartUpState struct {
	Families []FamilyStartUp // by Family
	Stats    StartUpStats
	Cooled   []Applied
}

// FamilyStartUp is what the engine remembers of a start-up family: its
// last measured start-up (0: none) and whether its processes said no in-job
// client's hello.
type FamilyStartUp struct {
	Family   string
	StartUp  float64
	NoClient bool
}

// WakeAt is the wake-up the last round asked for (its Result.WakeAt), 0
// before any round or if it asked for none.
func (e *Engine) WakeAt() float64 { return e.wakeAt }

// refs are the engine's objects a policy's state may point to.
func (e *Engine) refs() policy.Refs {
	return policy.Refs{Cluster: e.c, Snapshot: &e.snap, Jobs: e.jobs}
}

// Export copies the engine's state, its policy's included. It fails only
// when the policy's state cannot be encoded (policy.MarshalState). The
// engine is not changed; it is not safe to call concurrently with the
// engine's other methods.
func (e *Engine) Export() (*State, error) {
	refs := e.refs()
	refs.SizeHint = e.stateSize
	ps, err := policy.MarshalState(e.pol, refs)
	if err != nil {
		return nil, fmt.Errorf("engine: export: %w", err)
	}
	e.stateSize = len(ps)
	st := &State{Now: e.now, Jobs: make([]cluster.Job, len(e.jobs)), GPUs: make([]cluster.GPUState, len(e.gpus)),
		Servers: slices.Clone(e.servers), Events: slices.Clone(e.events), Retries: slices.Clone(e.retries),
		NodeFailures: make([][]float64, len(e.nodeErr)), Stats: e.stats, WakeAt: e.wakeAt, PolicyState: ps}
	if e.pol != nil {
		st.Policy = e.pol.Name()
	}
	for i, j := range e.jobs {
		st.Jobs[i] = copyJob(j)
	}
	for i := range e.gpus {
		st.GPUs[i] = cluster.GPUState{Jobs: slices.Clone(e.gpus[i].Jobs), MemGiB: e.gpus[i].MemGiB}
	}
	for i, ts := range e.nodeErr {
		st.NodeFailures[i] = slices.Clone(ts)
	}
	for _, a := range e.pending {
		st.Pending = append(st.Pending, copyApplied(a))
	}
	for _, r := range e.refused {
		st.Refused = append(st.Refused, copyRejection(r))
	}
	st.Reported = e.reported
	st.StartUps = StartUpState{Stats: e.sus}
	keys := slices.Sorted(maps.Keys(e.families))
	for f := range e.noClient {
		if _, ok := e.families[f]; !ok {
			keys = append(keys, f)
		}
	}
	slices.Sort(keys)
	for _, f := range keys {
		st.StartUps.Families = append(st.StartUps.Families, FamilyStartUp{Family: f, StartUp: e.families[f], NoClient: e.noClient[f]})
	}
	for _, a := range e.cooled {
		st.StartUps.Cooled = append(st.StartUps.Cooled, copyApplied(a))
	}
	return st, nil
}

// copyJob copies a job record, its lists included (not its spec, which
// never changes).
func copyJob(j *cluster.Job) cluster.Job {
	c := *j
	c.GPUs, c.Last = slices.Clone(j.GPUs), slices.Clone(j.Last)
	c.Profile.Samples = slices.Clone(j.Profile.Samples)
	for i := range c.Profile.Samples {
		c.Profile.Samples[i].Neighbors = slices.Clone(c.Profile.Samples[i].Neighbors)
	}
	c.Profile.Solo = slices.Clone(j.Profile.Solo)
	return c
}

// clone is slices.Clone(s), or s itself when it is owned (Adopt).
func clone[S ~[]E, E any](own bool, s S) S {
	if own {
		return s
	}
	return slices.Clone(s)
}

// copyRejection copies a refusal, its action's GPUs included.
func copyRejection(r Rejection) Rejection {
	r.Action.GPUs = slices.Clone(r.Action.GPUs)
	return r
}

func copyApplied(a Applied) Applied {
	a.GPUs, a.Prev = slices.Clone(a.GPUs), slices.Clone(a.Prev)
	return a
}

// Restore builds an engine over cluster c from st (Export's, or decoded
// from a snapshot), with policy pol, executor exec and options opts. pol
// must be a fresh policy of st's policy's type and configuration: its state
// is restored from st.PolicyState. c must be the cluster st was exported
// from, or a copy (same servers in the same order). The engine then
// behaves exactly as the one st was exported from. st is not kept (it may
// be restored again).
func Restore(c *cluster.Cluster, pol policy.Policy, exec Executor, opts Options, st *State) (*Engine, error) {
	return restore(c, pol, exec, opts, st, false)
}

// Adopt is Restore for a state handed over to the engine, such as one
// just decoded from a snapshot: the engine takes st's job records and
// lists as its own instead of copying them (a restart does not allocate
// the jobs twice). The caller must not use st, nor anything it holds,
// afterwards; on an error st is unchanged.
func Adopt(c *cluster.Cluster, pol policy.Policy, exec Executor, opts Options, st *State) (*Engine, error) {
	return restore(c, pol, exec, opts, st, true)
}

// restore is Restore (own: Adopt).
func restore(c *cluster.Cluster, pol policy.Policy, exec Executor, opts Options, st *State, own bool) (*Engine, error) {
	if err := st.check(c); err != nil {
		return nil, fmt.Errorf("engine: restore: %w", err)
	}
	if pol != nil && st.Policy != "" && pol.Name() != st.Policy {
		return nil, fmt.Errorf("engine: restore: the state is of policy %s, not %s", st.Policy, pol.Name())
	}
	e := New(c, pol, exec, opts)
	e.now, e.stats, e.wakeAt = st.Now, st.Stats, st.WakeAt
	e.jobs = make([]*cluster.Job, len(st.Jobs))
	e.byName = make(map[string]cluster.JobID, len(st.Jobs))
	for i := range st.Jobs {
		if own {
			e.jobs[i] = &st.Jobs[i]
		} else {
			j := copyJob(&st.Jobs[i])
			e.jobs[i] = &j
		}
		j := e.jobs[i]
		e.byName[j.Spec.Name] = j.ID
		if !j.State.Terminal() {
			e.active = append(e.active, j)
		}
	}
	for i := range st.GPUs {
		e.gpus[i] = cluster.GPUState{Jobs: clone(own, st.GPUs[i].Jobs), MemGiB: st.GPUs[i].MemGiB}
	}
	copy(e.servers, st.Servers)
	for i := range e.servers {
		e.nodeErr[i] = clone(own, st.NodeFailures[i])
		e.touch(cluster.ServerID(i))
	}
	e.events = clone(own, st.Events)
	e.retries = clone(own, st.Retries)
	for _, a := range st.Pending {
		if !own {
			a = copyApplied(a)
		}
		e.pending = append(e.pending, a)
	}
	for _, r := range st.Refused {
		if !own {
			r = copyRejection(r)
		}
		e.refused = append(e.refused, r)
	}
	e.reported = st.Reported
	e.restoreStartUps(&st.StartUps, own)
	if err := policy.UnmarshalState(pol, st.PolicyState, e.refs()); err != nil {
		return nil, fmt.Errorf("engine: restore: %w", err)
	}
	return e, nil
}

// check validates a state against the cluster it is to be restored over.
func (st *State) check(c *cluster.Cluster) error {
	if math.IsNaN(st.Now) || math.IsInf(st.Now, 0) || st.Now < 0 {
		return fmt.Errorf("time %v", st.Now)
	}
	if len(st.Servers) != len(c.Servers) || len(st.GPUs) != c.NumGPUs() || len(st.NodeFailures) != len(c.Servers) {
		return fmt.Errorf("the state has %d servers and %d GPUs (%d failure lists); the cluster %d and %d",
			len(st.Servers), len(st.GPUs), len(st.NodeFailures), len(c.Servers), c.NumGPUs())
	}
	names := make(map[string]bool, len(st.Jobs))
	job := func(id cluster.JobID) bool { return id >= 0 && int(id) < len(st.Jobs) }
	for i := range st.Jobs {
		j := &st.Jobs[i]
		switch {
		case j.ID != cluster.JobID(i):
			return fmt.Errorf("job %d has ID %d", i, j.ID)
		case j.Spec == nil:
			return fmt.Errorf("job %d has no spec", i)
		case names[j.Spec.Name]:
			return fmt.Errorf("job %d: name %q used twice", i, j.Spec.Name)
		case j.PreRun != cluster.NoJob && !job(j.PreRun), j.Probe && !job(j.Parent):
			return fmt.Errorf("job %d: its pre-run pair is no job", i)
		}
		names[j.Spec.Name] = true
		for _, g := range slices.Concat(j.GPUs, j.Last) {
			if g < 0 || int(g) >= len(st.GPUs) {
				return fmt.Errorf("job %d: no GPU %d", i, g)
			}
		}
	}
	for g := range st.GPUs {
		for _, id := range st.GPUs[g].Jobs {
			if !job(id) {
				return fmt.Errorf("GPU %d: held by no job %d", g, id)
			}
		}
	}
	for _, id := range st.Retries {
		if !job(id) {
			return fmt.Errorf("retry of no job %d", id)
		}
	}
	for _, a := range st.Pending {
		if !job(a.Job) {
			return fmt.Errorf("pending action on no job %d", a.Job)
		}
	}
	if st.Reported < 0 || st.Reported > len(st.Refused) {
		return fmt.Errorf("%d refusals reported, of %d", st.Reported, len(st.Refused))
	}
	return nil
}

// Fork returns an independent copy of the engine (its cluster, state and
// policy state copied) that runs with policy pol, a fresh policy of the same
// type and configuration as the engine's, and executor exec: what one of
// them does from then on changes nothing in the other. It keeps the
// engine's Options (a PreRunIf it holds is called by both: it must be safe
// for that). For "what happens next" questions: run the fork forward in a
// simulator.
func (e *Engine) Fork(pol policy.Policy, exec Executor) (*Engine, error) {
	st, err := e.Export()
	if err != nil {
		return nil, err
	}
	c, err := CopyCluster(e.c)
	if err != nil {
		return nil, err
	}
	return Restore(c, pol, exec, e.opts, st)
}

// CopyCluster returns an independent copy of c (a cluster only grows, as
// live agents register: a fork needs one of its own).
func CopyCluster(c *cluster.Cluster) (*cluster.Cluster, error) {
	data, err := codec.Marshal(c, nil)
	if err != nil {
		return nil, fmt.Errorf("engine: copying the cluster: %w", err)
	}
	var out cluster.Cluster
	if err := codec.Unmarshal(data, &out, nil); err != nil {
		return nil, fmt.Errorf("engine: copying the cluster: %w", err)
	}
	return &out, nil
}

// restoreStartUps restores the start-up state and derives the rest from
// the job records (the jobs starting up, the warming jobs per GPU).
func (e *Engine) restoreStartUps(su *StartUpState, own bool) {
	for _, f := range su.Families {
		if f.StartUp != 0 || !f.NoClient {
			e.families[f.Family] = f.StartUp
		}
		if f.NoClient {
			e.noClient[f.Family] = true
		}
	}
	e.sus = su.Stats
	for _, a := range su.Cooled {
		if !own {
			a = copyApplied(a)
		}
		e.cooled = append(e.cooled, a)
	}
	for _, j := range e.jobs {
		if j.StartingUp {
			e.starting = append(e.starting, j.ID) // (in ID order)
		}
		if j.State == cluster.Warming {
			e.warmAt(j)
		}
	}
}
