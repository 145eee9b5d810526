package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gandiva-sched/gandiva/internal/agent/jobproc"
	"github.com/gandiva-sched/gandiva/internal/api"
)

// Config configures an agent.
type Config struct {
	// Server is the server's URL and Token an agent token, with which the
	// agent enrols its node once: the server answers with the node's own
	// credential, which the agent keeps in CredentialFile (mode 0600) and
	// uses for every later call, across restarts.
	Server, Token string
	// CredentialFile holds the node's credential (default:
	// WorkRoot/node.credential). Remove it (and have an admin run `gandiva
	// nodes remove NAME`) to enrol the node anew.
	CredentialFile string
	// Name identifies the node (default: the host name).
	Name string
	// GPUs are the node's devices (DiscoverGPUs or ParseFakeGPUs).
	GPUs []api.GPU
	// WorkRoot holds the jobs' default working directories and the logs.
	WorkRoot string
	// CheckpointRoot, when set, replaces the server's checkpoint root (the
	// same shared storage mounted elsewhere on this node).
	CheckpointRoot string
	// Listen is the address of the log server ("127.0.0.1:0" by default;
	// ":7071" so a server on another machine can fetch logs). Advertise
	// is the host other machines reach this node by (default: the listen
	// host, or the host name).
	Listen, Advertise string
	// HostMemGiB bounds the suspended jobs' state in host memory (default:
	// half the machine's memory).
	HostMemGiB float64
	Rack       string
	Domain     int
	// PollWait is the long poll's length (default 10 s; never more than a
	// quarter of the server's lease, which is counted from the start of
	// the last request the server answered).
	PollWait time.Duration
	// ReportEvery rate-limits progress reports per job (default 1 s).
	ReportEvery time.Duration
	// ClientDeadline is how long a job's process may take to say the
	// in-job client's hello before it is taken to lack the client (default
	// 10 minutes: a framework's start-up can take a minute). Until then a
	// suspension waits for the hello and stops the job at a boundary.
	ClientDeadline time.Duration
	// PreRunWindow: a pre-run of a job without the in-job client passes
	// once it has run this long without failing (default: ClientDeadline;
	// a job is concluded to lack the client only then, or when it exits).
	PreRunWindow time.Duration
	// UserErrorWindow is passed to jobproc (0: its default).
	UserErrorWindow time.Duration
	// RunAs is the rule that gives the OS account each job runs as. The
	// zero value is the default: for an agent running as root, every job
	// as DefaultAccount; for one that is not root (it cannot switch
	// accounts), the agent's own account for the jobs of the user admin
	// only. See RunAs.
	RunAs RunAs
	// Grace is how long an agent stopping (Run's context ended: SIGTERM)
	// gives its jobs to write a checkpoint before it kills them (default
	// 20 s); then it tells the server it leaves, so that their work is
	// requeued at once. It keeps polling meanwhile, so a grace longer than
	// the lease holds while the server can be reached (when it cannot, the
	// lease lapses and the jobs' guards end them, as ever).
	Grace time.Duration
	Log   *slog.Logger
}

