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
	// Live is what happened: the per-job records (named as Jobs) and the
	// timeline (TimelineData names its jobs as Jobs).
	Live     *metrics.Run
	Timeline *timeline.Recorder
	labels   map[string]string
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
// did not finish (cancelled, failed, still waiting or running when the
// history was read) is replayed as a job that does the work it asked for
// (iters × iter_time, when declared), else the work it did; a job without
// progress reports is replayed as its run time. Jobs that never ran and
// declared no work are left out (a Note says so).
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
	h := &History{Policy: meta.Name, Params: meta.Params, PreRun: meta.PreRun, Epoch: epoch, PreRuns: map[string]bool{}, labels: map[string]string{},
		Entries: ri.Entries, Diverged: ri.Diverged}
	h.Cluster = m.c
	h.Timeline = m.rec
	h.Live = m.records(meta.Name)
	h.jobs(m)
	return h, nil
}

// jobs turns the machine's jobs into trace rows (see ReadHistory), and
// names the live records as the rows.
func (h *History) jobs(m *machine) {
	for i, j := range m.order {
		ej := m.eng.Job(j.eid)
		name := m.label(j.rec.ID)
		h.labels[j.rec.ID] = name
		h.Live.Jobs[i].Name = name
		spec := *ej.Spec
		spec.Name, spec.Submit, spec.User = name, ej.Submitted, j.rec.User
		it := spec.IterTime
		if it == 0 {
			it = j.iterTime
		}
		declared := j.rec.Request.Iters > 0 && j.rec.Request.IterTime > 0
		ran := ej.Executed(m.now)
		switch {
		case ej.State == cluster.Finished && j.done > 0 && it > 0:
			spec.Iters, spec.IterTime = j.done, it
		case ej.State == cluster.Finished && ran > 0:
			spec.Iters, spec.IterTime = 1, ran
			h.note("%s reported no progress: replayed as its run time, %.1f s", name, ran)
		case declared:
			spec.Iters, spec.IterTime = j.rec.Request.Iters, j.rec.Request.IterTime
			if ej.State != cluster.Finished {
				h.note("%s %s: replayed as the work it declared, %g mini-batches of %g s", name, ej.State, spec.Iters, spec.IterTime)
			}
		case j.done > 0 && it > 0:
			spec.Iters, spec.IterTime = j.done, it
			h.note("%s %s: replayed as the work it did, %g mini-batches of %.3g s", name, ej.State, spec.Iters, spec.IterTime)
		case ran > 0:
			spec.Iters, spec.IterTime = 1, ran
			h.note("%s %s: replayed as its run time, %.1f s", name, ej.State, ran)
		default:
			h.note("%s %s: left out (it never ran and declared no work)", name, ej.State)
			continue
		}
		h.Jobs = append(h.Jobs, &spec)
		if j.probe != nil {
			h.PreRuns[name] = true
		}
	}
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
