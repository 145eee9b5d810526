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
	if !errors.As(err, &se) || se.Field != "work_dir" || !se.UserError || !strings.Contains(err.Error(), "may enter") || !strings.Contains(err.Error(), "uid 65534") {
		t.Fatalf("a working directory the account cannot enter: %v", err)
	}
}

// TestWorkDirTellsNothingOfUnreadableDirs: the agent,
// as root, looked at a job's requested working directory before the job
// started, so the job's error told its user whether a path existed in a
// directory they cannot read ("permission denied" for one that exists, "no
// such file" for one that does not). Now the answer is the same for both,
// and for a file, and the same as for a missing path the account can see.
func TestWorkDirTellsNothingOfUnreadableDirs(t *testing.T) {
	needRoot(t)
	dir, err := os.MkdirTemp("", "jobproc-workdir-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	private := filepath.Join(dir, "private") // root's, 0700
	os.Mkdir(private, 0o700)
	os.Mkdir(filepath.Join(private, "exists"), 0o777)
	os.WriteFile(filepath.Join(private, "file"), nil, 0o644)
	os.WriteFile(filepath.Join(dir, "visible-file"), nil, 0o644)
	answer := func(work string) string {
		s := Spec{Job: "j", Attempt: 1, WorkDir: work, CheckpointDir: dir, LogPath: filepath.Join(dir, "logs", "j.log"),
			Command: []string{"true"}, BaseEnv: []string{"PATH=/usr/bin:/bin"},
			Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}}
		p, err := Start(context.Background(), s)
		if err == nil {
			p.Kill()
			t.Fatalf("%s: the job started", work)
		}
		var se *StartError
		if !errors.As(err, &se) || se.Field != "work_dir" || !se.UserError {
			t.Fatalf("%s: %v, want the job's error naming work_dir", work, err)
		}
		return strings.ReplaceAll(err.Error(), work, "PATH")
	}
	want := answer(filepath.Join(dir, "missing")) // what the account may see for itself
	for _, p := range []string{"exists", "missing", "file", "exists/deeper"} {
		if got := answer(filepath.Join(private, p)); got != want {
			t.Errorf("work_dir private/%s: %q; a missing one visible to the account: %q (the answer tells what is in a directory the job cannot read)", p, got, want)
		}
	}
	if got := answer(filepath.Join(dir, "visible-file")); got != want {
		t.Errorf("a file for work_dir: %q, want %q", got, want)
	}
}
