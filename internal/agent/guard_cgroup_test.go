package agent

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cgroupParent is this process's cgroup in a writable cgroup v2 hierarchy
// with cgroup.kill, or "" (the test is skipped).
func cgroupParent(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (cgroups)")
	}
	b, _ := os.ReadFile("/proc/self/cgroup")
	for _, line := range strings.Split(string(b), "\n") {
		rel, ok := strings.CutPrefix(line, "0::")
		if !ok {
			continue
		}
		for _, mount := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
			dir := filepath.Join(mount, rel)
			if _, err := os.Stat(filepath.Join(dir, "cgroup.procs")); err == nil {
				return dir
			}
		}
	}
	t.Skip("no cgroup v2 here")
	return ""
}

// TestGuardKillsTheJobsCgroup: the guard of a lapsed lease kills the job
// process's cgroup too (jobproc starts each job process in one where the
// node has cgroup v2), so a descendant that left the job's process group
// (setsid) ends with it while the agent is stopped, before the agent could
// kill the cgroup itself. Skipped without a cgroup v2 the test may use.
func TestGuardKillsTheJobsCgroup(t *testing.T) {
	parent := cgroupParent(t)
	cg := filepath.Join(parent, fmt.Sprintf("gandiva-guard-test.%d", os.Getpid()))
	if err := os.Mkdir(cg, 0o755); err != nil {
		t.Skip("cannot create a cgroup: ", err)
	}
	defer os.Remove(cg)
	if _, err := os.Stat(filepath.Join(cg, "cgroup.kill")); err != nil {
		t.Skip("no cgroup.kill (kernel before 5.14)")
	}
	fd, err := os.Open(cg)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := exec.Command("sh", "-c", `setsid sh -c 'echo $$ > setsid.pid; exec sleep 1000' & `+
		`while [ ! -s setsid.pid ]; do sleep 0.01; done; exec sleep 1000`)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, UseCgroupFD: true, CgroupFD: int(fd.Fd())}
	err = cmd.Start()
	fd.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { os.WriteFile(filepath.Join(cg, "cgroup.kill"), []byte("1"), 0); cmd.Wait() }()
	var escaped int
	for deadline := time.Now().Add(60 * time.Second); escaped == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the job's setsid child did not start")
		}
		b, _ := os.ReadFile(filepath.Join(dir, "setsid.pid"))
		escaped, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	pid := cmd.Process.Pid
	r, _ := io.Pipe() // never renewed
	if s := runGuard(fmt.Sprintf("%d:%s:0.1", pid, procStart(pid)), filepath.Join(cg, "cgroup.kill"), r, io.Discard); s != 0 {
		t.Fatalf("status %d", s)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		st, _ := os.ReadFile("/proc/" + strconv.Itoa(escaped) + "/stat")
		if errors.Is(syscall.Kill(escaped, 0), syscall.ESRCH) || strings.Contains(string(st), ") Z ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the job's setsid child outlived the guard's kill")
		}
	}
}
