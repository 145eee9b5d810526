package gandiva

import (
	"math"
	"slices"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/place"
)

// JobInfo is what the mechanisms remember about one job.
type JobInfo struct {
	// Home is where the job time-shares: so many GPUs on each of these
	// servers (which GPUs exactly is decided turn by turn); nil until the
	// job has a home.
	Home []place.Slot
	// Borrowed are extra GPUs an elastic job runs on beyond its home.
	Borrowed []cluster.GPUID
	// LastRun is when the job last stopped running (its submission before
	// it ever ran); a running job counts as "now".
	LastRun float64
	// SliceStart is when the job's current (or last) run began.
	SliceStart float64
	// Partner is the job packed with this one (NoJob when none): the pair
	// runs together on the same GPUs.
	Partner cluster.JobID
	// PackedAt is when a packing trial began (0 once the pair was kept).
	PackedAt float64
	// MovedAt is the time of the last migration.
	MovedAt float64
	// Prio raises the job in the turn order (early feedback): 0 for jobs
	// with no feedback yet, 1 + the percentile of its metric among its
	// group's at the last rung it passed.
	Prio float64
	// Dropped is set when early feedback dropped the job.
	Dropped bool

	growAt, growRate, noGrowUntil float64
	rung                          int
	ended                         bool
}

// State is the bookkeeping that the mechanisms share: homes, per-server
// demand, turns and packings. A policy calls Sync at the start of every
// Schedule.
type State struct {
	Jobs []JobInfo // by JobID
	// Demand counts, per server, the GPUs that jobs homed there need.
	Demand []int32
	// Elastic counts the elastic jobs that have not ended, so the
	// grow-shrink mechanism costs nothing where there are none.
	Elastic int
	// homed lists jobs given a home, swept for ended ones (Sweep).
	homed []cluster.JobID
}

// Sync grows the tables to the snapshot's size, registers new jobs and
// releases the homes of jobs that ended.
func (st *State) Sync(s *cluster.Snapshot) {
	for len(st.Demand) < len(s.Cluster.Servers) {
		st.Demand = append(st.Demand, 0)
	}
	for len(st.Jobs) < len(s.Jobs) {
		id := cluster.JobID(len(st.Jobs))
		st.Jobs = append(st.Jobs, JobInfo{Partner: cluster.NoJob, LastRun: s.Jobs[id].Submitted, SliceStart: math.Inf(-1)})
		if s.Jobs[id].Spec.Elastic() && !s.Jobs[id].State.Terminal() {
			st.Elastic++
		}
	}
	for _, ev := range s.Events {
		if ev.Kind == cluster.EvNodeDown {
			// the engine requeued every job of the lost node
			for _, j := range s.Active() {
				if j.State == cluster.Queued {
					st.requeued(j.ID)
				}
			}
			continue
		}
		if ev.Job < 0 || int(ev.Job) >= len(s.Jobs) || ev.Kind == cluster.EvSubmit {
			continue
		}
		switch j := s.Jobs[ev.Job]; {
		case j.State.Terminal():
			st.forget(s, j.ID)
		case j.State == cluster.Queued:
			st.requeued(j.ID) // a failure, a failed action
		}
	}
}

// forget drops an ended job's home and packing (once).
func (st *State) forget(s *cluster.Snapshot, id cluster.JobID) {
	ji := &st.Jobs[id]
	if ji.ended {
		return
	}
	ji.ended = true
	if s.Jobs[id].Spec.Elastic() {
		st.Elastic--
	}
	st.SetHome(id, nil)
	st.requeued(id)
}

// requeued forgets what held only while a job ran: borrowed GPUs, a
// growth trial, a packing.
func (st *State) requeued(id cluster.JobID) {
	ji := &st.Jobs[id]
	ji.Borrowed, ji.growAt = nil, 0
	st.Unpack(id)
}

// Sweep forgets ended jobs that no event announced (a pre-run probe
// cancelled with its job) so their homes stop counting. It is called at
// quantum boundaries; its cost is the number of jobs with a home.
func (st *State) Sweep(s *cluster.Snapshot) {
	out := st.homed[:0]
	for _, id := range st.homed {
		if s.Jobs[id].State.Terminal() {
			st.forget(s, id)
		}
		if st.Jobs[id].Home != nil {
			out = append(out, id)
		}
	}
	st.homed = out
}

// SetHome changes a job's home, keeping the demand counts.
func (st *State) SetHome(id cluster.JobID, home []place.Slot) {
	ji := &st.Jobs[id]
	for _, sl := range ji.Home {
		st.Demand[sl.Server] -= int32(sl.N)
	}
	had := ji.Home != nil
	ji.Home = slices.Clone(home)
	for _, sl := range ji.Home {
		st.Demand[sl.Server] += int32(sl.N)
	}
	if !had && ji.Home != nil {
		st.homed = append(st.homed, id)
	}
}

// Unpack separates a packed pair.
func (st *State) Unpack(a cluster.JobID) {
	if b := st.Jobs[a].Partner; b != cluster.NoJob {
		st.Jobs[b].Partner = cluster.NoJob
		st.Jobs[b].PackedAt = 0
	}
	st.Jobs[a].Partner = cluster.NoJob
	st.Jobs[a].PackedAt = 0
}

