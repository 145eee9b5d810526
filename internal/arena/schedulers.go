package arena

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
)

// Scheduler names one scheduler under test: KIND, KIND:ARGS or
// KIND:ARGS@SIMPOLICY, where KIND is a registered peer (see peers): for
// example "kube-scheduler", or "gandiva:POLICY" (any registered policy
// with its parameters, as for `gandiva sim --policy`; "gandiva" alone is
// "gandiva:tiresias-l"), optionally followed by "@SIMPOLICY", the policy
// the simulator runs to compare (default POLICY; gandiva's clock runs at
// the replay's speed, so POLICY's time constants are the simulator's).
type Scheduler struct {
	// Kind is the peer's name: "gandiva", "kube-scheduler", ...
	Kind string
	// Policy is the peer's arguments (gandiva's policy; "" for peers
	// that take none).
	Policy string
	// SimPolicy is the simulator's policy to compare with ("" for peers
	// the simulator does not model).
	SimPolicy string
}

// peer is one kind of scheduler the arena can run. Each kind lives in its
// own file (peer_KIND.go) and registers itself from an init function with
// registerPeer. Every function may be nil (the default says what it is).
type peer struct {
	// parse checks the text after "KIND:" (args, "" when none) and after
	// "@" (sim, when hasSim) and returns the Scheduler's Policy and
	// SimPolicy. nil: the kind takes neither.
	parse func(args, sim string, hasSim bool) (policy, simPolicy string, err error)
	// schedulerName is the schedulerName of the pods of the Jobs the
	// player creates ("default-scheduler" if "").
	schedulerName string
	// decorate changes each Job the player creates (labels, annotations,
	// suspend, ...) after its pods' schedulerName was set; nil: none.
	decorate func(s Scheduler, j *PlannedJob, job *batchv1.Job)
	// missing says why the kind cannot run here ("" when it can: its
	// binaries are built); the arena then reports the row as "not run:
	// WHY" without starting a plane. nil: always runnable.
	missing func(c *Config) string
	// start sets up the fresh plane (CRDs, queues, webhooks; the nodes
	// and the plan's namespaces exist and the nodes are Ready) and starts
	// the peer's processes (g.startChild), returning them once they serve.
	// The clock starts after it returns. On failure it returns the
	// processes started so far (or nil) with the error: the arena stops
	// them.
	start func(ctx context.Context, e *peerEnv) (*group, error)
}

// peerEnv is what a peer's start gets.
type peerEnv struct {
	Sched  Scheduler
	Config *Config // Plan, Speed, BinDir, Gandiva, QPS, Log
	Plane  *cplane.Plane
	CS     kubernetes.Interface
	// Kubeconfig is an admin kubeconfig file of the plane.
	Kubeconfig string
	// Dir is a private directory for configurations and logs, removed
	// after the run.
	Dir string
}

// logf writes a progress line about the run.
func (e *peerEnv) logf(format string, args ...any) {
	fmt.Fprintf(e.Config.Log, "%s: %s\n", e.Sched, fmt.Sprintf(format, args...))
}

// peers are the registered kinds of scheduler, by name.
var peers = map[string]*peer{}

// registerPeer adds a kind of scheduler; it panics on a name used twice.
func registerPeer(kind string, p *peer) {
	if _, dup := peers[kind]; dup {
		panic("arena: scheduler kind " + kind + " registered twice")
	}
	peers[kind] = p
}

