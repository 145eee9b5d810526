package agent

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/user"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// RunAs is the rule that gives the OS account each job runs as, from the
// job's user. An agent never runs a job as root, nor as its own account
// unless it cannot switch accounts at all (Self).
//
//   - Map (a mapping file, ReadUserMap) names the account of each user it
//     lists; it comes first.
//   - Pattern names the account of every other user: a fixed account
//     ("gandiva-job": every job as one dedicated account, so jobs cannot
//     touch the scheduler, but the jobs of different users share it) or one
//     with "{user}" in it ("gdv-{user}": one account per user, so users'
//     jobs cannot read each other's files either). An empty Pattern with a
//     Map runs only the users the map lists.
//   - Self runs jobs as the agent's own account, for an agent that is not
//     root (it cannot switch accounts): then only the jobs of SelfUsers
//     ("*": anyone's) run, because such a job can read everything the agent
//     can, the admin token of a `gandiva up` included. A root agent refuses
//     Self.
//
// The accounts are created by the node's administrator (see
// docs/SECURITY.md); an account that does not exist, is root (uid or gid
// 0) or is the agent's own fails the job with a reason that says so.
type RunAs struct {
	Pattern   string
	Map       map[string]string
	Self      bool
	SelfUsers []string
}

// DefaultAccount is the dedicated account jobs run as by default on an
// agent that runs as root.
const DefaultAccount = "gandiva-job"

var accountRE = regexp.MustCompile(`^[a-z_][a-z0-9_.-]{0,31}\$?$`)

// ParseRunAs parses a --run-as rule: "self", an account name, or an
// account name with "{user}" in it.
func ParseRunAs(rule string) (RunAs, error) {
	rule = strings.TrimSpace(rule)
	switch {
	case rule == "self":
		return RunAs{Self: true}, nil
	case rule == "":
		return RunAs{}, errors.New("--run-as: empty; want self, an account, or a pattern such as gdv-{user}")
	}
	probe := strings.ReplaceAll(rule, "{user}", "u")
	if !accountRE.MatchString(probe) || strings.Count(rule, "{") != strings.Count(rule, "{user}") {
		return RunAs{}, fmt.Errorf("--run-as %q: want self, an account name, or one with {user} in it (such as gdv-{user})", rule)
	}
	return RunAs{Pattern: rule}, nil
}

// ReadUserMap reads a mapping file: one "USER ACCOUNT" per line; blank
// lines and lines starting with '#' are skipped. An error names the line.
func ReadUserMap(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--user-map: %w", err)
	}
	defer f.Close()
	m := map[string]string{}
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		fs := strings.Fields(l)
		if len(fs) != 2 || !accountRE.MatchString(fs[1]) {
			return nil, fmt.Errorf("--user-map %s line %d: want \"USER ACCOUNT\", got %q", path, line, l)
		}
		if _, dup := m[fs[0]]; dup {
			return nil, fmt.Errorf("--user-map %s line %d: user %s is mapped twice", path, line, fs[0])
		}
		m[fs[0]] = fs[1]
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("--user-map %s: %w", path, err)
	}
	return m, nil
}

// String describes the rule, for logs.
func (r RunAs) String() string {
	var parts []string
	if r.Self {
		who := "the users " + strings.Join(r.SelfUsers, ", ")
		if slices.Contains(r.SelfUsers, "*") {
			who = "every user"
		}
		return "the agent's own account, for " + who
	}
	if len(r.Map) > 0 {
		parts = append(parts, fmt.Sprintf("%d users mapped", len(r.Map)))
	}
	if r.Pattern != "" {
		parts = append(parts, "otherwise "+r.Pattern)
	}
	return strings.Join(parts, "; ")
}

// account is an OS account a job runs as.
type account struct {
	name     string
	uid, gid uint32
	home     string
	self     bool // the agent's own (RunAs.Self)
}

// credential is the job's process credential: nil for the agent's own
// account; else the account's uid and gid and no supplementary group.
func (a *account) credential() *syscall.Credential {
	if a.self {
		return nil
	}
	return &syscall.Credential{Uid: a.uid, Gid: a.gid, Groups: []uint32{}}
}

// runAs resolves accounts (caching them).
type runAs struct {
	rule RunAs
	root bool // the agent runs as root (it can switch accounts)
	me   uint32
	mu   sync.Mutex
	seen map[string]*account
}

