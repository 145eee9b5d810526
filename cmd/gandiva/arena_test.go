package main

import (
	"strings"
	"testing"
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
		{[]string{"--schedulers", "volcano"}, "--schedulers"},
		{[]string{"--schedulers", "gandiva:nosuch"}, "--schedulers"},
		{[]string{"--synthetic", "5", "--users", "0"}, "--users"},
		{[]string{"--synthetic", "5", "--gang-sizes", "1,999"}, "--gang-sizes"},
		{[]string{"--synthetic", "5", "--trace", "x.csv"}, "--synthetic"},
	} {
		_, _, err := run(t, append([]string{"kube", "arena"}, c.args...)...)
		if err == nil || !strings.HasPrefix(err.Error(), c.flag) {
			t.Errorf("gandiva kube arena %s: error %v, want one starting with %s", strings.Join(c.args, " "), err, c.flag)
		}
	}
}