func (c *Config) defaults() error {
	if c.Server == "" {
		return errors.New("agent: the server's URL is required")
	}
	if c.Name == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("agent: no --name and no host name: %w", err)
		}
		c.Name = h
	}
	if len(c.GPUs) == 0 {
		return errors.New("agent: no GPUs (none found by nvidia-smi; use --fake-gpus 4xV100 to run without)")
	}
	if c.WorkRoot == "" {
		return errors.New("agent: a work directory is required")
	}
	if c.Listen == "" {
		c.Listen = "127.0.0.1:0"
	}
	if c.CredentialFile == "" {
		c.CredentialFile = filepath.Join(c.WorkRoot, "node.credential")
	}
	if c.HostMemGiB <= 0 {
		c.HostMemGiB = hostMemGiB()
	}
	if c.PollWait <= 0 {
		c.PollWait = 10 * time.Second
	}
	if c.ReportEvery <= 0 {
		c.ReportEvery = time.Second
	}
	if c.ClientDeadline <= 0 {
		c.ClientDeadline = jobproc.DefaultClientDeadline
	}
	if c.PreRunWindow <= 0 {
		c.PreRunWindow = c.ClientDeadline
	}
	if c.Grace <= 0 {
		c.Grace = 20 * time.Second
	}
	if !c.RunAs.Self && c.RunAs.Pattern == "" && len(c.RunAs.Map) == 0 {
		if os.Geteuid() == 0 {
			c.RunAs.Pattern = DefaultAccount
		} else {
			c.RunAs = RunAs{Self: true, SelfUsers: []string{"admin"}}
		}
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Agent runs one node's share of the jobs. See the package comment.
type Agent struct {
	cfg         Config
	runas       *runAs
	cl          *api.Client
	incarnation string
	logKey      string
	addr        string
	log         *slog.Logger

	workerWG sync.WaitGroup // the workers' goroutines
	mu       sync.Mutex
	stopping bool // leaving: start nothing, act on nothing
	workers  map[key]*worker
	ended    map[key]bool // attempts that ran and exited: never started again
	// answered holds, for each assignment never started here, the last
	// want whose outcome was reported ("never started"): a later, different
	// want (a kill or checkpoint after a suspend) is answered too, or the
	// server would wait for it for ever.
	answered map[key]api.Want
	pending  []api.Report
	seq      uint64
	session  string
	ckRoot   string // the server's checkpoint root
	cluster  string // the server's store's name ("": one from before names)
	ckErr    error  // why this node's checkpoint root cannot be used ("" ok)
	ckLocal  string // its path on this node (prepared)
	lease    time.Duration
	// contact is when the last request that the server answered was sent
	// (the server heard from the node no earlier): the lease runs from it.
	contact time.Time
	kick    chan struct{} // reports to send
	stale   chan struct{} // the session is stale: register again
}

type key struct {
	job     string
	attempt int64
	rank    int
}

func keyOf(a *api.Assignment) key { return key{a.Job, a.Attempt, a.Rank} }

// New checks the configuration and makes an agent.
func New(cfg Config) (*Agent, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	ra, err := newRunAs(cfg.RunAs)
	if err != nil {
		return nil, err
	}
	// (See dirs.go for who may read what.)
	shared := !cfg.RunAs.Self
	if err := prepareRoot(cfg.WorkRoot, shared); err != nil {
		return nil, fmt.Errorf("agent: work directory: %w", err)
	}
	if err := mkdirAllMode(filepath.Join(cfg.WorkRoot, "logs"), 0o700); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	if err := os.Chmod(filepath.Join(cfg.WorkRoot, "logs"), 0o700); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	if err := prepareRoot(filepath.Join(cfg.WorkRoot, "jobs"), shared); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	cfg.Log.Info("jobs run as", "rule", cfg.RunAs.String())
	// (Also ends what a dead agent's jobs left behind: jobproc/contain.go.)
	cfg.Log.Info("a job's descendants end with it", "by", jobproc.Containment())
	a := &Agent{cfg: cfg, runas: ra, incarnation: randHex(8), logKey: randHex(24),
		log: cfg.Log.With("node", cfg.Name), workers: map[key]*worker{}, ended: map[key]bool{}, answered: map[key]api.Want{},
		kick: make(chan struct{}, 1), stale: make(chan struct{}, 1), lease: 20 * time.Second}
	return a, nil
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Addr is the log server's URL (after Run has started listening).
func (a *Agent) Addr() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.addr
}

// Run registers with the server and carries out its assignments until ctx
// ends. It then leaves gracefully: it asks its jobs to write a checkpoint
// (those with the in-job client do; the others are killed), kills what is
// left after Config.Grace, and tells the server it leaves, with their last
// reports, so that the server requeues them at once (to restart elsewhere
// from those checkpoints) instead of after the node time-out. Until then it
// keeps polling the server (starting nothing), which keeps the lease, so
// the jobs have the whole grace while the server can be reached. It
// reconnects, with back-off, whenever the server restarts or cannot be
// reached; it returns an error when the server refuses the node's
// credential (its jobs are then killed).
func (a *Agent) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", a.cfg.Listen)
	if err != nil {
		return fmt.Errorf("agent: log server: %w", err)
	}
	host := a.cfg.Advertise
	if host == "" {
		h, _, _ := net.SplitHostPort(ln.Addr().String())
		if h == "" || h == "::" || h == "0.0.0.0" {
			h, _ = os.Hostname()
		}
		host = h
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	a.mu.Lock()
	a.addr = "http://" + net.JoinHostPort(host, port)
	a.mu.Unlock()
	// (Capped like the API: a flood of connections must not use up the
	// agent's file descriptors, which its jobs need.)
	srv, lim := api.NewHTTPServer(a.logHandler(), ln, api.ServerOptions{MaxConns: 256})
	go srv.Serve(lim)
	defer srv.Close()

	if err := a.credential(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	// The poll loop and the watchdog outlive ctx: while leave checkpoints
	// the jobs, the agent keeps in contact with the server (starting
	// nothing: a.stopping), so that the lease, and with it the jobs' guards
	// and in-job clients, is renewed from that contact for the whole grace;
	// if the server cannot be reached, the lease lapses as ever. The
	// reporter stops with ctx: leave sends the last reports with the leave.
	keep, stopKeep := context.WithCancel(context.Background())
	defer stopKeep()
	var kept sync.WaitGroup
	kept.Add(1)
	go func() { defer kept.Done(); a.watchdog(keep) }()
	looped := make(chan error, 1)
	go func() {
		err := a.loop(keep)
		if err != nil {
			a.killAll("agent stopping: "+err.Error(), false)
		}
		looped <- err
	}()
	stopContact := func() error {
		stopKeep()
		err := <-looped
		kept.Wait()
		return err
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); a.reporter(rctx) }()
	select {
	case err = <-looped:
		looped <- err // (for stopContact)
	case <-ctx.Done():
		a.mu.Lock()
		a.stopping = true // (the poll loop goes on: it starts nothing more)
		a.mu.Unlock()
	}
	cancel()
	wg.Wait()
	if err != nil {
		stopContact()
		return err
	}
	return a.leave(stopContact)
}

// leave stops the jobs (checkpointed where they can be, within the grace)
// and tells the server, with the reports it has not acknowledged. The poll
// loop goes on meanwhile (it keeps the lease); stopContact ends it once the
// jobs have ended, before the leave (after which the session is void), and
// returns its error: the server refused the node's credential (its jobs
// are then killed, and the leave is not sent).
func (a *Agent) leave(stopContact func() error) error {
	a.mu.Lock()
	a.stopping = true
	workers := make([]*worker, 0, len(a.workers))
	for _, w := range a.workers {
		workers = append(workers, w)
	}
	a.mu.Unlock()
	if len(workers) > 0 {
		a.log.Info("stopping: checkpointing the jobs", "jobs", len(workers), "grace", a.cfg.Grace)
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.cfg.Grace)
	defer cancel()
	var wg sync.WaitGroup
	for _, w := range workers {
		w.mu.Lock()
		w.lost = "its agent is shutting down"
		w.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := w.p.Checkpoint(ctx); err != nil && !errors.Is(err, jobproc.ErrExited) {
				a.log.Warn("no checkpoint within the grace; killing", "job", w.k.job, "err", err)
			}
			w.p.Kill()
			<-w.p.Done()
		}()
	}
	wg.Wait()
	a.workerWG.Wait() // every exit is reported (queued)
	if err := stopContact(); err != nil {
		return err
	}
	a.mu.Lock()
	l := &api.Leave{Node: a.cfg.Name, Session: a.session, Reason: "shutting down", Reports: slices.Clone(a.pending)}
	a.mu.Unlock()
	if a.cl == nil || l.Session == "" {
		return nil
	}
	lctx, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	if err := a.cl.Leave(lctx, l); err != nil {
		a.log.Warn("could not tell the server this node leaves; it will declare it lost after its time-out", "err", err)
		return nil
	}
	a.log.Info("left the server", "reports", len(l.Reports))
	return nil
}

