package kubecli

import (
	"strings"
	"testing"
)

// PrintNotes prints each note once, on a line of its own, inertly (a
// kind's name comes from the cluster).
func TestPrintNotes(t *testing.T) {
	var b strings.Builder
	PrintNotes(&b, []string{"JobSets not shown: you may not list jobsets.jobset.x-k8s.io in namespace team-a", "evil\x1b[2J\u202e"})
	got := b.String()
	if strings.Count(got, "\n") != 2 || !strings.HasPrefix(got, "note: JobSets not shown") {
		t.Errorf("notes printed as %q", got)
	}
	if strings.ContainsAny(got, "\x1b\u202e") {
		t.Errorf("a note's control characters reached the terminal: %q", got)
	}
	b.Reset()
	PrintNotes(&b, nil)
	if b.Len() != 0 {
		t.Errorf("no notes printed %q", b.String())
	}
}
