package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/metrics"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/registry"
	"github.com/gandiva-sched/gandiva/internal/store"
)

// Config configures a Server.
type Config struct {
	// DataDir holds the store (gandiva.db) and, after the first start, the
	// admin and agent tokens (admin.token, agent.token, mode 0600).
	DataDir string
	// Policy names the scheduling policy and PolicyParams its parameters.
	// The store remembers them: a restart with others is refused, because
	// the log can only be replayed under the policy that wrote it.
	Policy       string
	PolicyParams map[string]string
	// NewPolicy, when set, builds the policy instead of the registry (for
	// tests that force actions); Policy must still name it.
	NewPolicy func() (policy.Policy, error)
	// PreRun pre-runs each new job's first mini-batch on one GPU unless the
	// job opts out (JobRequest.PreRun).
	PreRun bool
	// CheckpointRoot is where jobs' checkpoints go: shared storage, seen
	// at the same path by every agent, for migration between nodes.
	// Default: DataDir/checkpoints.
	CheckpointRoot string
	// CheckpointEvery is the default periodic checkpoint interval in
	// seconds for jobs that do not set one (0: none).
	CheckpointEvery float64
	// Failure is the failure policy (retries, back-off, blacklisting);
	// nil: engine.DefaultFailurePolicy.
	Failure *engine.FailurePolicy
	// WarmStarts bounds the job processes starting up at once on one node
	// (placed ones and warm starts: engine.WarmOptions.PerNode); 0 means
	// DefaultWarmStarts, a negative value turns warm starts off. The store
	// remembers it, as it does the policy.
	WarmStarts int
	// NodeTimeout: a node not heard from for this long is lost and its
	// jobs are restarted elsewhere. Lease (shorter) is how long an agent
	// that cannot reach the server keeps its jobs before killing them.
	NodeTimeout, Lease time.Duration
	// Clock is the wall clock (default time.Now); only the shell reads it.
	Clock func() time.Time
	Log   *slog.Logger
	// NoSync skips fsync (benchmarks that isolate the API's own cost only).
	NoSync bool
	// RateLimit bounds each token's requests (zero: api.DefaultRateLimit);
	// NoRateLimit turns the limits off (benchmarks).
	RateLimit   api.RateLimit
	NoRateLimit bool
	// MaxConns caps the API's open connections (0: api.DefaultMaxConns).
	MaxConns int
	// NodeAddr says which log address a node may register (nodes.go):
	// NodeAddrPeer (the default, "") ties it to the registration's TCP
	// peer, NodeAddrAny takes it as registered.
	NodeAddr string
	// recoverGate, when set, holds the recovery until it is closed (tests
	// of the API while the state is being recovered).
	recoverGate chan struct{}
	// SnapshotAfter and SnapshotEvery say when the loop snapshots the
	// state (snapshot.go): once the entries since the last snapshot took
	// SnapshotAfter to apply (what a restart would spend replaying them;
	// default 250 ms), or number SnapshotEvery (default 20,000; negative:
	// never snapshot, and never compact the log).
	SnapshotAfter time.Duration
	SnapshotEvery int
}

// Start-up defaults: processes starting up at once per node, warm
// processes per GPU, and the GPU memory a held warm process keeps (its
// CUDA context: 834 MiB for PyTorch on an H100, measured).
const (
	DefaultWarmStarts = 4
	DefaultWarmPerGPU = 4
	DefaultContextGiB = 834.0 / 1024
)