// loop registers, then long-polls and reconciles, registering again when
// the session goes stale.
func (a *Agent) loop(ctx context.Context) error {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		if err := a.register(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if api.IsStatus(err, http.StatusUnauthorized) {
				return fmt.Errorf("agent: the server refused this node's credential (in %s): an admin removed the node, "+
					"or the server's store is new; remove the file to enrol the node again: %w", a.cfg.CredentialFile, err)
			}
			a.log.Warn("cannot register with the server; retrying", "err", err, "in", backoff)
			sleep(ctx, backoff)
			backoff = min(backoff*2, a.retryCap())
			continue
		}
		backoff = 100 * time.Millisecond
		a.poll(ctx)
	}
	return nil
}

// retryCap is the longest wait between attempts to register again: 5 s,
// or a quarter of the server's lease when that is shorter. A restarted
// server counts a node's time-out from its own start, so an agent must try
// several times within the lease (shorter than the time-out) or its node is
// declared lost while the server is back.
func (a *Agent) retryCap() time.Duration {
	a.mu.Lock()
	lease := a.lease
	a.mu.Unlock()
	return max(min(5*time.Second, lease/4), 100*time.Millisecond)
}

// credential loads the node's credential from CredentialFile, or enrols
// the node with the agent token and keeps the credential there (0600).
// A name taken by another node (409), or an agent token that may not enrol
// it (401, 403), is an error; an unreachable server is retried.
func (a *Agent) credential(ctx context.Context) error {
	path := a.cfg.CredentialFile
	if data, err := os.ReadFile(path); err == nil {
		tok := strings.TrimSpace(string(data))
		if tok == "" {
			return fmt.Errorf("agent: %s is empty: remove it to enrol the node again", path)
		}
		a.cl = api.NewClient(a.cfg.Server, tok)
		return nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("agent: the node's credential: %w", err)
	}
	if a.cfg.Token == "" {
		return fmt.Errorf("agent: no credential in %s and no agent token to enrol the node with", path)
	}
	enrol := api.NewClient(a.cfg.Server, a.cfg.Token)
	backoff := 100 * time.Millisecond
	for {
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		c, err := enrol.Enrol(rctx, a.cfg.Name)
		cancel()
		if err == nil {
			if err := writePrivate(path, []byte(c.Token+"\n")); err != nil {
				return fmt.Errorf("agent: keeping the node's credential: %w", err)
			}
			a.log.Info("enrolled", "credential", c.ID, "file", path)
			a.cl = api.NewClient(a.cfg.Server, c.Token)
			return nil
		}
		var ae *api.Error
		if errors.As(err, &ae) && ae.Status == 401 {
			return fmt.Errorf("agent: enrolling node %s: the agent token is unknown, used up, expired or revoked "+
				"(an admin makes another: gandiva token create --agent --label %s): %w", a.cfg.Name, a.cfg.Name, err)
		}
		if errors.As(err, &ae) && ae.Status < 500 {
			return fmt.Errorf("agent: enrolling node %s: %w", a.cfg.Name, err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		a.log.Warn("cannot enrol with the server; retrying", "err", err, "in", backoff)
		sleep(ctx, backoff)
		backoff = min(backoff*2, 5*time.Second)
	}
}

// writePrivate writes a file only its owner can read, atomically.
func writePrivate(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".credential-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func (a *Agent) register(ctx context.Context) error {
	a.mu.Lock()
	reg := &api.Registration{Name: a.cfg.Name, GPUs: a.cfg.GPUs, HostMemGiB: a.cfg.HostMemGiB, Rack: a.cfg.Rack,
		Domain: a.cfg.Domain, Addr: a.addr, LogKey: a.logKey, Incarnation: a.incarnation, Running: []api.Running{},
		Reports: slices.Clone(a.pending)}
	for k, p := range a.workers {
		info := p.p.Info()
		if info.State == jobproc.Exited {
			continue
		}
		reg.Running = append(reg.Running, api.Running{Job: k.job, Attempt: k.attempt, Rank: k.rank, State: info.State.String(), GPUs: info.GPUs})
	}
	a.mu.Unlock()
	sort.Slice(reg.Running, func(i, j int) bool { return reg.Running[i].Job < reg.Running[j].Job })
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	sent := time.Now()
	rep, err := a.cl.Register(rctx, reg)
	if err != nil {
		return err
	}
	if !validCluster(rep.Cluster) {
		return fmt.Errorf("agent: the server named its cluster %q (want c and 16 hex digits)", rep.Cluster)
	}
	a.mu.Lock()
	a.cluster = rep.Cluster
	if rep.CheckpointRoot != a.ckRoot || a.ckLocal == "" {
		a.ckRoot = rep.CheckpointRoot
		a.ckLocal = a.ckRoot
		if a.cfg.CheckpointRoot != "" {
			// (this node's mount of the server's root, which the
			// server follows with its cluster's name)
			a.ckLocal = filepath.Join(a.cfg.CheckpointRoot, rep.Cluster)
		}
		a.ckErr = nil
		if err := prepareRoot(a.ckLocal, !a.cfg.RunAs.Self); err != nil {
			a.ckErr = fmt.Errorf("checkpoint root: %w", err)
			a.log.Error("this node cannot use the checkpoint root: its jobs will fail", "err", a.ckErr)
		}
	}
	a.session = rep.Session
	if rep.Lease > 0 {
		a.lease = time.Duration(rep.Lease * float64(time.Second))
	}
	a.contact = sent
	a.ack(reg.Reports)
	select { // a stale signal from the old session is void
	case <-a.stale:
	default:
	}
	a.mu.Unlock()
	a.log.Info("registered", "server", a.cfg.Server, "session", rep.Session, "running", len(reg.Running))
	return nil
}

// ack drops reports the server has recorded (a.mu held).
func (a *Agent) ack(sent []api.Report) {
	if len(sent) == 0 {
		return
	}
	last := sent[len(sent)-1].Seq
	i := 0
	for i < len(a.pending) && a.pending[i].Seq <= last {
		i++
	}
	a.pending = a.pending[i:]
}

// poll long-polls the assignments and reconciles until the session is stale.
func (a *Agent) poll(ctx context.Context) {
	var version uint64
	fails := 0
	for ctx.Err() == nil {
		select {
		case <-a.stale:
			return
		default:
		}
		a.mu.Lock()
		session := a.session
		// (the lease runs from a poll's start: a poll may take at most a
		// quarter of it, so that it is renewed at least every half)
		wait := max(min(a.cfg.PollWait, a.lease/4), 100*time.Millisecond)
		a.mu.Unlock()
		pctx, cancel := context.WithTimeout(ctx, wait+15*time.Second)
		sent := time.Now()
		as, err := a.cl.Assignments(pctx, a.cfg.Name, session, version, wait)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if api.IsStatus(err, http.StatusConflict) {
				a.log.Info("session is stale; registering again", "err", err)
				return
			}
			fails++
			if fails > 3 {
				a.log.Warn("cannot reach the server", "err", err)
				return // register again: the server may have restarted
			}
			sleep(ctx, time.Duration(fails)*200*time.Millisecond)
			continue
		}
		fails = 0
		a.mu.Lock()
		a.heard(sent)
		a.mu.Unlock()
		version = as.Version
		a.reconcile(as.Items)
	}
}

// reconcile makes the node's processes match the assignments.
func (a *Agent) reconcile(items []api.Assignment) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopping {
		return
	}
	want := map[key]api.Assignment{}
	for _, it := range items {
		want[keyOf(&it)] = it
	}
	for k, p := range a.workers {
		if _, ok := want[k]; !ok {
			p.set(api.Assignment{Job: k.job, Attempt: k.attempt, Rank: k.rank, Want: api.WantKill})
		}
	}
	for k, it := range want {
		if p := a.workers[k]; p != nil {
			p.set(it)
			continue
		}
		if a.ended[k] {
			continue // its exit is reported (or will be)
		}
		if it.Want == api.WantRun || it.Want == api.WantWarm {
			a.start(it) // a warm start then holds it at its first boundary (worker.act)
			continue
		}
		if w, ok := a.answered[k]; ok && w == it.Want {
			continue
		}
		a.answered[k] = it.Want
		// Never started here: what was asked is trivially done.
		r := api.Report{Job: k.job, Attempt: k.attempt, Rank: k.rank, Message: "never started on this node"}
		switch it.Want {
		case api.WantSuspend:
			r.Kind, r.Mode = api.RepSuspended, "not-started"
		case api.WantCheckpoint:
			r.Kind, r.Outcome = api.RepCheckpointed, "not-started"
		default:
			r.Kind, r.Outcome = api.RepExited, "not-started"
		}
		a.queue(r)
	}
}

