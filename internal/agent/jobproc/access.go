package jobproc

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Access is what a job's account must be able to do for the job to start
// on a node: enter its working directory and run its command (and the
// command's interpreter and script). CheckAccess checks it before the job
// is submitted, so that a job that would fail at its start (a working
// directory under /root, python3 resolving to root's pyenv) is refused at
// once, with the fix, instead of after a pre-run and a retry.
type Access struct {
	// Credential is the job's account (as Spec.Credential): nil is the
	// caller's own. Account names it, for messages.
	Credential *syscall.Credential
	Account    string
	// WorkDir and Command are the job's (Spec); an empty WorkDir is not
	// checked.
	WorkDir string
	Command []string
	// Path is the PATH that Command[0] is looked up in: the agent's, which
	// it resolves as itself before it starts the job as its account (Spec).
	Path string
}

// Problem is one thing the job's account cannot do. Fatal problems stop
// the job from starting; the others (a working directory it cannot write)
// may or may not matter to it.
type Problem struct {
	// Field is the request field at fault: "workdir" or "command".
	Field string
	Fatal bool
	// What happened and the Fix, both for people.
	What, Fix string
}

func (p Problem) String() string { return p.Field + ": " + p.What + ". Fix: " + p.Fix }

// CheckAccess asks, as the job's account, whether it can enter a.WorkDir,
// write there, and run a.Command: the command as the agent resolves it
// (the first match on a.Path), the interpreter its "#!" line names (through
// env, any match on a.Path) and, for an interpreter such as python3, the
// script given as its first argument. It returns the problems found, fatal
// ones first; an error only when it could not ask.
//
// As root (or as the account itself) it asks a shell started with the
// account's credential, as the job's own process is (test -x, -r, -w: the
// kernel's answer, ACLs included). Otherwise it can only read permission
// bits (ACLs aside), and says what it cannot see as allowed. The paths are
// resolved, and at most the first 256 bytes of the command's file read (its
// "#!" line), as the caller: the submitter, who named them.
func CheckAccess(ctx context.Context, a Access) ([]Problem, error) {
	var q questions
	who := a.Account
	if who == "" {
		who = "the job's account"
	}
	// The working directory: every directory on the way searchable, the
	// directory itself writable (a warning).
	if a.WorkDir != "" {
		q.walk(a.WorkDir)
		q.ask('w', a.WorkDir)
	}
	var cmd *resolved
	if len(a.Command) > 0 && a.Command[0] != "" {
		cmd = resolve(a.Command[0], a.WorkDir, a.Path, true)
		cmd.addTo(&q)
	}
	var interp, script *resolved
	if cmd != nil && cmd.path != "" {
		if name, viaEnv := shebang(cmd.path); name != "" {
			if viaEnv {
				interp = resolve(name, "", a.Path, false)
			} else {
				interp = resolve(name, "", "", false)
			}
			interp.addTo(&q)
		}
		if s := scriptArg(cmd.path, a.Command, a.WorkDir); s != "" {
			script = &resolved{name: s, path: s}
			q.walk(filepath.Dir(s))
			q.ask('r', s)
		}
	}
	ans, err := askAs(ctx, a.Credential, q)
	if err != nil {
		return nil, err
	}
	var fatal, warn []Problem
	if a.WorkDir != "" {
		if d := ans.blocked(a.WorkDir); d != "" {
			what := fmt.Sprintf("%s cannot enter %s: %s", who, a.WorkDir, blockedBy(d))
			if d == filepath.Clean(a.WorkDir) {
				what = fmt.Sprintf("%s may not enter %s (%s)", who, d, modeOf(d))
			}
			fatal = append(fatal, Problem{Field: "workdir", Fatal: true, What: what,
				Fix: fmt.Sprintf("submit from a directory %s can reach (such as one under /srv or /tmp, every directory above it searchable by others: chmod o+x), or give --workdir", who)})
		} else if !ans.ok('w', a.WorkDir) {
			warn = append(warn, Problem{Field: "workdir",
				What: fmt.Sprintf("%s cannot write in %s (the job may still read there, and write its checkpoints in $GANDIVA_CHECKPOINT_DIR)", who, a.WorkDir),
				Fix:  fmt.Sprintf("if the job writes files there, let %s write it (chgrp/chmod g+w, or chmod o+w)", who)})
		}
	}
	if cmd != nil {
		if p, ok := cmd.problem(ans, who, "the command"); !ok {
			fatal = append(fatal, p)
		} else if interp != nil {
			if p, ok := interp.problem(ans, who, cmd.path+"'s interpreter"); !ok {
				fatal = append(fatal, p)
			}
		}
	}
	if script != nil {
		if d := ans.blocked(filepath.Dir(script.path)); d != "" {
			fatal = append(fatal, Problem{Field: "command", Fatal: true,
				What: fmt.Sprintf("%s cannot read the script %s: %s", who, script.path, blockedBy(d)),
				Fix:  fmt.Sprintf("put it where %s can read it", who)})
		} else if !ans.ok('r', script.path) {
			fatal = append(fatal, Problem{Field: "command", Fatal: true,
				What: fmt.Sprintf("%s cannot read the script %s (%s)", who, script.path, modeOf(script.path)),
				Fix:  fmt.Sprintf("let %s read it (chmod o+r, or chgrp and chmod g+r)", who)})
		}
	}
	return append(fatal, warn...), nil
}

