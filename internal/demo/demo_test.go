package demo

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

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
	if err := check(&out, []api.Job{job("j1", "good")}, dir, want); err != nil {
		t.Fatalf("good job: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "✓ equal") {
		t.Fatalf("table:\n%s", out.String())
	}
	for _, name := range []string{"wrong", "twice", "overlap"} {
		out.Reset()
		if err := check(&out, []api.Job{job("j1", "good"), job("j2", name)}, dir, want); err == nil || !strings.Contains(err.Error(), "jobs j2 ") {
			t.Errorf("%s: error %v\n%s", name, err, out.String())
		}
	}
	out.Reset()
	failed := job("j1", "good")
	failed.State = "failed"
	if err := check(&out, []api.Job{failed}, dir, want); err == nil {
		t.Errorf("a failed job passed:\n%s", out.String())
	}
}
