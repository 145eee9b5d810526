package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/metrics"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/registry"
	"github.com/gandiva-sched/gandiva/internal/store"
	"github.com/gandiva-sched/gandiva/internal/timeline"
)

// History is a live cluster's own history, read back from its store, for
// what-if replays (gandiva whatif): the nodes that registered, as a
// cluster; every job, as a trace row; what really happened (the per-job
// records package metrics summarises, and the GPU timeline); and the
// policy it ran under.
type History struct {
	// Policy and Params are the policy the server ran, PreRun whether it
	// pre-ran new jobs.
	Policy string
	Params map[string]string
	PreRun bool
	// Epoch is the wall-clock time of engine time 0; every time below is
	// engine seconds.
	Epoch time.Time
	// Cluster holds the registered nodes (all up, as a spec).
	Cluster *cluster.Cluster
	// Jobs are the jobs as a trace, in submission order: each submitted at
	// its engine time, with its gang, memory and user, and the work it
	// did (see ReadHistory). Name is the job's ID and its name ("j3
	// train-c"), as the dashboard shows it.
	Jobs []*cluster.JobSpec
	// PreRuns says which jobs were pre-run (by name).
	PreRuns map[string]bool
	// Notes say how jobs that did not simply finish became trace rows, and
	// which were left out (never ran, so no work is known).
	Notes []string
	// Live is what happened: the per-job records (named as Jobs, and of
	// the same jobs, in the same order) and the timeline (TimelineData
	// names its jobs as Jobs).
	Live     *metrics.Run
	Timeline *timeline.Recorder
	labels   map[string]string
	// outcome is each row's live state (by name); known the run time
	// alone (Iters × IterTime) of the rows whose work is known.
	outcome map[string]cluster.JobState
	known   map[string]float64
	// Entries is the log entries replayed (those after the store's newest
	// snapshot, which holds the state before them); Diverged counts the
	// state changes the replay made differently from the recorded history
	// (0 expected; more if the server ran with another failure policy than
	// the default one the replay uses).
	Entries, Diverged int
}

// ReadHistory rebuilds the state of the store in dataDir (its newest
// snapshot and the log after it, as a server's restart does) under the
// policy it was written with, and returns the history. The store
// must not be in use (a running server holds its lock). It changes nothing
// in the store.
//
// A job's work in the trace is what it did: mini-batches done × seconds per
// mini-batch (as declared in the request, else as measured). A job that
// failed or was cancelled is replayed as it ran: the work it did, else its
// run time (from its first process to its end when it never held GPUs, as
// a job without the in-job client that ran to its end while warming);
// one that ended the moment it started, as a run of its pre-run's length
// (or 1 ms). A job still waiting or running when the history was read is
// replayed as the work it declared (iters × iter_time), else the work it
// did so far. A job without progress reports is replayed as its run time,
// and its slowdown is not computed. Jobs that never ran (and, if they
// have not ended, declared no work) are left out of every row, the live
// records included; a Note says how each job that did not simply finish
// became a row. Align then counts each job in a replay as it ended live.
func ReadHistory(dataDir string, log *slog.Logger) (*History, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	path := filepath.Join(dataDir, "gandiva.db")
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("history: no store in %s (no %s): give the data directory a server ran with (--data-dir)", dataDir, filepath.Base(path))
		}
		return nil, fmt.Errorf("history: %w", err)
	}
	db, err := store.Open(path, store.Options{LockTimeout: time.Second})
	if err != nil {
		return nil, fmt.Errorf("history: %w (is a server running on it? stop it first)", err)
	}
	defer db.Close()
	raw, ok, err := db.Meta("policy")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("history: the store in %s holds no history (no server ever ran on it)", dataDir)
	}
	var meta policyMeta
	if err := json.Unmarshal(raw, &meta); err != nil {
		return nil, fmt.Errorf("history: the store's policy %q: %w", raw, err)
	}
	epoch, _, err := db.Epoch(time.Now())
	if err != nil {
		return nil, err
	}
	mcfg := func(pol policy.Policy) machineConfig {
		mc := machineConfig{Policy: pol, PreRun: meta.PreRun, Epoch: epoch, Log: log, CheckpointRoot: filepath.Join(dataDir, "checkpoints")}
		meta.StartUps.apply(&mc) // the start-ups and warm starts the log was written with
		return mc
	}
	newPolicy := func() (policy.Policy, error) { return registry.New(meta.Name, policy.Config{Params: meta.Params}) }
	if _, err := newPolicy(); err != nil {
		return nil, fmt.Errorf("history: the store's policy: %w", err)
	}
	// (its newest snapshot, which holds the timeline and every job so far,
	// and the log after it)
	m, ri, _, err := rebuilder{db: db, newPolicy: newPolicy, config: mcfg, log: log}.rebuild()
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	h := historyOf(m, meta)
	h.Entries, h.Diverged = ri.Entries, ri.Diverged
	return h, nil
}

