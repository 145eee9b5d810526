package gandiva

import (
	"fmt"
	"math"
	"slices"

	"github.com/gandiva-sched/gandiva/internal/cluster"
)

// Moves that pay (engine Options.StartUps: the live server). A process is
// bound to the GPUs it started on, so every move of a job whose process
// (or whose state in host memory, or whose warm process) waits on some
// GPUs to others launches a new process there: the job computes nothing
// until that process has restored its state and reached its first
// mini-batch boundary. That is the move's cost, and the engine measures it
// per job: Job.StartUpEst, the seconds its last process took from launch
// to its first boundary (a process restoring a checkpoint includes the
// restore), else its family's. A move is made only when its expected gain,
// in seconds of the job's progress, exceeds that cost:
//
//   - a turn elsewhere (a waiting job resumed on other GPUs than its
//     state's, a warm job started away from its warm process) gains the
//     wait it avoids for its own GPUs (waitGain): until the next boundary
//     at least, or as long again as their holder has held them, if it has
//     waited that long (a job whose own GPUs stay taken does not wait for
//     ever); a packed pair that moves together counts both jobs' costs and
//     gains. The jobs that can run where their state waits get their GPUs
//     first (ownFirst, moveTurns, fillTurns), so a move only ever takes
//     GPUs that no such job wants;
//   - a move to a faster GPU generation gains (1 - 1/speed-up) of the
//     job's remaining run time (from its iterations and measured rate,
//     else the cool-down, the horizon before it may move again);
//   - moving the partner of a kept packing onto idle GPUs gains what the
//     pair loses by sharing (2 - their normalised progress) over that
//     horizon;
//   - moving smaller jobs off a waiting gang's GPUs gains the gang's turn
//     (its GPUs × the wait it avoids), against the movers' costs × their
//     GPUs;
//   - a packing trial that moves the joining job gains nothing it can
//     count on before the trial has measured the pair: it is made only
//     where the job's state waits.
//
// A waiting job moved onto idle GPUs of another server (rebalance) is
// weighed as a turn elsewhere.
//
// Consolidating a gang spread over servers is not weighed yet: nothing
// measures its gain before it is made. Without measured start-ups (the
// simulator, unless its performance model has start-ups) every cost is 0
// and every move is decided as before.

// moveCost is what running job j on gpus costs beyond running it where
// its state waits: its expected start-up (Job.StartUpEst) when j runs, or
// waits in host memory or as a warm process, on other GPUs; else 0 (a queued
// or checkpointed job launches a process wherever it goes).
func moveCost(j *cluster.Job, gpus []cluster.GPUID) float64 {
	if j.StartUpEst <= 0 {
		return 0
	}
	switch j.State {
	case cluster.Running, cluster.Migrating:
		if slices.Equal(gpus, j.GPUs) {
			return 0
		}
	case cluster.Suspended:
		if j.Home == cluster.NoServer || slices.Equal(gpus, j.Last) {
			return 0
		}
	default:
		return 0
	}
	return j.StartUpEst
}

// stateGPUs are the GPUs where j's state waits or runs (its process, its
// state in host memory, its warm process), nil when a move costs it
// nothing (moveCost).
func stateGPUs(j *cluster.Job) []cluster.GPUID {
	if j.StartUpEst <= 0 {
		return nil
	}
	switch {
	case j.State == cluster.Running:
		return j.GPUs
	case j.State == cluster.Suspended && j.Home != cluster.NoServer:
		return j.Last
	}
	return nil
}

// waitGain is the expected gain of a turn elsewhere for waiting job j: the
// wait it avoids for its own GPUs. That is until the next boundary at
// least; where the jobs holding them have held them longer, as long again
// as they have (the usual estimate of a wait of unknown length), but no
// longer than j has waited already (since it was suspended, or since its
// warm process was ready): a job whose own GPUs stay taken does not wait
// for ever, and one whose GPUs merely change hands with the turns waits
// for the next.
func (p *Policy) waitGain(s *cluster.Snapshot, j *cluster.Job) float64 {
	next := periodStart(s.Now, p.plen) + p.plen - s.Now
	if next <= 0 {
		next = p.plen
	}
	waited := j.Waited(s.Now)
	if j.Warmed && j.ReadyAt >= 0 {
		waited = min(waited, s.Now-j.ReadyAt)
	}
	return max(next, min(waited, p.heldFor(s, j)))
}

// heldFor is how long the jobs that hold j's own GPUs, in the plan, have
// held them without a break (0 for a job the plan puts there now).
func (p *Policy) heldFor(s *cluster.Snapshot, j *cluster.Job) float64 {
	longest := 0.0
	for _, g := range stateGPUs(j) {
		hs := s.GPUs[g].Jobs
		if h := p.plan.Holder(g); h != cluster.NoJob && !slices.Contains(hs, h) {
			continue // it comes now: held for 0 s
		}
		for _, h := range hs {
			if h == j.ID || !s.Jobs[h].State.Holding() || (p.plan.Chosen(h) && !slices.Contains(p.plan.Target(h), g)) {
				continue
			}
			if since := p.st.Jobs[h].SliceStart; !math.IsInf(since, -1) && s.Now-since > longest {
				longest = s.Now - since
			}
		}
	}
	return longest
}

