package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gandiva-sched/gandiva/internal/agent"
	"github.com/gandiva-sched/gandiva/internal/agent/jobproc"
	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/policy/registry"
	"github.com/gandiva-sched/gandiva/internal/server"
)

// The live scheduler's commands: server, agent, up.

// defaultServer is the URL client commands and agents use by default.
const defaultServer = "http://127.0.0.1:7070"

func defaultDataDir() string {
	if d := os.Getenv("GANDIVA_DATA"); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ".gandiva"
	}
	return filepath.Join(home, ".gandiva")
}

type serverFlags struct {
	listen, dataDir, policy, ckptRoot string
	prerun, resetAdmin                bool
	ckptEvery                         float64
	nodeTimeout                       time.Duration
	backoff                           float64
	maxAttempts, maxConns, burst      int
	warmStarts                        int
	rate                              float64
	verbose                           bool
	snapshotAfter                     time.Duration
	snapshotEvery                     int
	nodeAddr                          string
}

func (f *serverFlags) add(cmd *cobra.Command, listen string) {
	fl := cmd.Flags()
	fl.StringVar(&f.listen, "listen", listen, "address of the API")
	fl.StringVar(&f.dataDir, "data-dir", defaultDataDir(), "the server's store and token files ($GANDIVA_DATA)")
	fl.StringVar(&f.policy, "policy", "", "scheduling policy, with optional :key=value;... parameters (default: gandiva if built in, else fifo); fixed for the store's life")
	fl.BoolVar(&f.prerun, "prerun", true, "pre-run each new job's first mini-batch on one GPU before its gang starts")
	fl.StringVar(&f.ckptRoot, "checkpoint-root", "", "where job checkpoints go: shared storage mounted at the same path on every node (default: DATA/checkpoints)")
	fl.Float64Var(&f.ckptEvery, "checkpoint-every", 60, "default seconds between a job's periodic checkpoints (0: none)")
	fl.DurationVar(&f.nodeTimeout, "node-timeout", 30*time.Second, "a node silent this long is lost and its jobs restart elsewhere")
	fl.Float64Var(&f.backoff, "retry-backoff", 60, "seconds before a failed job's first retry (doubles each retry)")
	fl.IntVar(&f.maxAttempts, "max-attempts", 3, "attempts before a failing job is given up")
	fl.IntVar(&f.warmStarts, "warm-starts", server.DefaultWarmStarts, "job processes starting up at once per node, placed or warm: waiting jobs' processes are started\nahead of their turn and held at their first mini-batch boundary (0: no warm starts); fixed for the store's life")
	fl.BoolVar(&f.resetAdmin, "reset-admin-token", false, "create a new admin token and write it to DATA/admin.token")
	fl.BoolVar(&f.verbose, "verbose", false, "debug logging")
	fl.DurationVar(&f.snapshotAfter, "snapshot-after", 250*time.Millisecond, "snapshot the state once the log entries since the last snapshot took this long to apply (what a restart would replay)")
	fl.IntVar(&f.snapshotEvery, "snapshot-every", 20000, "snapshot the state after at most this many log entries (-1: never, and never compact the log)")
	fl.IntVar(&f.maxConns, "max-conns", 0, "most API connections open at once; at the cap an anonymous, never-reading or idle one is closed (0: the file limit less a reserve, at most 16384)")
	fl.Float64Var(&f.rate, "rate-limit", api.DefaultRateLimit.Rate, "requests per second per token (429 with Retry-After beyond)")
	fl.IntVar(&f.burst, "rate-burst", api.DefaultRateLimit.Burst, "requests per token in a burst")
	fl.StringVar(&f.nodeAddr, "node-addr", server.NodeAddrPeer, "where logs are fetched from: peer (the address a node registered from, at the port of its --advertise address)\nor any (its address as registered: for agents behind NAT or a proxy)")
}

// check validates the numeric flags (before anything is written).
func (f *serverFlags) check() error {
	return firstErr(
		nonNegative("--checkpoint-every", f.ckptEvery),
		positiveDuration("--node-timeout", f.nodeTimeout),
		nonNegative("--retry-backoff", f.backoff),
		intAtLeast("--max-attempts", f.maxAttempts, 0),
		intAtLeast("--warm-starts", f.warmStarts, 0),
		intBetween("--max-conns", f.maxConns, 0, 1<<20),
		between("--rate-limit", f.rate, 0.01, 1e6),
		intBetween("--rate-burst", f.burst, 1, 1e7),
		positiveDuration("--snapshot-after", f.snapshotAfter),
		snapshotEvery(f.snapshotEvery),
		oneOf("--node-addr", f.nodeAddr, server.NodeAddrPeer, server.NodeAddrAny),
	)
}

