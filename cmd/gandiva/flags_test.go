package main

import (
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestNumericFlagsChecked: every command's numeric flags are checked, and
// the error names the flag (before anything is done: no file is written, no
// server is contacted).
func TestNumericFlagsChecked(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"sim", "--limit", "-5", "--quiet"}, "--limit"},
		{[]string{"sim", "--horizon", "-1", "--quiet"}, "--horizon"},
		{[]string{"sim", "--horizon", "NaN", "--quiet"}, "--horizon"},
		{[]string{"trace", "heavytail", "--jobs", "0"}, "--jobs"},
		{[]string{"trace", "heavytail", "--gpus", "-8"}, "--gpus"},
		{[]string{"trace", "heavytail", "--load", "-0.5"}, "--load"},
		{[]string{"server", "--data-dir", data, "--checkpoint-every", "-1"}, "--checkpoint-every"},
		{[]string{"server", "--data-dir", data, "--node-timeout", "-3s"}, "--node-timeout"},
		{[]string{"server", "--data-dir", data, "--retry-backoff", "-60"}, "--retry-backoff"},
		{[]string{"server", "--data-dir", data, "--max-attempts", "-1"}, "--max-attempts"},
		{[]string{"up", "--data-dir", data, "--timeout", "0s"}, "--timeout"},
		{[]string{"up", "--data-dir", data, "--demo-startup", "-1s"}, "--demo-startup"},
		{[]string{"agent", "--token", "gdv_x", "--domain", "-1"}, "--domain"},
		{[]string{"logs", "j1", "--tail", "-10", "--token", "gdv_x"}, "--tail"},
		{[]string{"logs", "j1", "--rank", "-1", "--token", "gdv_x"}, "--rank"},
		{[]string{"logs", "j1", "--attempt", "-2", "--token", "gdv_x"}, "--attempt"},
		{[]string{"submit", "--gpus", "0", "--token", "gdv_x", "--server", "http://192.0.2.1:1", "--", "true"}, "--gpus"},
		{[]string{"submit", "--gpus", "5000", "--token", "gdv_x", "--server", "http://192.0.2.1:1", "--", "true"}, "--gpus"},
		{[]string{"submit", "--mem-gib", "-1", "--token", "gdv_x", "--server", "http://192.0.2.1:1", "--", "true"}, "--mem-gib"},
		{[]string{"submit", "--priority", "99999", "--token", "gdv_x", "--server", "http://192.0.2.1:1", "--", "true"}, "--priority"},
		{[]string{"submit", "--iter-time", "-1", "--token", "gdv_x", "--server", "http://192.0.2.1:1", "--", "true"}, "--iter-time"},
		{[]string{"submit", "--checkpoint-every", "-1", "--token", "gdv_x", "--server", "http://192.0.2.1:1", "--", "true"}, "--checkpoint-every"},
		{[]string{"submit", "--min-gpus", "3", "--gpus", "2", "--token", "gdv_x", "--server", "http://192.0.2.1:1", "--", "true"}, "--min-gpus"},
	} {
		_, _, err := run(t, c.args...)
		if err == nil || !strings.HasPrefix(err.Error(), c.flag+":") {
			t.Errorf("gandiva %s: error %v, want one starting with %s:", strings.Join(c.args, " "), err, c.flag)
		}
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Errorf("a refused flag left the data directory %s behind (%v)", data, err)
	}
}

