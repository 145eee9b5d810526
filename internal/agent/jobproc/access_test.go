package jobproc

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// accessTree makes, under a directory every account may search, a
// directory only root may enter (private, like /root) and one anyone may
// search (open), each with a bin directory holding an executable python3
// script.
func accessTree(t *testing.T) (private, open string) {
	t.Helper()
	top, err := os.MkdirTemp("", "jobproc-access-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(top) })
	private, open = filepath.Join(top, "root-home"), filepath.Join(top, "srv")
	for _, d := range []string{top, open, filepath.Join(open, "bin"), filepath.Join(private, "bin")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		os.Chmod(d, 0o755)
	}
	os.Chmod(private, 0o700)
	for _, d := range []string{private, open} {
		writeMode(t, filepath.Join(d, "bin", "python3"), "#!/bin/sh\nexit 0\n", 0o755)
	}
	return private, open
}

// writeMode writes a file and gives it mode, whatever the umask.
func writeMode(t *testing.T, path, data string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
	os.Chmod(path, mode)
}

// mkdirMode makes a directory of mode, whatever the umask.
func mkdirMode(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Mkdir(path, mode); err != nil {
		t.Fatal(err)
	}
	os.Chmod(path, mode)
}

func asNobody() *syscall.Credential {
	return &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}
}

