package jobproc

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestCredential: with Credential the job runs as that account, with no
// supplementary groups, in its working directory entered as that account
// (one it cannot enter is the job's error), from BaseEnv. Needs root.
func TestCredential(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a process as another account")
	}
	const nobody = 65534
	dir, err := os.MkdirTemp("", "jobproc-cred-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	work := filepath.Join(dir, "work")
	os.Mkdir(work, 0o700)
	os.Chown(work, nobody, nobody)
	cred := &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}
	s := Spec{Job: "j", Attempt: 1, WorkDir: work, CheckpointDir: work, LogPath: filepath.Join(dir, "logs", "j.log"),
		Command:    []string{"sh", "-c", "id -u > out; id -G >> out; pwd >> out; env >> out"},
		Credential: cred, BaseEnv: []string{"PATH=/usr/bin:/bin", "ONLY=this"}}
	if e := wait(t, launch(t, s)); e.Outcome != Finished {
		t.Fatalf("exit %+v", e)
	}
	out, _ := os.ReadFile(filepath.Join(work, "out"))
	lines := strings.Split(string(out), "\n")
	if lines[0] != "65534" || lines[1] != "65534" || lines[2] != work {
		t.Fatalf("the job ran as uid %q, groups %q, in %q; want 65534, 65534 only, %s", lines[0], lines[1], lines[2], work)
	}
	if !strings.Contains(string(out), "\nONLY=this\n") || strings.Contains(string(out), "HOME=/root") {
		t.Fatalf("the job's environment is not BaseEnv's:\n%s", out)
	}
	if st, err := os.Stat(s.LogPath); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the log: %v %v, want mode 0600", st, err)
	}
	// A working directory the account cannot enter.
	private := filepath.Join(dir, "private")
	os.Mkdir(private, 0o700)
	s.WorkDir = private
	_, err = Start(context.Background(), s)
	var se *StartError
	if !errors.As(err, &se) || se.Field != "work_dir" || !se.UserError || !strings.Contains(err.Error(), "permission denied") || !strings.Contains(err.Error(), "uid 65534") {
		t.Fatalf("a working directory the account cannot enter: %v", err)
	}
}