// TestSubmitChecksLocally: bytes that are not UTF-8 are refused by the CLI
// (JSON would replace them with U+FFFD on the way), naming the field; a
// workdir that does not exist is refused when the server is on this machine.
func TestSubmitChecksLocally(t *testing.T) {
	base := []string{"submit", "--token", "gdv_x", "--server", "http://127.0.0.1:1"}
	_, _, err := run(t, append(base, "--workdir", "/", "--", "echo", "caf\xe9")...)
	if err == nil || !strings.HasPrefix(err.Error(), "command[1]:") {
		t.Errorf("a non-UTF-8 argument: %v, want an error naming command[1]", err)
	}
	_, _, err = run(t, append(base, "--workdir", "/", "--env", "A=\xff", "--", "true")...)
	if err == nil || !strings.HasPrefix(err.Error(), "env.A:") {
		t.Errorf("a non-UTF-8 env value: %v, want an error naming env.A", err)
	}
	missing := filepath.Join(t.TempDir(), "nope")
	_, _, err = run(t, append(base, "--workdir", missing, "--", "true")...)
	if err == nil || !strings.Contains(err.Error(), "workdir "+missing) || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("a workdir that does not exist: %v", err)
	}
	if !isLoopback("http://127.0.0.1:7070") || !isLoopback("http://localhost:1") || !isLoopback("http://[::1]:1") || isLoopback("http://head:7070") {
		t.Error("isLoopback")
	}
}

// TestServerRefusesBeforeWriting: a typo in --policy, and a port in use, are
// reported before a new data directory, its store and its admin token are
// created (a typo used to leave a store that only the typo could open).
func TestServerRefusesBeforeWriting(t *testing.T) {
	dir := t.TempDir()
	for _, pol := range []string{"quantm:5", "gandiva:quantm=5", "fifo,philly"} {
		data := filepath.Join(dir, "bad-policy")
		_, _, err := run(t, "server", "--listen", "127.0.0.1:0", "--data-dir", data, "--policy", pol)
		if err == nil {
			t.Fatalf("--policy %s accepted", pol)
		}
		if _, err := os.Stat(data); !os.IsNotExist(err) {
			t.Fatalf("--policy %s: the data directory was created (%v)", pol, err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	data := filepath.Join(dir, "busy-port")
	_, _, err = run(t, "server", "--listen", ln.Addr().String(), "--data-dir", data, "--policy", "fifo")
	if err == nil || !strings.Contains(err.Error(), "--listen") {
		t.Fatalf("a port in use: %v, want an error naming --listen", err)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("a port in use: the data directory was created (%v)", err)
	}
	// up checks the same way (its agent never starts either).
	_, _, err = run(t, append([]string{"up", "--listen", ln.Addr().String(), "--data-dir", data, "--policy", "fifo", "--fake-gpus", "1xV100"}, upTestArgs(t)...)...)
	if err == nil || !strings.Contains(err.Error(), "--listen") {
		t.Fatalf("up on a port in use: %v", err)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("up on a port in use: the data directory was created (%v)", err)
	}
	// A run-as rule the agent cannot use is refused before anything is written.
	rule := []string{"--run-as", "no-such-account-here"}
	if os.Geteuid() != 0 {
		rule = []string{"--run-as", "nobody"} // (not root: only self)
	}
	_, _, err = run(t, append([]string{"up", "--listen", "127.0.0.1:0", "--data-dir", data, "--policy", "fifo", "--fake-gpus", "1xV100"}, rule...)...)
	if err == nil || !strings.Contains(err.Error(), "run") {
		t.Fatalf("up with an unusable --run-as: %v", err)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("up with an unusable --run-as: the data directory was created (%v)", err)
	}
}

// TestHelpNamesRealCommands: every "gandiva WORD" in a command's help is
// a command (sim's help named a `gandiva clusters` that did not exist).
func TestHelpNamesRealCommands(t *testing.T) {
	root := newRoot()
	re := regexp.MustCompile("`gandiva ([a-z][a-z-]*)|\\bgandiva ([a-z][a-z-]*) ")
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, m := range re.FindAllStringSubmatch(c.Short+"\n"+c.Long+"\n"+c.Example+"\n", -1) {
			word := m[1] + m[2]
			if found, _, err := root.Find([]string{word}); err != nil || found == root {
				t.Errorf("the help of %q names `gandiva %s`, which is not a command", c.CommandPath(), word)
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}
