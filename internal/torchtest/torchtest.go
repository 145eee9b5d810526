// Package torchtest is what the tests that run PyTorch share: finding a
// Python with torch, examples/pytorch/ddp.py's path, its --out result and
// --loss-log, and running its ranks outside Gandiva (started by env:
// RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, as the agents and the
// Kubernetes pods start them) for the reference a test compares with.
package torchtest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Find returns a Python interpreter that imports torch and
// torch.distributed: the one GANDIVA_TORCH_PYTHON names, else
// /usr/bin/python3 (Debian's python3-torch; the python3 first on PATH
// may lack it). It stats the interpreter's module directories, so that
// go test's cache of a result that depends on it ends when a package is
// installed there.
func Find() (string, error) {
	for _, c := range []string{os.Getenv("GANDIVA_TORCH_PYTHON"), "/usr/bin/python3"} {
		if c == "" {
			continue
		}
		p, err := exec.LookPath(c)
		if err != nil {
			continue
		}
		if out, err := exec.Command(p, "-c", "import sys; print('\\n'.join(sys.path))").Output(); err == nil {
			for _, d := range strings.Split(string(out), "\n") {
				if d != "" {
					os.Stat(d)
				}
			}
		}
		if exec.Command(p, "-c", "import torch, torch.distributed").Run() == nil {
			return p, nil
		}
	}
	return "", errors.New("no Python that imports torch ($GANDIVA_TORCH_PYTHON, /usr/bin/python3): apt-get install python3-torch")
}

// Python returns Find's interpreter. Without one the test is skipped,
// except when CI=true, where it fails: CI installs python3-torch and must
// run the PyTorch tests.
func Python(t testing.TB) string {
	t.Helper()
	p, err := Find()
	if err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%v\n(CI=true: the PyTorch tests must run; .ci/run installs it)", err)
	}
	t.Skip(err.Error())
	return ""
}

// Script returns the absolute path of examples/pytorch/ddp.py, root being
// the module root relative to the test's package directory (e.g. "../..").
// It fails the test if the file is missing.
func Script(t testing.TB, root string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join(root, "examples", "pytorch", "ddp.py"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the DDP example: %v", err)
	}
	return p
}

// ReadableScript is Script(t, root) copied, with the gandiva Python
// package it imports (python/gandiva), into a new directory every account
// can read (0755, files 0644), removed when the test ends: jobs that run
// as another account (nobody) cannot read a checkout under a private
// directory (a fresh clone in a mktemp directory, 0700).
func ReadableScript(t testing.TB, root string) string {
	t.Helper()
	src := Script(t, root)
	d, err := os.MkdirTemp("", "gandiva-ddp-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	pkg := filepath.Join(filepath.Dir(src), "..", "..", "python", "gandiva")
	files, err := filepath.Glob(filepath.Join(pkg, "*.py"))
	if err != nil || len(files) == 0 {
		t.Fatalf("the gandiva Python package in %s: %v", pkg, err)
	}
	copyTo := func(from, dir string) string {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		to := filepath.Join(dir, filepath.Base(from))
		if err := os.WriteFile(to, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return to
	}
	for _, f := range files {
		copyTo(f, filepath.Join(d, "python", "gandiva"))
	}
	script := copyTo(src, filepath.Join(d, "examples", "pytorch"))
	// every directory on the way searchable (MkdirAll's modes pass the umask)
	for p := filepath.Dir(script); len(p) >= len(d); p = filepath.Dir(p) {
		os.Chmod(p, 0o755)
	}
	os.Chmod(filepath.Join(d, "python"), 0o755)
	os.Chmod(filepath.Join(d, "python", "gandiva"), 0o755)
	return script
}

// FreePort returns a TCP port of 127.0.0.1 that nothing listens on now (a
// gang's MASTER_PORT).
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Result is what ddp.py's rank 0 writes to --out.
type Result struct {
	Checksum  string `json:"checksum"`
	Steps     int    `json:"steps"`
	WorldSize int    `json:"world_size"`
	Start     int    `json:"start"`
	Restored  bool   `json:"restored"`
}

// ReadResult reads ddp.py's --out file at path; it fails the test if the
// file is missing or not a Result.
func ReadResult(t testing.TB, path string) Result {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("ddp.py left no result: %v", err)
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("ddp.py's result %s: %v\n%s", path, err, b)
	}
	return r
}

// LossLine is one line of ddp.py's --loss-log: "step loss world".
type LossLine struct {
	Step  int
	Loss  string // as printed (Python's repr), so that lines compare exactly
	World int
}

// ReadLossLog reads ddp.py's --loss-log at path; it fails the test on a
// line that is not "step loss world" (two integers around a float).
func ReadLossLog(t testing.TB, path string) []LossLine {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("loss log: %v", err)
	}
	defer f.Close()
	var out []LossLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) != 3 {
			t.Fatalf("loss log %s: bad line %q", path, sc.Text())
		}
		step, err1 := strconv.Atoi(fs[0])
		world, err2 := strconv.Atoi(fs[2])
		if _, err3 := strconv.ParseFloat(fs[1], 64); err1 != nil || err2 != nil || err3 != nil {
			t.Fatalf("loss log %s: bad line %q", path, sc.Text())
		}
		out = append(out, LossLine{step, fs[1], world})
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("loss log %s: %v", path, err)
	}
	return out
}

