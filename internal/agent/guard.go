package agent

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gandiva-sched/gandiva/internal/agent/jobproc"
)

// A job's guard is a small process outside the agent that ends the job
// when the agent's lease lapses. The agent's own watchdog does that while
// the agent runs; the guard does it when the agent cannot: stopped
// (SIGSTOP, Ctrl-Z), paused by a debugger or hung. Jobs with the in-job
// client also stop by themselves (protocol.Lease); those without it have
// only their guard.
//
// The agent starts one guard per job process, by running its own
// executable again with envGuard set (see GuardMain), in a process group
// of its own (a signal to the agent's group, as a terminal's Ctrl-Z sends,
// does not stop it). Through a pipe, the agent renews the lease: one line
// per renewal, the seconds the lease still runs. The guard kills the job's
// process group with SIGKILL once the last renewal has run out, and its
// cgroup where jobproc started it in one (cgroup.kill: the descendants that
// left the group too), then exits. It exits without killing when the agent
// releases it (a line "release", then the pipe closes: the agent ended the
// job), and kills the same way when the pipe closes without that line (the
// agent died: its job's leader dies with it by its parent-death signal, but
// not what the job started). It never hits a reused process ID: the
// group is killed only while the leader's start time (in /proc) still
// matches or no process has that ID (endJob).

// envGuard, when set (to "PID:START:LEASE"), makes the executable a guard;
// envGuardCgroup names the job process's cgroup.kill file, if it has one.
const (
	envGuard       = "GANDIVA_JOB_GUARD"
	envGuardCgroup = "GANDIVA_JOB_GUARD_CGROUP"
)

var (
	guardMu sync.Mutex
	// reexec: GuardMain ran in this process (so its executable can be
	// started again as a guard).
	reexec bool
)

// GuardMain makes this program able to serve as the guard of the jobs an
// agent in it runs. Call it first thing in main (and in TestMain of tests
// that run agents): when the process was started as a guard, it runs the
// guard and exits; otherwise it returns at once. An agent in a program
// that has not called it runs its jobs without guards (and logs so).
func GuardMain() {
	spec := os.Getenv(envGuard)
	if spec == "" {
		guardMu.Lock()
		reexec = true
		guardMu.Unlock()
		return
	}
	os.Exit(runGuard(spec, os.Getenv(envGuardCgroup), os.Stdin, os.Stderr))
}

// errNoGuard: this program cannot start guards (GuardMain was not called).
var errNoGuard = errors.New("this program cannot start job guards (its main does not call agent.GuardMain)")

// runGuard is the guard's main: spec is "PID:START:LEASE" (LEASE in
// seconds), cgKill the job's cgroup.kill file ("": none), in carries the
// renewals. It returns the exit status.
func runGuard(spec, cgKill string, in io.Reader, log io.Writer) int {
	f := strings.Split(spec, ":")
	if len(f) != 3 {
		fmt.Fprintf(log, "gandiva job guard: bad %s=%q (want PID:START:LEASE)\n", envGuard, spec)
		return 2
	}
	pid, err1 := strconv.Atoi(f[0])
	lease, err2 := strconv.ParseFloat(f[2], 64)
	if err1 != nil || err2 != nil || pid <= 1 || lease < 0 || lease > 1e6 {
		fmt.Fprintf(log, "gandiva job guard: bad %s=%q\n", envGuard, spec)
		return 2
	}
	start := f[1]
	renew := make(chan time.Duration, 1)
	closed := make(chan struct{})
	released := false // (the agent said release before closing; read after closed)
	go func() {
		defer close(closed)
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if line == guardRelease {
				released = true
				return
			}
			d, err := strconv.ParseFloat(line, 64)
			if err != nil || d < 0 || d > 1e6 {
				continue
			}
			select {
			case <-renew: // only the latest counts
			default:
			}
			renew <- time.Duration(d * float64(time.Second))
		}
	}()
	deadline := time.Now().Add(time.Duration(lease * float64(time.Second)))
	for {
		t := time.NewTimer(max(time.Until(deadline), 0))
		select {
		case d := <-renew:
			t.Stop()
			deadline = time.Now().Add(d)
		case <-closed:
			t.Stop()
			if released {
				return 0
			}
			// The agent died (kill -9, a crash, the OOM killer): its job's
			// leader dies with it (parent-death signal), but not what the
			// job started, and the server will restart the job elsewhere.
			endJob(pid, start, cgKill, log, "its agent ended without releasing the job")
			return 0
		case <-t.C:
			select {
			case d := <-renew: // a renewal that came with the deadline
				deadline = time.Now().Add(d)
				continue
			default:
			}
			endJob(pid, start, cgKill, log, "the agent did not renew its lease in time")
			return 0
		}
	}
}