// resolved is a command name and where it leads.
type resolved struct {
	name string
	// path is what is run: for a name looked up on PATH, the first match
	// (first) or "" when there is none; cands are all the matches.
	path  string
	cands []string
	first bool // the first match is taken (the agent's lookup), not any
	where string
}

// resolve finds name as a program: a path (relative ones to dir), or
// looked up on path (the matches, in order, that the caller sees as
// executable files).
func resolve(name, dir, path string, first bool) *resolved {
	r := &resolved{name: name, first: first}
	if strings.Contains(name, "/") {
		if !filepath.IsAbs(name) {
			if dir == "" {
				return &resolved{name: name} // (relative to a directory not known here)
			}
			name = filepath.Join(dir, name)
		}
		r.path, r.cands, r.first = name, []string{name}, true
		return r
	}
	r.where = "on PATH " + path
	for _, d := range filepath.SplitList(path) {
		if !filepath.IsAbs(d) || len(r.cands) == 16 {
			continue // (relative entries depend on a directory not known here)
		}
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0 {
			r.cands = append(r.cands, p)
		}
	}
	if len(r.cands) > 0 {
		r.path = r.cands[0]
	}
	return r
}

// addTo adds the questions that say whether the account can run r's
// candidates.
func (r *resolved) addTo(q *questions) {
	for _, c := range r.cands {
		if real, err := filepath.EvalSymlinks(c); err == nil && real != c {
			q.walk(filepath.Dir(real))
		}
		q.walk(filepath.Dir(c))
		q.ask('x', c)
	}
}

// runs reports whether the account can run c, and if not, why.
func (r *resolved) runs(ans answers, c string) (bool, string) {
	if d := ans.blocked(filepath.Dir(c)); d != "" {
		return false, blockedBy(d)
	}
	if real, err := filepath.EvalSymlinks(c); err == nil && real != c {
		if d := ans.blocked(filepath.Dir(real)); d != "" {
			return false, "it leads to " + real + ", and " + blockedBy(d)
		}
	}
	if !ans.ok('x', c) {
		return false, "it is not executable for it (" + modeOf(c) + ")"
	}
	return true, ""
}

// problem says what is wrong with r for the account, if anything.
func (r *resolved) problem(ans answers, who, what string) (Problem, bool) {
	if r.name != "" && r.path == "" && len(r.cands) == 0 && r.where == "" {
		return Problem{}, true // (not checked)
	}
	if r.where == "" {
		if _, err := os.Stat(r.path); errors.Is(err, os.ErrNotExist) {
			return Problem{Field: "command", Fatal: true,
				What: fmt.Sprintf("%s %s does not exist", what, r.path),
				Fix:  "give the path of a program that exists on the node"}, false
		}
	}
	if len(r.cands) == 0 {
		return Problem{Field: "command", Fatal: true,
			What: fmt.Sprintf("%s %q is not found %s", what, r.name, r.where),
			Fix:  "give the full path of a program the job's account can run"}, false
	}
	if r.first {
		ok, why := r.runs(ans, r.path)
		if ok {
			return Problem{}, true
		}
		desc := r.path
		if r.path != r.name {
			desc = fmt.Sprintf("%q resolves to %s (the first match %s)", r.name, r.path, r.where)
		}
		fix := fmt.Sprintf("install it where %s can run it, or give the full path of one it can", who)
		if strings.HasPrefix(why, "it is not executable") {
			fix = fmt.Sprintf("let %s execute it (chmod o+x, or chgrp and chmod g+x), or give the full path of one it can run", who)
		}
		for _, c := range r.cands[1:] {
			if ok, _ := r.runs(ans, c); ok {
				fix = fmt.Sprintf("give the full path of one %s can run, such as %s (later on the same PATH)", who, c)
				break
			}
		}
		return Problem{Field: "command", Fatal: true,
			What: fmt.Sprintf("%s %s, which %s cannot run: %s", what, desc, who, why), Fix: fix}, false
	}
	var whys []string
	for _, c := range r.cands {
		ok, why := r.runs(ans, c)
		if ok {
			return Problem{}, true
		}
		whys = append(whys, c+": "+why)
	}
	return Problem{Field: "command", Fatal: true,
		What: fmt.Sprintf("%s %q %s is none that %s can run (%s)", what, r.name, r.where, who, strings.Join(whys, "; ")),
		Fix:  fmt.Sprintf("install it where %s can run it, or name one it can", who)}, false
}