// queue adds a report (a.mu held) and wakes the reporter.
func (a *Agent) queue(r api.Report) {
	a.seq++
	r.Seq = a.seq
	a.pending = append(a.pending, r)
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// report queues a report from a worker.
func (a *Agent) report(r api.Report) {
	a.mu.Lock()
	a.queue(r)
	a.mu.Unlock()
}

// reporter sends queued reports; the server acknowledges each batch once
// it has recorded it.
func (a *Agent) reporter(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.kick:
		}
		for ctx.Err() == nil {
			a.mu.Lock()
			batch := &api.ReportBatch{Node: a.cfg.Name, Session: a.session, Reports: slices.Clone(a.pending)}
			a.mu.Unlock()
			if len(batch.Reports) == 0 || batch.Session == "" {
				break
			}
			rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			sent := time.Now()
			err := a.cl.Report(rctx, batch)
			cancel()
			if err == nil {
				a.mu.Lock()
				a.ack(batch.Reports)
				a.heard(sent)
				a.mu.Unlock()
				continue
			}
			if api.IsStatus(err, http.StatusConflict) {
				select {
				case a.stale <- struct{}{}:
				default:
				}
			}
			sleep(ctx, 200*time.Millisecond)
		}
	}
}

// watchdog enforces the lease: an agent that cannot reach the server for
// longer than the lease kills its jobs, because the server will restart
// them elsewhere after a longer silence and a job must never run twice.
// It also renews, while the lease stands, the hold of each job's in-job
// client and guard (Proc.Renew, guard.renew), at least every eighth of
// the lease: those end the job by themselves when the agent cannot (it is
// stopped or hung), once the lease has passed without a renewal.
func (a *Agent) watchdog(ctx context.Context) {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	var renewed time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		a.mu.Lock()
		lost := !a.contact.IsZero() && time.Since(a.contact) > a.lease && len(a.workers) > 0
		lease, left := a.lease, a.leaseLeft()
		var workers []*worker
		if time.Since(renewed) >= min(max(lease/8, 250*time.Millisecond), 5*time.Second) {
			renewed = time.Now()
			for _, w := range a.workers {
				workers = append(workers, w)
			}
		}
		a.mu.Unlock()
		if lost {
			a.killAll(fmt.Sprintf("no contact with the server for %s (the lease)", lease), true)
			continue
		}
		for _, w := range workers {
			w.renew(left)
		}
	}
}