// guardRelease is the line with which the agent ends a guard without it
// killing anything (guard.stop); a pipe closed without it is the agent's
// death, and the guard ends the job.
const guardRelease = "release"

// endJob kills what is left of the job whose leader is (or was) process
// pid, started at start: its cgroup (cgKill, "" none: made for this job
// process alone, so whatever is in it is the job's) and its process group,
// unless pid is now another process (its ID reused: then the job's group
// is gone too, as the kernel does not reuse an ID that names a live
// group). why is logged.
func endJob(pid int, start, cgKill string, log io.Writer, why string) {
	var what []string
	if now := procStart(pid); now == start || now == "" {
		if syscall.Kill(-pid, syscall.SIGKILL) == nil {
			what = append(what, fmt.Sprintf("process group %d", pid))
		}
		syscall.Kill(pid, syscall.SIGKILL)
	}
	if cgKill != "" {
		if f, err := os.OpenFile(cgKill, os.O_WRONLY|syscall.O_NOFOLLOW, 0); err == nil {
			if _, err := f.Write([]byte("1")); err == nil {
				what = append(what, "cgroup "+strings.TrimSuffix(cgKill, "/cgroup.kill"))
			}
			f.Close()
		}
	}
	if len(what) > 0 {
		fmt.Fprintf(log, "gandiva job guard: %s; killed the job's %s\n", why, strings.Join(what, " and "))
	}
}

// procStart is a process's start time (field 22 of /proc/PID/stat, in
// clock ticks since boot), "" when the process does not exist.
func procStart(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // (the command may hold spaces and parentheses)
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return ""
	}
	return f[19] // fields from 3 (state) on: 22 is the 20th
}

// jobCgroupKill returns the cgroup.kill file of the cgroup that jobproc
// started process pid in (MOUNT/.../gandiva-agent.PID.START/job-N), or ""
// when it is in none of those (no cgroup v2: its process group is all).
func jobCgroupKill(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		rel, ok := strings.CutPrefix(line, "0::")
		if !ok || !strings.HasPrefix(rel, "/") || strings.Contains(rel, "/..") {
			continue
		}
		dir, base := filepath.Split(strings.TrimSuffix(rel, "/"))
		if !strings.HasPrefix(base, "job-") || !strings.HasPrefix(filepath.Base(dir), "gandiva-agent.") {
			return ""
		}
		mount, err := jobproc.Cgroup2Mount() // (where jobproc made it)
		if err != nil {
			return ""
		}
		kill := filepath.Join(mount, rel, "cgroup.kill")
		if st, err := os.Lstat(kill); err == nil && st.Mode().IsRegular() {
			return kill
		}
	}
	return ""
}

// guard is the agent's handle on one job process's guard.
type guard struct {
	cmd  *exec.Cmd
	w    *os.File
	once sync.Once
}

// startGuard starts the guard of the job process pid (the leader of its
// process group), with the lease running for lease more.
func startGuard(pid int, lease time.Duration) (*guard, error) {
	guardMu.Lock()
	ok := reexec
	guardMu.Unlock()
	if !ok {
		return nil, errNoGuard
	}
	start := procStart(pid)
	if start == "" {
		return nil, fmt.Errorf("job guard: process %d is gone", pid)
	}
	// (/proc/self/exe is this very program even when its file has been
	// replaced or removed since, as an upgrade in place does)
	exe := "/proc/self/exe"
	if _, err := os.Stat(exe); err != nil {
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("job guard: %w", err)
		}
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("job guard: %w", err)
	}
	cmd := exec.Command(exe)
	cmd.Env = []string{fmt.Sprintf("%s=%d:%s:%.3f", envGuard, pid, start, max(lease, 0).Seconds())}
	if kill := jobCgroupKill(pid); kill != "" {
		cmd.Env = append(cmd.Env, envGuardCgroup+"="+kill)
	}
	cmd.Stdin, cmd.Stderr = r, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	r.Close()
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("job guard: starting %s: %w", exe, err)
	}
	return &guard{cmd: cmd, w: w}, nil
}

// renew extends the lease to d from now. It never blocks for long: a guard
// that does not read (stopped itself) misses the renewal. (A line is one
// write of less than PIPE_BUF bytes, which a pipe takes whole or not at
// all: a timed-out write never leaves half a line.)
func (g *guard) renew(d time.Duration) {
	g.w.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	g.w.Write([]byte(fmt.Sprintf("%.3f\n", max(d, 0).Seconds())))
}

// stop ends the guard without it killing anything, and reaps it.
func (g *guard) stop() {
	g.once.Do(func() {
		g.w.SetWriteDeadline(time.Now().Add(time.Second))
		g.w.Write([]byte(guardRelease + "\n"))
		g.w.Close()
		go g.cmd.Wait()
	})
}
