package sim

import (
	"fmt"
	"math"
	"slices"

	"github.com/gandiva-sched/gandiva/internal/cluster"
)

// WorkSample is every user's cumulative work at one time, from the
// simulator's ground truth (Config.SampleEvery): reference-GPU-seconds of
// training done, the unit of metrics.Job.Work, summed over the user's jobs.
type WorkSample struct {
	At   float64
	Work map[string]float64
}

// sample records the samples due at or before upTo (multiples of
// SampleEvery from 0). Called before the events at upTo are applied, it
// sees the progress of the interval that ends there, which is exact: between
// events every job progresses at a constant rate.
func (r *runner) sample(upTo float64) {
	every := r.cfg.SampleEvery
	if every <= 0 {
		return
	}
	for {
		at := float64(len(r.samples)) * every
		if at > upTo || math.IsInf(upTo, 0) {
			return
		}
		w := map[string]float64{}
		for id, t := range r.x.truth {
			if t == nil {
				continue
			}
			if t.holding {
				r.x.settle(t, at)
			}
			user := t.spec.User
			if j := r.e.Job(cluster.JobID(id)); j != nil && j.Probe {
				user = r.e.Job(j.Parent).Spec.User
			}
			if x := t.done * t.spec.IterTime * float64(t.spec.GPUs); x > 0 {
				w[user] += x
			}
		}
		r.samples = append(r.samples, WorkSample{At: at, Work: w})
	}
}

// pushSettings schedules Config.Settings as events at their times.
func (r *runner) pushSettings() error {
	for i, ev := range r.cfg.Settings {
		if ev.Kind != cluster.EvSetting || ev.Key == "" || !(ev.Time >= 0) {
			return fmt.Errorf("sim: settings[%d]: want an EvSetting with a key at a time ≥ 0, got %s", i, ev)
		}
		r.h.push(item{t: ev.Time, kind: evSetting, job: cluster.JobID(i)})
	}
	return nil
}

// Users returns the users that appear in the samples, sorted.
func (r *Result) Users() []string {
	seen := map[string]bool{}
	for _, s := range r.Samples {
		for u := range s.Work {
			seen[u] = true
		}
	}
	for _, j := range r.Jobs {
		seen[j.User] = true
	}
	out := make([]string, 0, len(seen))
	for u := range seen {
		out = append(out, u)
	}
	slices.Sort(out)
	return out
}