// heard records that the server answered a request sent at sent (a.mu
// held).
func (a *Agent) heard(sent time.Time) {
	if sent.After(a.contact) {
		a.contact = sent
	}
}

// leaseLeft is how long the lease still runs (a.mu held): 0 once lapsed,
// or before the first contact.
func (a *Agent) leaseLeft() time.Duration {
	if a.contact.IsZero() {
		return 0
	}
	return max(a.lease-time.Since(a.contact), 0)
}

// leaseLapsed says whether the lease has run out (after a first contact).
func (a *Agent) leaseLapsed() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return !a.contact.IsZero() && time.Since(a.contact) > a.lease
}

// killAll kills every job; lost marks their exits as caused by the lease.
func (a *Agent) killAll(why string, lost bool) {
	a.mu.Lock()
	workers := make([]*worker, 0, len(a.workers))
	for _, p := range a.workers {
		workers = append(workers, p)
	}
	a.mu.Unlock()
	if len(workers) > 0 {
		a.log.Warn("killing every job", "why", why, "jobs", len(workers))
	}
	for _, p := range workers {
		if lost {
			p.mu.Lock()
			p.lost = why
			p.mu.Unlock()
		}
		p.p.Kill()
	}
	for _, p := range workers {
		<-p.p.Done()
	}
}

