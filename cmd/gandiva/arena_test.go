package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
)

// TestArenaRefusesBadFlags: gandiva kube arena checks its flags, naming
// each, before it brings up any control plane.
func TestArenaRefusesBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"--speed", "0"}, "--speed"},
		{[]string{"--speed", "NaN"}, "--speed"},
		{[]string{"--checkpoint-every", "-1"}, "--checkpoint-every"},
		{[]string{"--synthetic", "-3"}, "--synthetic"},
		{[]string{"--timeout", "0s"}, "--timeout"},
		{[]string{"--format", "xml"}, "--format"},
		{[]string{"--perf", "b200"}, "--perf"},
		{[]string{"--schedulers", "nosuch-scheduler"}, "--schedulers"},
		{[]string{"--schedulers", "gandiva:nosuch"}, "--schedulers"},
		{[]string{"--synthetic", "5", "--users", "0"}, "--users"},
		{[]string{"--synthetic", "5", "--gang-sizes", "1,999"}, "--gang-sizes"},
		{[]string{"--synthetic", "5", "--trace", "x.csv"}, "--synthetic"},
		{[]string{"--records"}, "--records"},
		{[]string{"--format", "csv", "--records"}, "--records"},
		{[]string{"--trace", "no-such-trace.csv"}, "--trace"},
		{[]string{"--workload", "deployment"}, "--workload"},
		{[]string{"--workload", "pods", "--schedulers", "gandiva:fifo,kueue"}, "--workload"},
		{[]string{"--synthetic", "5", "--html", "/no/such/dir/report.html"}, "--html"},
	} {
		_, _, err := run(t, append([]string{"kube", "arena"}, c.args...)...)
		if err == nil || !strings.HasPrefix(err.Error(), c.flag) {
			t.Errorf("gandiva kube arena %s: error %v, want one starting with %s", strings.Join(c.args, " "), err, c.flag)
		}
	}
}

// TestArenaExamplesExist: the --cluster and --trace of each example in
// gandiva kube arena --help name a preset or a file of the repository
// (run from its root), so that a newcomer can paste them.
func TestArenaExamplesExist(t *testing.T) {
	cmd, _, err := newRoot().Find([]string{"kube", "arena"})
	if err != nil || cmd.Name() != "arena" {
		t.Fatalf("gandiva kube arena: %v", err)
	}
	n := 0
	for _, line := range strings.Split(cmd.Example, "\n") {
		args := strings.Fields(line)
		for i := 0; i+1 < len(args); i++ {
			switch args[i] {
			case "--cluster":
				n++
				if _, err := cluster.Load(args[i+1]); err != nil {
					t.Errorf("example %q: %v", line, err)
				}
			case "--trace":
				n++
				if _, err := os.Stat(filepath.Join("..", "..", args[i+1])); err != nil {
					t.Errorf("example %q: --trace: %v", line, err)
				}
			}
		}
	}
	if n == 0 {
		t.Fatalf("no --cluster or --trace in the examples:\n%s", cmd.Example)
	}
}