// shebang returns the interpreter a script's "#!" line names (and whether
// it is looked up through env: "#!/usr/bin/env python3"), or "" for a
// file that is not a script (or cannot be read). It reads at most 256
// bytes of a regular file and opens nothing else: path (which the job's
// owner may control, and swap at any time) is looked at first through an
// O_PATH descriptor, which runs no device's open and releases no FIFO's
// writer, and only a regular file is then opened, through that
// descriptor (/proc/self/fd), so that it is the very file looked at.
func shebang(path string) (string, bool) {
	pfd, err := syscall.Open(path, oPath|syscall.O_CLOEXEC, 0)
	if err != nil {
		return "", false
	}
	defer syscall.Close(pfd)
	var pre syscall.Stat_t
	if err := syscall.Fstat(pfd, &pre); err != nil || pre.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return "", false
	}
	f, err := os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", pfd), os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return "", false
	}
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil || st.Dev != pre.Dev || st.Ino != pre.Ino {
		return "", false
	}
	buf := make([]byte, 256)
	n, _ := f.Read(buf)
	line, _, _ := bytes.Cut(buf[:n], []byte("\n"))
	rest, ok := bytes.CutPrefix(line, []byte("#!"))
	if !ok {
		return "", false
	}
	fs := strings.Fields(string(rest))
	if len(fs) == 0 {
		return "", false
	}
	if filepath.Base(fs[0]) == "env" && len(fs) > 1 && !strings.HasPrefix(fs[1], "-") && !strings.Contains(fs[1], "=") {
		return fs[1], true
	}
	return fs[0], false
}

// scriptArg returns the script an interpreter is given as its first
// argument (python3 train.py), as a path, when it is a file the caller
// sees; else "".
func scriptArg(prog string, command []string, dir string) string {
	if len(command) < 2 || strings.HasPrefix(command[1], "-") || command[1] == "" {
		return ""
	}
	base := filepath.Base(prog)
	interp := strings.HasPrefix(base, "python")
	for _, p := range []string{"bash", "sh", "dash", "zsh", "perl", "ruby", "node"} {
		interp = interp || base == p
	}
	if !interp {
		return ""
	}
	s := command[1]
	if !filepath.IsAbs(s) {
		if dir == "" {
			return ""
		}
		s = filepath.Join(dir, s)
	}
	if st, err := os.Stat(s); err != nil || !st.Mode().IsRegular() {
		return ""
	}
	return s
}

// questions are what the account is asked: may it search/execute ('x'),
// read ('r') or write ('w') a path.
type questions struct {
	list []question
	seen map[question]bool
}

type question struct {
	op   byte
	path string
}

func (q *questions) ask(op byte, path string) {
	k := question{op, filepath.Clean(path)}
	if q.seen == nil {
		q.seen = map[question]bool{}
	}
	if !q.seen[k] {
		q.seen[k] = true
		q.list = append(q.list, k)
	}
}

// walk asks whether the account may search dir and every directory above
// it.
func (q *questions) walk(dir string) {
	for _, d := range rootDown(dir) {
		q.ask('x', d)
	}
}

// rootDown returns the directories from the root down to dir: the root
// first, dir (cleaned) last.
func rootDown(dir string) []string {
	var ds []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		ds = append(ds, d)
		if d == filepath.Dir(d) {
			break
		}
	}
	slices.Reverse(ds)
	return ds
}

// answers are the account's answers.
type answers map[question]bool

func (a answers) ok(op byte, path string) bool {
	v, asked := a[question{op, filepath.Clean(path)}]
	return v || !asked
}

