package jobproc

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gandiva-sched/gandiva/client/protocol"
)

// childFD is the descriptor number of the job's end of the socket pair: the
// first of exec.Cmd.ExtraFiles.
const childFD = 3

// process is one OS process of a Proc.
type process struct {
	pid     int
	conn    net.Conn
	started time.Time
	client  bool  // it said hello
	hooks   bool  // it can save and load its state
	maxDone int64 // highest Done it reported
	stopped bool  // SIGSTOPped
	// fallback: it was killed on purpose as part of a move or migration
	// (not a failure, not a Kill).
	fallback bool
	// cg is the process's cgroup (nil: none; contain.go); uid, without
	// one, the account the fall-back tracks it under (nil: not tracked).
	cg  *jobCgroup
	uid *uint32
	// attached: not our process but a connection its client made (see
	// Attach); signals cannot reach it, SIGKILL becomes a disconnection.
	attached bool
}

type inboxItem struct {
	gen    int
	msg    *protocol.Msg
	exit   *procExit
	probed *bool // whether a checkpoint is there (probe.go)
}

type procExit struct {
	state *os.ProcessState
	err   error
	// disconnected: an attached job's connection closed (no exit status)
	disconnected bool
}

// status returns the exit code (-1 if signalled or unknown) and the signal.
func (e *procExit) status() (int, string) {
	if e.state == nil {
		return -1, ""
	}
	if ws, ok := e.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return -1, ws.Signal().String()
	}
	return e.state.ExitCode(), ""
}

type signal = syscall.Signal

const (
	sigStop = syscall.SIGSTOP
	sigCont = syscall.SIGCONT
	sigKill = syscall.SIGKILL
)

// signal sends sig to the process's whole group (workers it forked too).
// For an attached job, SIGKILL closes the connection (its client stops the
// job at its next boundary) and other signals do nothing: the callers
// never ask them of one.
func (p *process) signal(sig signal) {
	if p.attached {
		if sig == sigKill {
			p.conn.Close()
		}
		return
	}
	if sig == sigKill { // (also the descendants that left the group)
		if p.cg != nil {
			p.cg.kill()
		} else {
			killTree(p.pid)
		}
	}
	if err := syscall.Kill(-p.pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		// The group leader is always ours and alive until reaped, so this
		// only fails if the group is gone already.
		syscall.Kill(p.pid, sig)
	}
}

