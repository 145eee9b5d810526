package agent

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestParseRunAs(t *testing.T) {
	for _, c := range []struct {
		in   string
		want RunAs
		err  bool
	}{
		{"self", RunAs{Self: true}, false},
		{"gandiva-job", RunAs{Pattern: "gandiva-job"}, false},
		{"gdv-{user}", RunAs{Pattern: "gdv-{user}"}, false},
		{"", RunAs{}, true},
		{"Bad Account", RunAs{}, true},
		{"gdv-{usr}", RunAs{}, true},
		{"../etc", RunAs{}, true},
	} {
		got, err := ParseRunAs(c.in)
		if (err != nil) != c.err || (err == nil && (got.Self != c.want.Self || got.Pattern != c.want.Pattern)) {
			t.Errorf("ParseRunAs(%q) = %+v, %v", c.in, got, err)
		}
	}
}

func TestReadUserMap(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	os.WriteFile(good, []byte("# comment\n\nalice  ml-alice\nbob bob\n"), 0o644)
	m, err := ReadUserMap(good)
	if err != nil || m["alice"] != "ml-alice" || m["bob"] != "bob" || len(m) != 2 {
		t.Fatalf("%v %v", m, err)
	}
	for _, bad := range []string{"alice\n", "alice a b\n", "alice Root!\n", "alice a\nalice b\n"} {
		p := filepath.Join(dir, "bad")
		os.WriteFile(p, []byte(bad), 0o644)
		if _, err := ReadUserMap(p); err == nil || !strings.Contains(err.Error(), "line") {
			t.Errorf("%q: %v, want an error naming the line", bad, err)
		}
	}
}