// problems runs CheckAccess as nobody and returns its problems, one per
// line.
func problems(t *testing.T, a Access) string {
	t.Helper()
	a.Credential, a.Account = asNobody(), "nobody"
	ps, err := CheckAccess(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, p := range ps {
		if p.Fatal != (p.Field != "workdir" || !strings.Contains(p.What, "cannot write")) {
			t.Errorf("%v: Fatal %v", p, p.Fatal)
		}
		lines = append(lines, p.String())
	}
	t.Logf("%+q:\n%s", a.Command, strings.Join(lines, "\n"))
	return strings.Join(lines, "\n")
}

// TestCheckAccess: the check, run as the job's account (nobody), finds
// what would make the job fail at its start, and says how to fix it: a
// working directory under a directory only root may enter; a command that
// resolves on the agent's PATH to a program the account cannot reach
// (python3 in root's pyenv, with a usable one later on the PATH); an
// interpreter ("#!") it cannot reach, directly or through env; a script
// it cannot read; a command not found. A working directory it cannot
// write is a warning; a job it can run has no problem.
func TestCheckAccess(t *testing.T) {
	needRoot(t)
	private, open := accessTree(t)
	shims := filepath.Join(private, "bin")
	bin := filepath.Join(open, "bin")
	path := shims + ":" + bin + ":/usr/bin:/bin"

	// A job it can run: no problem (its working directory nobody's).
	work := filepath.Join(open, "work")
	mkdirMode(t, work, 0o755)
	os.Chown(work, nobody, nobody)
	if got := problems(t, Access{WorkDir: work, Command: []string{"sh", "-c", "true"}, Path: "/usr/bin:/bin"}); got != "" {
		t.Errorf("a job nobody can run: %s", got)
	}

	// Submitted from a directory under the private one.
	inPrivate := filepath.Join(private, "proj")
	mkdirMode(t, inPrivate, 0o755)
	got := problems(t, Access{WorkDir: inPrivate, Command: []string{"true"}, Path: "/usr/bin:/bin"})
	if !strings.Contains(got, "workdir: nobody cannot enter "+inPrivate+": it may not enter "+private+" (mode 0700") ||
		!strings.Contains(got, "Fix: submit from a directory nobody can reach") || strings.Count(got, "\n") != 0 {
		t.Errorf("a workdir under a private directory:\n%s", got)
	}

	// A working directory it can enter but not write: a warning only.
	ro := filepath.Join(open, "ro")
	mkdirMode(t, ro, 0o755)
	got = problems(t, Access{WorkDir: ro, Command: []string{"true"}, Path: "/usr/bin:/bin"})
	if !strings.Contains(got, "workdir: nobody cannot write in "+ro) || strings.Count(got, "\n") != 0 {
		t.Errorf("a read-only workdir:\n%s", got)
	}

	// python3 resolves (as the agent resolves it) to the private one.
	got = problems(t, Access{WorkDir: work, Command: []string{"python3", "-c", "pass"}, Path: path})
	want := `command: the command "python3" resolves to ` + filepath.Join(shims, "python3") + ` (the first match on PATH ` + path +
		`), which nobody cannot run: it may not enter ` + private + ` (mode 0700`
	if !strings.Contains(got, want) || !strings.Contains(got, "such as "+filepath.Join(bin, "python3")+" (later on the same PATH)") {
		t.Errorf("python3 in a private directory:\n%s\nwant %s", got, want)
	}
	// Only there: the fix says to install one.
	got = problems(t, Access{WorkDir: work, Command: []string{"python3"}, Path: shims + ":/nonexistent"})
	if !strings.Contains(got, "which nobody cannot run") || !strings.Contains(got, "install it where nobody can run it") {
		t.Errorf("python3 only in a private directory:\n%s", got)
	}
	// Not executable for it.
	noexec := filepath.Join(bin, "noexec")
	writeMode(t, noexec, "#!/bin/sh\n", 0o744)
	got = problems(t, Access{WorkDir: work, Command: []string{noexec}, Path: path})
	if !strings.Contains(got, "it is not executable for it (mode 0744") || !strings.Contains(got, "Fix: let nobody execute it") {
		t.Errorf("a program only its owner may run:\n%s", got)
	}

	// A script whose interpreter is private, directly and through env.
	direct := filepath.Join(bin, "train-direct")
	writeMode(t, direct, "#!"+filepath.Join(shims, "python3")+" -u\nprint(1)\n", 0o755)
	got = problems(t, Access{WorkDir: work, Command: []string{"train-direct"}, Path: path})
	if !strings.Contains(got, direct+"'s interpreter "+filepath.Join(shims, "python3")+", which nobody cannot run: it may not enter "+private) {
		t.Errorf("a private interpreter:\n%s", got)
	}
	viaEnv := filepath.Join(bin, "train-env")
	writeMode(t, viaEnv, "#!/usr/bin/env python3\nprint(1)\n", 0o755)
	if got := problems(t, Access{WorkDir: work, Command: []string{"train-env"}, Path: path}); got != "" {
		t.Errorf("env finds a python3 nobody can run later on PATH, as it would: %s", got)
	}
	got = problems(t, Access{WorkDir: work, Command: []string{viaEnv}, Path: shims})
	if !strings.Contains(got, viaEnv+`'s interpreter "python3" on PATH `+shims+` is none that nobody can run`) {
		t.Errorf("env finds only a private python3:\n%s", got)
	}

	// A script nobody may not read.
	secret := filepath.Join(work, "train.py")
	writeMode(t, secret, "print(1)\n", 0o600)
	got = problems(t, Access{WorkDir: work, Command: []string{filepath.Join(bin, "python3"), "train.py", "--lr", "0.1"}, Path: path})
	if !strings.Contains(got, "command: nobody cannot read the script "+secret+" (mode 0600") {
		t.Errorf("an unreadable script:\n%s", got)
	}
	os.Chmod(secret, 0o644)
	if got := problems(t, Access{WorkDir: work, Command: []string{filepath.Join(bin, "python3"), "train.py"}, Path: path}); got != "" {
		t.Errorf("a readable script: %s", got)
	}

	// Not found, on PATH or at its path.
	got = problems(t, Access{WorkDir: work, Command: []string{"no-such-program-here"}, Path: path})
	if !strings.Contains(got, `the command "no-such-program-here" is not found on PATH`) {
		t.Errorf("a missing program:\n%s", got)
	}
	got = problems(t, Access{WorkDir: work, Command: []string{"./missing.sh"}, Path: path})
	if !strings.Contains(got, "the command "+filepath.Join(work, "missing.sh")+" does not exist") {
		t.Errorf("a missing program:\n%s", got)
	}
}

// TestCheckAccessByBits: a caller that is neither root nor the account
// reads permission bits instead; a path it cannot see counts as allowed.
func TestCheckAccessByBits(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "f")
	writeMode(t, f, "", 0o640)
	st, _ := os.Stat(f)
	sys := st.Sys().(*syscall.Stat_t)
	for _, c := range []struct {
		op       byte
		uid, gid uint32
		want     bool
	}{
		{'r', sys.Uid, sys.Gid + 1, true}, {'w', sys.Uid, sys.Gid + 1, true}, {'x', sys.Uid, sys.Gid + 1, false},
		{'r', sys.Uid + 1, sys.Gid, true}, {'w', sys.Uid + 1, sys.Gid, false},
		{'r', sys.Uid + 1, sys.Gid + 1, false},
	} {
		if got := byBits(question{c.op, f}, c.uid, c.gid); got != c.want {
			t.Errorf("%c as %d:%d: %v, want %v", c.op, c.uid, c.gid, got, c.want)
		}
	}
	if byBits(question{'x', filepath.Join(dir, "missing")}, 1, 1) {
		t.Error("a missing path counts as allowed")
	}
}

