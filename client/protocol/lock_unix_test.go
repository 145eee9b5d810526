//go:build unix

package protocol

import (
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// The processes of a gang spread over nodes share one checkpoint directory
// and write at the same moments. Without the lock, one writer's clean-up
// removed the payload another was writing, and that one's commit left
// metadata naming a missing file ("opening checkpoint payload: no such
// file": the next restore failed). A writer now holds LockFile from its
// payload to its clean-up, so a second writer waits, and both commits are
// whole.
func TestConcurrentWritersOfOneDirectory(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, 1, "one")
	inSave, release := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() { // rank 1, saving
		_, err := WriteCheckpoint(dir, Meta{Done: 5}, func(w io.Writer) error {
			close(inSave)
			<-release
			_, err := io.WriteString(w, "rank 1")
			return err
		})
		first <- err
	}()
	<-inSave
	// While rank 1 saves, the lock is taken: another writer would wait.
	f, err := os.OpenFile(filepath.Join(dir, LockFile), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err == nil {
		t.Fatal("a writer saving does not hold the directory's lock")
	}
	second := make(chan error, 1)
	go func() { // rank 0, at the same moment
		_, err := WriteCheckpoint(dir, Meta{Done: 5}, func(w io.Writer) error {
			_, err := io.WriteString(w, "rank 0")
			return err
		})
		second <- err
	}()
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	m, payload, err := read(t, dir)
	if err != nil || m.Done != 5 || (payload != "rank 0" && payload != "rank 1") {
		t.Fatalf("after two writers: %+v %q %v", m, payload, err)
	}
	if old, _ := filepath.Glob(filepath.Join(dir, "ckpt-*.bin")); len(old) != 1 {
		t.Fatalf("payload files %v, want the committed one only", old)
	}
}