// oneOf: v is one of want.
func oneOf(flag, v string, want ...string) error {
	if !slices.Contains(want, v) {
		return fmt.Errorf("%s: want %s, got %q", flag, strings.Join(want, " or "), v)
	}
	return nil
}

// snapshotEvery: a positive number of entries, or -1 (never).
func snapshotEvery(n int) error {
	if n == 0 || n < -1 {
		return fmt.Errorf("--snapshot-every: must be a positive number of log entries, or -1 for never, got %d", n)
	}
	return nil
}

func defaultPolicy() string {
	for _, n := range registry.Names() {
		if n == "gandiva" {
			return n
		}
	}
	return "fifo"
}

func (f *serverFlags) config(log *slog.Logger) (server.Config, error) {
	if err := f.check(); err != nil {
		return server.Config{}, err
	}
	pol := f.policy
	if pol == "" {
		pol = defaultPolicy()
	}
	names, params, err := registry.Parse(pol)
	if err != nil {
		return server.Config{}, err
	}
	if len(names) != 1 {
		return server.Config{}, fmt.Errorf("--policy: the live scheduler runs one policy, got %d", len(names))
	}
	fp := engine.DefaultFailurePolicy()
	fp.Backoff, fp.MaxAttempts = f.backoff, f.maxAttempts
	warm := f.warmStarts
	if warm == 0 {
		warm = -1 // server.Config: negative turns them off
	}
	if warm < -1 {
		return server.Config{}, fmt.Errorf("--warm-starts: must not be negative, got %d", f.warmStarts)
	}
	return server.Config{DataDir: f.dataDir, Policy: names[0], PolicyParams: params[0], PreRun: f.prerun,
		CheckpointRoot: f.ckptRoot, CheckpointEvery: f.ckptEvery, Failure: &fp, NodeTimeout: f.nodeTimeout, WarmStarts: warm, Log: log,
		MaxConns: f.maxConns, RateLimit: api.RateLimit{Rate: f.rate, Burst: f.burst},
		SnapshotAfter: f.snapshotAfter, SnapshotEvery: f.snapshotEvery, NodeAddr: f.nodeAddr}, nil
}

func newLogger(w io.Writer, verbose bool) *slog.Logger {
	lvl := slog.LevelInfo
	if verbose {
		lvl = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: lvl}))
}

// startServer opens the store, starts the loop and serves the API; it
// returns the server, its URL, and a function that waits for it to stop.
func startServer(ctx context.Context, cfg server.Config, listen string, resetAdmin bool, stderr io.Writer) (*server.Server, string, func() error, error) {
	// The port first: a port in use must be reported before a new store and
	// its admin token are created.
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, "", nil, fmt.Errorf("--listen %s: %w", listen, err)
	}
	// (the API answers while the state is recovered; Run waits for it)
	s, err := server.OpenAsync(cfg)
	if err != nil {
		ln.Close()
		return nil, "", nil, err
	}
	if s.AdminToken != "" {
		fmt.Fprintf(stderr, "gandiva: new store in %s\n  admin token (shown once; also in %s):\n    %s\n  agent token: %s\n",
			cfg.DataDir, filepath.Join(cfg.DataDir, "admin.token"), s.AdminToken, filepath.Join(cfg.DataDir, "agent.token"))
	}
	if resetAdmin {
		tok, err := s.ResetAdminToken()
		if err != nil {
			ln.Close()
			s.Close()
			return nil, "", nil, err
		}
		fmt.Fprintf(stderr, "gandiva: new admin token (also in %s):\n    %s\n", filepath.Join(cfg.DataDir, "admin.token"), tok)
	}
	url := "http://" + dialAddr(ln.Addr().(*net.TCPAddr))
	hs, lim := s.HTTPServer(ln)
	runErr := make(chan error, 1)
	ctx, cancel := context.WithCancel(ctx)
	go func() { runErr <- s.Run(ctx) }()
	go hs.Serve(lim)
	wait := func() error {
		var err error
		select {
		case err = <-runErr:
		case <-ctx.Done():
			err = <-runErr
		}
		cancel()
		sctx, c2 := context.WithTimeout(context.Background(), 2*time.Second)
		hs.Shutdown(sctx)
		c2()
		s.Close()
		return err
	}
	return s, url, wait, nil
}

// dialAddr is the address a client on this machine reaches a listener by:
// an unspecified host (":7070") becomes the loopback address.
func dialAddr(a *net.TCPAddr) string {
	ip := a.IP
	if ip == nil || ip.IsUnspecified() {
		ip = net.IPv4(127, 0, 0, 1)
	}
	return net.JoinHostPort(ip.String(), fmt.Sprint(a.Port))
}

