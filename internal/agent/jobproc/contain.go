package jobproc

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Every descendant of a job ends with it. A process group is not enough:
// a job's process may start a child in a session of its own (setsid), or
// fork twice and let the middle process exit (a daemon), and such a child
// outlived its job; under a shared account (gandiva-job) it could then
// reach the later jobs of other users. So, where the node has cgroup v2
// (the unified hierarchy, kernel 5.14 or later for cgroup.kill), each
// process of a job is started directly inside a cgroup of its own (clone3
// with CLONE_INTO_CGROUP: it is in the cgroup before it runs a single
// instruction of the job's), which no descendant can leave: an unprivileged
// process cannot move itself out. When the job's process ends, or on Kill,
// the cgroup is killed (cgroup.kill: every process in it, atomically
// against forks), the agent waits until it is empty, removes it, and only
// then reports the exit.
//
// The cgroups live under the agent's own cgroup (read from
// /proc/self/cgroup), in a directory of this agent process,
// gandiva-agent.PID.START (START: the process's start time, so that a
// reused process ID is told apart), one per job process, job-N. An agent
// that dies leaves its directory; the next agent on the node, at its
// start (Containment), kills and removes those of agents no longer
// running. Under systemd, give the agent's unit Delegate=yes, so that
// systemd leaves the agent's sub-cgroups alone.
//
// Without cgroup v2 (or where the agent may not create cgroups: a
// read-only /sys/fs/cgroup in a container), the fall-back below is used:
// Containment says which, and the agent logs it at its start.

// cgroupKillWait bounds the wait for a killed cgroup to empty (processes
// in uninterruptible sleep, on a hung file system, take their time).
const cgroupKillWait = 30 * time.Second

// cgroups is this agent process's directory of job cgroups.
type cgroups struct {
	dir string // MOUNT/OWN/gandiva-agent.PID.START
	seq atomic.Uint64
	off atomic.Bool // starting into a cgroup failed: contain no more
}

var (
	containOnce sync.Once
	contain     *cgroups // nil: no cgroup v2 here
	containWhy  string   // the mechanism, or why there is none, for logs
)

// Containment prepares, once per process, how job processes are
// contained (above), ends the leftovers of dead agents' jobs, and returns
// a line that says which mechanism is used, for the agent's log.
func Containment() string {
	containOnce.Do(func() {
		contain, containWhy = setupCgroups()
		if contain == nil {
			containWhy += "; " + fallBack()
		}
	})
	return containWhy
}

// setupCgroups makes this process's directory of job cgroups, after
// ending the leftovers of dead agents.
func setupCgroups() (*cgroups, string) {
	parent, err := ownCgroup()
	if err != nil {
		return nil, "no cgroups: " + err.Error()
	}
	if n := sweep(parent); n > 0 {
		slog.Default().Warn("killed the leftover processes of the jobs of agents that are gone", "agents", n, "under", parent)
	}
	start, err := startTime(os.Getpid())
	if err != nil {
		return nil, "no cgroups: " + err.Error()
	}
	dir := filepath.Join(parent, fmt.Sprintf("gandiva-agent.%d.%s", os.Getpid(), start))
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Sprintf("no cgroups: cannot create one under %s: %v", parent, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "cgroup.kill")); err != nil {
		os.Remove(dir)
		return nil, "no cgroups: this kernel's cgroup v2 has no cgroup.kill (5.14 or later has)"
	}
	return &cgroups{dir: dir}, "a cgroup v2 per job process, under " + dir
}

// ownCgroup returns the directory of this process's cgroup in the
// cgroup v2 hierarchy, checking that it is one.
func ownCgroup() (string, error) {
	mount, err := Cgroup2Mount()
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", fmt.Errorf("no cgroup v2: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "0::"); ok {
			if !strings.HasPrefix(rest, "/") || strings.Contains(rest, "/..") {
				return "", fmt.Errorf("no usable cgroup v2: this process's cgroup is %q", rest)
			}
			dir := filepath.Join(mount, rest)
			var st syscall.Statfs_t
			if err := syscall.Statfs(dir, &st); err != nil || st.Type != cgroup2Magic {
				return "", fmt.Errorf("no cgroup v2 at %s", dir)
			}
			return dir, nil
		}
	}
	return "", errors.New("no cgroup v2 (no 0:: line in /proc/self/cgroup)")
}

// cgroup2Magic is CGROUP2_SUPER_MAGIC, the type of a cgroup v2 file system.
const cgroup2Magic = 0x63677270

// Cgroup2Mount returns where the cgroup v2 hierarchy is mounted
// (/sys/fs/cgroup, or /sys/fs/cgroup/unified on a hybrid system).
func Cgroup2Mount() (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", fmt.Errorf("no cgroup v2: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) >= 5 && len(qf) >= 1 && qf[0] == "cgroup2" && pf[3] == "/" {
			return unescapeMount(pf[4]), nil
		}
	}
	return "", errors.New("no cgroup v2 mounted")
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// startTime returns a process's start time (clock ticks since boot, field
// 22 of /proc/PID/stat), which with its ID names it uniquely.
func startTime(pid int) (string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "", fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return "", fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	return f[19], nil // field 22 overall: the 20th after the command
}

