package main

import (
	"bytes"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/arena"
)

// TestKubeRefusesBadClockSpeed: gandiva kube refuses a --clock-speed that
// is not a number > 0 before it reads any kubeconfig.
func TestKubeRefusesBadClockSpeed(t *testing.T) {
	for _, v := range []string{"0", "-1", "NaN", "+Inf"} {
		_, _, err := run(t, "kube", "--clock-speed", v, "--kubeconfig", "/no/such/kubeconfig")
		if err == nil || !strings.HasPrefix(err.Error(), "--clock-speed") {
			t.Errorf("--clock-speed %s: error %v, want one starting with --clock-speed", v, err)
		}
	}
}

// writeResults writes a results file of the given schedulers and speed.
func writeResults(t *testing.T, path string, speed float64, scheds ...string) {
	t.Helper()
	st := arena.Settings{Trace: "synthetic", Cluster: "tiresias-n2g4", Jobs: 1, Speed: speed, Perf: "gandiva-perf/v1"}
	var res []arena.Result
	for _, s := range scheds {
		rec := &arena.Record{Capacity: 8, End: 100, Jobs: []arena.JobSeen{{Key: "u-a/j-1", Namespace: "u-a", GPUs: 1, Submit: 0, FirstBind: 1, FirstRun: 2, Completed: 50, JobComplete: 51}}}
		res = append(res, arena.Result{Scheduler: s, Status: "ok", Summary: arena.Summarize(rec), Record: rec})
	}
	var buf bytes.Buffer
	if err := arena.Write(&buf, "json", st, res, true); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}

// gandiva kube arena report merges saved runs into one HTML page (and
// table), and refuses runs of different settings and bad flags, naming them.
func TestArenaReport(t *testing.T) {
	dir := t.TempDir()
	a, b, c := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json"), filepath.Join(dir, "c.json")
	writeResults(t, a, 20, "gandiva:fifo", "kube-scheduler")
	writeResults(t, b, 20, "kueue")
	writeResults(t, c, 50, "volcano")
	page := filepath.Join(dir, "out", "report.html")
	os.Mkdir(filepath.Dir(page), 0o700)
	out, _, err := run(t, "kube", "arena", "report", "--from", a, "--from", b, "--html", page, "--format", "table")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"gandiva:fifo", "kube-scheduler", "kueue"} {
		if !strings.Contains(out, s) {
			t.Errorf("the merged table has no row of %s:\n%s", s, out)
		}
	}
	data, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	paths := 0
	d := xml.NewDecoder(bytes.NewReader(data))
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the report is not well-formed: %v", err)
		}
		if e, ok := tok.(xml.StartElement); ok && e.Name.Local == "path" {
			paths++
		}
	}
	if paths != 6 { // 3 schedulers × (CDF, utilisation)
		t.Errorf("%d lines in the report's charts, want 6", paths)
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--from", a, "--from", c, "--html", page}, "--from: " + a + " and " + c + ": different speed"},
		{[]string{"--from", a, "--from", a, "--html", page}, "--from: scheduler gandiva:fifo: run in both"},
		{[]string{"--html", page}, "--from"},
		{[]string{"--from", a}, "--html or --format"},
		{[]string{"--from", a, "--format", "xml"}, "--format"},
		{[]string{"--from", filepath.Join(dir, "none.json"), "--html", page}, "--from"},
		{[]string{"--from", page, "--html", page + ".2"}, "--from: " + page + ": not the JSON"},
	} {
		_, _, err := run(t, append([]string{"kube", "arena", "report"}, bad.args...)...)
		if err == nil || !strings.HasPrefix(err.Error(), bad.want) {
			t.Errorf("arena report %s: error %v, want one starting with %q", strings.Join(bad.args, " "), err, bad.want)
		}
	}
}