// blocked returns the first directory from the root down to dir that the
// account may not search, or "".
func (a answers) blocked(dir string) string {
	for _, d := range rootDown(dir) {
		if !a.ok('x', d) {
			return d
		}
	}
	return ""
}

// blockedBy says why a directory cannot be searched, from what the caller
// sees of it.
func blockedBy(d string) string {
	return fmt.Sprintf("it may not enter %s (%s)", d, modeOf(d))
}

// modeOf describes a path's mode and owner, or that it does not exist.
func modeOf(p string) string {
	st, err := os.Stat(p)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "it does not exist"
		}
		return err.Error()
	}
	s := fmt.Sprintf("mode %04o", st.Mode().Perm())
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		s += fmt.Sprintf(", owner uid %d, group gid %d", sys.Uid, sys.Gid)
	}
	return s
}

// probeScript answers each argument "OP:PATH" with a line: 1 when the
// shell's test -OP PATH holds, else 0.
const probeScript = `for q do
  p=${q#?:}
  case $q in
  r:*) test -r "$p" ;;
  w:*) test -w "$p" ;;
  *) test -x "$p" ;;
  esac && echo 1 || echo 0
done`

// askAs answers q as the account: by a shell started with its credential
// when the caller can (root, or the account itself), else by permission
// bits.
func askAs(ctx context.Context, cred *syscall.Credential, q questions) (answers, error) {
	ans := answers{}
	if len(q.list) == 0 {
		return ans, nil
	}
	euid := uint32(os.Geteuid())
	if cred != nil && euid != 0 && cred.Uid != euid {
		for _, k := range q.list {
			ans[k] = byBits(k, cred.Uid, cred.Gid)
		}
		return ans, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	args := []string{"-c", probeScript, "gandiva-access-check"}
	for _, k := range q.list {
		args = append(args, string(k.op)+":"+k.path)
	}
	sh := exec.CommandContext(ctx, probeShell, args...)
	sh.Dir, sh.Env = "/", []string{"PATH=/usr/bin:/bin"}
	sh.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if cred != nil && cred.Uid != euid {
		sh.SysProcAttr.Credential = cred
	}
	// The shell runs as the account, so the account's other processes
	// (its jobs) may trace it and answer for it: its output is bounded
	// (two bytes an answer), and a descendant that keeps its stdout open
	// after it ends holds nobody up.
	out := &capped{max: 2*len(q.list) + 64, over: cancel}
	sh.Stdout, sh.WaitDelay = out, time.Second
	sh.Cancel = func() error { return syscall.Kill(-sh.Process.Pid, syscall.SIGKILL) }
	if err := sh.Run(); err != nil {
		if out.full {
			err = fmt.Errorf("more than %d bytes of answers", out.max)
		}
		return nil, fmt.Errorf("checking access as uid %d: %w", credUID(cred), err)
	}
	sc := bufio.NewScanner(&out.b)
	for _, k := range q.list {
		if !sc.Scan() {
			return nil, fmt.Errorf("checking access as uid %d: %d answers to %d questions", credUID(cred), len(ans), len(q.list))
		}
		ans[k] = sc.Text() == "1"
	}
	return ans, nil
}

// probeShell is the shell askAs starts (tests replace it).
var probeShell = "/bin/sh"

// capped is a buffer that takes at most max bytes, then calls over and
// fails.
type capped struct {
	b    bytes.Buffer
	max  int
	over func()
	full bool
}

func (c *capped) Write(p []byte) (int, error) {
	if c.b.Len()+len(p) > c.max {
		c.full = true
		c.over()
		return 0, fmt.Errorf("more than %d bytes of answers", c.max)
	}
	return c.b.Write(p)
}

// oPath is O_PATH (not in package syscall on every architecture; this
// value on all that Go supports on Linux).
const oPath = 0x200000

func credUID(c *syscall.Credential) uint32 {
	if c == nil {
		return uint32(os.Geteuid())
	}
	return c.Uid
}

// byBits answers a question from permission bits (ACLs aside; the account
// has only its primary group): a path the caller cannot see counts as
// allowed, since nothing can be told of it.
func byBits(k question, uid, gid uint32) bool {
	st, err := os.Stat(k.path)
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return true
	}
	bit := map[byte]os.FileMode{'r': 4, 'w': 2, 'x': 1}[k.op]
	m := st.Mode().Perm()
	switch {
	case sys.Uid == uid:
		return m&(bit<<6) != 0
	case sys.Gid == gid:
		return m&(bit<<3) != 0
	default:
		return m&bit != 0
	}
}