// before orders jobs for turns: higher priority first, then least recently
// run, then (among jobs that run now) the one whose run began latest, then
// ID. A total order.
func (st *State) before(a, b *cluster.Job, now float64) bool {
	ia, ib := &st.Jobs[a.ID], &st.Jobs[b.ID]
	if ia.Prio != ib.Prio {
		return ia.Prio > ib.Prio
	}
	la, lb := ia.LastRun, ib.LastRun
	if a.State.Holding() {
		la = now
	}
	if b.State.Holding() {
		lb = now
	}
	if la != lb {
		return la < lb
	}
	if ia.SliceStart != ib.SliceStart {
		return ia.SliceStart > ib.SliceStart
	}
	return a.ID < b.ID
}

// periodStart is the start of the quantum period containing now.
func periodStart(now, q float64) float64 {
	return math.Floor(now/q+1e-9) * q
}

// Plan is one round's decision as it is being built: which jobs run on
// which GPUs. Which job holds which GPU is recorded in a place.Pool reset
// as the plan's ledger: at a quantum boundary every GPU starts free (the
// plan re-decides every turn); between boundaries running jobs keep their
// GPUs (place.Pool.Keep) until the plan moves, grows or shrinks them. The
// per-job tables are stamped with a generation, so a round costs nothing
// for the jobs it does not touch, and the ledger is reset at its first use
// in a round (many rounds need none).
type Plan struct {
	s      *cluster.Snapshot
	stay   bool // between boundaries: running jobs keep their GPUs
	pool   place.Pool
	poolAt uint32 // the generation pool was reset for
	gen    uint32
	runGen []uint32
	target [][]cluster.GPUID
	share  []bool
	reason []string
	kills  []cluster.Action
	// Waiting counts jobs with a home that did not get a turn: the GPUs are
	// over-subscribed.
	Waiting int
}

// reset starts the round's plan over s; stay is set between boundaries.
func (pl *Plan) reset(s *cluster.Snapshot, stay bool) {
	pl.s, pl.stay = s, stay
	for len(pl.runGen) < len(s.Jobs) {
		pl.runGen = append(pl.runGen, 0)
		pl.target = append(pl.target, nil)
		pl.share = append(pl.share, false)
		pl.reason = append(pl.reason, "")
	}
	pl.gen++
	pl.kills = pl.kills[:0]
	pl.Waiting = 0
}

// Free reports whether no job holds any of gpus in the plan.
func (pl *Plan) Free(gpus []cluster.GPUID) bool {
	for _, g := range gpus {
		if pl.Holder(g) != cluster.NoJob {
			return false
		}
	}
	return true
}

// Holder returns the job holding g in the plan, or NoJob.
func (pl *Plan) Holder(g cluster.GPUID) cluster.JobID {
	if pl.poolAt != pl.gen {
		return cluster.NoJob // nothing chosen yet
	}
	return pl.pool.Holder(g)
}

// Idle is the plan's ledger: its free GPUs are those that can be given
// out (on schedulable servers, held by no job in the plan, and between
// boundaries kept by no running job the plan did not touch).
func (pl *Plan) Idle() *place.Pool {
	if pl.poolAt != pl.gen {
		pl.pool.ResetPlan(pl.s, pl.stay)
		pl.poolAt = pl.gen
	}
	return &pl.pool
}

// choose marks job id chosen on gpus; a running job the plan had left
// where it is leaves its GPUs to the plan.
func (pl *Plan) choose(id cluster.JobID, gpus []cluster.GPUID, reason string, share bool) {
	if pl.stay && !pl.Chosen(id) {
		pl.Idle().Leave(pl.s.Jobs[id].GPUs)
	}
	pl.runGen[id] = pl.gen
	pl.target[id] = gpus
	pl.share[id] = share
	pl.reason[id] = reason
}

// Choose marks job id to run on gpus.
func (pl *Plan) Choose(id cluster.JobID, gpus []cluster.GPUID, reason string) {
	pl.choose(id, gpus, reason, false)
	pl.Idle().Hold(id, gpus)
}

// ChooseShared marks job id to run on gpus that its partner holds (packing).
func (pl *Plan) ChooseShared(id cluster.JobID, gpus []cluster.GPUID, reason string) {
	pl.choose(id, gpus, reason, true)
	pl.Idle().Share(id, gpus)
}

// Unchoose takes a job out of the plan; its GPUs become free in the plan
// (between boundaries a running job keeps its own GPUs again).
func (pl *Plan) Unchoose(id cluster.JobID) {
	if pl.runGen[id] != pl.gen {
		return
	}
	pl.runGen[id] = 0
	pl.Idle().Release(id, pl.target[id])
	if pl.stay {
		pl.Idle().Keep(pl.s.Jobs[id].GPUs)
	}
}

// Chosen reports whether a job runs after this round.
func (pl *Plan) Chosen(id cluster.JobID) bool { return pl.runGen[id] == pl.gen }

// Target is where a chosen job runs.
func (pl *Plan) Target(id cluster.JobID) []cluster.GPUID { return pl.target[id] }

// Kill ends a job.
func (pl *Plan) Kill(id cluster.JobID, reason string) {
	pl.kills = append(pl.kills, cluster.Action{Kind: cluster.Kill, Job: id, Reason: reason})
}

// Pick chooses GPUs for a home among those that can be given out,
// preferring prefer; nil if the home's servers lack them.
func (pl *Plan) Pick(home []place.Slot, prefer []cluster.GPUID) []cluster.GPUID {
	return pl.Idle().Pick(home, prefer)
}
