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
	// Server is the server's URL and Token an agent token.
	Server, Token string
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
	// PollWait is the long poll's length (default 10 s).
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
	Log             *slog.Logger
}

func (c *Config) defaults() error {
	if c.Server == "" || c.Token == "" {
		return errors.New("agent: the server's URL and an agent token are required")
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
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Agent runs one node's share of the jobs. See the package comment.
type Agent struct {
	cfg         Config
	cl          *api.Client
	incarnation string
	logKey      string
	addr        string
	log         *slog.Logger

	mu       sync.Mutex
	workers  map[key]*worker
	ended    map[key]bool // attempts that ran and exited: never started again
	answered map[key]bool // never-started assignments whose outcome was reported
	pending  []api.Report
	seq      uint64
	session  string
	ckRoot   string // the server's checkpoint root
	lease    time.Duration
	contact  time.Time
	kick     chan struct{} // reports to send
	stale    chan struct{} // the session is stale: register again
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
	for _, d := range []string{cfg.WorkRoot, filepath.Join(cfg.WorkRoot, "logs"), filepath.Join(cfg.WorkRoot, "jobs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("agent: %w", err)
		}
	}
	a := &Agent{cfg: cfg, cl: api.NewClient(cfg.Server, cfg.Token), incarnation: randHex(8), logKey: randHex(24),
		log: cfg.Log.With("node", cfg.Name), workers: map[key]*worker{}, ended: map[key]bool{}, answered: map[key]bool{},
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
// ends; it then kills its jobs (they are restarted elsewhere from their
// checkpoints) and returns. It reconnects, with back-off, whenever the
// server restarts or cannot be reached.
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
	srv := &http.Server{Handler: a.logHandler(), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); a.reporter(ctx) }()
	go func() { defer wg.Done(); a.watchdog(ctx) }()
	err = a.loop(ctx)
	cancel()
	wg.Wait()
	a.killAll("agent stopping", false)
	return err
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
			a.log.Warn("cannot register with the server; retrying", "err", err, "in", backoff)
			sleep(ctx, backoff)
			backoff = min(backoff*2, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		a.poll(ctx)
	}
	return nil
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
	rep, err := a.cl.Register(rctx, reg)
	if err != nil {
		return err
	}
	a.mu.Lock()
	a.session, a.ckRoot = rep.Session, rep.CheckpointRoot
	if rep.Lease > 0 {
		a.lease = time.Duration(rep.Lease * float64(time.Second))
	}
	a.contact = time.Now()
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
		a.mu.Unlock()
		pctx, cancel := context.WithTimeout(ctx, a.cfg.PollWait+15*time.Second)
		as, err := a.cl.Assignments(pctx, a.cfg.Name, session, version, a.cfg.PollWait)
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
		a.contact = time.Now()
		a.mu.Unlock()
		version = as.Version
		a.reconcile(as.Items)
	}
}

// reconcile makes the node's processes match the assignments.
func (a *Agent) reconcile(items []api.Assignment) {
	a.mu.Lock()
	defer a.mu.Unlock()
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
		if a.answered[k] {
			continue
		}
		a.answered[k] = true
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
			err := a.cl.Report(rctx, batch)
			cancel()
			if err == nil {
				a.mu.Lock()
				a.ack(batch.Reports)
				a.contact = time.Now()
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
func (a *Agent) watchdog(ctx context.Context) {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		a.mu.Lock()
		lost := !a.contact.IsZero() && time.Since(a.contact) > a.lease && len(a.workers) > 0
		lease := a.lease
		a.mu.Unlock()
		if lost {
			a.killAll(fmt.Sprintf("no contact with the server for %s (the lease)", lease), true)
		}
	}
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

// start launches an assignment's process (a.mu held).
func (a *Agent) start(it api.Assignment) {
	k := keyOf(&it)
	work := it.WorkDir
	if work == "" {
		work = filepath.Join(a.cfg.WorkRoot, "jobs", it.Job)
	}
	ck := it.CheckpointDir
	if a.cfg.CheckpointRoot != "" && a.ckRoot != "" && strings.HasPrefix(ck, a.ckRoot) {
		ck = filepath.Join(a.cfg.CheckpointRoot, strings.TrimPrefix(ck, a.ckRoot))
	}
	spec := jobproc.Spec{Job: it.Job, Attempt: int(it.Attempt), Command: it.Command, Env: it.Env, WorkDir: work,
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
		a.queue(api.Report{Job: k.job, Attempt: k.attempt, Rank: k.rank, Kind: api.RepExited, Outcome: "failed", Code: -1,
			UserError: true, Message: "could not start: " + err.Error()})
		return
	}
	wk := newWorker(a, k, p, it)
	a.workers[k] = wk
	a.log.Info("started", "job", it.Job, "attempt", it.Attempt, "rank", it.Rank, "gpus", it.GPUs, "restore", it.Restore, "prerun", it.PreRun, "warm", it.Want == api.WantWarm)
	go wk.run()
	if it.Want == api.WantWarm {
		wk.poke() // hold it at its first boundary
	}
}

func (a *Agent) logPath(k key) string {
	return filepath.Join(a.cfg.WorkRoot, "logs", safe(k.job), fmt.Sprintf("%d-r%d.log", k.attempt, k.rank))
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
