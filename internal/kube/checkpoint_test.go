package kube

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/harness"
)

// The checkpoint annotations: a time, and optionally a step and a cost;
// bad values are refused naming the annotation.
func TestReadCheckpoint(t *testing.T) {
	c, ok, err := readCheckpoint(map[string]string{AnnCheckpointTime: "2026-01-02T03:04:05.5Z", AnnCheckpointStep: "1200", AnnCheckpointCost: " 4 "})
	want := checkpoint{at: float64(time.Date(2026, 1, 2, 3, 4, 5, 5e8, time.UTC).UnixNano()) / 1e9, step: 1200, cost: 4}
	if !ok || err != nil || c != want {
		t.Fatalf("got %+v %v %v, want %+v", c, ok, err, want)
	}
	if s := c.String(); s != "at 2026-01-02T03:04:05Z, step 1200, written in 4s" {
		t.Errorf("String %q", s)
	}
	if c, ok, err := readCheckpoint(map[string]string{AnnCheckpointTime: "2026-01-02T03:04:05Z"}); !ok || err != nil || c.step != -1 || c.cost != -1 {
		t.Errorf("time alone: %+v %v %v", c, ok, err)
	}
	if _, ok, err := readCheckpoint(map[string]string{AnnCheckpointStep: "5"}); ok || err != nil {
		t.Errorf("no time: ok %v, err %v", ok, err)
	}
	for _, c := range []struct {
		ann map[string]string
		bad string
	}{
		{map[string]string{AnnCheckpointTime: "yesterday"}, AnnCheckpointTime},
		{map[string]string{AnnCheckpointTime: "2026-01-02T03:04:05Z", AnnCheckpointStep: "-1"}, AnnCheckpointStep},
		{map[string]string{AnnCheckpointTime: "2026-01-02T03:04:05Z", AnnCheckpointStep: "NaN"}, AnnCheckpointStep},
		{map[string]string{AnnCheckpointTime: "2026-01-02T03:04:05Z", AnnCheckpointCost: "1e9"}, AnnCheckpointCost},
	} {
		if _, ok, err := readCheckpoint(c.ann); ok || err == nil || !strings.Contains(err.Error(), c.bad) {
			t.Errorf("%v: ok %v, err %v; want an error naming %s", c.ann, ok, err, c.bad)
		}
	}
}

// A checkpoint is reported once, and not when it is older than the job's
// last start (which restored it); a time in the future counts as now.
func TestCheckpointEvent(t *testing.T) {
	j := &cluster.Job{ID: 3, State: cluster.Running, Done: 100}
	ev, ok := checkpointEvent(j, checkpoint{at: 50, step: 120, cost: -1}, 60)
	if !ok || ev.Kind != cluster.EvProfile || !ev.Saved || ev.SavedAt != 50 || ev.Done != 120 || ev.Job != 3 || ev.Time != 60 {
		t.Fatalf("first report: %+v %v", ev, ok)
	}
	if ev, _ := checkpointEvent(j, checkpoint{at: 50, step: 80, cost: -1}, 60); ev.Done != 0 {
		t.Errorf("a step behind the job's progress moved it: %+v", ev)
	}
	if ev, ok := checkpointEvent(j, checkpoint{at: 500, step: -1, cost: -1}, 60); !ok || ev.SavedAt != 60 {
		t.Errorf("a future time: %+v %v, want SavedAt 60", ev, ok)
	}
	j.Saved, j.SavedAt = true, 50
	if _, ok := checkpointEvent(j, checkpoint{at: 50, step: -1, cost: -1}, 70); ok {
		t.Error("the same checkpoint reported again")
	}
	if _, ok := checkpointEvent(j, checkpoint{at: 55, step: -1, cost: -1}, 70); !ok {
		t.Error("a newer checkpoint not reported")
	}
	j.State = cluster.Finished
	if _, ok := checkpointEvent(j, checkpoint{at: 65, step: -1, cost: -1}, 70); ok {
		t.Error("a checkpoint of a finished job reported")
	}
}

// Two running workloads that tiresias-l ranks equal differ only by the
// checkpoint their annotations report: a third that needs one of their
// GPUs suspends the one that loses less work since its last checkpoint,
// whichever the policy's tie-break (scan order) would have taken.
func TestCheckpointAnnotationChoosesVictim(t *testing.T) {
	stamp := func(sec float64) string { return time.Unix(int64(sec), 0).UTC().Format(time.RFC3339) }
	for _, c := range []struct {
		savedA, savedB float64
		want           string
	}{
		{90, 30, "suspend a "}, // a saved 10 s before, b 70 s
		{30, 90, "suspend b "},
	} {
		h := &harness.H{}
		do := func(line string) string {
			t.Helper()
			cmd, args, err := datadriven.ParseLine(line)
			if err != nil {
				t.Fatal(err)
			}
			out, err := h.Do(&datadriven.TestData{Cmd: cmd, CmdArgs: args})
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return out
		}
		do("cluster servers=1 gpus=2")
		do("policy name=tiresias-l limits=50")
		do("submit name=a gpus=1 iters=100000")
		do("submit name=b gpus=1 iters=100000")
		do("round")
		do("at t=95")
		for name, saved := range map[string]float64{"a": c.savedA, "b": c.savedB} {
			cp, ok, err := readCheckpoint(map[string]string{AnnCheckpointTime: stamp(saved)})
			if !ok || err != nil {
				t.Fatal(ok, err)
			}
			j, _ := h.E.Lookup(name)
			ev, ok := checkpointEvent(j, cp, h.Now)
			if !ok {
				t.Fatalf("%s: no event", name)
			}
			if err := h.E.Apply(ev); err != nil {
				t.Fatal(err)
			}
		}
		do("at t=100")
		do("submit name=c gpus=1 iters=100000")
		if out := do("round"); !strings.Contains(out, c.want) {
			t.Errorf("a saved at %v, b at %v: %q, want %q", c.savedA, c.savedB, out, c.want)
		}
	}
}

// FuzzReadCheckpoint: hostile annotations never panic, and what is
// accepted is within the bounds the contract states.
func FuzzReadCheckpoint(f *testing.F) {
	f.Add("2026-01-02T03:04:05Z", "1200", "4")
	f.Add("2026-01-02T03:04:05.123456789+02:00", "", "-0")
	f.Add("yesterday", "1e400", "NaN")
	f.Fuzz(func(t *testing.T, at, step, cost string) {
		ann := map[string]string{AnnCheckpointTime: at}
		if step != "" {
			ann[AnnCheckpointStep] = step
		}
		if cost != "" {
			ann[AnnCheckpointCost] = cost
		}
		c, ok, err := readCheckpoint(ann)
		if ok == (err != nil) {
			t.Fatalf("ok %v with err %v", ok, err)
		}
		if !ok {
			return
		}
		if math.IsNaN(c.at) || c.step > 1e15 || c.cost > 86400 || (step == "") != (c.step == -1) || (cost == "") != (c.cost == -1) || c.step < -1 || c.cost < -1 {
			t.Fatalf("accepted %+v from %q %q %q", c, at, step, cost)
		}
		j := &cluster.Job{ID: 1, State: cluster.Running}
		if ev, ok := checkpointEvent(j, c, 1e9); ok && (ev.SavedAt > 1e9 || math.IsNaN(ev.SavedAt)) {
			t.Fatalf("event %+v", ev)
		}
	})
}
