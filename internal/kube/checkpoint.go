package kube

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/gandiva-sched/gandiva/internal/cluster"
)

// The checkpoint contract: annotations on a workload's object (a Job, a
// JobSet, a RayJob, ...) that say when its trainer last saved its work.
// The trainer (or whatever writes its checkpoints) sets them after each
// checkpoint; Gandiva reads them and, among victims its policy ranks
// equal, suspends first those that lose least work since their last
// checkpoint. docs/KUBERNETES.md ("Checkpoint contract") is the spec.
const (
	// AnnCheckpointTime is when the last checkpoint was complete (RFC 3339).
	AnnCheckpointTime = "gandiva.io/checkpoint-time"
	// AnnCheckpointStep is the step (mini-batches done) it holds.
	AnnCheckpointStep = "gandiva.io/checkpoint-step"
	// AnnCheckpointCost is the seconds it took to write.
	AnnCheckpointCost = "gandiva.io/checkpoint-cost"
)

// checkpoint is a workload's last checkpoint as its annotations give it.
type checkpoint struct {
	at   float64 // Unix seconds
	step float64 // -1: not given
	cost float64 // -1: not given
}

// readCheckpoint reads the checkpoint annotations; ok is false when there
// is no AnnCheckpointTime, err says what is wrong with a bad value (a
// workload's annotations are its users': hostile).
func readCheckpoint(ann map[string]string) (c checkpoint, ok bool, err error) {
	v, has := ann[AnnCheckpointTime]
	if !has {
		return checkpoint{}, false, nil
	}
	t, perr := time.Parse(time.RFC3339Nano, strings.TrimSpace(v))
	if perr != nil {
		return checkpoint{}, false, fmt.Errorf("annotation %s=%q: want an RFC 3339 time (2006-01-02T15:04:05Z)", AnnCheckpointTime, v)
	}
	c = checkpoint{at: float64(t.UnixNano()) / 1e9, step: -1, cost: -1}
	num := func(key string, hi float64) (float64, error) {
		v, has := ann[key]
		if !has {
			return -1, nil
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || math.IsNaN(f) || f < 0 || f > hi {
			return -1, fmt.Errorf("annotation %s=%q: want a number from 0 to %g", key, v, hi)
		}
		return f, nil
	}
	if c.step, err = num(AnnCheckpointStep, 1e15); err != nil {
		return checkpoint{}, false, err
	}
	if c.cost, err = num(AnnCheckpointCost, 86400); err != nil {
		return checkpoint{}, false, err
	}
	return c, true, nil
}

// String is the checkpoint for people: "at 2026-01-02T03:04:05Z, step 1200, written in 4s".
func (c checkpoint) String() string {
	s := "at " + time.Unix(0, int64(c.at*1e9)).UTC().Format(time.RFC3339)
	if c.step >= 0 {
		s += ", step " + strconv.FormatFloat(c.step, 'f', -1, 64)
	}
	if c.cost >= 0 {
		s += ", written in " + strconv.FormatFloat(c.cost, 'f', -1, 64) + "s"
	}
	return s
}

// checkpointEvent is the engine event that reports checkpoint c of job j
// at now, or false when the engine knows it already (a checkpoint not
// newer than the job's SavedAt: the same one, or one from before its
// last start, which restored it). A time in the future counts as now.
func checkpointEvent(j *cluster.Job, c checkpoint, now float64) (cluster.Event, bool) {
	at := min(c.at, now)
	if j == nil || j.State.Terminal() || (j.Saved && at <= j.SavedAt) {
		return cluster.Event{}, false
	}
	ev := cluster.Event{Time: now, Kind: cluster.EvProfile, Job: j.ID, Saved: true, SavedAt: at}
	if c.step > j.Done {
		ev.Done = c.step
	}
	return ev, true
}

// observeCheckpoint reports a workload's last checkpoint, from its
// object's annotations, to the engine when it is new (syncWorkload). A bad
// annotation is logged and otherwise ignored: the workload runs as one
// that reports no checkpoints.
func (s *Scheduler) observeCheckpoint(ws *wstate, obj Object, now float64) {
	c, ok, err := readCheckpoint(obj.GetAnnotations())
	if err != nil {
		s.log.Debug("checkpoint annotations ignored", "workload", ws.w.key, "err", err)
		return
	}
	if !ok {
		return
	}
	c.at = s.clk.at(c.at) // (the annotation's time is the wall clock's)
	ev, ok := checkpointEvent(s.eng.Job(ws.id), c, now)
	if !ok {
		return
	}
	if err := s.eng.Apply(ev); err == nil {
		s.pending++
	}
}