func (c *Config) defaults() {
	if c.Policy == "" {
		c.Policy = "fifo"
	}
	if c.CheckpointRoot == "" {
		c.CheckpointRoot = filepath.Join(c.DataDir, "checkpoints")
	}
	if c.NodeTimeout <= 0 {
		c.NodeTimeout = 30 * time.Second
	}
	if c.Lease <= 0 {
		c.Lease = c.NodeTimeout * 2 / 3
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.SnapshotAfter <= 0 {
		c.SnapshotAfter = 250 * time.Millisecond
	}
	if c.SnapshotEvery == 0 {
		c.SnapshotEvery = 20000
	}
}

// Server is the live scheduler: the store, the state machine and the
// loop that feeds it. Build one with Open, serve Handler, and call Run.
type Server struct {
	// cluster names the store (clusterID); ckptRoot is the checkpoint root
	// of its jobs: the configured root, followed by cluster when set.
	cluster, ckptRoot string
	// startUps are the start-up settings the store's log was written under
	// (nil: none; policyMeta).
	startUps *startUpMeta
	cfg      Config
	db       *store.DB
	epoch    time.Time
	boot     uint64
	// AdminToken and AgentToken are set when Open created them (a new
	// store); they are also in DataDir's token files.
	AdminToken, AgentToken string

	mu      sync.RWMutex // guards m
	m       *machine
	nextSeq uint64

	reqs chan *req
	done chan struct{}

	pollMu sync.Mutex
	polls  map[string]chan struct{}
	// seen is when each node was last heard from by this server process;
	// started is when the process opened the store (the time-out of a
	// node not heard from since counts from then).
	seenMu  sync.Mutex
	seen    map[string]time.Time
	started time.Time

	failed error // set when the store failed: the server stops
	met    *serverMetrics
	snap   snapState // snapshot.go
	// the dashboard's data source (ui.go), made once, and the jobs' ETAs (eta.go)
	dashOnce sync.Once
	dash     *dashboard
	eta      forecasts
	// ready is closed when the state is recovered (recErr: or could not be).
	ready  chan struct{}
	recErr error
	// Replay describes the recovery (read it once Open returned, or after
	// Recovered).
	Replay ReplayInfo
}

// policyMeta is what the store remembers about the policy.
type policyMeta struct {
	Name   string            `json:"name"`
	Params map[string]string `json:"params,omitempty"`
	PreRun bool              `json:"prerun"`
	// StartUps is how the log's engine knew start-ups (nil: a store
	// written before they were, replayed without them).
	StartUps *startUpMeta `json:"start_ups,omitempty"`
}

// startUpMeta is the start-up settings a store's log was written under:
// the engine reports start-ups, and warms this many per node (0: none).
type startUpMeta struct {
	WarmPerNode int     `json:"warm_per_node"`
	WarmPerGPU  int     `json:"warm_per_gpu"`
	ContextGiB  float64 `json:"context_gib"`
}

// Open opens (or creates) the server's store in cfg.DataDir and recovers
// its state: its latest snapshot and the log entries after it
// (snapshot.go).
func Open(cfg Config) (*Server, error) {
	s, err := OpenAsync(cfg)
	if err != nil {
		return nil, err
	}
	if err := s.Recovered(context.Background()); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// OpenAsync is Open, except that it returns once the store is open and the
// configuration checked, and recovers the state in the background. The
// API it serves meanwhile answers at once what needs no state (health,
// whoami, token creation) and holds the rest until the state is back; Run
// waits for it too. Recovered waits for the recovery and returns its
// error.
func OpenAsync(cfg Config) (*Server, error) {
	cfg.defaults()
	if cfg.DataDir == "" {
		return nil, errors.New("server: a data directory is required")
	}
	// Everything that can be checked is checked before anything is
	// written: a typo in a flag must not leave a store behind that only
	// that typo can open.
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	pol, err := cfg.newPolicy()
	if err != nil {
		return nil, fmt.Errorf("server: policy %s: %w", cfg.Policy, err)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	// The data directory (the store, the token files) is the server's
	// alone, whoever made it.
	if st, err := os.Stat(cfg.DataDir); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	} else if st.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(cfg.DataDir, 0o700); err != nil {
			return nil, fmt.Errorf("server: the data directory %s is mode %04o and cannot be made private: %w", cfg.DataDir, st.Mode().Perm(), err)
		}
		cfg.Log.Warn("the data directory was readable by others: it is now mode 0700", "dir", cfg.DataDir, "was", fmt.Sprintf("%04o", st.Mode().Perm()))
	}
	if err := checkTokensHaveStore(cfg.DataDir); err != nil {
		return nil, err
	}
	db, err := store.Open(filepath.Join(cfg.DataDir, "gandiva.db"), store.Options{NoSync: cfg.NoSync})
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, db: db, reqs: make(chan *req, 1024), done: make(chan struct{}),
		polls: map[string]chan struct{}{}, seen: map[string]time.Time{}, ready: make(chan struct{})}
	if err := s.open(pol); err != nil {
		db.Close()
		return nil, err
	}
	go s.recover()
	return s, nil
}

func (s *Server) open(pol policy.Policy) error {
	cfg := &s.cfg
	now := cfg.Clock()
	epoch, _, err := s.db.Epoch(now)
	if err != nil {
		return err
	}
	s.epoch = epoch
	if s.boot, err = s.db.Boot(); err != nil {
		return err
	}
	if s.cluster, err = s.clusterID(); err != nil {
		return err
	}
	s.ckptRoot = filepath.Join(cfg.CheckpointRoot, s.cluster)
	// The policy the log was written under.
	meta, err := s.policyMeta()
	if err != nil {
		return err
	}
	s.startUps = meta.StartUps
	if err := s.bootstrap(now); err != nil {
		return err
	}
	if err := s.warnLegacyTokens(); err != nil {
		return err
	}
	// (the state is recovered by recover, in the background: this machine
	// is replaced by the snapshot's, if any, and the log replayed into it)
	s.m = newMachine(s.machineConfig(pol))
	s.met = newMetrics(s)
	s.started = now
	return nil
}

// clusterID returns the name of the store's cluster, making it with a
// new store (one without the policy's metadata yet: policyMeta writes it
// next). A store made before clusters were named has none ("") and keeps
// its jobs' files where they were (CKPT/USER/JOB, WORK/logs/JOB), so that
// an upgrade finds its jobs' checkpoints; every newer store's jobs' files
// are under its name, so that two stores sharing a checkpoint root or an
// agent's work directory (a second `gandiva up --data-dir`, whose job IDs
// start again at j1) never read or overwrite each other's.
func (s *Server) clusterID() (string, error) {
	if id, ok, err := s.db.Meta("cluster"); err != nil || ok {
		return string(id), err
	}
	if _, old, err := s.db.Meta("policy"); err != nil || old {
		return "", err
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("server: naming the cluster: %w", err)
	}
	id := "c" + hex.EncodeToString(b[:])
	return id, s.db.SetMeta("cluster", []byte(id))
}

// policyMeta checks the policy and start-up settings against those the
// store's log was written under (a new store records them) and returns
// the ones to replay and run with. A store written before start-ups were
// known runs on without them: its log replays only that way.
func (s *Server) policyMeta() (policyMeta, error) {
	cfg := &s.cfg
	want := policyMeta{Name: cfg.Policy, Params: cfg.PolicyParams, PreRun: cfg.PreRun,
		StartUps: &startUpMeta{WarmPerNode: max(cfg.WarmStarts, 0), WarmPerGPU: DefaultWarmPerGPU, ContextGiB: DefaultContextGiB}}
	if cfg.WarmStarts == 0 {
		want.StartUps.WarmPerNode = DefaultWarmStarts
	}
	if len(want.Params) == 0 {
		want.Params = nil
	}
	wantJSON, err := json.Marshal(want)
	if err != nil {
		return want, fmt.Errorf("server: encoding the policy's settings: %w", err)
	}
	old, ok, err := s.db.Meta("policy")
	switch {
	case err != nil:
		return want, err
	case !ok:
		return want, s.db.SetMeta("policy", wantJSON)
	case string(old) == string(wantJSON):
		return want, nil
	}
	legacy := want
	legacy.StartUps = nil
	if lj, err := json.Marshal(legacy); err == nil && string(old) == string(lj) {
		cfg.Log.Warn("this store was written before start-ups were known: it runs on without them (no warm starts); use a new --data-dir for them")
		return legacy, nil
	}
	return want, fmt.Errorf("server: the store in %s was written under policy %s; this server runs %s. Start it with the same policy and warm starts, or use a new --data-dir", cfg.DataDir, old, wantJSON)
}