// TestShebangOpensNoSpecialFile: the check (run by gandiva submit, maybe
// as root, over paths a job's owner may control) opens nothing but a
// regular file to read its "#!" line: a FIFO (or a device: its driver's
// open runs) named as the command, directly or through a link, is not
// opened at all. inotify sees every open of the FIFO.
func TestShebangOpensNoSpecialFile(t *testing.T) {
	dir := t.TempDir()
	fifo, link := filepath.Join(dir, "train.sh"), filepath.Join(dir, "run")
	if err := syscall.Mkfifo(fifo, 0o755); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	if err := os.Symlink(fifo, link); err != nil {
		t.Fatal(err)
	}
	in, err := syscall.InotifyInit1(syscall.IN_NONBLOCK | syscall.IN_CLOEXEC)
	if err != nil {
		t.Skipf("inotify: %v", err)
	}
	defer syscall.Close(in)
	if _, err := syscall.InotifyAddWatch(in, fifo, syscall.IN_OPEN); err != nil {
		t.Skipf("inotify watch: %v", err)
	}
	for _, p := range []string{fifo, link} {
		if name, _ := shebang(p); name != "" {
			t.Errorf("shebang(%s) = %q from a FIFO", p, name)
		}
	}
	if _, err := CheckAccess(context.Background(), Access{Command: []string{link, "x"}, WorkDir: dir}); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	if n, err := syscall.Read(in, buf); err != syscall.EAGAIN {
		t.Errorf("the FIFO was opened (inotify: %d bytes of events, %v)", n, err)
	}
	// (the watch works: an open of the FIFO is seen)
	f, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if n, err := syscall.Read(in, buf); err != nil || n == 0 {
		t.Errorf("inotify saw no open of the FIFO (%d, %v): the test sees nothing", n, err)
	}
}

// TestAskAsBounded: the shell that answers runs as the job's account, so
// that account's processes may trace it and answer for it. One that
// floods its output, or leaves a descendant holding its output open,
// gets an error, soon: its output is bounded and nothing waits for the
// descendant.
func TestAskAsBounded(t *testing.T) {
	dir := t.TempDir()
	var q questions
	q.ask('x', "/")
	q.ask('r', "/etc")
	for name, body := range map[string]string{
		"flood": "yes 1",
		"held":  "echo 1; echo 1; sleep 120 &",
	} {
		t.Run(name, func(t *testing.T) {
			pids := filepath.Join(dir, name+".pid")
			sh := filepath.Join(dir, name)
			writeMode(t, sh, "#!/bin/sh\necho $$ >"+pids+"\n"+body+"\n", 0o755)
			t.Cleanup(func() {
				if b, err := os.ReadFile(pids); err == nil {
					if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
						syscall.Kill(-pid, syscall.SIGKILL) // (its own group: Setpgid)
					}
				}
			})
			old := probeShell
			probeShell = sh
			defer func() { probeShell = old }()
			done := make(chan error, 1)
			go func() {
				_, err := askAs(context.Background(), nil, q)
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil {
					t.Error("no error")
				}
				t.Logf("%v", err)
			case <-time.After(90 * time.Second):
				t.Fatal("askAs still waits after 90 s (its bound is 20 s)")
			}
		})
	}
}
