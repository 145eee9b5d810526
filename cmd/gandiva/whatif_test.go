package main

import (
	"strings"
	"testing"
)

// TestWhatifBadInput: each bad flag or missing store is an error naming it.
// (gandiva whatif on a real history: internal/e2e TestDashboardOfTheDemo.)
func TestWhatifBadInput(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"whatif", "--data-dir", dir}, "no store in " + dir},
		{[]string{"whatif", "--data-dir", dir, "--policy", "nope"}, `unknown policy "nope"`},
		{[]string{"whatif", "--data-dir", dir, "--format", "xml"}, `--format "xml"`},
		{[]string{"whatif", "--data-dir", dir, "--startup", "-1"}, "--startup -1"},
	} {
		if _, _, err := run(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
}
