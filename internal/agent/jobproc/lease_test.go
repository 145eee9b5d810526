package jobproc

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLeaseLapseStopsClientJob: the agent renews a job's lease (Renew), then
// falls silent, as a stopped agent does: the job's in-job client stops the
// job by itself at its next mini-batch boundary, with nothing killing it,
// once the last renewal has run out.
func TestLeaseLapseStopsClientJob(t *testing.T) {
	t.Parallel()
	a := trainerArgs{seed: 5, dim: 64, steps: 1_000_000}
	root := t.TempDir()
	s := node(root, filepath.Join(root, "ckpt"), a, 5*time.Millisecond)
	p := launch(t, s)
	p.Renew(time.Hour)
	waitDone(t, p, 20)
	if !p.Info().Client {
		t.Fatal("no hello")
	}
	done := p.Info().Done
	p.Renew(300 * time.Millisecond) // the last renewal
	last := time.Now()
	e := wait(t, p)
	if since := time.Since(last); since < 300*time.Millisecond {
		t.Errorf("the job stopped %s after a lease of 300ms", since)
	}
	if e.Outcome != Failed || e.Code == 0 || e.Done <= done {
		t.Errorf("exit %v code %d done %d (%s), want a failure after mini-batch %d", e.Outcome, e.Code, e.Done, e.Reason, done)
	}
	if !strings.Contains(e.LogTail, "lease") {
		t.Errorf("the job's log does not say its lease lapsed:\n%s", e.LogTail)
	}
}