// historyOf is the history of machine m, which ran under meta's policy.
func historyOf(m *machine, meta policyMeta) *History {
	h := &History{Policy: meta.Name, Params: meta.Params, PreRun: meta.PreRun, Epoch: m.cfg.Epoch, PreRuns: map[string]bool{}, labels: map[string]string{},
		outcome: map[string]cluster.JobState{}, known: map[string]float64{}}
	h.Cluster = m.c
	h.Timeline = m.rec
	h.Live = m.records(meta.Name)
	h.jobs(m)
	return h
}

// jobs turns the machine's jobs into trace rows (see ReadHistory), and
// keeps in the live records only the jobs the rows hold, so that every
// row of a comparison is over the same jobs.
func (h *History) jobs(m *machine) {
	live := h.Live.Jobs
	h.Live.Jobs = nil
	for i, j := range m.order {
		ej := m.eng.Job(j.eid)
		name := m.label(j.rec.ID)
		h.labels[j.rec.ID] = name
		spec := *ej.Spec
		spec.Name, spec.Submit, spec.User = name, ej.Submitted, j.rec.User
		row, ok := h.row(m, j, &spec)
		if !ok {
			continue
		}
		h.Jobs = append(h.Jobs, &spec)
		h.outcome[name] = ej.State
		if row.known {
			h.known[name] = spec.Duration()
		}
		if j.probe != nil && row.probe {
			h.PreRuns[name] = true
		}
		rec := live[i]
		rec.Name, rec.Duration = name, h.known[name]
		if rec.FirstStart < 0 && row.launched >= 0 {
			// its process ran (warming, to its end) without ever holding
			// GPUs: it started when its process did
			rec.FirstStart = row.launched
		}
		h.Live.Jobs = append(h.Live.Jobs, rec)
	}
}

// rowInfo is how a job became a trace row.
type rowInfo struct {
	// known: its work is known (mini-batches × seconds each), so its
	// slowdown can be computed; probe: the replay pre-runs it as the live
	// server did; launched: when its first process started (engine
	// seconds), -1 if it never had one.
	known, probe bool
	launched     float64
}

// minRun is the run time a job that ended the moment it started (a
// process that exited at once) is replayed as: the simulator's jobs do
// some work.
const minRun = 0.001

// row fills spec's work with what job j did (see ReadHistory) and says
// how, or returns false if the job is left out (it never ran).
func (h *History) row(m *machine, j *job, spec *cluster.JobSpec) (rowInfo, bool) {
	ej := m.eng.Job(j.eid)
	name, st := spec.Name, ej.State
	info := rowInfo{probe: true, launched: launched(m, j)}
	it := spec.IterTime
	if it == 0 {
		it = j.iterTime
	}
	declared := j.rec.Request.Iters > 0 && j.rec.Request.IterTime > 0
	// ran is how long it ran: the time it held GPUs, else (a process
	// that ran to its end while warming, as one without the in-job client
	// does) from its first process to its end
	ran := ej.Executed(m.now)
	if ran == 0 && info.launched >= 0 {
		end := m.now
		if st.Terminal() {
			end = ej.Ended
		}
		ran = max(0, end-info.launched)
	}
	prerun := 0.0
	if j.probe != nil {
		prerun = m.eng.Job(j.probe.eid).Executed(m.now)
	}
	switch {
	case j.done > 0 && it > 0 && (st.Terminal() || !declared):
		spec.Iters, spec.IterTime = j.done, it
		info.known = true
		if st != cluster.Finished {
			h.note("%s %s: replayed as the work it did, %g mini-batches of %.3g s", name, st, spec.Iters, spec.IterTime)
		}
	case st.Terminal() && ran > 0:
		spec.Iters, spec.IterTime = 1, ran
		h.note("%s %s, %s: replayed as its run time, %.1f s (its slowdown is not computed)", name, st, noProgress(j), ran)
	case st.Terminal() && (info.launched >= 0 || prerun > 0):
		// it ended as it started (its process exited at once, or its
		// pre-run failed): replayed as a run of that length, not pre-run
		spec.Iters, spec.IterTime = 1, max(prerun, minRun)
		info.probe = false
		if info.launched < 0 {
			h.note("%s %s in its pre-run: replayed as a run of its pre-run's length, %.3g s (its slowdown is not computed)", name, st, spec.IterTime)
		} else {
			h.note("%s %s at once: replayed as a run of %.3g s (its slowdown is not computed)", name, st, spec.IterTime)
		}
	case declared && !st.Terminal():
		spec.Iters, spec.IterTime = j.rec.Request.Iters, j.rec.Request.IterTime
		info.known = true
		h.note("%s %s: replayed as the work it declared, %g mini-batches of %g s", name, st, spec.Iters, spec.IterTime)
	case ran > 0:
		spec.Iters, spec.IterTime = 1, ran
		h.note("%s %s, %s: replayed as its run time so far, %.1f s (its slowdown is not computed)", name, st, noProgress(j), ran)
	case st.Terminal():
		h.note("%s %s before it ever ran: left out of every row", name, st)
		return info, false
	default:
		h.note("%s %s: left out of every row (it has not run yet and declared no work)", name, st)
		return info, false
	}
	return info, true
}

