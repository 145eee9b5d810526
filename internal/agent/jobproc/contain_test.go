package jobproc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// needCgroups skips a test of the cgroup containment where this node has
// none (Containment says why): there the fall-back's tests, which run
// wherever the tests run as root, hold the same line.
func needCgroups(t *testing.T) {
	t.Helper()
	why := Containment()
	if contain == nil {
		t.Skip("no cgroup v2 the agent may use: " + why)
	}
}

// escapees is a job's shell command that starts a child in a session of
// its own (setsid) and a daemon (a double fork whose middle process
// exits), each writing its process ID to a file in the working directory,
// waits until both have, then runs tail.
func escapees(tail string) string {
	return `setsid sh -c 'echo $$ > setsid.pid; exec sleep 1000' & ` +
		`sh -c "setsid sh -c 'echo \$\$ > daemon.pid; exec sleep 1000' &" ; ` +
		`while [ ! -s setsid.pid ] || [ ! -s daemon.pid ]; do sleep 0.01; done; touch ready; ` + tail
}

// pids reads the process IDs that escapees wrote in dir.
func pids(t *testing.T, dir string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, name := range []string{"setsid.pid", "daemon.pid"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 1 {
			t.Fatalf("%s: %q", name, b)
		}
		out[name] = pid
	}
	return out
}

// alive reports whether pid runs (a zombie, ended but not yet reaped by
// whoever adopted it, does not).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	s := procState(pid)
	return s != 0 && s != 'Z' && s != 'X'
}