// startError is why an assignment could not start; user says the job's
// spec (or its user's account) is to blame rather than the node.
type startError struct {
	err  error
	user bool
}

// jobDirs resolves the account an assignment runs as and prepares its
// directories (a.mu held): its working directory (the default one is made
// under WORK/jobs/USER; one the job names must exist, and is never made)
// and its checkpoint directory under CKPT/USER, both private to the
// account.
func (a *Agent) jobDirs(it *api.Assignment) (acc *account, work, ck string, serr *startError) {
	user := it.User
	if user == "" {
		user = "unknown"
	}
	acc, err := a.runas.resolve(user)
	if err != nil {
		return nil, "", "", &startError{err, true}
	}
	work = it.WorkDir
	if work == "" {
		if work, err = mkdirOwned(filepath.Join(a.cfg.WorkRoot, "jobs"), []string{user, it.Job}, acc); err != nil {
			return nil, "", "", &startError{fmt.Errorf("working directory: %w", err), false}
		}
	}
	if a.ckErr != nil {
		return nil, "", "", &startError{a.ckErr, false}
	}
	rel, err := filepath.Rel(a.ckRoot, it.CheckpointDir)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return nil, "", "", &startError{fmt.Errorf("checkpoint directory %s is not under the checkpoint root %s", it.CheckpointDir, a.ckRoot), false}
	}
	if ck, err = mkdirOwned(a.ckLocal, strings.Split(rel, string(filepath.Separator)), acc); err != nil {
		return nil, "", "", &startError{fmt.Errorf("checkpoint directory: %w", err), false}
	}
	return acc, work, ck, nil
}