// TestResolve: the accounts a job may run as, and the refusals: root, the
// agent's own, a missing account; in self mode, users not allowed.
func TestResolve(t *testing.T) {
	if os.Geteuid() != 0 {
		r, err := newRunAs(RunAs{Self: true, SelfUsers: []string{"admin"}})
		if err != nil {
			t.Fatal(err)
		}
		if a, err := r.resolve("admin"); err != nil || !a.self || a.credential() != nil {
			t.Fatalf("admin in self mode: %+v %v", a, err)
		}
		if _, err := r.resolve("alice"); err == nil || !strings.Contains(err.Error(), "cannot switch accounts") {
			t.Fatalf("alice in self mode: %v", err)
		}
		if _, err := newRunAs(RunAs{Pattern: "nobody"}); err == nil || !strings.Contains(err.Error(), "needs the agent to run as root") {
			t.Fatalf("a pattern without root: %v", err)
		}
		return
	}
	if _, err := newRunAs(RunAs{Self: true, SelfUsers: []string{"*"}}); err == nil || !strings.Contains(err.Error(), "never runs jobs as itself") {
		t.Fatalf("self as root: %v", err)
	}
	if _, err := newRunAs(RunAs{Pattern: "no-such-account-x"}); err == nil || !strings.Contains(err.Error(), "useradd") {
		t.Fatalf("a fixed account that does not exist: %v", err)
	}
	if _, err := newRunAs(RunAs{Pattern: "root"}); err == nil || !strings.Contains(err.Error(), "never runs as root") {
		t.Fatalf("root: %v", err)
	}
	r, err := newRunAs(RunAs{Pattern: "nouser-{user}", Map: map[string]string{"alice": "nobody"}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := r.resolve("alice")
	if err != nil || a.uid != 65534 || a.self {
		t.Fatalf("alice → nobody: %+v %v", a, err)
	}
	if c := a.credential(); c == nil || c.Uid != 65534 || c.Groups == nil || len(c.Groups) != 0 {
		t.Fatalf("credential %+v: want nobody's, groups cleared", c)
	}
	if _, err := r.resolve("bob"); err == nil || !strings.Contains(err.Error(), `"nouser-bob"`) {
		t.Fatalf("bob (no account): %v", err)
	}
}

// TestJobEnv: a job's base environment keeps what finds tools and
// libraries, drops everything else of the agent's, and names the account.
func TestJobEnv(t *testing.T) {
	t.Setenv("PATH", "/usr/bin:/bin")
	t.Setenv("CUDA_HOME", "/usr/local/cuda")
	t.Setenv("LC_ALL", "C")
	t.Setenv("GANDIVA_AGENT_TOKEN", "gdv_secret")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "hunter2")
	t.Setenv("CUDA_VISIBLE_DEVICES", "0,1")
	env := "\n" + strings.Join(jobEnv(&account{name: "alice", uid: 1000, gid: 1000, home: "/home/alice"}), "\n") + "\n"
	for _, want := range []string{"\nPATH=/usr/bin:/bin\n", "\nCUDA_HOME=/usr/local/cuda\n", "\nLC_ALL=C\n", "\nHOME=/home/alice\n", "\nUSER=alice\n", "\nLOGNAME=alice\n"} {
		if !strings.Contains(env, want) {
			t.Errorf("env lacks %q", strings.TrimSpace(want))
		}
	}
	for _, bad := range []string{"GANDIVA_", "hunter2", "CUDA_VISIBLE_DEVICES"} {
		if strings.Contains(env, bad) {
			t.Errorf("env has %q:%s", bad, env)
		}
	}
}

// TestMkdirOwned: directories under a user's are made without following a
// symbolic link the user's jobs may have planted, and given to the account.
func TestMkdirOwned(t *testing.T) {
	root := t.TempDir()
	var acc *account
	if os.Geteuid() == 0 {
		acc = &account{name: "nobody", uid: 65534, gid: 65534}
	}
	p, err := mkdirOwned(root, []string{"alice", "j1", "prerun"}, acc)
	if err != nil || p != filepath.Join(root, "alice", "j1", "prerun") {
		t.Fatalf("%s %v", p, err)
	}
	for _, d := range []string{"alice", "alice/j1", "alice/j1/prerun"} {
		st, _ := os.Stat(filepath.Join(root, d))
		if st.Mode().Perm() != 0o700 || (acc != nil && st.Sys().(*syscall.Stat_t).Uid != acc.uid) {
			t.Errorf("%s: mode %04o owner %d", d, st.Mode().Perm(), st.Sys().(*syscall.Stat_t).Uid)
		}
	}
	target := t.TempDir()
	os.Symlink(target, filepath.Join(root, "alice", "j2"))
	if _, err := mkdirOwned(root, []string{"alice", "j2", "prerun"}, acc); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("through a planted symbolic link: %v", err)
	}
	if _, err := os.Stat(filepath.Join(target, "prerun")); !os.IsNotExist(err) {
		t.Fatalf("a directory was made where the link points")
	}
	if _, err := mkdirOwned(root, []string{"alice", ".."}, acc); err == nil {
		t.Fatal("a .. component was accepted")
	}
	// A root reached through the admin's link: the path returned has no
	// link in it (the agent looks into it, as root, following none:
	// protocol.ProbeCheckpoint).
	via := filepath.Join(t.TempDir(), "ckpt-link")
	os.Symlink(root, via)
	p, err = mkdirOwned(via, []string{"alice", "j3"}, acc)
	real, _ := filepath.EvalSymlinks(root)
	if want := filepath.Join(real, "alice", "j3"); err != nil || p != want {
		t.Fatalf("through the root's link: %s %v, want %s", p, err, want)
	}
}

// TestPrepareRoot: a work or checkpoint root for other accounts is 0711 and
// must be reachable; one under a private directory is refused, saying why.
func TestPrepareRoot(t *testing.T) {
	private := t.TempDir() // (under a 0700 directory)
	os.Chmod(private, 0o700)
	err := prepareRoot(filepath.Join(private, "work"), true)
	if err == nil || !strings.Contains(err.Error(), "cannot reach") {
		t.Fatalf("a root under a private directory: %v", err)
	}
	if err := prepareRoot(filepath.Join(private, "self"), false); err != nil {
		t.Fatalf("a root for the agent's own jobs: %v", err)
	}
	if st, _ := os.Stat(filepath.Join(private, "self")); st.Mode().Perm() != 0o700 {
		t.Fatalf("mode %04o", st.Mode().Perm())
	}
}
