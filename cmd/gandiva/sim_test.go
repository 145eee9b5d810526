package main

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// run executes the CLI with args and returns stdout, stderr and the error.
func run(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	root := newRoot()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), errb.String(), err
}

// TestSimJSONContract checks the fields scripts rely on in --format json.
func TestSimJSONContract(t *testing.T) {
	out, _, err := run(t, "sim", "--format", "json", "--quiet")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Results []map[string]any `json:"results"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if len(doc.Results) < 2 {
		t.Fatalf("want a result per policy, got %d", len(doc.Results))
	}
	for _, r := range doc.Results {
		for _, k := range []string{"policy", "jobs", "finished", "avg_jct_s", "p50_jct_s", "p95_jct_s", "p99_jct_s",
			"avg_queue_s", "makespan_s", "avg_time_to_100_minibatches_s", "gpu_utilization", "cluster_throughput",
			"preemptions", "migrations"} {
			if _, ok := r[k]; !ok {
				t.Errorf("result %v lacks %q", r["policy"], k)
			}
		}
		if r["jobs"].(float64) != 850 || r["finished"].(float64) != 850 {
			t.Errorf("%v: jobs %v finished %v, want 850", r["policy"], r["jobs"], r["finished"])
		}
	}
}

// TestSimTiresiasFIFO is the foundation's acceptance figure through the CLI.
func TestSimTiresiasFIFO(t *testing.T) {
	for spec, want := range map[string]string{"n2g4": "1556.5", "n4g4": "200.8"} {
		path := "../../../shared/data/tiresias/specs/" + spec + ".csv"
		if _, err := os.Stat(path); err != nil {
			path = "tiresias-" + spec
		}
		out, stderr, err := run(t, "sim", "--trace", "../../internal/dataset/files/60_job.csv", "--cluster", path,
			"--policy", "fifo", "--compat", "tiresias", "--format", "table")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, " "+want+" ") {
			t.Errorf("%s: table lacks average JCT %s:\n%s", spec, want, out)
		}
		// plurals as English has them (the README shows this example)
		if !strings.Contains(stderr, "60 jobs × 1 policy simulated") || (spec == "n2g4" && !strings.Contains(out, "2 servers, 8 GPUs (8 V100), 1 domain,")) {
			t.Errorf("%s: header or footer counts:\n%s%s", spec, out, stderr)
		}
	}
}

func TestSimBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := dir + "/bad.csv"
	os.WriteFile(bad, []byte("job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n0,x,0,1,vgg,5,1\n"), 0o644)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"sim", "--policy", "nope"}, `unknown policy "nope"`},
		{[]string{"sim", "--format", "xml"}, `--format "xml"`},
		{[]string{"sim", "--compat", "gavel"}, `--compat "gavel"`},
		{[]string{"sim", "--cluster", "nowhere"}, "no such file and no such preset"},
		{[]string{"sim", "--trace", bad}, "line 2, field num_gpu"},
		{[]string{"sim", "--policy", "fifo:bogus=1"}, "unknown parameter(s) bogus"},
		{[]string{"sim", "--trace", "../../internal/dataset/files/60_job.csv", "--cluster", "p100x1"}, "needs 8 GPUs"},
	}
	for _, tc := range cases {
		_, _, err := run(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
}

// TestSimExplain: --explain traces one job under each policy, with the
// policy's own explanation while it waits, before the table; an unknown
// job is an error that names it.
func TestSimExplain(t *testing.T) {
	out, _, err := run(t, "sim", "--quiet", "--trace", "../../internal/dataset/files/60_job.csv", "--cluster", "tiresias-n2g4",
		"--policy", "tiresias-l,fifo", "--explain", "12")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"policy tiresias-l, job 12:\nt=337.000 12 queued (submitted at 337.000, 2 GPUs)\n",
		"waits: queue 1 of 3 (attained 0 GPU·s; limits 3,250/7,200); place 3 of 3 waiting in it",
		"policy fifo, job 12:", "waits: submission order", "12 finished: completed", "avg JCT"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if _, _, err := run(t, "sim", "--quiet", "--policy", "fifo", "--explain", "no-such-job"); err == nil || !strings.Contains(err.Error(), `"no-such-job"`) {
		t.Errorf("--explain of an unknown job: %v", err)
	}
}
