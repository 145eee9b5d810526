package eta

import (
	"fmt"
	"math"
	"slices"

	"github.com/gandiva-sched/gandiva/internal/cluster"
)

// The smallest fork (see the package comment): the live jobs submitted
// afresh at the fork's time with the work that remains to them. It is the
// one place that turns a State into the simulator's input; an exact fork
// (an engine and policy state restored, running jobs adopted by the
// simulated executor where they run) replaces it without changing
// Predict's contract.

// forked is a State turned into the simulator's jobs: each job's length,
// as declared or as a distribution (a prior's), made into a simulator's
// job by specs for one draw of the unknown lengths.
type forked struct {
	jobs    []forkJob // in the simulator's order of submission
	notes   map[string]string
	holding map[string]bool
	unknown int // jobs of unknown length
}

// forkJob is one job of the fork.
type forkJob struct {
	spec cluster.JobSpec // Submit and IterTime set; Iters from the length drawn
	left float64         // seconds of work left, on reference GPUs, when known
	rest Remainder       // its distribution, when unknown (left unused)
	paid float64         // start-up seconds already paid (held GPUs)
}

// minRemaining is the least work a job is given (seconds): one that has
// done all its declared mini-batches has still to finish its last one.
const minRemaining = 1.0

func fork(st *State, prior Prior, startup float64) *forked {
	f := &forked{notes: map[string]string{}, holding: map[string]bool{}}
	// jobs that hold GPUs first (they start again at once, ahead of the
	// waiting ones, as their being in place would have them), then the
	// waiting ones; each group in order of submission
	order := make([]int, len(st.Jobs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		ha, hb := st.Jobs[a].State.Holding(), st.Jobs[b].State.Holding()
		switch {
		case ha && !hb:
			return -1
		case hb && !ha:
			return 1
		}
		return 0
	})
	for _, i := range order {
		j := &st.Jobs[i]
		if j.State.Terminal() || j.Spec == nil {
			continue
		}
		fj := forkJob{spec: *j.Spec}
		name := fj.spec.Name
		it, why := iterTime(j)
		if j.Known && j.Spec.Iters > 0 && j.Spec.IterTime > 0 {
			done := j.Done
			if j.State.Holding() && j.IterTime <= 0 {
				// not measured yet: it has run at its declared rate since its start-up
				done = math.Max(done, (j.Ran-startup)/j.Spec.IterTime)
			}
			left := math.Max(j.Spec.Iters-done, 0)
			fj.left = left * it
			f.notes[name] = fmt.Sprintf("%.0f of %.0f mini-batches left at %.3g s each (%s)", left, j.Spec.Iters, it, why)
		} else {
			var what string
			fj.rest, what = prior.Remaining(fj.spec.User, j.Ran)
			f.unknown++
			f.notes[name] = "length unknown, " + what
		}
		if j.State.Holding() {
			// it goes on where it runs; the fork starts it again, at the
			// model's start-up cost, of which its work left pays back what
			// it had paid already
			fj.paid = math.Min(startup, j.Ran)
			f.holding[name] = true
		}
		fj.spec.IterTime = it
		fj.spec.Submit = st.Now
		if j.State == cluster.Queued && j.NotBefore > st.Now && !math.IsInf(j.NotBefore, 1) {
			fj.spec.Submit = j.NotBefore
			f.notes[name] += fmt.Sprintf("; backs off until %.0f s", j.NotBefore)
		} else if math.IsInf(j.NotBefore, 1) && j.State == cluster.Queued {
			f.notes[name] += "; assumes its pre-run passes"
		}
		f.jobs = append(f.jobs, fj)
	}
	// the simulator submits in order of time, stably: holders, then the rest
	slices.SortStableFunc(f.jobs, func(a, b forkJob) int { return cluster.BySubmit(&a.spec, &b.spec) })
	for name, n := range f.notes {
		f.notes[name] = n + "; no other job arrives"
	}
	return f
}

