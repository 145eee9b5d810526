package policy

import (
	"slices"

	"github.com/gandiva-sched/gandiva/internal/cluster"
)

// Waiting tracks the jobs that wait for GPUs (queued or suspended)
// incrementally from the snapshot's events, so a policy need not scan every
// active job each round. A policy calls Update at the start of Schedule,
// Remove for each job it starts or resumes, and Add for each job it suspends
// (no event reports its own actions). Those calls assume the actions are
// applied; Update corrects them for the ones the engine or executor refused
// (cluster.Snapshot.Rejected): a job whose start or resume was refused is
// waiting again, one whose suspension was refused is not.
type Waiting struct {
	ids   []cluster.JobID // sorted; entries with in[id] == false are stale
	in    []bool          // by JobID
	stale int
}

// Update folds the snapshot's events and refusals in.
func (w *Waiting) Update(s *cluster.Snapshot) {
	w.compact()
	for i := range s.Rejected {
		id := s.Rejected[i].Action.Job
		if id < 0 || int(id) >= len(s.Jobs) {
			continue
		}
		if s.Jobs[id].State.Waiting() {
			w.Add(id)
		} else {
			w.Remove(id)
		}
	}
	for _, ev := range s.Events {
		if ev.Kind == cluster.EvNodeDown {
			for _, j := range s.Active() {
				if j.State.Waiting() {
					w.Add(j.ID)
				}
			}
			continue
		}
		if ev.Kind == cluster.EvTick || ev.Kind == cluster.EvNodeUp || ev.Kind == cluster.EvSetting || ev.Job < 0 || int(ev.Job) >= len(s.Jobs) {
			continue
		}
		if st := s.Jobs[ev.Job].State; st.Waiting() {
			w.Add(ev.Job)
		} else if st.Terminal() {
			w.Remove(ev.Job)
		}
	}
}

// Add marks a job as waiting (idempotent).
func (w *Waiting) Add(id cluster.JobID) {
	for int(id) >= len(w.in) {
		w.in = append(w.in, false)
	}
	if w.in[id] {
		return
	}
	w.in[id] = true
	if i, found := slices.BinarySearch(w.ids, id); found {
		w.stale-- // a stale entry comes back to life
	} else if i == len(w.ids) {
		w.ids = append(w.ids, id)
	} else {
		w.ids = slices.Insert(w.ids, i, id)
	}
}

// Remove marks a job as no longer waiting (idempotent).
func (w *Waiting) Remove(id cluster.JobID) {
	if int(id) >= len(w.in) || !w.in[id] {
		return
	}
	w.in[id] = false
	w.stale++
}

// compact drops stale entries once they are the majority. Only Update
// calls it, never during Each.
func (w *Waiting) compact() {
	if w.stale <= 32 || w.stale <= len(w.ids)/2 {
		return
	}
	out := w.ids[:0]
	for _, x := range w.ids {
		if w.in[x] {
			out = append(out, x)
		}
	}
	w.ids = out
	w.stale = 0
}

// Has reports whether a job is tracked as waiting.
func (w *Waiting) Has(id cluster.JobID) bool { return int(id) < len(w.in) && w.in[id] }

// Each calls fn for the waiting jobs in ID (submission) order until fn
// returns false. Jobs that the snapshot shows not waiting are skipped.
func (w *Waiting) Each(s *cluster.Snapshot, fn func(j *cluster.Job) bool) {
	for _, id := range w.ids {
		if !w.in[id] {
			continue
		}
		j := s.Jobs[id]
		if !j.State.Waiting() {
			continue
		}
		if !fn(j) {
			return
		}
	}
}

// Jobs appends the waiting jobs in ID order to dst.
func (w *Waiting) Jobs(s *cluster.Snapshot, dst []*cluster.Job) []*cluster.Job {
	w.Each(s, func(j *cluster.Job) bool { dst = append(dst, j); return true })
	return dst
}

// Len is the number of jobs tracked as waiting.
func (w *Waiting) Len() int { return len(w.ids) - w.stale }
