package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/experiment"
	"github.com/gandiva-sched/gandiva/internal/timeline"
	"github.com/gandiva-sched/gandiva/internal/trace"
	"github.com/gandiva-sched/gandiva/internal/ui"
)

// TestSimHTML: sim --html writes one run per policy, each with the
// timeline a recorder beside the same simulation records, and the figures
// of the table.
func TestSimHTML(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.html")
	tr := "../../internal/dataset/files/60_job.csv"
	_, stderr, err := run(t, "sim", "--quiet", "--trace", tr, "--cluster", "tiresias-n4g4", "--policy", "gandiva:quantum=30,fifo", "--html", path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr, "wrote the timeline of 2 runs to "+path+" (") || !strings.Contains(stderr, " MB; it opens from disk") {
		t.Errorf("stderr: %s", stderr)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rep, err := ui.ReadReport(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 2 || rep.Runs[0].Label != "gandiva:quantum=30" || rep.Runs[1].Policy != "fifo" || !strings.Contains(rep.Title, "60_job.csv") {
		t.Fatalf("report %q with runs %v", rep.Title, rep.Runs)
	}
	// the same simulation, recorded here
	jobs, _, err := trace.ReadFile(tr, trace.Auto, trace.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	c, err := cluster.Load("tiresias-n4g4")
	if err != nil {
		t.Fatal(err)
	}
	recs := []*timeline.Recorder{timeline.NewRecorder(timeline.Options{Noted: true}), timeline.NewRecorder(timeline.Options{Noted: true})}
	if _, err := experiment.Compare(experiment.Setup{Cluster: c, Jobs: jobs, Policies: []string{"gandiva", "fifo"},
		Params: []map[string]string{{"quantum": "30"}, nil}, Seed: 1, Timelines: recs}); err != nil {
		t.Fatal(err)
	}
	for i, r := range rep.Runs {
		got, _ := json.Marshal(r.Timeline)
		want, _ := json.Marshal(recs[i].Data(timeline.Query{}))
		if string(got) != string(want) {
			t.Errorf("%s: the report's timeline differs from the simulation's (%d vs %d bytes)", r.Label, len(got), len(want))
		}
		segs := 0
		for _, row := range r.Timeline.GPUs {
			segs += len(row)
		}
		if len(r.Timeline.Jobs) != 60 || segs < 60 || len(r.Stats) == 0 {
			t.Errorf("%s: %d jobs, %d segments, stats %v", r.Label, len(r.Timeline.Jobs), segs, r.Stats)
		}
		if st := r.Stats[0]; st.Name != "jobs finished" || st.Value != "60 of 60" {
			t.Errorf("%s: first figure %+v", r.Label, st)
		}
	}
	if _, _, err := run(t, "sim", "--quiet", "--policy", "fifo", "--limit", "5", "--html", filepath.Join(t.TempDir(), "no", "such", "dir.html")); err == nil || !strings.Contains(err.Error(), "--html") {
		t.Errorf("--html into a missing directory: %v", err)
	}
}