// specs are the simulator's jobs for one draw: u(i) is the probability at
// which job i's unknown length is drawn from its distribution.
func (f *forked) specs(u func(i int) float64) []*cluster.JobSpec {
	out := make([]*cluster.JobSpec, len(f.jobs))
	for i := range f.jobs {
		fj := &f.jobs[i]
		remaining := fj.left
		if fj.rest != nil {
			remaining = fj.rest(u(i))
		}
		remaining = math.Max(remaining-fj.paid, minRemaining)
		sp := fj.spec
		sp.Iters = math.Max(math.Round(remaining/sp.IterTime), 1)
		out[i] = &sp
	}
	return out
}

// iterTime is the seconds per mini-batch the fork runs a job at: as
// measured, else as declared, else 1 (a length in seconds, then).
func iterTime(j *Job) (float64, string) {
	switch {
	case j.IterTime > 0:
		return j.IterTime, "measured"
	case j.Spec.IterTime > 0:
		return j.Spec.IterTime, "as declared"
	}
	return 1, "no rate known"
}

// FromSnapshot copies what a fork needs of an engine's snapshot (taken
// under the engine's owner's lock; the State shares nothing mutable with
// it): the schedulable servers as a cluster of their own, the jobs that
// have not ended (pre-run probes left out), and the run times of the
// finished ones by user. With lengths false, no job's declared length is
// used (every one is of unknown length, as for the accuracy experiment's
// second case).
func FromSnapshot(s *cluster.Snapshot, lengths bool) (*State, error) {
	c, err := schedulable(s)
	if err != nil {
		return nil, err
	}
	st := &State{Now: s.Now, Cluster: c, Finished: map[string][]float64{}}
	for _, j := range s.Jobs {
		if j.Probe {
			continue
		}
		if j.State == cluster.Finished {
			st.Finished[j.Spec.User] = append(st.Finished[j.Spec.User], j.Executed(s.Now))
			continue
		}
		if j.State.Terminal() {
			continue
		}
		st.Jobs = append(st.Jobs, Job{Spec: j.Spec, Known: lengths && j.Spec.Iters > 0 && j.Spec.IterTime > 0, State: j.State,
			Done: doneNow(j, s.Now), IterTime: RefIterTime(s.Cluster, &j.Profile), Ran: j.Executed(s.Now), NotBefore: j.NotBefore})
	}
	return st, nil
}

// schedulable copies the servers of s that are up and not drained into a
// cluster of their own (the same names, types, racks and domains).
func schedulable(s *cluster.Snapshot) (*cluster.Cluster, error) {
	src := s.Cluster
	b := cluster.NewBuilder(src.Name, src.Types)
	var names []string
	for i := range src.Servers {
		sv := &src.Servers[i]
		if i < len(s.Servers) && !s.Servers[i].Schedulable() {
			continue
		}
		rack := ""
		if sv.Rack >= 0 && sv.Rack < len(src.Racks) {
			rack = src.Racks[sv.Rack]
		}
		b.Add(cluster.ServerGroup{Type: src.Types[sv.Type].Name, Count: 1, GPUs: sv.NumGPUs, Rack: rack, Domain: sv.Domain,
			HostMemGiB: sv.HostMemGiB, NamePrefix: sv.Name + "#"})
		names = append(names, sv.Name)
	}
	if len(names) == 0 {
		return &cluster.Cluster{Name: src.Name, Types: slices.Clone(src.Types)}, nil
	}
	c, err := b.Build()
	if err != nil {
		return nil, fmt.Errorf("eta: copying the cluster: %w", err)
	}
	for i := range c.Servers {
		c.Servers[i].Name = names[i]
	}
	return c, nil
}

// doneNow is the mini-batches a job has done by now: those it last
// reported, and, while it holds GPUs, those it has done since at its last
// measured rate (reports come now and then; the simulator's, 20 s after a
// start and at a suspend).
func doneNow(j *cluster.Job, now float64) float64 {
	done := j.Done
	if last := j.Profile.Last(); j.State == cluster.Running && last != nil && last.IterTime > 0 && now > j.DoneAt {
		done += (now - max(j.DoneAt, last.At)) / last.IterTime
	}
	if j.Spec.Iters > 0 {
		done = min(done, j.Spec.Iters)
	}
	return done
}