func newRunAs(rule RunAs) (*runAs, error) {
	r := &runAs{rule: rule, root: os.Geteuid() == 0, me: uint32(os.Geteuid()), seen: map[string]*account{}}
	switch {
	case rule.Self && r.root:
		return nil, errors.New("agent: --run-as self: an agent running as root never runs jobs as itself; give an unprivileged account (default " + DefaultAccount + ")")
	case !rule.Self && !r.root:
		return nil, fmt.Errorf("agent: --run-as %s needs the agent to run as root, to switch to the account; not root, an agent can only run jobs as itself (--run-as self, for the users of --self-users)", rule)
	case !rule.Self && rule.Pattern == "" && len(rule.Map) == 0:
		return nil, errors.New("agent: a run-as rule needs an account, a pattern or a user map")
	}
	// The fixed accounts must exist now: a typo is found at start.
	var fixed []string
	if rule.Pattern != "" && !strings.Contains(rule.Pattern, "{user}") {
		fixed = append(fixed, rule.Pattern)
	}
	for _, acc := range rule.Map {
		fixed = append(fixed, acc)
	}
	slices.Sort(fixed)
	for _, name := range slices.Compact(fixed) {
		if _, err := r.lookup(name); err != nil {
			return nil, fmt.Errorf("agent: %w", err)
		}
	}
	return r, nil
}

// Check reports whether an agent can use the rule on this machine (as
// New would): Self only when not root, the others only as root, and every
// fixed account exists and is not root nor the agent's own.
func (r RunAs) Check() error {
	_, err := newRunAs(r)
	return err
}

// resolve gives the account user's jobs run as, or an error that says why
// none (the job fails with it).
func (r *runAs) resolve(user string) (*account, error) {
	if r.rule.Self {
		if !slices.Contains(r.rule.SelfUsers, "*") && !slices.Contains(r.rule.SelfUsers, user) {
			return nil, fmt.Errorf("this node runs jobs as its agent's own account (the agent is not root, so it cannot switch accounts), "+
				"and only for %s, not for %s: run the agent as root with --run-as, or add the user to --self-users", strings.Join(r.rule.SelfUsers, ", "), user)
		}
		return &account{name: "(the agent's own)", uid: r.me, self: true}, nil
	}
	name, ok := r.rule.Map[user]
	if !ok {
		if r.rule.Pattern == "" {
			return nil, fmt.Errorf("user %s has no OS account on this node (it is not in the agent's --user-map)", user)
		}
		name = strings.ReplaceAll(r.rule.Pattern, "{user}", user)
	}
	return r.lookup(name)
}

// lookup finds an account and checks it is one a job may run as.
func (r *runAs) lookup(name string) (*account, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if a := r.seen[name]; a != nil {
		return a, nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("no OS account %q on this node for the job to run as: an admin creates it "+
			"(useradd --system --user-group --no-create-home --shell /usr/sbin/nologin %s) or changes --run-as/--user-map", name, name)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	switch {
	case err1 != nil || err2 != nil:
		return nil, fmt.Errorf("account %s: uid %q, gid %q: not numbers", name, u.Uid, u.Gid)
	case uid == 0 || gid == 0:
		return nil, fmt.Errorf("account %s has uid %d, gid %d: a job never runs as root or in group 0", name, uid, gid)
	case uint32(uid) == r.me:
		return nil, fmt.Errorf("account %s is the agent's own (uid %d): a job never runs as its agent", name, uid)
	}
	a := &account{name: name, uid: uint32(uid), gid: uint32(gid), home: u.HomeDir}
	r.seen[name] = a
	return a, nil
}

// jobEnv is the environment a job starts from: the variables of the agent
// that a job may need to find its tools and libraries (never one that may
// hold a secret of the agent's: no GANDIVA_*, no credentials, no tokens),
// then its account's HOME, USER and LOGNAME.
func jobEnv(acc *account) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if passEnv(k) {
			env = append(env, kv)
		}
	}
	if !acc.self {
		home := acc.home
		if home == "" {
			home = "/"
		}
		env = slices.DeleteFunc(env, func(kv string) bool {
			return strings.HasPrefix(kv, "HOME=") || strings.HasPrefix(kv, "USER=") || strings.HasPrefix(kv, "LOGNAME=")
		})
		env = append(env, "HOME="+home, "USER="+acc.name, "LOGNAME="+acc.name)
	}
	return env
}

// passEnv is the allow-list of the agent's variables a job inherits.
func passEnv(k string) bool {
	switch k {
	case "PATH", "LD_LIBRARY_PATH", "LANG", "LANGUAGE", "TZ", "TERM", "PYTHONPATH", "HOME", "USER", "LOGNAME":
		return true
	case "CUDA_VISIBLE_DEVICES":
		return false
	}
	for _, p := range []string{"LC_", "CUDA_", "NVIDIA_", "NCCL_"} {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}
