package demo

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gandiva-sched/gandiva/internal/api"
)

func TestWorkload(t *testing.T) {
	jobs := Workload(4)
	if len(jobs) != 8 || jobs[1].GPUs != 2 || jobs[0].Steps != 150 || jobs[3].Steps != 225 {
		t.Fatalf("workload for 4 GPUs: %+v", jobs)
	}
	if n := len(Workload(20)); n != 16 {
		t.Fatalf("workload for 20 GPUs has %d jobs, want at most 16", n)
	}
	args := jobs[0].Args("/d", 0)
	if i := slices.Index(args, "-step-time"); i < 0 || args[i+1] != "0s" || !slices.Contains(args, "/d/train-a.ledger") {
		t.Fatalf("args %v", args)
	}
}

// check passes only jobs that finished once with the reference checksum.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	write := func(name, sum, ledger string) {
		os.WriteFile(filepath.Join(dir, name+".json"), []byte(`{"checksum":"`+sum+`"}`), 0o644)
		os.WriteFile(filepath.Join(dir, name+".ledger"), []byte(ledger), 0o644)
	}
	write("good", "aa", "start 1 0\ndone aa\n")
	write("wrong", "bb", "start 1 0\ndone bb\n")
	write("twice", "aa", "start 1 0\ndone aa\nstart 2 0\ndone aa\n")
	write("overlap", "aa", "start 1 0\noverlap 42\ndone aa\n")
	want := map[string]string{"good": "aa", "wrong": "aa", "twice": "aa", "overlap": "aa"}
	job := func(id, name string) api.Job { return api.Job{ID: id, Name: name, GPUs: 1, State: "finished"} }
	var out bytes.Buffer
	if err := check(&out, []api.Job{job("j1", "good")}, dir, want, nil); err != nil {
		t.Fatalf("good job: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "✓ equal") {
		t.Fatalf("table:\n%s", out.String())
	}
	for _, name := range []string{"wrong", "twice", "overlap"} {
		out.Reset()
		if err := check(&out, []api.Job{job("j1", "good"), job("j2", name)}, dir, want, nil); err == nil || !strings.Contains(err.Error(), "jobs j2 ") {
			t.Errorf("%s: error %v\n%s", name, err, out.String())
		}
	}
	out.Reset()
	failed := job("j1", "good")
	failed.State = "failed"
	if err := check(&out, []api.Job{failed}, dir, want, nil); err == nil {
		t.Errorf("a failed job passed:\n%s", out.String())
	}
}

// The summary's PACKED WITH column is what the narration said: a job
// running on a GPU another running job holds is "packed with" it, and both
// are listed with each other in the table, whichever was placed second.
func TestPackedAgrees(t *testing.T) {
	w := func(gpus ...int) []api.Worker { return []api.Worker{{Node: "n", GPUs: gpus}} }
	all := []api.Job{
		{ID: "j1", Name: "a", State: "running", Workers: w(0)},
		{ID: "j2", Name: "b", State: "running", Workers: w(0), Packs: 1},
		{ID: "j3", Name: "c", State: "running", Workers: w(1)},
		{ID: "j4", Name: "d", State: "warming", Workers: w(1)},
	}
	packed := map[string][]string{}
	lines := map[string]string{}
	for _, j := range all {
		lines[j.ID] = describe(j, all, packed)
	}
	if !strings.Contains(lines["j1"], "packed with j2") || !strings.Contains(lines["j2"], "packed with j1") {
		t.Errorf("narration: %q, %q", lines["j1"], lines["j2"])
	}
	if strings.Contains(lines["j3"], "packed") || !strings.Contains(lines["j4"], "warm start") || !strings.Contains(lines["j4"], "beside j3") {
		t.Errorf("narration: %q, %q", lines["j3"], lines["j4"])
	}
	dir := t.TempDir()
	for _, n := range []string{"a", "b", "c", "d"} {
		os.WriteFile(filepath.Join(dir, n+".json"), []byte(`{"checksum":"aa"}`), 0o644)
		os.WriteFile(filepath.Join(dir, n+".ledger"), []byte("start 1 0\ndone aa\n"), 0o644)
	}
	var out bytes.Buffer
	for i := range all {
		all[i].State = "finished"
	}
	if err := check(&out, all, dir, map[string]string{"a": "aa", "b": "aa", "c": "aa", "d": "aa"}, packed); err != nil {
		t.Fatal(err)
	}
	rows := strings.Split(out.String(), "\n")
	for _, want := range []struct{ id, with string }{{"j1", " j2 "}, {"j2", " j1 "}, {"j3", " - "}, {"j4", " - "}} {
		found := false
		for _, r := range rows {
			if strings.HasPrefix(r, want.id+" ") && strings.Contains(r, want.with) {
				found = true
			}
		}
		if !found {
			t.Errorf("row of %s lacks %q:\n%s", want.id, want.with, out.String())
		}
	}
}

func TestWithin(t *testing.T) {
	got := within([2]float64{10, 20}, [][2]float64{{0, 12}, {11, 13}, {15, 16}, {19, 30}})
	if got != 3+1+1 {
		t.Fatalf("within = %v, want 5", got)
	}
}

// The GPU-busy fraction counts each GPU once (a packed pair) and only
// while its job is running past its start-up.
func TestBusyMeter(t *testing.T) {
	w := func(gpus ...int) []api.Worker { return []api.Worker{{Node: "vm", GPUs: gpus}} }
	t0 := time.Unix(1000, 0)
	b := newBusyMeter(4)
	// 0-1 s: a and b packed on GPU 0, c starting up on GPU 1: 1 of 4 busy
	b.sample(t0, []api.Job{{ID: "a", State: "running", Workers: w(0)}, {ID: "b", State: "running", Workers: w(0)},
		{ID: "c", State: "running", Starting: "starting (1 s)", Workers: w(1)}, {ID: "d", State: "suspended"}})
	// 1-3 s: c ready on GPU 1, d migrating to GPUs 2,3: 2 of 4 busy
	b.sample(t0.Add(time.Second), []api.Job{{ID: "a", State: "running", Workers: w(0)}, {ID: "c", State: "running", Workers: w(1)},
		{ID: "d", State: "migrating", Workers: w(2, 3)}})
	b.sample(t0.Add(3*time.Second), nil)
	if got, want := b.fraction(), (1.0+2*2)/(4*3); math.Abs(got-want) > 1e-9 {
		t.Fatalf("busy fraction %v, want %v", got, want)
	}
	var out bytes.Buffer
	b.report(&out)
	if !strings.Contains(out.String(), "GPU-busy: 42% of 12 GPU-seconds") {
		t.Fatalf("report %q", out.String())
	}
}

// A move is narrated with the reason the policy gave: its gain and cost.
func TestMoveReason(t *testing.T) {
	why := "resumed elsewhere: its state moves (migrating) (turn elsewhere: gains 30.0 s, costs a 20.0 s start-up)"
	h := []api.Change{{From: "queued", To: "running", Reason: "started (turn)"}, {From: "running", To: "suspended", Reason: "suspended (turn over)"},
		{From: "suspended", To: "migrating", Reason: why}, {From: "migrating", To: "running", Reason: "migrated: its state was restored on its new GPUs"}}
	if got := moveReason(h); got != "moved: "+why {
		t.Fatalf("moveReason = %q", got)
	}
	if got := moveReason(h[:2]); got != "moved" {
		t.Fatalf("moveReason without a move = %q", got)
	}
}