// start launches an assignment's process (a.mu held).
func (a *Agent) start(it api.Assignment) {
	k := keyOf(&it)
	acc, work, ck, serr := a.jobDirs(&it)
	if serr != nil {
		a.ended[k] = true
		a.log.Warn("cannot start", "job", it.Job, "attempt", it.Attempt, "user", it.User, "err", serr.err)
		a.queue(api.Report{Job: k.job, Attempt: k.attempt, Rank: k.rank, Kind: api.RepExited, Outcome: "failed", Code: -1,
			UserError: serr.user, Message: "could not start on node " + a.cfg.Name + ": " + serr.err.Error()})
		return
	}
	spec := jobproc.Spec{Job: it.Job, Attempt: int(it.Attempt), Command: it.Command, Env: it.Env, WorkDir: work,
		Credential: acc.credential(), BaseEnv: jobEnv(acc),
		CheckpointDir: ck, LogPath: a.logPath(k), GPUs: it.GPUs, Rank: it.Rank, WorldSize: it.World,
		MasterAddr: it.MasterAddr, MasterPort: it.MasterPort, Restore: it.Restore,
		CheckpointEvery: time.Duration(it.CheckpointEvery * float64(time.Second)), ReportEvery: a.cfg.ReportEvery,
		UserErrorWindow: a.cfg.UserErrorWindow, ClientDeadline: a.cfg.ClientDeadline,
		Hold: it.Want == api.WantWarm} // a warm start holds itself at its first boundary
	if it.World <= 1 {
		spec.WorldSize = 0
	}
	if it.PreRun {
		spec.PreRun = true // the in-job client stops the job after its first mini-batch
		spec.ReportEvery = 100 * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	p, err := jobproc.Start(ctx, spec)
	cancel()
	a.ended[k] = true // an attempt is started once, whatever happens
	if err != nil {
		a.log.Warn("start failed", "job", it.Job, "attempt", it.Attempt, "err", err)
		user := true // (a bad spec: the command, the working directory)
		var se *jobproc.StartError
		if errors.As(err, &se) {
			user = se.UserError
		}
		a.queue(api.Report{Job: k.job, Attempt: k.attempt, Rank: k.rank, Kind: api.RepExited, Outcome: "failed", Code: -1,
			UserError: user, Message: "could not start on node " + a.cfg.Name + ": " + err.Error()})
		return
	}
	wk := newWorker(a, k, p, it)
	a.workers[k] = wk
	a.workerWG.Add(1)
	a.log.Info("started", "job", it.Job, "attempt", it.Attempt, "rank", it.Rank, "gpus", it.GPUs, "restore", it.Restore, "prerun", it.PreRun, "warm", it.Want == api.WantWarm)
	go wk.run()
	if it.Want == api.WantWarm {
		wk.poke() // hold it at its first boundary
	}
}

// logPath is where the log of worker k goes (a.mu held): under
// WORK/logs/CLUSTER, as job IDs and attempts are unique within one
// server's store only (WORK/logs for a store from before clusters were
// named).
func (a *Agent) logPath(k key) string {
	return filepath.Join(a.cfg.WorkRoot, "logs", a.cluster, safe(k.job), fmt.Sprintf("%d-r%d.log", k.attempt, k.rank))
}

// validCluster reports whether id is a cluster's name as servers make
// them (or "", a store's from before names), so that it is one plain
// path element.
func validCluster(id string) bool {
	if id == "" {
		return true
	}
	if len(id) != 17 || id[0] != 'c' {
		return false
	}
	for _, r := range id[1:] {
		if !strings.ContainsRune("0123456789abcdef", r) {
			return false
		}
	}
	return true
}

func safe(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == 0 {
			return '_'
		}
		return r
	}, s)
}

// gone forgets an ended worker.
func (a *Agent) gone(k key) {
	a.mu.Lock()
	delete(a.workers, k)
	a.mu.Unlock()
}