// spawn starts one process of the job described by s (generation gen); its
// messages and, after them, its exit arrive on inbox.
func spawn(s *Spec, gen int, inbox chan<- inboxItem) (*process, error) {
	// The working directory is the job's: it must exist, and it is never
	// created here (a path that does not exist is the job's error, not a
	// directory to make with the agent's privileges). The log's directory
	// is the agent's (private to it). The checkpoint directory is made
	// here only for a job that runs as the agent itself: for one that runs
	// as another account, the caller prepares it (owned by that account).
	//
	// For a job that runs as another account the agent (maybe root) looks
	// at the working directory not at all: the job's process enters it as
	// its account, and a failure gives one answer whether the path is
	// missing, not a directory or out of the account's reach (badWorkDir),
	// so that a job cannot learn through the agent what is in directories
	// it may not read.
	if s.Credential == nil {
		if st, err := os.Stat(s.WorkDir); err != nil {
			return nil, &StartError{Field: "work_dir", Err: fmt.Errorf("%s: %w", s.WorkDir, err), UserError: true}
		} else if !st.IsDir() {
			return nil, &StartError{Field: "work_dir", Err: fmt.Errorf("%s is not a directory", s.WorkDir), UserError: true}
		}
	}
	if err := os.MkdirAll(filepath.Dir(s.LogPath), 0o700); err != nil {
		return nil, &StartError{Field: "log_path", Err: err}
	}
	if s.Credential == nil {
		if err := os.MkdirAll(s.CheckpointDir, 0o700); err != nil {
			return nil, &StartError{Field: "checkpoint_dir", Err: err}
		}
	}
	ckdir, err := filepath.Abs(s.CheckpointDir)
	if err != nil {
		return nil, &StartError{Field: "checkpoint_dir", Err: err}
	}
	logf, err := os.OpenFile(s.LogPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, &StartError{Field: "log_path", Err: err}
	}
	defer logf.Close()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("creating the job's socket: %w", err)
	}
	ours := os.NewFile(uintptr(fds[0]), "gandiva-agent")
	theirs := os.NewFile(uintptr(fds[1]), "gandiva-job")
	defer ours.Close()
	defer theirs.Close()
	conn, err := net.FileConn(ours) // a dup of fds[0]
	if err != nil {
		return nil, fmt.Errorf("creating the job's socket: %w", err)
	}

	command := func(cg *jobCgroup) *exec.Cmd {
		cmd := exec.Command(s.Command[0], s.Command[1:]...)
		if errors.Is(cmd.Err, exec.ErrDot) {
			cmd.Err = nil // a program in the current directory, as the user wrote it
		}
		cmd.Dir = s.WorkDir
		cmd.Env = environ(s, ckdir)
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.ExtraFiles = []*os.File{theirs}
		// (The child sets its credentials before it changes directory, so the
		// working directory is entered as the job's account, and its
		// parent-death signal after, so that the change does not clear it.)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: s.Credential}
		if cg != nil { // born in its cgroup (contain.go)
			cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, int(cg.fd.Fd())
		}
		return cmd
	}

	fmt.Fprintf(logf, "=== gandiva: job %s attempt %d: starting %q on GPUs %v%s at %s ===\n",
		s.Job, s.Attempt, s.Command, s.GPUs, map[bool]string{true: " (restore)"}[s.Restore],
		time.Now().UTC().Format(time.RFC3339Nano))
	started := time.Now()
	cg := newJobCgroup()
	cmd := command(cg)
	// (Without a cgroup, the fall-back tracks the job's account: contain.go.)
	track := cg == nil && reaper.Load() && s.Credential != nil && s.Credential.Uid != uint32(os.Geteuid())
	if track {
		liveMu.Lock()
	}
	onSpawner(func() { err = cmd.Start() })
	if err != nil && cg != nil && cgroupStartFailed(err) && !cgroupStartWorks() {
		// The cgroup's fault (no clone3 into a cgroup here: a program
		// known to start fails too, so that a job's own program cannot
		// turn containment off for every job): once more without. Only if
		// that works is it taken to be so.
		cmd2 := command(nil)
		var err2 error
		onSpawner(func() { err2 = cmd2.Start() })
		if err2 == nil {
			slog.Default().Error("cannot start job processes in cgroups: falling back", "err", err, "to", fallBack())
			contain.off.Store(true)
			cg.destroy()
			cg, cmd, err = nil, cmd2, nil
		}
	}
	cg.started()
	if track {
		if err == nil {
			livePIDs[cmd.Process.Pid] = true
			liveUIDs[s.Credential.Uid]++
		}
		liveMu.Unlock()
	}
	if err != nil {
		cg.destroy()
		conn.Close()
		fmt.Fprintf(logf, "=== gandiva: could not start: %v ===\n", err)
		// (The child's error does not say whether the chdir or the exec
		// failed: a directory the account cannot enter is found here.)
		if c := s.Credential; c != nil && !canEnter(s.WorkDir, c.Uid, c.Gid) {
			return nil, &StartError{Field: "work_dir", Err: badWorkDir(s), UserError: true}
		}
		return nil, &StartError{Err: fmt.Errorf("starting %q: %w%s", s.Command[0], err, asWhom(s)), UserError: true}
	}
	p := &process{pid: cmd.Process.Pid, conn: conn, started: started, cg: cg}
	if track {
		uid := s.Credential.Uid
		p.uid = &uid
	}

	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		sc := bufio.NewScanner(conn)
		sc.Buffer(make([]byte, 4096), protocol.MaxLine+1)
		for sc.Scan() {
			m, err := protocol.Decode(sc.Bytes())
			if err != nil {
				continue // a job writing garbage gets no say; its exit still counts
			}
			inbox <- inboxItem{gen: gen, msg: &m}
		}
	}()
	go func() {
		err := cmd.Wait()
		// Workers the job forked die with it: its process group, and
		// every process in its cgroup (wherever they went: contain.go),
		// before its exit is reported.
		syscall.Kill(-p.pid, syscall.SIGKILL)
		p.cg.destroy()
		if p.uid != nil {
			liveMu.Lock()
			delete(livePIDs, p.pid)
			liveUIDs[*p.uid]--
			if liveUIDs[*p.uid] == 0 {
				delete(liveUIDs, *p.uid)
				killAdoptees(*p.uid)
			}
			liveMu.Unlock()
		}
		// Its last messages first (a descendant that kept the socket open
		// gets two seconds).
		select {
		case <-readerDone:
		case <-time.After(2 * time.Second):
		}
		conn.Close()
		<-readerDone
		inbox <- inboxItem{gen: gen, exit: &procExit{state: cmd.ProcessState, err: err}}
	}()
	return p, nil
}

// StartError is why a job's process could not be started: Field names
// the Spec field at fault (if one is), UserError says the job's own spec is
// to blame (its working directory, its program) rather than the node.
type StartError struct {
	Field     string
	Err       error
	UserError bool
}