func newServerCmd() *cobra.Command {
	var f serverFlags
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run the live scheduler's server: API, store, scheduling loop",
		Long: `Run the server of the live scheduler: the /v1 API, the embedded store (every job,
user and state change is synced to disk before it is acknowledged), the scheduling loop
over the engine and the configured policy, and Prometheus metrics at /metrics.

On a new data directory it creates the user admin and prints an admin token once (also
written, mode 0600, to DATA/admin.token) and an agent token (DATA/agent.token), which enrols
up to 16 nodes of any name within 24 hours (later nodes: gandiva token create --agent). After a
crash or kill -9 it replays its log and reconnects with its agents: no job is lost and
none runs twice.`,
		Example: `  gandiva server --listen :7070 --data-dir /var/lib/gandiva --policy gandiva`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := newLogger(cmd.ErrOrStderr(), f.verbose)
			cfg, err := f.config(log)
			if err != nil {
				return err
			}
			_, url, wait, err := startServer(cmd.Context(), cfg, f.listen, f.resetAdmin, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			log.Info("serving", "url", url, "policy", cfg.Policy, "data", cfg.DataDir)
			return wait()
		},
	}
	f.add(cmd, "127.0.0.1:7070")
	return cmd
}

type agentFlags struct {
	server, token, tokenFile, name, fakeGPUs, workDir, ckptRoot, listen, advertise, rack string
	credFile, runAs, userMap, selfUsers                                                  string
	domain                                                                               int
	grace                                                                                time.Duration
	verbose                                                                              bool
	clientDeadline                                                                       time.Duration
}

func (f *agentFlags) add(cmd *cobra.Command, standalone bool) {
	fl := cmd.Flags()
	if standalone {
		fl.StringVar(&f.server, "server", envOr("GANDIVA_SERVER", defaultServer), "the server's URL ($GANDIVA_SERVER)")
		fl.StringVar(&f.token, "token", "", "an agent token, to enrol the node ($GANDIVA_AGENT_TOKEN)")
		fl.StringVar(&f.tokenFile, "token-file", filepath.Join(defaultDataDir(), "agent.token"), "file holding the agent token (only needed until the node is enrolled)")
		fl.StringVar(&f.credFile, "credential-file", "", "where the node keeps its own credential, mode 0600 (default: WORK/node.credential)")
		fl.StringVar(&f.name, "name", "", "the node's name (default: host name)")
		fl.StringVar(&f.workDir, "work-dir", "", "jobs' default working directories and logs (default: "+defaultWorkHelp+")")
		fl.StringVar(&f.listen, "listen", "127.0.0.1:0", "address of the agent's log server (e.g. :7071 when the server is on another machine)")
		fl.StringVar(&f.advertise, "advertise", "", "host name other machines reach this node by")
		fl.StringVar(&f.rack, "rack", "", "rack name (locality)")
		fl.IntVar(&f.domain, "domain", 0, "InfiniBand domain (locality)")
		fl.StringVar(&f.ckptRoot, "checkpoint-root", "", "this node's mount of the server's checkpoint root, if at another path")
		fl.BoolVar(&f.verbose, "verbose", false, "debug logging")
	}
	fl.StringVar(&f.runAs, "run-as", "", "the OS account jobs run as: an account, a pattern such as gdv-{user} (one account per user), or self\n"+
		"(the agent's own, only when it is not root); default: "+agent.DefaultAccount+" when root, else self")
	fl.StringVar(&f.userMap, "user-map", "", "file of \"USER ACCOUNT\" lines: the account each listed user's jobs run as (before --run-as)")
	fl.StringVar(&f.selfUsers, "self-users", "admin", "with --run-as self: the users whose jobs may run as the agent's own account (* for all: they can then read all it can)")
	fl.DurationVar(&f.grace, "grace", 20*time.Second, "on SIGTERM or Ctrl-C: how long jobs get to write a checkpoint before they are killed (then the node leaves the server, which requeues them at once)")
	fl.StringVar(&f.fakeGPUs, "fake-gpus", "", "pretend to have these GPUs (COUNTxTYPE, e.g. 4xV100) instead of asking nvidia-smi")
	fl.DurationVar(&f.clientDeadline, "client-deadline", jobproc.DefaultClientDeadline, "a job process that has not said the in-job client's hello this long after its start is taken to lack the client\n(until then a suspension waits for the hello, so a slow framework start-up is never mistaken for it)")
}

// defaultWorkHelp describes defaultWorkDir.
const defaultWorkHelp = "/var/lib/gandiva-agent/NAME as root, else DATA/agent-NAME"

// defaultWorkDir is an agent's work directory by default: where the
// accounts jobs run as can reach it when the agent is root (not under
// root's home), else in the data directory.
func defaultWorkDir(name string) string {
	if os.Geteuid() == 0 {
		return filepath.Join("/var/lib/gandiva-agent", name)
	}
	return filepath.Join(defaultDataDir(), "agent-"+name)
}