// CheckContiguous fails the test (without stopping it) unless log, the
// loss log of job name, has every mini-batch from 1 to steps exactly
// once, in order.
func CheckContiguous(t testing.TB, name string, log []LossLine, steps int) {
	t.Helper()
	if len(log) != steps {
		t.Errorf("%s: %d loss lines, want %d (one per mini-batch)", name, len(log), steps)
	}
	for i, l := range log {
		if l.Step != i+1 {
			t.Errorf("%s: loss line %d is of mini-batch %d, want %d (steps repeated or skipped)", name, i+1, l.Step, i+1)
			return
		}
	}
}

// Ranks is a gang of World ranks of one command, run outside Gandiva.
type Ranks struct {
	Python string
	// Args are the script and its arguments, the same for every rank;
	// they make rank 0 write its result to Out.
	Args []string
	Out  string
	Dir  string // every rank's working directory
	// Env is every rank's environment, to which Run adds RANK,
	// WORLD_SIZE, MASTER_ADDR=127.0.0.1 and MASTER_PORT (a free port)
	// when World > 1.
	Env   []string
	World int
}

// Run starts r's ranks together, waits for all of them (ctx bounds them:
// a rank that hangs must not hang the test), fails the test with a rank's
// output if any fails, and returns rank 0's result.
func Run(ctx context.Context, t testing.TB, r Ranks) Result {
	t.Helper()
	port := strconv.Itoa(FreePort(t))
	var wg sync.WaitGroup
	errs := make([]error, r.World)
	logs := make([][]byte, r.World)
	for rank := range r.World {
		cmd := exec.CommandContext(ctx, r.Python, r.Args...)
		cmd.Dir = r.Dir
		cmd.Env = append([]string(nil), r.Env...)
		if r.World > 1 {
			cmd.Env = append(cmd.Env, "RANK="+strconv.Itoa(rank), "WORLD_SIZE="+strconv.Itoa(r.World),
				"MASTER_ADDR=127.0.0.1", "MASTER_PORT="+port)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			logs[rank], errs[rank] = cmd.CombinedOutput()
		}()
	}
	wg.Wait()
	for rank, err := range errs {
		if err != nil {
			t.Fatalf("%s run outside Gandiva, rank %d of %d: %v\n%s", filepath.Base(r.Args[0]), rank, r.World, err, logs[rank])
		}
	}
	return ReadResult(t, r.Out)
}