// sweep kills and removes, under parent, the job cgroups of agent
// processes that are gone, and returns how many of the agents' directories
// still had processes in them.
func sweep(parent string) int {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), "gandiva-agent.")
		if !ok || !e.IsDir() {
			continue
		}
		pid, start, ok := strings.Cut(rest, ".")
		p, err := strconv.Atoi(pid)
		if !ok || err != nil || p <= 0 {
			continue
		}
		if st, err := startTime(p); err == nil && st == start {
			continue // its agent runs
		}
		dir := filepath.Join(parent, e.Name())
		ev, _ := os.ReadFile(filepath.Join(dir, "cgroup.events"))
		if bytes.Contains(ev, []byte("populated 1")) {
			n++
		}
		if err := killCgroup(dir); err != nil {
			slog.Default().Warn("cannot end the leftovers of a gone agent's jobs", "cgroup", dir, "err", err)
			continue
		}
		jobs, _ := os.ReadDir(dir)
		for _, j := range jobs {
			if j.IsDir() {
				os.Remove(filepath.Join(dir, j.Name()))
			}
		}
		os.Remove(dir)
	}
	return n
}

// killCgroup kills every process in cgroup dir and its descendants and
// waits (at most cgroupKillWait) until it is empty.
func killCgroup(dir string) error {
	if err := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0); err != nil {
		return fmt.Errorf("killing cgroup %s: %w", dir, err)
	}
	deadline := time.Now().Add(cgroupKillWait)
	for wait := 100 * time.Microsecond; ; wait = min(2*wait, 10*time.Millisecond) {
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
		if err != nil {
			return fmt.Errorf("cgroup %s: %w", dir, err)
		}
		if bytes.Contains(b, []byte("populated 0")) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup %s: processes left %s after cgroup.kill", dir, cgroupKillWait)
		}
		time.Sleep(wait)
	}
}

// jobCgroup is the cgroup of one job process.
type jobCgroup struct {
	dir string
	fd  *os.File // open until the process has started (clone3 needs it)
}

// newJobCgroup makes the cgroup of the next job process, or returns nil
// (and the process is contained by its process group only).
func newJobCgroup() *jobCgroup {
	Containment()
	c := contain
	if c == nil || c.off.Load() {
		return nil
	}
	dir := filepath.Join(c.dir, "job-"+strconv.FormatUint(c.seq.Add(1), 10))
	if err := os.Mkdir(dir, 0o755); err != nil {
		slog.Default().Warn("cannot create a job's cgroup: its descendants are contained by its process group only", "err", err)
		return nil
	}
	fd, err := os.Open(dir)
	if err != nil {
		os.Remove(dir)
		return nil
	}
	return &jobCgroup{dir: dir, fd: fd}
}

// started closes the descriptor the start needed.
func (g *jobCgroup) started() {
	if g != nil && g.fd != nil {
		g.fd.Close()
		g.fd = nil
	}
}

// kill kills every process of the cgroup, without waiting.
func (g *jobCgroup) kill() {
	if g != nil {
		os.WriteFile(filepath.Join(g.dir, "cgroup.kill"), []byte("1"), 0)
	}
}

// destroy kills every process of the cgroup, waits until it is empty and
// removes it.
func (g *jobCgroup) destroy() {
	if g == nil {
		return
	}
	g.started()
	if err := killCgroup(g.dir); err != nil {
		slog.Default().Error("a job's processes outlive it", "err", err)
		return
	}
	if err := os.Remove(g.dir); err != nil {
		slog.Default().Warn("cannot remove a job's cgroup", "cgroup", g.dir, "err", err)
	}
}

// cgroupStartWorks says whether a process starts in a new job cgroup:
// when a job's start into its cgroup failed, it tells the cgroup's fault
// from the job's program's. Nothing runs: the probe's program does not
// exist, so a start that got as far as exec (clone3 into the cgroup
// worked) fails with ENOENT.
func cgroupStartWorks() bool {
	cg := newJobCgroup()
	if cg == nil {
		return false
	}
	defer cg.destroy()
	cmd := exec.Command("/nonexistent/gandiva-cgroup-probe")
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(cg.fd.Fd())}
	var err error
	onSpawner(func() { err = cmd.Start() })
	if err == nil { // (cannot be: but then it started)
		cmd.Process.Kill()
		cmd.Wait()
		return true
	}
	return errors.Is(err, syscall.ENOENT)
}

// cgroupStartFailed says whether a start into a cgroup failed because of
// the cgroup (clone3 or CLONE_INTO_CGROUP missing or refused), not the
// job's program or directory; the start is then tried again without, and
// cgroups are not used again in this process.
func cgroupStartFailed(err error) bool {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return false
	}
	switch errno {
	case syscall.ENOSYS, syscall.EOPNOTSUPP, syscall.EBUSY, syscall.EINVAL:
		return true
	}
	return false
}