// machineConfig is the configuration of the server's machine, with policy pol.
func (s *Server) machineConfig(pol policy.Policy) machineConfig {
	cfg := &s.cfg
	mc := machineConfig{Policy: pol, PreRun: cfg.PreRun, Failure: cfg.Failure, CheckpointRoot: s.ckptRoot,
		Epoch: s.epoch, Log: cfg.Log}
	s.startUps.apply(&mc) // (policyMeta: the store's start-up settings)
	return mc
}

// apply sets mc's start-up options to those the store's log was written
// under (su nil: none), so that a replay applies the log as it was applied.
func (su *startUpMeta) apply(mc *machineConfig) {
	if su == nil {
		return
	}
	mc.StartUps = true
	mc.Warm = engine.WarmOptions{PerNode: su.WarmPerNode, PerGPU: su.WarmPerGPU, ContextGiB: su.ContextGiB}
}

func (c *Config) newPolicy() (policy.Policy, error) {
	if c.NewPolicy != nil {
		return c.NewPolicy()
	}
	return registry.New(c.Policy, policy.Config{Params: c.PolicyParams})
}

// validate checks the configuration's numbers (after defaults), naming
// the field at fault.
func (c *Config) validate() error {
	switch {
	case c.CheckpointEvery < 0 || math.IsNaN(c.CheckpointEvery) || math.IsInf(c.CheckpointEvery, 0):
		return fmt.Errorf("server: checkpoint-every: must be a number of seconds ≥ 0, got %v", c.CheckpointEvery)
	case c.Lease >= c.NodeTimeout:
		return fmt.Errorf("server: the lease (%s) must be shorter than the node time-out (%s)", c.Lease, c.NodeTimeout)
	case c.NodeAddr != "" && c.NodeAddr != NodeAddrPeer && c.NodeAddr != NodeAddrAny:
		return fmt.Errorf("server: node-addr: want %s or %s, got %q", NodeAddrPeer, NodeAddrAny, c.NodeAddr)
	}
	if f := c.Failure; f != nil {
		switch {
		case f.MaxAttempts < 0:
			return fmt.Errorf("server: max-attempts: must be ≥ 0 (0: unlimited), got %d", f.MaxAttempts)
		case f.Backoff < 0 || math.IsNaN(f.Backoff) || math.IsInf(f.Backoff, 0):
			return fmt.Errorf("server: retry-backoff: must be a number of seconds ≥ 0, got %v", f.Backoff)
		}
	}
	return nil
}

// bootstrap creates the first admin and an agent token in a new store and
// writes them to 0600 files in the data directory.
func (s *Server) bootstrap(now time.Time) error {
	has, err := s.db.HasUsers()
	if err != nil || has {
		return err
	}
	for _, name := range tokenFiles { // (before the store has tokens no file holds)
		if _, err := os.Lstat(filepath.Join(s.cfg.DataDir, name)); err == nil {
			return fmt.Errorf("server: the store %s is new (it has no users) but the data directory has %s: "+
				"that file belongs to another store, and is not written over. Put that store back; or move the token files away to start a new cluster here",
				s.db.Path(), name)
		}
	}
	admin, _, err := s.db.CreateToken("admin", store.KindUser, true, "bootstrap", now)
	if err != nil {
		return err
	}
	agent, _, err := s.db.CreateEnrolToken(bootstrapEnrol, now)
	if err != nil {
		return err
	}
	s.AdminToken, s.AgentToken = admin, agent
	for name, tok := range map[string]string{"admin.token": admin, "agent.token": agent} {
		if err := writeSecret(filepath.Join(s.cfg.DataDir, name), tok, false); err != nil {
			return fmt.Errorf("server: writing %s: %w", name, err)
		}
	}
	s.cfg.Log.Info("new store: created user admin and an agent token", "admin_token_file", filepath.Join(s.cfg.DataDir, "admin.token"),
		"agent_token_file", filepath.Join(s.cfg.DataDir, "agent.token"))
	return nil
}

// ResetAdminToken makes a new admin token (for an operator who lost it; it
// needs access to the data directory) and writes it to admin.token.
func (s *Server) ResetAdminToken() (string, error) {
	tok, _, err := s.db.CreateToken("admin", store.KindUser, true, "reset", s.cfg.Clock())
	if err != nil {
		return "", err
	}
	return tok, writeSecret(filepath.Join(s.cfg.DataDir, "admin.token"), tok, true)
}

// tokenFiles are the token files bootstrap writes in the data directory.
var tokenFiles = []string{"admin.token", "agent.token"}

// checkTokensHaveStore refuses a data directory that has token files but
// no store: they belong to a store that was there (deleted or moved away),
// and a new store would write new tokens over them, locking every user
// and agent of the old one out.
func checkTokensHaveStore(dir string) error {
	if _, err := os.Lstat(filepath.Join(dir, "gandiva.db")); !errors.Is(err, os.ErrNotExist) {
		return nil // (store.Open judges the store)
	}
	for _, name := range tokenFiles {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			return fmt.Errorf("server: the data directory %s has %s but no store (gandiva.db): the store those tokens belong to "+
				"was deleted or moved. Put it back (or restore it from a backup); or, to start a new, empty cluster, "+
				"move the token files away too", dir, name)
		}
	}
	return nil
}