// peerKinds lists the registered kinds, sorted.
func peerKinds() []string {
	var out []string
	for k := range peers {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ParseSchedulers reads a comma-separated list of schedulers.
func ParseSchedulers(s string) ([]Scheduler, error) {
	var out []Scheduler
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		f, simPol, hasSim := strings.Cut(f, "@")
		kind, args, hasArgs := strings.Cut(f, ":")
		p, ok := peers[kind]
		if !ok {
			return nil, fmt.Errorf("scheduler %q: use one of %s (gandiva:POLICY)", f, strings.Join(peerKinds(), ", "))
		}
		pol := ""
		if p.parse == nil {
			if hasArgs || hasSim {
				return nil, fmt.Errorf("scheduler %q: %s takes no policy", f, kind)
			}
		} else {
			var err error
			if pol, simPol, err = p.parse(args, simPol, hasSim); err != nil {
				return nil, fmt.Errorf("scheduler %q: %w", f, err)
			}
		}
		out = append(out, Scheduler{Kind: kind, Policy: pol, SimPolicy: simPol})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no scheduler named")
	}
	return out, nil
}

// String is the scheduler as ParseSchedulers reads it.
func (s Scheduler) String() string {
	out := s.Kind
	if s.Policy != "" {
		out += ":" + s.Policy
	}
	if s.SimPolicy != "" && s.SimPolicy != s.Policy {
		out += "@" + s.SimPolicy
	}
	return out
}

// peer is s's kind (nil if unregistered).
func (s Scheduler) peer() *peer { return peers[s.Kind] }

// schedulerName is the schedulerName of the pods this scheduler binds.
func (s Scheduler) schedulerName() string {
	if p := s.peer(); p != nil && p.schedulerName != "" {
		return p.schedulerName
	}
	return "default-scheduler"
}

// decorate applies s's changes to a Job the player creates.
func (s Scheduler) decorate(j *PlannedJob, job *batchv1.Job) *batchv1.Job {
	if p := s.peer(); p != nil && p.decorate != nil {
		p.decorate(s, j, job)
	}
	return job
}

// missing says why s cannot run here ("" if it can).
func (s Scheduler) missing(c *Config) string {
	p := s.peer()
	switch {
	case p == nil:
		return "unknown scheduler kind " + s.Kind
	case p.missing == nil:
		return ""
	}
	return p.missing(c)
}

// Usage is a scheduler's resources, from its processes' rusage once they
// ended (summed over its processes).
type Usage struct {
	CPUSeconds float64 `json:"cpu_s"`
	PeakRSSMiB float64 `json:"peak_rss_mib"`
}

// startScheduler sets s up on p and starts its processes (a peer's start),
// with their configurations and logs in dir.
func startScheduler(ctx context.Context, p *cplane.Plane, cs kubernetes.Interface, c *Config, s Scheduler, dir string) (*group, error) {
	pe := s.peer()
	if pe == nil || pe.start == nil {
		return nil, fmt.Errorf("unknown scheduler %q", s.Kind)
	}
	kc := filepath.Join(dir, "scheduler.kubeconfig")
	if err := p.WriteKubeconfig(kc, "admin"); err != nil {
		return nil, err
	}
	g, err := pe.start(ctx, &peerEnv{Sched: s, Config: c, Plane: p, CS: cs, Kubeconfig: kc, Dir: dir})
	if err != nil {
		if g != nil {
			g.stop()
		}
		return nil, err
	}
	return g, nil
}

// group is a scheduler's processes (one or more), stopped together.
type group struct {
	kids []*child
	// atStop runs after the processes ended, last added first: helpers a
	// peer runs in the arena's process (e.g. a watch that writes each
	// Job's PodGroup), stopped with its scheduler.
	atStop []func()
}

// onStop adds f to what stop runs once the processes ended.
func (g *group) onStop(f func()) { g.atStop = append(g.atStop, f) }

// add puts a started process in the group.
func (g *group) add(c *child) { g.kids = append(g.kids, c) }

// exited reports whether any of the processes ended.
func (g *group) exited() bool {
	for _, c := range g.kids {
		if c.exited() {
			return true
		}
	}
	return false
}

// stop ends the processes, last started first, and returns their CPU time
// summed and their peak resident memories summed (an upper bound of the
// group's peak: they need not peak together).
func (g *group) stop() Usage {
	var u Usage
	for i := len(g.kids) - 1; i >= 0; i-- {
		k := g.kids[i].stop()
		u.CPUSeconds += k.CPUSeconds
		u.PeakRSSMiB += k.PeakRSSMiB
	}
	for i := len(g.atStop) - 1; i >= 0; i-- {
		g.atStop[i]()
	}
	g.atStop = nil
	return u
}

// tail is the last n lines of each process's log, each under its name.
func (g *group) tail(n int) string {
	var b strings.Builder
	for i, c := range g.kids {
		if i > 0 {
			b.WriteString("\n")
		}
		if len(g.kids) > 1 {
			fmt.Fprintf(&b, "--- %s:\n", c.name)
		}
		b.WriteString(cplane.Tail(c.log, n))
	}
	return b.String()
}

// child is one process of a scheduler.
type child struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	log  string
}

// startChild starts argv as a child process named name (its output in
// dir/NAME.log; env is added to this process's environment) and adds it to g. The child dies with this process.
func (g *group) startChild(dir, name string, argv []string, env ...string) (*child, error) {
	if len(argv) == 0 {
		return nil, fmt.Errorf("%s: no command", name)
	}
	logPath := filepath.Join(dir, strings.ReplaceAll(name, "/", "_")+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, done: make(chan struct{}), log: logPath}
	go func() { cmd.Wait(); close(c.done) }()
	g.add(c)
	return c, nil
}

// exited reports whether the process ended (on its own or stopped).
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// stop ends the process (SIGTERM, SIGKILL after 10 s) and returns its
// CPU time and peak resident memory.
func (c *child) stop() Usage {
	if !c.exited() {
		c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			c.cmd.Process.Kill()
			<-c.done
		}
	}
	st := c.cmd.ProcessState
	if st == nil {
		return Usage{}
	}
	u := Usage{CPUSeconds: (st.UserTime() + st.SystemTime()).Seconds()}
	if ru, ok := st.SysUsage().(*syscall.Rusage); ok {
		u.PeakRSSMiB = float64(ru.Maxrss) / 1024 // KiB on Linux
	}
	return u
}