// The fall-back, where there are no cgroups to use (contain is nil or
// off). The agent process becomes a child subreaper (PR_SET_CHILD_SUBREAPER):
// a job's descendant whose parent exits (the middle of a double fork, the
// job's own process) is adopted by the agent instead of by init, so it
// stays in view. Then:
//
//   - Kill kills the job process's whole tree (its descendants by parent
//     in /proc, a child with a session of its own included), not only its
//     process group;
//   - when the last process of an account's jobs on this node ends, the
//     processes the agent adopted that run as that account (and their
//     descendants) are killed and reaped. They cannot be told apart by
//     job: while another job of the same account runs here, they are left
//     until it ends too. With an account per user (--run-as 'gdv-{user}')
//     that holds them to their own user's jobs; with the shared account,
//     to the time the node has a job of it (use cgroup v2).
//
// A job that runs as the agent's own account (an agent that is not root)
// gets the tree kill only: its processes cannot be told from the agent's.

// reaper: this process is a child subreaper (the fall-back is in use).
var reaper atomic.Bool

// live tracks, for the fall-back, the job processes not yet waited for
// and how many run per account. liveMu is held across a start and around
// the adoptees' killing and reaping, so that a job process that exits at
// once is never taken for an adoptee (whose status the reaping would steal
// from its Wait).
var (
	liveMu   sync.Mutex
	livePIDs = map[int]bool{}
	liveUIDs = map[uint32]int{}
)

// fallBack turns the fall-back on and says what it is, for logs.
func fallBack() string {
	if os.Geteuid() != 0 {
		// (Its jobs run as itself: what they leave cannot be told from
		// its own children, and would only pile up, unreaped.)
		return "only a killed job's process tree is killed (the agent is not root): a daemon a job leaves outlives it"
	}
	if err := becomeSubreaper(); err != nil {
		return "only the job's process tree is killed (no child subreaper: " + err.Error() + "): a daemon it leaves outlives it"
	}
	return "the agent adopts what a job's processes leave (a child subreaper) and kills it with the last job of its account on this node"
}

// becomeSubreaper makes this process a child subreaper.
func becomeSubreaper() error {
	const prSetChildSubreaper = 36
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); e != 0 {
		return e
	}
	reaper.Store(true)
	return nil
}

// procInfo is what the fall-back reads of a process in /proc.
type procInfo struct {
	ppid  int
	uid   uint32
	state byte
}

// procs reads every process's parent, real uid and state.
func procs() map[int]procInfo {
	out := map[int]procInfo{}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) {
			continue
		}
		f := strings.Fields(string(b[i+2:]))
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		st, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		uid := -1
		for _, line := range strings.Split(string(st), "\n") {
			if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
				if fs := strings.Fields(rest); len(fs) > 0 {
					uid, _ = strconv.Atoi(fs[0])
				}
				break
			}
		}
		if uid < 0 {
			continue
		}
		out[pid] = procInfo{ppid: ppid, uid: uint32(uid), state: f[0][0]}
	}
	return out
}

// descendants returns the descendants of the roots in ps.
func descendants(ps map[int]procInfo, roots ...int) []int {
	kids := map[int][]int{}
	for pid, p := range ps {
		kids[p.ppid] = append(kids[p.ppid], pid)
	}
	var out []int
	queue := roots
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, k := range kids[pid] {
			out = append(out, k)
			queue = append(queue, k)
		}
	}
	return out
}

// killTree kills the descendants of pid (not pid itself), again until
// none is left (one may fork while they are killed), at most 100 rounds.
func killTree(pid int) {
	for range 100 {
		ps := procs()
		alive := 0
		for _, k := range descendants(ps, pid) {
			if st := ps[k].state; st != 'Z' && st != 'X' && syscall.Kill(k, syscall.SIGKILL) == nil {
				alive++ // (a zombie is dead already: its parent reaps it)
			}
		}
		if alive == 0 {
			return
		}
	}
}

// killAdoptees kills and reaps the processes this process adopted that
// run as uid (and their descendants), liveMu held, until none is left
// (bounded by cgroupKillWait).
func killAdoptees(uid uint32) {
	self := os.Getpid()
	deadline := time.Now().Add(cgroupKillWait)
	for wait := 100 * time.Microsecond; ; wait = min(2*wait, 10*time.Millisecond) {
		ps := procs()
		var adopted []int
		for pid, p := range ps {
			if p.ppid == self && p.uid == uid && !livePIDs[pid] {
				adopted = append(adopted, pid)
			}
		}
		if len(adopted) == 0 {
			return
		}
		for _, pid := range append(descendants(ps, adopted...), adopted...) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		for _, pid := range adopted {
			var ws syscall.WaitStatus
			syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		}
		if time.Now().After(deadline) {
			slog.Default().Error("processes of a job's account outlive it", "uid", uid, "pids", adopted)
			return
		}
		time.Sleep(wait)
	}
}
