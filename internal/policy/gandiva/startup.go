package gandiva

import (
	"fmt"
	"math"
	"slices"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/place"
)

// Start-ups and warm starts (engine Options.StartUps and Options.Warm; the
// live server has both). A job's process is starting up from its launch to
// its first mini-batch boundary; it computes nothing a turn is for, so:
//
//   - a job starting up is never a time-slicing victim: at a boundary it
//     keeps its GPUs, as a migrating job does;
//   - a turn counts from readiness: a running job whose start-up ended
//     during its turn, less than half a period before the boundary, keeps
//     its GPUs for one more period, so that no job is suspended at its
//     first mini-batch right after paying its start-up;
//   - early feedback: while a job whose process the engine warmed (held at
//     its first boundary, Job.Warmed) waits for its first turn, turns
//     change every quantum/intro seconds (intro=3), not every quantum: its
//     turn costs a resume (tens of milliseconds), and every new job reports
//     its first mini-batches within a few short turns of being ready;
//   - a warm job is homed on the server of its warm process, whose GPUs
//     its turn then resumes on (a resume elsewhere is a migration).
//
// Without start-ups reported, every process is ready when placed and no
// job is warm: none of this applies, and the policy decides as before.

// periodLen is this round's period: quantum/intro while a warm job waits
// for its first turn, else the quantum.
func (p *Policy) periodLen(s *cluster.Snapshot) float64 {
	q := p.prm.Quantum
	if p.prm.Intro <= 1 {
		return q
	}
	fresh := false
	p.waiting.Each(s, func(j *cluster.Job) bool {
		ji := &p.st.Jobs[j.ID]
		fresh = j.Warmed && math.IsInf(ji.SliceStart, -1) && !ji.Dropped && ji.Home != nil
		return !fresh
	})
	if fresh {
		return q / float64(p.prm.Intro)
	}
	return q
}

// after reports whether period starts after the last boundary (periods of
// quantum/intro and of the quantum share their boundaries, up to rounding).
func (p *Policy) after(period float64) bool {
	if p.plen == p.prm.Quantum {
		return period > p.lastBoundary
	}
	return period > p.lastBoundary+1e-6*p.prm.Quantum
}

// protected says why a running job keeps its GPUs at a boundary because of
// its start-up ("" when it does not).
func (p *Policy) protected(s *cluster.Snapshot, j *cluster.Job) string {
	if j.State != cluster.Running {
		return ""
	}
	if j.StartingUp {
		return "starting up"
	}
	ji := &p.st.Jobs[j.ID]
	if j.ReadyAt > ji.SliceStart && s.Now-j.ReadyAt < p.plen/2 {
		return fmt.Sprintf("ready only since %.1f s", s.Now-j.ReadyAt)
	}
	return ""
}

// warmElsewhere reports whether a warm job's home is not where its warm
// process waits.
func (p *Policy) warmElsewhere(s *cluster.Snapshot, j *cluster.Job) bool {
	if !j.Warmed || j.State != cluster.Suspended || j.Home == cluster.NoServer {
		return false
	}
	return !slotsEqual(s.Cluster, p.st.Jobs[j.ID].Home, j.Last)
}

// slotsEqual reports whether slots equals place.SlotsOf(c, gpus), without
// building the latter (warmElsewhere asks it of every warm waiting job
// every round).
func slotsEqual(c *cluster.Cluster, slots []place.Slot, gpus []cluster.GPUID) bool {
	k, n := -1, 0 // the slot of the run of gpus[i]'s server, and its GPUs so far
	for i, g := range gpus {
		if sv := c.ServerOf(g); i == 0 || sv != slots[k].Server {
			if k >= 0 && n != slots[k].N {
				return false
			}
			if k++; k >= len(slots) || slots[k].Server != sv {
				return false
			}
			n = 0
		}
		n++
	}
	if k < 0 {
		return len(slots) == 0
	}
	return k == len(slots)-1 && n == slots[k].N
}

// warmHome is a waiting job's home: where its warm process waits, if it
// has one and may run there, else Homes.
func (p *Policy) warmHome(s *cluster.Snapshot, j *cluster.Job) []place.Slot {
	if j.Warmed && j.State == cluster.Suspended && j.Home != cluster.NoServer {
		slots := place.SlotsOf(s.Cluster, j.Last)
		if !slices.ContainsFunc(slots, func(sl place.Slot) bool { return !s.MayRun(j.ID, sl.Server) }) {
			return slots
		}
	}
	return p.Homes(s, j.ID, j.Spec.GPUs)
}
