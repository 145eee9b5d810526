package protocol

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// probe runs ProbeCheckpoint, failing the test if it blocks (a FIFO read
// once wedged the root agent's supervisor).
func probe(t *testing.T, dir string) (Meta, error) {
	t.Helper()
	type res struct {
		m   Meta
		err error
	}
	ch := make(chan res, 1)
	go func() {
		m, err := ProbeCheckpoint(dir)
		ch <- res{m, err}
	}()
	select {
	case r := <-ch:
		return r.m, r.err
	case <-time.After(60 * time.Second):
		t.Fatalf("ProbeCheckpoint(%s) blocked", dir)
		return Meta{}, nil
	}
}

// TestProbeCheckpoint: the agent's look into a job's checkpoint directory
// follows no link (in the directory's path or in it), opens no FIFO,
// reads a bounded amount, and creates nothing. The traps stand in for a
// job's; internal/agent/jobproc's TestRootAgentFollowsNoLinkOfTheJob has a job
// running as nobody plant them.
func TestProbeCheckpoint(t *testing.T) {
	top := t.TempDir()
	dir := filepath.Join(top, "job")
	if _, err := probe(t, dir); !errors.Is(err, ErrNoCheckpoint) {
		t.Fatalf("missing directory: %v", err)
	}
	os.Mkdir(dir, 0o700)
	if _, err := probe(t, dir); !errors.Is(err, ErrNoCheckpoint) {
		t.Fatalf("empty directory: %v", err)
	}
	m := write(t, dir, 7, "seven")
	got, err := probe(t, dir)
	if err != nil || got.Done != 7 || got.File != m.File || got.Bytes != 5 {
		t.Fatalf("a good checkpoint: %+v %v", got, err)
	}
	// Elsewhere: a valid checkpoint the job may not read ("secret").
	secret := filepath.Join(top, "secret")
	write(t, secret, 99, "root's")
	sm, _ := ProbeCheckpoint(secret)

	trap := func(name string, plant func(dir string)) {
		t.Helper()
		d := filepath.Join(top, name)
		os.Mkdir(d, 0o700)
		plant(d)
		before, _ := os.ReadDir(d)
		got, err := probe(t, d)
		if err == nil {
			t.Errorf("%s: probe %+v %v, want a refusal", name, got, err)
		}
		if after, _ := os.ReadDir(d); len(after) != len(before) {
			t.Errorf("%s: the probe created files: %v", name, after)
		}
	}
	trap("meta-link", func(d string) { os.Symlink(filepath.Join(secret, MetaFile), filepath.Join(d, MetaFile)) })
	trap("payload-link", func(d string) {
		os.Symlink(filepath.Join(secret, sm.File), filepath.Join(d, sm.File))
		b, _ := os.ReadFile(filepath.Join(secret, MetaFile))
		os.WriteFile(filepath.Join(d, MetaFile), b, 0o600)
	})
	trap("fifo", func(d string) {
		if err := syscall.Mkfifo(filepath.Join(d, MetaFile), 0o600); err != nil {
			t.Fatal(err)
		}
	})
	trap("payload-fifo", func(d string) {
		b, _ := os.ReadFile(filepath.Join(secret, MetaFile))
		os.WriteFile(filepath.Join(d, MetaFile), b, 0o600)
		syscall.Mkfifo(filepath.Join(d, sm.File), 0o600)
	})
	trap("huge", func(d string) {
		os.WriteFile(filepath.Join(d, MetaFile), []byte(`{"format":"gandiva-checkpoint","pad":"`+strings.Repeat("x", 1<<20)+`"}`), 0o600)
	})
	if os.Geteuid() == 0 { // a file of another owner than the directory's
		trap("other-owner", func(d string) {
			b, _ := os.ReadFile(filepath.Join(secret, MetaFile))
			os.WriteFile(filepath.Join(d, MetaFile), b, 0o600)
			os.Link(filepath.Join(secret, sm.File), filepath.Join(d, sm.File))
			os.Chown(d, 65534, 65534)
		})
	}
	// The lock file a link to where the job may not write: nothing is
	// made there.
	made := filepath.Join(top, "made-by-root")
	trap("lock-link", func(d string) {
		os.Symlink(made, filepath.Join(d, LockFile))
		b, _ := os.ReadFile(filepath.Join(secret, MetaFile))
		os.WriteFile(filepath.Join(d, MetaFile), b, 0o600)
	})
	if _, err := os.Lstat(made); err == nil {
		t.Errorf("the probe created %s through the lock file's link", made)
	}
	// The directory itself (a component the job controls) a link.
	link := filepath.Join(top, "dir-link")
	os.Symlink(secret, link)
	if got, err := probe(t, link); err == nil || !strings.Contains(err.Error(), "not followed") {
		t.Errorf("a link for the directory: %+v %v", got, err)
	}
	if got, err := probe(t, filepath.Join(link, ".")); err == nil {
		t.Errorf("a link inside the directory's path: %+v %v", got, err)
	}
}