// noProgress says why a job has no mini-batches to be replayed by.
func noProgress(j *job) string {
	if j.done > 0 {
		return "its mini-batches' time unknown"
	}
	return "no progress reported (no in-job client?)"
}

// launched is when job j's first process started (engine seconds: its
// first change to warming, running or migrating), -1 if it never had one.
func launched(m *machine, j *job) float64 {
	for _, c := range j.history {
		switch c.To {
		case cluster.Warming.String(), cluster.Running.String(), cluster.Migrating.String():
			return c.At.Sub(m.cfg.Epoch).Seconds()
		}
	}
	return -1
}

// Align makes a replay's records count every job as the live history
// does, so that its row compares like with like: a job that failed or
// was cancelled live counts as such (its replay ran as long as it had),
// a job that had not ended when the history was read is unfinished
// (censored: no end, so not in the JCT), and a job whose work is unknown
// (replayed as its run time) has no slowdown. Records of jobs the history
// does not hold are left as they are.
func (h *History) Align(r *metrics.Run) {
	for i := range r.Jobs {
		j := &r.Jobs[i]
		st, ok := h.outcome[j.Name]
		if !ok {
			continue
		}
		j.Duration = h.known[j.Name]
		switch {
		case st == cluster.Finished:
		case st.Terminal():
			j.State = st
		default:
			j.State, j.End = st, -1
		}
	}
}

// Basis says, for people, how Align counts the jobs: the same jobs in
// every row, each as it ended live.
func (h *History) Basis() string {
	var n [cluster.Cancelled + 1]int
	unfinished := 0
	for _, st := range h.outcome {
		if st.Terminal() {
			n[st]++
		} else {
			unfinished++
		}
	}
	s := fmt.Sprintf("every row holds the same %d jobs, each counted as it ended live: %d finished (JCT over them)", len(h.Jobs), n[cluster.Finished])
	if n[cluster.Failed] > 0 {
		s += fmt.Sprintf(", %d failed", n[cluster.Failed])
	}
	if n[cluster.Cancelled] > 0 {
		s += fmt.Sprintf(", %d cancelled", n[cluster.Cancelled])
	}
	if unfinished > 0 {
		s += fmt.Sprintf(", %d not ended when the history was read (unfinished in every row)", unfinished)
	}
	slow := 0
	for name := range h.known {
		if h.outcome[name] == cluster.Finished {
			slow++
		}
	}
	if slow < n[cluster.Finished] {
		s += fmt.Sprintf("; slowdown over the %d of them whose work is known", slow)
	}
	return s
}

func (h *History) note(format string, args ...any) {
	h.Notes = append(h.Notes, fmt.Sprintf(format, args...))
}

// PreRunIf says whether a replay pre-runs a job (engine
// Options.PreRunIf): as the live server did.
func (h *History) PreRunIf(s *cluster.JobSpec) bool { return h.PreRuns[s.Name] }

// TimelineData exports the live timeline (timeline.Recorder.Data), its
// jobs named as Jobs are.
func (h *History) TimelineData(q timeline.Query) *timeline.Data {
	d := h.Timeline.Data(q)
	for i := range d.Jobs {
		if l, ok := h.labels[d.Jobs[i].Name]; ok {
			d.Jobs[i].Name = l
		}
	}
	return d
}