// writeSecret writes a token file readable by its owner only (mode 0600,
// also when it existed with another mode), over an existing one only if
// over is set: a new store's token files never replace a file that may
// hold the only copy of another store's token (that is an error).
func writeSecret(path, tok string, over bool) error {
	flag := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if over {
		flag = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(path, flag, 0o600)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%s exists, and the store is new: it belongs to another store; move it away to start a new cluster here: %w", path, err)
	}
	if err != nil {
		return err
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.WriteString(tok + "\n"); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Close closes the store (after the recovery, and a snapshot being
// written). Call it after Run has returned.
func (s *Server) Close() error {
	<-s.ready
	s.snap.wg.Wait()
	return s.db.Close()
}

// Epoch is time 0 of the engine.
func (s *Server) Epoch() time.Time { return s.epoch }

// Handler is the HTTP API, with Prometheus metrics at /metrics and the
// dashboard under /ui/ (DashboardHandler).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	dash := api.WithWriteTimeout(s.DashboardHandler(), time.Minute) // (static files and small JSON)
	mux.Handle("/ui", dash)
	mux.Handle("/ui/", dash)
	mux.Handle("/", api.Handler(s, authenticator{s.db, s.cfg.Clock}, api.Options{Metrics: s.met.handler(), Observe: s.met.observe, Log: s.cfg.Log,
		RateLimit: s.cfg.RateLimit, NoRateLimit: s.cfg.NoRateLimit, Clock: s.cfg.Clock}))
	return mux
}

// HTTPServer is the API's http.Server over ln, with its time-outs and its
// connection cap (api.NewHTTPServer); serve it on the returned listener.
func (s *Server) HTTPServer(ln net.Listener) (*http.Server, *api.Limiter) {
	// (a quarter of the cap is kept for connections that have made an
	// authenticated request: api.Handler marks them)
	return api.NewHTTPServer(s.Handler(), ln, api.ServerOptions{MaxConns: s.cfg.MaxConns, UnauthenticatedShare: 0.75,
		OnEvict:  func() { s.met.conns.WithLabelValues("evicted").Inc() },
		OnRefuse: func() { s.met.conns.WithLabelValues("refused").Inc() }})
}

type authenticator struct {
	db    *store.DB
	clock func() time.Time
}

func (a authenticator) Authenticate(tok string) (api.Principal, error) {
	p, err := a.db.AuthenticateAt(tok, a.clock())
	if err != nil {
		return api.Principal{}, err
	}
	return api.Principal{User: p.User, Admin: p.Admin, Agent: p.Agent, Node: p.Node, TokenID: p.TokenID}, nil
}

// viewNow is the time a view of a job is taken at: now, or the machine's
// time for a server without a clock (a test's view of a bare machine).
func (s *Server) viewNow() float64 {
	if s.cfg.Clock == nil {
		return s.m.now
	}
	return s.now()
}

// now is the engine time: seconds since the epoch, never decreasing.
func (s *Server) now() float64 {
	t := s.cfg.Clock().Sub(s.epoch).Seconds()
	if t < s.m.now {
		t = s.m.now
	}
	return t
}

// --- The loop ---

// req is one request to the loop.
type req struct {
	kind    string
	p       api.Principal
	jobReq  *api.JobRequest
	id      string
	reg     *api.Registration
	reports *api.ReportBatch
	leave   *api.Leave
	setting api.Setting
	// results
	existing bool // a submission answered with the job of its idempotency key
	err      error
	job      *api.Job
	regRep   *api.RegistrationReply
	done     chan struct{}
}

// do hands a request to the loop and waits for its answer.
func (s *Server) do(ctx context.Context, r *req) error {
	if err := s.await(ctx); err != nil {
		return err
	}
	r.done = make(chan struct{})
	select {
	case s.reqs <- r:
	case <-s.done:
		return api.Unavailable("server is shutting down")
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-r.done:
		return r.err
	case <-s.done:
		return api.Unavailable("server is shutting down")
	}
}

// Run is the loop that owns the machine: it batches requests, applies them,
// runs scheduling rounds, detects lost nodes, commits each batch to the
// store (one synced transaction) and only then answers. It returns when
// ctx ends, or with the store's error if a commit fails (the process should
// then exit: its memory is ahead of its disk, and a restart replays).
func (s *Server) Run(ctx context.Context) error {
	defer close(s.done)
	select {
	case <-s.ready:
	case <-ctx.Done():
		return nil
	}
	if s.recErr != nil {
		s.failed = s.recErr
		return s.recErr
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		var batch []*req
		select {
		case <-ctx.Done():
			return nil
		case r := <-s.reqs:
			batch = append(batch, r)
		drain:
			for len(batch) < 512 {
				select {
				case r := <-s.reqs:
					batch = append(batch, r)
				default:
					break drain
				}
			}
		case <-tick.C:
		}
		if err := s.step(batch); err != nil {
			s.failed = err
			for _, r := range batch {
				r.err = api.Unavailable("store failed: %v", err)
				close(r.done)
			}
			return err
		}
		s.forecastSoon(s.nextSeq)
	}
}

// step applies one batch (see Run): under the lock, stepLocked turns it
// into log entries, applies and commits them; after it, the callers are
// answered and the agents whose assignments changed are woken.
func (s *Server) step(batch []*req) error {
	changed, err := s.stepLocked(batch)
	if err != nil {
		return err
	}
	s.notify(changed)
	forced := s.forcedSnapshots(batch)
	for _, r := range batch {
		close(r.done)
	}
	if !forced {
		s.maybeSnapshot()
	}
	return nil
}

// stepLocked is step's part under the lock, in small steps: a wake-up the
// policy asked for, the requests, the nodes lost, a round if one is due,
// then one commit. It returns the nodes whose assignments changed. An
// error is the store's (or an entry that cannot be encoded for it): the
// memory may then be ahead of the disk, and the server stops.
func (s *Server) stepLocked(batch []*req) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.newStep()
	// A wake-up the policy asked for runs at exactly the time it asked
	// (policies such as gandiva act on quantum boundaries), before this
	// batch's later events; engine time is ours to keep, the wall clock
	// only drives it.
	if w := s.m.wakeAt; w > 0 && w <= b.now && w >= s.m.now {
		s.internal(b, &entry{Kind: entRound, T: w})
	}
	// Retention due (before the requests, whose quotas it may free).
	if s.m.retainDue(b.now) {
		s.internal(b, &entry{Kind: entRetain})
	}
	for _, r := range batch {
		s.request(b, r)
	}
	for _, name := range s.lostNodes() {
		s.internal(b, &entry{Kind: entNodeDown, Node: name, Reason: fmt.Sprintf("no contact for longer than the node time-out (%s)", s.cfg.NodeTimeout)})
	}
	if s.m.roundDue(b.now) {
		s.internal(b, &entry{Kind: entRound})
	}
	if len(b.out.Entries) > 0 {
		if err := s.commit(b); err != nil {
			return nil, err
		}
	}
	s.answer(batch)
	return b.changed(), nil
}

// stepBatch is what one step has applied and will commit.
type stepBatch struct {
	s   *Server
	now float64
	// out holds the entries applied, encoded, with the job records of the
	// submissions among them.
	out store.Batch
	// the nodes' assignment versions before the step
	before map[*node]uint64
}

func (s *Server) newStep() *stepBatch {
	b := &stepBatch{s: s, now: s.now(), out: store.Batch{Jobs: map[string][]byte{}}, before: map[*node]uint64{}}
	for _, n := range s.m.x.byID {
		b.before[n] = n.version
	}
	return b
}

// add encodes e (and the job record a submission carries) and applies it
// as the next log entry; the job record is stored only if the submission
// applied. An entry that cannot be encoded is not applied:
// what is applied is always what is logged. An entry that fails to apply
// stays in the log (a replay fails the same way). Either failure is logged
// and counted (gandiva_log_entries_failed_total), and returned.
func (s *Server) add(b *stepBatch, e *entry) error {
	seq, err := s.addEntry(b, e)
	if err != nil {
		s.met.failedEntry(e.Kind)
		s.cfg.Log.Error("log entry not applied", "seq", seq, "kind", e.Kind, "err", err)
	}
	return err
}

func (s *Server) addEntry(b *stepBatch, e *entry) (uint64, error) {
	seq := s.nextSeq + uint64(len(b.out.Entries))
	if e.T == 0 {
		e.T = b.now
	}
	data, err := json.Marshal(e)
	if err != nil {
		return seq, fmt.Errorf("encoding a %s entry: %w", e.Kind, err)
	}
	var rec []byte
	if e.Kind == entSubmit {
		if rec, err = json.Marshal(e.Job); err != nil {
			return seq, fmt.Errorf("encoding job %s: %w", e.Job.ID, err)
		}
	}
	b.out.Entries = append(b.out.Entries, data)
	t0 := time.Now()
	err = s.m.apply(seq, e)
	s.snap.applied += time.Since(t0) // (what a replay of it would cost)
	if err != nil {
		return seq, err
	}
	if rec != nil {
		// Only a job the machine has: a failed submission keeps its ID
		// (the machine counts it) and leaves no record.
		b.out.Jobs[e.Job.ID] = rec
	}
	return seq, nil
}

// internal adds an entry of the server's own (a round, a lost node): a
// failure is logged and counted by add, and nobody waits for it.
func (s *Server) internal(b *stepBatch, e *entry) { _ = s.add(b, e) }

// request validates r and adds its entry, if it has one; r.err is set when
// it was refused or failed.
func (s *Server) request(b *stepBatch, r *req) {
	if r.kind == reqLeave {
		s.leave(b, r)
		return
	}
	e, err := s.prepare(r, b.now)
	if err != nil {
		r.err = err
		return
	}
	if e == nil {
		return
	}
	if err := s.add(b, e); err != nil {
		r.err = api.AsError(err)
	}
}

// lostNodes returns the nodes not heard from for longer than the node
// time-out (and restarts their clocks), in name order.
func (s *Server) lostNodes() []string {
	wall := s.cfg.Clock()
	s.seenMu.Lock()
	defer s.seenMu.Unlock()
	var lost []string
	snap := s.m.eng.Snapshot()
	for _, n := range s.m.x.byID {
		if !snap.Servers[n.sid].Up && n.session == "" {
			continue
		}
		// (A node declared lost is down without a session, so it is
		// not declared again: its last contact stays what it was.)
		last, ok := s.seen[n.name]
		if !ok {
			last = s.started
		}
		if wall.Sub(last) > s.cfg.NodeTimeout {
			lost = append(lost, n.name)
		}
	}
	sort.Strings(lost)
	return lost
}

// commit writes the step's entries, job records and the state changes they
// caused to the store in one synced transaction.
func (s *Server) commit(b *stepBatch) error {
	for _, ch := range s.m.takeChanges() {
		data, err := json.Marshal(ch)
		if err != nil {
			return fmt.Errorf("encoding the state change %+v: %w", ch, err)
		}
		b.out.Changes = append(b.out.Changes, data)
	}
	for _, j := range s.m.takeSummarised() {
		// (retention: the summary replaces the full record)
		data, err := json.Marshal(j.rec)
		if err != nil {
			return fmt.Errorf("encoding the summary of job %s: %w", j.rec.ID, err)
		}
		b.out.Jobs[j.rec.ID] = data
	}
	t0 := time.Now()
	first, err := s.db.Commit(&b.out)
	s.met.commit(time.Since(t0), len(b.out.Entries))
	if err != nil {
		return err
	}
	if first != s.nextSeq {
		return fmt.Errorf("log sequence %d, expected %d", first, s.nextSeq)
	}
	s.nextSeq += uint64(len(b.out.Entries))
	return nil
}

// changed lists the nodes whose assignments changed in the step.
func (b *stepBatch) changed() []string {
	var out []string
	for _, n := range b.s.m.x.byID {
		if n.version != b.before[n] {
			out = append(out, n.name)
		}
	}
	return out
}

// prepare validates a request against the machine and builds its entry (nil
// entry: nothing to log). It runs under the lock, in batch order.
func (s *Server) prepare(r *req, now float64) (*entry, error) {
	m := s.m
	switch r.kind {
	case entSubmit:
		rq := *r.jobReq
		if rq.IdempotencyKey != "" {
			if j := m.idem[idemKey(r.p.User, rq.IdempotencyKey)]; j != nil {
				if !reflect.DeepEqual(j.rec.Request, rq) {
					return nil, api.Conflict("idempotency key %q was used for job %s with a different request", rq.IdempotencyKey, j.rec.ID)
				}
				r.id, r.existing = j.rec.ID, true
				return nil, nil // nothing to log: answered with that job
			}
		}
		if err := s.admit(r.p.User, &rq); err != nil {
			return nil, err
		}
		prerun := s.cfg.PreRun
		if rq.PreRun != nil {
			prerun = prerun && *rq.PreRun
		}
		every := s.cfg.CheckpointEvery
		if rq.CheckpointEvery != nil {
			every = *rq.CheckpointEvery
		}
		rec := &Record{ID: m.nextJobID(), User: r.p.User, Request: rq, Submitted: m.wall(now), PreRun: prerun, CkptEvery: every}
		s.met.submitted.Inc()
		r.id = rec.ID
		return &entry{Kind: entSubmit, Job: rec}, nil
	case entCancel:
		j, err := s.visible(r.p, r.id)
		if err != nil {
			return nil, err
		}
		if st := m.eng.Job(j.eid).State; st.Terminal() {
			return nil, api.Conflict("job %s is already %s", r.id, st)
		}
		return &entry{Kind: entCancel, ID: r.id}, nil
	case entRegister:
		if err := m.x.checkRegister(r.reg); err != nil {
			return nil, err
		}
		s.touch(r.reg.Name)
		return &entry{Kind: entRegister, Reg: r.reg}, nil
	case entReport:
		n := m.x.nodes[r.reports.Node]
		if n == nil || n.session == "" || n.session != r.reports.Session {
			return nil, api.StaleSession("node %s: session %q is not current; register again", r.reports.Node, r.reports.Session)
		}
		s.touch(n.name)
		if len(r.reports.Reports) == 0 {
			return nil, nil
		}
		return &entry{Kind: entReport, Node: n.name, Reports: r.reports.Reports}, nil
	case entUndrain, entDrain:
		if m.x.nodes[r.id] == nil {
			return nil, api.NotFound("no node %q", r.id)
		}
		e := &entry{Kind: r.kind, Node: r.id}
		if r.kind == entDrain {
			e.Reason = "drained by an admin"
		}
		return e, nil
	case reqRemove:
		if m.x.nodes[r.id] == nil {
			return nil, nil // enrolled but never registered: its credential is gone, nothing else to do
		}
		return &entry{Kind: entNodeDown, Node: r.id, Reason: reasonRemoved, Removed: true}, nil
	case entSetting:
		if err := s.checkSetting(r.setting); err != nil {
			return nil, err
		}
		return &entry{Kind: entSetting, Key: r.setting.Key, Value: r.setting.Value}, nil
	case reqSnapshot:
		return nil, nil // taken after the batch (forcedSnapshots)
	}
	return nil, fmt.Errorf("unknown request %q", r.kind)
}

// answer fills the results of a committed batch (under the lock).
func (s *Server) answer(batch []*req) {
	m := s.m
	for _, r := range batch {
		if r.err != nil {
			continue
		}
		switch r.kind {
		case entSubmit, entCancel:
			if j := m.jobs[r.id]; j != nil {
				r.job = s.view(j, false, r.p)
			}
		case entRegister:
			n := m.x.nodes[r.reg.Name]
			r.regRep = &api.RegistrationReply{Node: n.name, Session: n.session, Lease: s.cfg.Lease.Seconds(), CheckpointRoot: s.ckptRoot, Cluster: s.cluster}
		}
	}
}

func (s *Server) touch(node string) {
	s.seenMu.Lock()
	s.seen[node] = s.cfg.Clock()
	s.seenMu.Unlock()
}

func (s *Server) pollChan(node string) chan struct{} {
	s.pollMu.Lock()
	defer s.pollMu.Unlock()
	ch := s.polls[node]
	if ch == nil {
		ch = make(chan struct{})
		s.polls[node] = ch
	}
	return ch
}

func (s *Server) notify(nodes []string) {
	s.pollMu.Lock()
	defer s.pollMu.Unlock()
	for _, n := range nodes {
		if ch := s.polls[n]; ch != nil {
			close(ch)
			delete(s.polls, n)
		}
	}
}

// --- api.Backend ---

var _ api.Backend = (*Server)(nil)

// visible finds a job the principal may see (under at least a read lock).
func (s *Server) visible(p api.Principal, id string) (*job, error) {
	j := s.m.jobs[id]
	if j == nil {
		return nil, api.NotFound("no job %q", id)
	}
	if !p.Admin && j.rec.User != p.User {
		return nil, api.Forbidden("job %s belongs to another user", id)
	}
	return j, nil
}

// Submit implements api.Backend.
func (s *Server) Submit(ctx context.Context, p api.Principal, rq *api.JobRequest) (*api.Job, bool, error) {
	r := &req{kind: entSubmit, p: p, jobReq: rq}
	if err := s.do(ctx, r); err != nil {
		return nil, false, err
	}
	return r.job, !r.existing, nil
}

// Cancel implements api.Backend.
func (s *Server) Cancel(ctx context.Context, p api.Principal, id string) (*api.Job, error) {
	r := &req{kind: entCancel, p: p, id: id}
	if err := s.do(ctx, r); err != nil {
		return nil, err
	}
	return r.job, nil
}

// List implements api.Backend.
func (s *Server) List(ctx context.Context, p api.Principal, o api.ListOptions) ([]api.Job, error) {
	user := p.User
	switch {
	case o.All && !p.Admin:
		return nil, api.Forbidden("all: only admins may list every user's jobs")
	case o.User != "" && o.User != p.User && !p.Admin:
		return nil, api.Forbidden("user: only admins may list another user's jobs")
	case o.User != "":
		user = o.User
	case o.All:
		user = ""
	}
	if err := s.await(ctx); err != nil {
		return nil, err
	}
	states := map[string]bool{}
	for _, st := range o.States {
		if !validState(st) {
			return nil, api.Invalid("state", "unknown state %q (queued, running, suspended, migrating, finished, failed, cancelled)", st)
		}
		states[st] = true
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []api.Job
	for _, j := range s.m.order {
		if user != "" && j.rec.User != user {
			continue
		}
		if len(states) > 0 && !states[s.m.eng.Job(j.eid).State.String()] {
			continue
		}
		out = append(out, *s.view(j, false, p))
	}
	return out, nil
}

func validState(st string) bool {
	switch st {
	case "queued", "running", "suspended", "migrating", "finished", "failed", "cancelled":
		return true
	}
	return false
}

// Get implements api.Backend.
func (s *Server) Get(ctx context.Context, p api.Principal, id string) (*api.Job, error) {
	if err := s.await(ctx); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	j, err := s.visible(p, id)
	if err != nil {
		return nil, err
	}
	return s.view(j, true, p), nil
}

// Undrain implements api.Backend.
func (s *Server) Undrain(ctx context.Context, p api.Principal, node string) error {
	if !p.Admin {
		return api.Forbidden("only admins may undrain nodes")
	}
	return s.do(ctx, &req{kind: entUndrain, p: p, id: node})
}

// Set implements api.Backend.
func (s *Server) Set(ctx context.Context, p api.Principal, st api.Setting) error {
	if !p.Admin {
		return api.Forbidden("only admins may change settings")
	}
	return s.do(ctx, &req{kind: entSetting, p: p, setting: st})
}

// CreateToken implements api.Backend.
func (s *Server) CreateToken(_ context.Context, p api.Principal, t api.TokenRequest) (*api.TokenCreated, error) {
	if !p.Admin {
		return nil, api.Forbidden("only admins may create tokens")
	}
	if t.Agent {
		return s.createEnrolToken(t)
	}
	user := t.User
	if err := store.ValidUserName(user); err != nil {
		return nil, api.Invalid("user", "%v", err)
	}
	sec, tok, err := s.db.CreateToken(user, store.KindUser, t.Admin, t.Label, s.cfg.Clock())
	if err != nil {
		return nil, err
	}
	return &api.TokenCreated{Token: sec, ID: tok.ID, User: tok.User, Kind: string(tok.Kind)}, nil
}

// WhoAmI implements api.Backend.
func (s *Server) WhoAmI(_ context.Context, p api.Principal) (*api.WhoAmI, error) {
	return &api.WhoAmI{User: p.User, Admin: p.Admin, Agent: p.Agent, Node: p.Node, Server: "gandiva", Policy: s.cfg.Policy}, nil
}

// Register implements api.Backend.
func (s *Server) Register(ctx context.Context, p api.Principal, reg *api.Registration) (*api.RegistrationReply, error) {
	if err := agentMay(p, reg.Name); err != nil {
		return nil, err
	}
	if err := s.checkAddr(ctx, reg); err != nil {
		return nil, err
	}
	r := &req{kind: entRegister, p: p, reg: reg}
	if err := s.do(ctx, r); err != nil {
		return nil, err
	}
	return r.regRep, nil
}

// Report implements api.Backend.
func (s *Server) Report(ctx context.Context, p api.Principal, b *api.ReportBatch) error {
	if err := agentMay(p, b.Node); err != nil {
		return err
	}
	return s.do(ctx, &req{kind: entReport, p: p, reports: b})
}

// Assignments implements api.Backend: a long poll.
func (s *Server) Assignments(ctx context.Context, p api.Principal, node, session string, version uint64, wait time.Duration) (*api.Assignments, error) {
	if err := agentMay(p, node); err != nil {
		return nil, err
	}
	var timer <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timer = t.C
	}
	if err := s.await(ctx); err != nil {
		return nil, err
	}
	for {
		s.touch(node)
		s.mu.RLock()
		n := s.m.x.nodes[node]
		if n == nil || n.session == "" || n.session != session {
			s.mu.RUnlock()
			return nil, api.StaleSession("node %s: session %q is not current; register again", node, session)
		}
		a := s.m.x.assignments(n)
		ch := s.pollChan(node)
		s.mu.RUnlock()
		if a.Version != version || timer == nil {
			return a, nil
		}
		select {
		case <-ch:
		case <-timer:
			return a, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-s.done:
			return nil, api.Unavailable("server is shutting down")
		}
	}
}

// --- views ---

// view is job j as viewer p sees it (with its history if asked): for a
// viewer who is not an admin, the causes name other users' jobs as
// "another user's job" (the engine's reasons name the jobs a transition
// involved, such as "preempted by j4"). Callers hold s.mu.
func (s *Server) view(j *job, history bool, p api.Principal) *api.Job {
	m := s.m
	ej := m.eng.Job(j.eid)
	rq := &j.rec.Request
	v := &api.Job{ID: j.rec.ID, Name: rq.Name, User: j.rec.User, Group: rq.Group, Command: rq.Command, Env: rq.Env,
		WorkDir: rq.WorkDir, GPUs: rq.GPUs, MinGPUs: rq.MinGPUs, MaxGPUs: rq.MaxGPUs, MemGiB: rq.MemGiB, Iters: rq.Iters,
		Priority: rq.Priority, RankPerGPU: rq.RankPerGPU, State: ej.State.String(), Reason: ej.Reason, PreRun: m.eng.PreRunStatus(ej),
		Submitted: j.rec.Submitted, Done: j.done, IterTime: j.iterTime, Metric: j.metric, Attempts: ej.Attempts,
		Suspends: ej.Suspends, Resumes: ej.Resumes, Migrations: ej.Migrations, Packs: ej.Packs, Notes: j.notes,
		Starting: engine.StartUpText(ej, s.viewNow()), StartUp: ej.StartUp, Warm: ej.Warmed, Summary: j.rec.Summary}
	if ej.FirstStart >= 0 {
		t := m.wall(ej.FirstStart)
		v.Started = &t
	}
	if ej.Ended >= 0 {
		t := m.wall(ej.Ended)
		v.Ended = &t
	}
	if ej.State == cluster.Queued && ej.NotBefore > m.now && !math.IsInf(ej.NotBefore, 1) {
		t := m.wall(ej.NotBefore)
		v.BackoffUntil = &t
	}
	if ej.State == cluster.Queued {
		need, _ := ej.Spec.WidthRange()
		if why := m.unfit(need); why != "" {
			v.Reason = why // (a node was removed: nodes.go)
		}
	}
	for _, r := range []*run{j.run, j.probe} {
		if r == nil {
			continue
		}
		for _, w := range r.workers {
			v.Workers = append(v.Workers, api.Worker{Node: w.n.name, GPUs: w.gpus, Rank: w.rank, Phase: w.phase, Attempt: w.attempt})
		}
	}
	if history {
		v.History = j.history
		v.AttemptList = attemptList(m, j)
	}
	if !p.Admin {
		visible := func(user string) bool { return user == p.User }
		v.Reason = m.rec.Redact(v.Reason, visible)
		if len(v.History) > 0 {
			v.History = slices.Clone(v.History)
			for i := range v.History {
				v.History[i].Reason = m.rec.Redact(v.History[i].Reason, visible)
			}
		}
	}
	if !ej.State.Terminal() {
		v.ETA = s.apiETA(j.rec.ID, ej.State.Waiting())
	}
	return v
}

// attemptList is job j's attempts as the API shows them.
func attemptList(m *machine, j *job) []api.Attempt {
	var out []api.Attempt
	for i := range j.attempts {
		at := &j.attempts[i]
		v := api.Attempt{N: at.number(i), PreRun: at.probe, Outcome: at.outcome}
		for k, n := range at.nodes {
			r := api.AttemptRank{Node: n}
			if k < len(at.gpus) {
				r.GPUs = at.gpus[k]
			}
			v.Ranks = append(v.Ranks, r)
		}
		if at.n > 0 {
			t := m.wall(at.start)
			v.Started = &t
		}
		if at.outcome != "" {
			t := m.wall(at.end)
			v.Ended = &t
		}
		for _, r := range []*run{j.run, j.probe} {
			if r != nil && r.attempt == at.attempt && r.probe == at.probe && len(r.workers) > 0 {
				v.Current = at.outcome == ""
			}
		}
		out = append(out, v)
	}
	return out
}

// Nodes implements api.Backend.
func (s *Server) Nodes(ctx context.Context, p api.Principal) ([]api.Node, error) {
	if err := s.await(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock() // Snapshot compacts the engine's lists
	defer s.mu.Unlock()
	m := s.m
	snap := m.eng.Snapshot()
	s.seenMu.Lock()
	defer s.seenMu.Unlock()
	var out []api.Node
	for _, n := range m.x.byID {
		st := snap.Servers[n.sid]
		v := api.Node{Name: n.name, GPUType: n.gpuType, GPUs: m.c.Servers[n.sid].NumGPUs, FreeGPUs: st.NumFree(), Up: st.Up,
			Drained: st.Drained, Reason: st.Reason, Addr: n.addr}
		if t, ok := s.seen[n.name]; ok {
			v.LastSeen = t.UTC() // (zero: not heard from since this server started)
		}
		seen := map[string]bool{}
		for _, w := range n.workers {
			id := w.r.j.rec.ID
			if seen[id] {
				continue
			}
			seen[id] = true
			if p.Admin || w.r.j.rec.User == p.User {
				v.Jobs = append(v.Jobs, id)
			} else {
				v.OtherJobs++
			}
		}
		sort.Strings(v.Jobs)
		out = append(out, v)
	}
	return out, nil
}

// Explain implements api.Backend.
func (s *Server) Explain(ctx context.Context, p api.Principal, id string) (*api.Explanation, error) {
	if err := s.await(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock() // Snapshot compacts the engine's lists
	defer s.mu.Unlock()
	j, err := s.visible(p, id)
	if err != nil {
		return nil, err
	}
	e := explain(s.m, j, s.cfg.Policy)
	if st := s.m.eng.Job(j.eid).State; !st.Terminal() {
		e.ETA = s.apiETA(j.rec.ID, st.Waiting())
	}
	return e, nil
}

// Records returns the per-job records of everything submitted so far, for
// package metrics: the live run summarised by the same code as a simulated
// one (metrics.Summarize). See machine.records for what each figure means
// live.
func (s *Server) Records() *metrics.Run {
	<-s.ready
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.m.records(s.cfg.Policy)
}

// Err returns the error that stopped Run, if any.
func (s *Server) Err() error { return s.failed }