// runAs builds the agent's run-as rule from the flags.
func (f *agentFlags) runAsRule() (agent.RunAs, error) {
	var r agent.RunAs
	if f.runAs != "" {
		var err error
		if r, err = agent.ParseRunAs(f.runAs); err != nil {
			return r, err
		}
	}
	if f.userMap != "" {
		m, err := agent.ReadUserMap(f.userMap)
		if err != nil {
			return r, err
		}
		r.Map = m
	}
	if r.Self || (f.runAs == "" && f.userMap == "" && os.Geteuid() != 0) {
		r.Self = true
		for _, u := range strings.Split(f.selfUsers, ",") {
			if u = strings.TrimSpace(u); u != "" {
				r.SelfUsers = append(r.SelfUsers, u)
			}
		}
	}
	return r, nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func (f *agentFlags) gpus(ctx context.Context, fallback string) ([]api.GPU, string, error) {
	if f.fakeGPUs != "" {
		g, err := agent.ParseFakeGPUs(f.fakeGPUs)
		return g, "fake " + f.fakeGPUs, err
	}
	g, err := agent.DiscoverGPUs(ctx)
	if err != nil {
		return nil, "", err
	}
	if len(g) > 0 {
		return g, fmt.Sprintf("%d × %s (nvidia-smi)", len(g), g[0].Type), nil
	}
	if fallback == "" {
		return nil, "", errors.New("no GPU found (no nvidia-smi): use --fake-gpus 4xV100 to run without GPUs")
	}
	g, err = agent.ParseFakeGPUs(fallback)
	return g, "fake " + fallback + " (no nvidia-smi found)", err
}

func readToken(flagVal, env, file string) (string, error) {
	if flagVal != "" {
		return flagVal, nil
	}
	if v := os.Getenv(env); v != "" {
		return v, nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("no token: pass --token, set $%s, or put it in %s (%v)", env, file, err)
	}
	return strings.TrimSpace(string(data)), nil
}

func newAgentCmd() *cobra.Command {
	var f agentFlags
	var k kubeAgentFlags
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run the node agent: registers this machine's GPUs and runs its share of the jobs",
		Long: `Run the agent of one GPU node. It registers the node's GPUs with the server (found with
nvidia-smi, or --fake-gpus 4xV100 without GPUs), launches each job's workers as processes with
CUDA_VISIBLE_DEVICES, their own working and checkpoint directories and captured logs, carries out
start, suspend, resume, migrate and kill, reports the jobs' mini-batch progress, and reconnects
when the server or the agent restarts.

It enrols the node once, with an agent token (gandiva token create --agent --label NODE on the
server's side: it enrols that node only, once, within a day), and keeps the node's own credential
for every later start.`,
		Example: `  gandiva agent --server http://head:7070 --token-file gpu07.token --listen :7071
  gandiva agent --fake-gpus 2xV100 --name n1
  gandiva agent --kube --node "$NODE_NAME"     # Kubernetes shared mode (a DaemonSet)`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if k.kube {
				return k.run(cmd, f.clientDeadline, f.verbose)
			}
			if err := firstErr(intAtLeast("--domain", f.domain, 0), positiveDuration("--grace", f.grace)); err != nil {
				return err
			}
			log := newLogger(cmd.ErrOrStderr(), f.verbose)
			tok, tokErr := readToken(f.token, "GANDIVA_AGENT_TOKEN", f.tokenFile)
			gpus, desc, err := f.gpus(cmd.Context(), "")
			if err != nil {
				return err
			}
			name := f.name
			if name == "" {
				if name, err = os.Hostname(); err != nil {
					return err
				}
			}
			work := f.workDir
			if work == "" {
				work = defaultWorkDir(name)
			}
			rule, err := f.runAsRule()
			if err != nil {
				return err
			}
			syscall.Umask(0o077) // (the jobs inherit it: what they write is theirs alone)
			cred := f.credFile
			if cred == "" {
				cred = filepath.Join(work, "node.credential")
			}
			if tokErr != nil && !fileExists(cred) {
				return tokErr // (an enrolled node starts from its credential, without the agent token)
			}
			a, err := agent.New(agent.Config{Server: f.server, Token: tok, CredentialFile: cred, Name: name, GPUs: gpus, WorkRoot: work,
				CheckpointRoot: f.ckptRoot, Listen: f.listen, Advertise: f.advertise, Rack: f.rack, Domain: f.domain, Grace: f.grace,
				RunAs: rule, ClientDeadline: f.clientDeadline, Log: log})
			if err != nil {
				return err
			}
			log.Info("agent starting", "node", name, "gpus", desc, "server", f.server, "work", work)
			return a.Run(cmd.Context())
		},
	}
	f.add(cmd, true)
	k.add(cmd)
	return cmd
}
