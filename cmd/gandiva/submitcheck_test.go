package main

import (
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
)

// TestSubmitChecksAsJobAccount: with the server on this machine, submit
// checks as the job's OS account that it can enter the workdir and run the
// command, and refuses at once, with the fix, what would fail at the job's
// start: a workdir under a directory only root may enter (submitting from
// /root), python3 resolving on PATH to one only root may reach (root's
// pyenv) while one it can run is later on the PATH. A workdir it cannot
// write is a warning; --job-account none skips the check. The default
// account is gandiva-job, where it exists. (Each refused submission would
// otherwise reach the server: here, nothing listens, so the error would
// be a refused connection.)
func TestSubmitChecksAsJobAccount(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true but not root: this test checks as another account")
		}
		t.Skip("needs root to check as another account")
	}
	top, err := os.MkdirTemp("", "gandiva-submitcheck-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(top) })
	os.Chmod(top, 0o755)
	private, open := filepath.Join(top, "root-home"), filepath.Join(top, "srv")
	// (modes set explicitly: other tests of this package may set the umask)
	for _, d := range []string{private, filepath.Join(private, "proj"), filepath.Join(private, "bin"), open, filepath.Join(open, "bin")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		os.Chmod(d, 0o755)
	}
	os.Chmod(private, 0o700)
	for _, d := range []string{private, open} {
		py := filepath.Join(d, "bin", "python3")
		os.WriteFile(py, []byte("#!/bin/sh\n"), 0o755)
		os.Chmod(py, 0o755)
	}
	work := filepath.Join(open, "work")
	os.Mkdir(work, 0o777)
	os.Chmod(work, 0o777)
	t.Setenv("PATH", filepath.Join(private, "bin")+":"+filepath.Join(open, "bin")+":/usr/bin:/bin")
	base := []string{"submit", "--token", "gdv_x", "--server", "http://127.0.0.1:1", "--job-account", "nobody"}

	_, _, err = run(t, append(base, "--workdir", filepath.Join(private, "proj"), "--", "true")...)
	if err == nil || !strings.Contains(err.Error(), "the job would fail at its start: on this machine it runs as OS account nobody") ||
		!strings.Contains(err.Error(), "workdir: nobody cannot enter "+filepath.Join(private, "proj")+": it may not enter "+private) {
		t.Errorf("a workdir under a private directory: %v", err)
	}
	_, _, err = run(t, append(base, "--workdir", work, "--", "python3", "-c", "pass")...)
	if err == nil || !strings.Contains(err.Error(), `command: the command "python3" resolves to `+filepath.Join(private, "bin", "python3")) ||
		!strings.Contains(err.Error(), "Fix: give the full path of one nobody can run, such as "+filepath.Join(open, "bin", "python3")) {
		t.Errorf("python3 in a private directory: %v", err)
	}
	// What it can run gets through to the server (here, a refused connection).
	_, stderr, err := run(t, append(base, "--workdir", work, "--", filepath.Join(open, "bin", "python3"), "-c", "pass")...)
	if err == nil || strings.Contains(err.Error(), "would fail") || stderr != "" {
		t.Errorf("a job nobody can run: %v, stderr %q", err, stderr)
	}
	// A workdir it cannot write: a warning.
	os.Chmod(work, 0o755)
	_, stderr, err = run(t, append(base, "--workdir", work, "--", "true")...)
	if err == nil || strings.Contains(err.Error(), "would fail") || !strings.Contains(stderr, "warning: workdir: nobody cannot write in "+work) {
		t.Errorf("a workdir nobody cannot write: %v, stderr %q", err, stderr)
	}
	// none skips the check.
	none := append(append([]string{}, base[:len(base)-1]...), "none")
	if _, _, err = run(t, append(none, "--workdir", filepath.Join(private, "proj"), "--", "true")...); err == nil || strings.Contains(err.Error(), "would fail") {
		t.Errorf("--job-account none: %v", err)
	}
	// An account that does not exist is an error.
	bad := append(append([]string{}, base[:len(base)-1]...), "no-such-account-here")
	if _, _, err = run(t, append(bad, "--workdir", work, "--", "true")...); err == nil || !strings.Contains(err.Error(), "--job-account no-such-account-here: no such OS account") {
		t.Errorf("--job-account no-such-account-here: %v", err)
	}
	// The default: gandiva-job where it exists.
	_, _, err = run(t, "submit", "--token", "gdv_x", "--server", "http://127.0.0.1:1", "--workdir", filepath.Join(private, "proj"), "--", "true")
	if _, lerr := user.Lookup(defaultJobAccount); lerr == nil {
		if err == nil || !strings.Contains(err.Error(), "runs as OS account "+defaultJobAccount) {
			t.Errorf("the default account: %v", err)
		}
	} else if err == nil || strings.Contains(err.Error(), "would fail") {
		t.Errorf("no %s here, so no check: %v", defaultJobAccount, err)
	}
}