// turnElsewhere decides a turn of waiting job j on gpus, with its packed
// partner q (nil: none) joining it there: the pair's costs against the
// pair's gains. The reason is "turn" when the turn moves neither.
func (p *Policy) turnElsewhere(s *cluster.Snapshot, j, q *cluster.Job, gpus []cluster.GPUID) (string, bool) {
	gain, cost := 0.0, 0.0
	for _, x := range []*cluster.Job{j, q} {
		if x != nil {
			if c := moveCost(x, gpus); c > 0 {
				gain, cost = gain+p.waitGain(s, x), cost+c
			}
		}
	}
	if cost <= 0 {
		return "turn", true
	}
	return pays("turn elsewhere", func() float64 { return gain }, cost)
}

// pays reports whether a move that costs cost (seconds of j's start-up)
// and gains gain() is made, and the reason the action carries: why, with
// the gain and cost when there is a cost (gain is asked only then).
func pays(why string, gain func() float64, cost float64) (string, bool) {
	if cost <= 0 {
		return why, true
	}
	g := gain()
	if g <= cost {
		return "", false
	}
	return fmt.Sprintf("%s: gains %.1f s, costs a %.1f s start-up", why, g, cost), true
}

// horizon is how long job j is expected to go on running: its remaining
// iterations at its measured (else stated) rate when it has a length,
// else the cool-down between two moves of a job.
func (p *Policy) horizon(j *cluster.Job) float64 {
	if j.Spec.Iters > 0 {
		it := j.Spec.IterTime
		if l := j.Profile.Last(); l != nil && l.IterTime > 0 {
			it = l.IterTime
		}
		if left := (j.Spec.Iters - j.Done) * it; left > 0 && it > 0 {
			return left
		}
	}
	return p.prm.Cooldown
}

// ownFree reports whether j may run where its state waits (gpus): they
// are its home and free in the plan.
func (p *Policy) ownFree(s *cluster.Snapshot, j *cluster.Job, gpus []cluster.GPUID) bool {
	return slotsEqual(s.Cluster, p.st.Jobs[j.ID].Home, gpus) && p.plan.Idle().AllFree(gpus)
}

// ownFirst gives the jobs selected for a turn whose state waits on GPUs
// that are free their turn there, before any other is placed: a move then
// takes only GPUs that none of them wants.
func (p *Policy) ownFirst(s *cluster.Snapshot, sel []*cluster.Job) {
	for _, j := range sel {
		if g := stateGPUs(j); g != nil && !p.plan.Chosen(j.ID) && p.ownFree(s, j, g) {
			p.plan.Choose(j.ID, g, "turn")
		}
	}
}

// moveTurns places, at a boundary, the jobs selected for a turn whose own
// GPUs are taken (moving, in turn order). First the candidates that were
// not selected but whose state waits on GPUs still free run there (a turn
// without a move: the GPUs compute either way); then each mover runs on
// what is left of its home if the move pays, and otherwise waits for its
// own GPUs.
func (p *Policy) moveTurns(s *cluster.Snapshot, moving, cands []*cluster.Job) {
	pl := &p.plan
	for _, j := range cands {
		if pl.Chosen(j.ID) || p.selGen[j.ID] == pl.gen {
			continue
		}
		g := stateGPUs(j)
		if g == nil || !p.ownFree(s, j, g) {
			continue
		}
		// a packed pair whose states wait on the same GPUs runs there together
		q := p.partner(s, j)
		if q != nil && (pl.Chosen(q.ID) || p.selGen[q.ID] == pl.gen || !p.eligible(s, q) || !slices.Equal(stateGPUs(q), g)) {
			continue
		}
		pl.Choose(j.ID, g, "turn: its own GPUs are free")
		pl.Waiting--
		if q != nil {
			pl.ChooseShared(q.ID, g, "packed")
			pl.Waiting--
		}
	}
	for _, j := range moving {
		prefer := j.Last
		if j.State == cluster.Running {
			prefer = j.GPUs
		}
		g := pl.Pick(p.st.Jobs[j.ID].Home, prefer)
		if g == nil {
			pl.Waiting++
			continue
		}
		q := p.partner(s, j)
		if q != nil && (p.selGen[q.ID] != pl.gen || pl.Chosen(q.ID)) {
			q = nil
		}
		why, ok := p.turnElsewhere(s, j, q, g)
		if !ok {
			pl.Waiting++
			continue
		}
		pl.Choose(j.ID, g, why)
		if q != nil {
			pl.ChooseShared(q.ID, pl.Target(j.ID), "packed")
		}
	}
}

// pairNorm is the normalised progress of packed jobs j and q (each one's
// packed rate over its solo rate, summed) from their latest samples taken
// together; 2 (sharing costs nothing, so a move gains nothing) when they
// have none.
func pairNorm(j, q *cluster.Job) float64 {
	sa, sb := packedSample(j, q.ID, math.Inf(-1)), packedSample(q, j.ID, math.Inf(-1))
	if sa == nil || sb == nil {
		return 2
	}
	ta, tb := j.Profile.SoloIterTime(sa.Type), q.Profile.SoloIterTime(sb.Type)
	if ta <= 0 || tb <= 0 {
		return 2
	}
	return min(ta/sa.IterTime, 1) + min(tb/sb.IterTime, 1)
}