func waitReady(t *testing.T, dir string, p *Proc) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(dir, "ready")); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the job's children did not start")
		}
		if p != nil {
			select {
			case <-p.Done():
				t.Fatalf("the job ended first: %+v", p.Exit())
			default:
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestDescendantsEndWithTheJob: a job's child in a
// session of its own and a daemon it forked outlived it (under the shared
// account they could reach later jobs of other users). Now, whether the
// job exits by itself or is killed, none is left once its exit is
// reported.
func TestDescendantsEndWithTheJob(t *testing.T) {
	needCgroups(t)
	descendantsEnd(t)
}

// TestDescendantsEndWithTheJobWithoutCgroups: the same with the
// fall-back (the agent a child subreaper): jobs as another account, the
// last of which on the node ends.
func TestDescendantsEndWithTheJobWithoutCgroups(t *testing.T) {
	needRoot(t)
	withoutCgroups(t)
	descendantsEnd(t)
}

// withoutCgroups makes the jobs of the test start without cgroups, as
// on a node without cgroup v2.
func withoutCgroups(t *testing.T) {
	t.Helper()
	Containment()
	if contain != nil && !contain.off.Load() {
		contain.off.Store(true)
		t.Cleanup(func() { contain.off.Store(false) })
	}
	if !reaper.Load() {
		if err := becomeSubreaper(); err != nil {
			t.Fatal(err)
		}
	}
}

func descendantsEnd(t *testing.T) {
	for _, c := range []struct {
		name, tail string
		kill       bool
	}{
		{"exits", "while [ ! -e go ]; do sleep 0.01; done; exit 0", false},
		{"killed", "exec sleep 1000", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, err := os.MkdirTemp("", "jobproc-escape-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			s := Spec{Job: "escape", Attempt: 1, WorkDir: dir, CheckpointDir: filepath.Join(dir, "ckpt"),
				LogPath: filepath.Join(dir, "logs", "j.log"), Command: []string{"sh", "-c", escapees(c.tail)}}
			if os.Geteuid() == 0 { // as the agent runs them: as another account
				os.Chmod(dir, 0o777)
				os.Mkdir(s.CheckpointDir, 0o700)
				os.Chown(s.CheckpointDir, nobody, nobody)
				s.Credential = &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}
				s.BaseEnv = []string{"PATH=/usr/bin:/bin"}
			}
			p := launch(t, s)
			waitReady(t, dir, p)
			ps := pids(t, dir)
			t.Cleanup(func() {
				for _, pid := range ps {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			})
			for name, pid := range ps {
				if !alive(pid) {
					t.Fatalf("%s (%d) is not running before the job's end", name, pid)
				}
			}
			if c.kill {
				p.Kill()
			} else {
				os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
			}
			e := wait(t, p)
			if c.kill && e.Outcome != Killed || !c.kill && e.Outcome != Finished {
				t.Fatalf("exit %+v", e)
			}
			for name, pid := range ps {
				if alive(pid) {
					t.Errorf("%s (%d) outlived its job (%s)", name, pid, e.Outcome)
				}
			}
		})
	}
}

// TestLeftoversOfADeadAgentEnd: an agent killed with
// SIGKILL takes its jobs' processes with it (their parent-death signal),
// but not a child that left the job's session; the next agent on the node
// ends it at its start (Containment's sweep).
func TestLeftoversOfADeadAgentEnd(t *testing.T) {
	needCgroups(t)
	dir := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	agent := exec.Command(self)
	agent.Env = append(os.Environ(), helperEnv+"="+dir, helperCmdEnv+"="+escapees("exec sleep 600"))
	out, err := agent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Fscan(out, &pid); err != nil || pid <= 0 {
		agent.Process.Kill()
		t.Fatalf("helper agent: pid %d, %v", pid, err)
	}
	waitReady(t, dir, nil)
	ps := pids(t, dir)
	t.Cleanup(func() {
		for _, pid := range ps {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	agent.Process.Signal(syscall.SIGKILL)
	agent.Wait()
	for name, pid := range ps {
		if !alive(pid) {
			t.Fatalf("%s (%d) ended with its agent: nothing to sweep", name, pid)
		}
	}
	parent := filepath.Dir(contain.dir)
	// (Another agent starting on this machine meanwhile may sweep first:
	// what counts is that the processes end.)
	t.Logf("the sweep found %d gone agents with processes left", sweep(parent))
	deadline := time.Now().Add(60 * time.Second)
	for name, pid := range ps {
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if alive(pid) {
			t.Errorf("%s (%d), left by a dead agent, outlived the next agent's start", name, pid)
		}
	}
	if _, err := os.Stat(contain.dir); err != nil {
		t.Errorf("the sweep removed this agent's own cgroups: %v", err)
	}
}

// TestAdopteesWaitForTheAccountsLastJob: without cgroups, what a job
// leaves cannot be told apart from what another job of the same account
// leaves: it is killed when the account's last job on the node ends, not
// before (it would kill the other job's), and then surely.
func TestAdopteesWaitForTheAccountsLastJob(t *testing.T) {
	needRoot(t)
	withoutCgroups(t)
	mk := func(tail string) (Spec, string) {
		dir, err := os.MkdirTemp("", "jobproc-adopt-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		os.Chmod(dir, 0o777)
		ck := filepath.Join(dir, "ckpt")
		os.Mkdir(ck, 0o700)
		os.Chown(ck, nobody, nobody)
		return Spec{Job: "adopt", Attempt: 1, WorkDir: dir, CheckpointDir: ck, LogPath: filepath.Join(dir, "logs", "j.log"),
			Command: []string{"sh", "-c", escapees(tail)}, BaseEnv: []string{"PATH=/usr/bin:/bin"},
			Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}}, dir
	}
	s1, d1 := mk("while [ ! -e go ]; do sleep 0.01; done; exit 0")
	s2, d2 := mk("exec sleep 1000")
	p1, p2 := launch(t, s1), launch(t, s2)
	waitReady(t, d1, p1)
	waitReady(t, d2, p2)
	ps1, ps2 := pids(t, d1), pids(t, d2)
	t.Cleanup(func() {
		for _, ps := range []map[string]int{ps1, ps2} {
			for _, pid := range ps {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	os.WriteFile(filepath.Join(d1, "go"), nil, 0o644)
	if e := wait(t, p1); e.Outcome != Finished {
		t.Fatalf("exit %+v", e)
	}
	for name, pid := range ps2 {
		if !alive(pid) {
			t.Fatalf("the second job's %s (%d) was killed when the first job ended", name, pid)
		}
	}
	p2.Kill()
	wait(t, p2)
	for _, ps := range []map[string]int{ps1, ps2} {
		for name, pid := range ps {
			if alive(pid) {
				t.Errorf("%s (%d) outlived the account's last job", name, pid)
			}
		}
	}
}

// BenchmarkContainment: what a cgroup of its own adds to a job process's
// life (made, the process born in it, killed, waited for empty, removed),
// against a plain start and wait of /bin/true.
func BenchmarkContainment(b *testing.B) {
	Containment()
	for _, in := range []bool{false, true} {
		name := "plain"
		if in {
			name = "cgroup"
			if contain == nil {
				b.Skip("no cgroup v2: " + containWhy)
			}
		}
		b.Run(name, func(b *testing.B) {
			for range b.N {
				var cg *jobCgroup
				if in {
					cg = newJobCgroup()
				}
				cmd := exec.Command("/bin/true")
				cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
				if cg != nil {
					cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, int(cg.fd.Fd())
				}
				if err := cmd.Start(); err != nil {
					b.Fatal(err)
				}
				cg.started()
				cmd.Wait()
				cg.destroy()
			}
		})
	}
}

// TestCgroupStartProbe: where job cgroups are used, the probe that tells a
// cgroup's fault from a job program's (a failed start into a cgroup turns
// containment off for every later job only when the probe fails too)
// starts in a job cgroup, leaves it empty and removed, and runs nothing.
func TestCgroupStartProbe(t *testing.T) {
	needCgroups(t)
	before, _ := filepath.Glob(filepath.Join(contain.dir, "job-*"))
	if !cgroupStartWorks() {
		t.Fatal("the probe did not start in a job cgroup where jobs do")
	}
	if contain.off.Load() {
		t.Fatal("the probe turned containment off")
	}
	after, _ := filepath.Glob(filepath.Join(contain.dir, "job-*"))
	if len(after) != len(before) {
		t.Errorf("job cgroups %q before the probe, %q after: want its own removed", before, after)
	}
}
