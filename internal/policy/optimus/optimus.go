// Package optimus is an Optimus-style remaining-time policy (Peng et al.,
// EuroSys'18; Tiresias' talk lists it as "SRTF on remaining time" for converging
// jobs): preemptive shortest-remaining-time-first, like srtf, but on an
// estimate of the remaining time that a live system can make, not on the
// simulator's knowledge of every job's run time.
//
// # The estimator
//
// What Optimus knows about a job is what it declares and what it reports:
//
//   - the total number of mini-batches it will run (Spec.Iters: the steps
//     or epochs a training script is told to run; Optimus proper fits the
//     loss curve to predict when a job converges, and the simulator's jobs
//     run a fixed number of mini-batches, so the declared count is the
//     honest stand-in);
//   - its progress and speed from profile samples: mini-batches done at
//     the last report (Job.Done) and seconds per mini-batch where it ran
//     (the last Sample's IterTime).
//
// Remaining time = (Iters − done now) × seconds per mini-batch, where done
// now extrapolates the last report at the last measured speed while the
// job runs. A job that has not reported yet is estimated from the speed
// other jobs of the same model and gang size measured (the mean of their
// latest samples), then of the same model at any size; failing that its
// remaining time is taken as 0, so it runs soon and gets measured, which is
// what Optimus' online profiling does. A job that declares no iteration
// count (Iters = 0) is estimated as never finishing and runs last.
//
// Limits: the speed measured where a job last ran is assumed where it runs
// next (a spread or packed placement differs); the estimate of a waiting
// job is fixed until it reports again, so a model's speed learnt later does
// not re-rank jobs already waiting; and with --compat tiresias the
// simulator reports no progress at all, so every estimate is 0 and the
// policy degrades to first-fit in arrival order with running jobs kept.
// Unlike Optimus it does not resize jobs (the gangs here are rigid).
//
// Parameters: skew=0.5 (placement, see preempt.Profiled).
package optimus

import (
	"math"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/preempt"
	"github.com/gandiva-sched/gandiva/internal/policy/shortest"
)

// New builds the policy.
func New(cfg policy.Config) (*shortest.Policy, error) {
	return shortest.New("optimus", cfg, NewEstimator(), false)
}

// Estimator estimates remaining run times from profile samples. It
// implements shortest.Keyer.
type Estimator struct {
	speeds  map[speedKey]*mean // seconds per mini-batch by (model, width)
	changed []cluster.JobID
	jobs    []estimate // by JobID
}

// estimate is a job's remaining run time as of its last speed report:
// rest seconds when it had held GPUs for ran seconds.
type estimate struct {
	known     bool
	rest, ran float64
}

type speedKey struct {
	model string
	width int // 0: any width
}

type mean struct {
	sum float64
	n   int
	// last sample counted per job, so each job counts once (its latest)
	last map[cluster.JobID]float64
}

func (m *mean) set(id cluster.JobID, v float64) {
	if old, ok := m.last[id]; ok {
		m.sum -= old
		m.n--
	}
	m.last[id] = v
	m.sum += v
	m.n++
}

func (m *mean) value() float64 {
	if m == nil || m.n == 0 {
		return 0
	}
	return m.sum / float64(m.n)
}

// NewEstimator returns an estimator that has seen nothing.
func NewEstimator() *Estimator { return &Estimator{speeds: map[speedKey]*mean{}} }

var _ shortest.Keyer = (*Estimator)(nil)

// Observe learns from the round's speed reports (profile samples taken
// while a job ran) and returns the jobs that reported. A report without a
// speed, the one a suspend sends, is not used: the estimate already
// counted that progress, and re-ranking a job at the instant it was
// stopped would undo the decision that stopped it.
func (e *Estimator) Observe(s *cluster.Snapshot) []cluster.JobID {
	e.changed = e.changed[:0]
	for _, ev := range s.Events {
		if ev.Kind != cluster.EvProfile || ev.IterTime <= 0 || ev.Job < 0 || int(ev.Job) >= len(s.Jobs) {
			continue
		}
		j := s.Jobs[ev.Job]
		for len(e.jobs) <= int(j.ID) {
			e.jobs = append(e.jobs, estimate{})
		}
		e.changed = append(e.changed, j.ID)
		if j.Spec.Iters > 0 {
			e.jobs[j.ID] = estimate{known: true, rest: math.Max(0, j.Spec.Iters-ev.Done) * ev.IterTime, ran: j.Executed(s.Now)}
		}
		last := j.Profile.Last()
		if last == nil || last.IterTime <= 0 || last.Shared || j.Spec.Model == "" {
			continue
		}
		for _, k := range []speedKey{{j.Spec.Model, last.Width}, {j.Spec.Model, 0}} {
			m := e.speeds[k]
			if m == nil {
				m = &mean{last: map[cluster.JobID]float64{}}
				e.speeds[k] = m
			}
			m.set(j.ID, last.IterTime)
		}
	}
	return e.changed
}

// Remaining estimates j's remaining run time in seconds at now: the
// estimate of its last speed report less the time it has held GPUs since;
// before any report, its mini-batches at the speed its model measured on
// other jobs, less the time it has held GPUs.
func (e *Estimator) Remaining(j *cluster.Job, now float64) float64 {
	if j.Spec.Iters <= 0 {
		return math.Inf(1)
	}
	if int(j.ID) < len(e.jobs) && e.jobs[j.ID].known {
		est := e.jobs[j.ID]
		return math.Max(0, est.rest-(j.Executed(now)-est.ran))
	}
	per := e.speeds[speedKey{j.Spec.Model, j.Spec.GPUs}].value()
	if per == 0 {
		per = e.speeds[speedKey{j.Spec.Model, 0}].value()
	}
	return math.Max(0, j.Spec.Iters*per-j.Executed(now))
}

// Describe implements shortest.Keyer.
func (e *Estimator) Describe(k preempt.Key) string {
	if math.IsInf(k.A, 1) {
		return "shortest estimated remaining time first (from measured progress); this job declares no mini-batch count, so it runs last"
	}
	return "shortest estimated remaining time first (from measured progress); this job: " + policy.Thousands(k.A) + " s remaining, estimated"
}

// Key implements shortest.Keyer: the estimated remaining time.
func (e *Estimator) Key(j *cluster.Job, now float64) preempt.Key {
	return preempt.Key{A: e.Remaining(j, now)}
}