func (e *StartError) Error() string {
	if e.Field == "" {
		return e.Err.Error()
	}
	return e.Field + ": " + e.Err.Error()
}

func (e *StartError) Unwrap() error { return e.Err }

// badWorkDir is the error of a working directory that a job running as
// another account could not enter: the same whether it is missing, not a
// directory, or out of the account's reach.
func badWorkDir(s *Spec) error {
	return fmt.Errorf("%s: no such directory, or not one that uid %d may enter", s.WorkDir, s.Credential.Uid)
}

// canEnter reports whether uid (with group gid and no other group) may
// enter dir by its and its parents' permission bits (ACLs aside), and dir
// is a directory. It tells nothing more than the account could learn by
// itself: false for a path that is missing and for one out of its reach.
func canEnter(dir string, uid, gid uint32) bool {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err != nil {
			return false
		}
		sys, ok := st.Sys().(*syscall.Stat_t)
		if !ok {
			return true
		}
		m := st.Mode().Perm()
		var x bool
		switch {
		case sys.Uid == uid:
			x = m&0o100 != 0
		case sys.Gid == gid:
			x = m&0o010 != 0
		default:
			x = m&0o001 != 0
		}
		if !x || d == filepath.Clean(dir) && !st.IsDir() {
			return false
		}
		if d == filepath.Dir(d) {
			return true
		}
	}
}

// asWhom says which account a job was to run as, for errors.
func asWhom(s *Spec) string {
	if s.Credential == nil {
		return ""
	}
	return fmt.Sprintf(" (as uid %d)", s.Credential.Uid)
}

// environ builds the job's environment: Spec.BaseEnv (by default the
// agent's, without its GANDIVA_* variables), then Spec.Env, then the
// protocol's variables.
func environ(s *Spec, ckdir string) []string {
	var env []string
	base := s.BaseEnv
	if base == nil {
		base = os.Environ()
	}
	for _, kv := range base {
		if strings.HasPrefix(kv, "GANDIVA_") || strings.HasPrefix(kv, "CUDA_VISIBLE_DEVICES=") {
			continue
		}
		env = append(env, kv)
	}
	keys := make([]string, 0, len(s.Env))
	for k := range s.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+s.Env[k])
	}
	gpus := make([]string, len(s.GPUs))
	for i, g := range s.GPUs {
		gpus[i] = strconv.Itoa(g)
	}
	restore := "0"
	if s.Restore {
		restore = "1"
	}
	report := s.ReportEvery.Seconds()
	if report == 0 {
		report = protocol.DefaultReportEvery
	}
	env = append(env,
		"CUDA_VISIBLE_DEVICES="+strings.Join(gpus, ","),
		protocol.EnvGPUs+"="+strings.Join(gpus, ","),
		protocol.EnvFD+"="+strconv.Itoa(childFD),
		protocol.EnvJob+"="+s.Job,
		protocol.EnvAttempt+"="+strconv.Itoa(s.Attempt),
		protocol.EnvCheckpointDir+"="+ckdir,
		protocol.EnvRestore+"="+restore,
		protocol.EnvCheckpointEvery+"="+strconv.FormatFloat(s.CheckpointEvery.Seconds(), 'g', -1, 64),
		protocol.EnvReportEvery+"="+strconv.FormatFloat(report, 'g', -1, 64),
	)
	if s.PreRun {
		env = append(env, protocol.EnvPreRun+"=1")
	}
	if s.Hold {
		env = append(env, protocol.EnvHold+"=1")
	}
	if s.WorldSize > 1 {
		env = append(env,
			"RANK="+strconv.Itoa(s.Rank), "WORLD_SIZE="+strconv.Itoa(s.WorldSize),
			"MASTER_ADDR="+s.MasterAddr, "MASTER_PORT="+strconv.Itoa(s.MasterPort),
			"GANDIVA_RANK="+strconv.Itoa(s.Rank), "GANDIVA_WORLD_SIZE="+strconv.Itoa(s.WorldSize),
		)
	}
	return env
}

// The parent-death signal is sent when the thread that forked the child
// exits, not the process. Go may end an OS thread whose goroutine locked it,
// so every job is forked from one goroutine locked to a thread that never
// exits.
var (
	spawnOnce sync.Once
	spawnCh   chan func()
)

func onSpawner(f func()) {
	spawnOnce.Do(func() {
		spawnCh = make(chan func())
		go func() {
			runtime.LockOSThread()
			for f := range spawnCh {
				f()
			}
		}()
	})
	done := make(chan struct{})
	spawnCh <- func() { f(); close(done) }
	<-done
}
