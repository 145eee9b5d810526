package protocol

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func writeString(s string) func(io.Writer) error {
	return func(w io.Writer) error { _, err := io.WriteString(w, s); return err }
}

// TestCheckpointFencing: a checkpoint of a later attempt (epoch) is never
// replaced by an earlier attempt's; the same or a later attempt, and a
// writer without an epoch, replace it as before.
func TestCheckpointFencing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ck")
	if _, err := WriteCheckpoint(dir, Meta{Job: "j", Attempt: 512, Done: 10}, writeString("new")); err != nil {
		t.Fatal(err)
	}
	// The superseded copy (attempt 256) tries to commit later progress.
	_, err := WriteCheckpoint(dir, Meta{Job: "j", Attempt: 256, Done: 40}, writeString("old"))
	if !errors.Is(err, ErrStaleCheckpoint) {
		t.Fatalf("an older attempt's checkpoint: err %v, want ErrStaleCheckpoint", err)
	}
	meta, f, err := ReadCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(f)
	f.Close()
	if meta.Attempt != 512 || meta.Done != 10 || string(b) != "new" {
		t.Fatalf("after the stale write: %+v %q, want attempt 512's checkpoint", meta, b)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "ckpt-*.bin")); len(m) != 1 {
		t.Errorf("payloads left: %v", m)
	}
	// The same attempt (a restarted process of it) and a later one write.
	for _, att := range []int{512, 768} {
		if _, err := WriteCheckpoint(dir, Meta{Job: "j", Attempt: att, Done: 20}, writeString("x")); err != nil {
			t.Fatalf("attempt %d: %v", att, err)
		}
	}
	// No epoch (standalone): not fenced.
	if _, err := WriteCheckpoint(dir, Meta{Job: "j", Done: 30}, writeString("y")); err != nil {
		t.Fatalf("without an epoch: %v", err)
	}
	// A damaged metadata file, or a FIFO in its place, does not fence (nor
	// block) the writer.
	os.WriteFile(filepath.Join(dir, MetaFile), []byte("{garbage"), 0o600)
	if _, err := WriteCheckpoint(dir, Meta{Job: "j", Attempt: 5, Done: 1}, writeString("z")); err != nil {
		t.Fatalf("over damaged metadata: %v", err)
	}
}
