package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gandiva-sched/gandiva/examples/trainer/trainer"
	"github.com/gandiva-sched/gandiva/internal/agent"
	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/demo"
	"github.com/gandiva-sched/gandiva/internal/server"
)

func newUpCmd() *cobra.Command {
	var (
		sf      serverFlags
		af      agentFlags
		isDemo  bool
		timeout time.Duration
		startUp time.Duration
	)
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run the live scheduler on this machine: server and one agent in one process",
		Long: `Run the server and one agent in one process, with the embedded store, using this
machine's GPUs (fake ones, 4xV100, if nvidia-smi finds none). Then submit jobs from another
terminal: gandiva submit --gpus 1 -- python train.py. It runs until Ctrl-C (the agent then
checkpoints its jobs and leaves, and the server stops).

Jobs never run as the scheduler: as root, each runs as the account --run-as gives (by default
` + agent.DefaultAccount + `, which an admin creates: useradd --system --user-group --no-create-home
--shell /usr/sbin/nologin ` + agent.DefaultAccount + `), with its working and checkpoint directories
under --work-dir (/var/lib/gandiva-agent/HOST by default). Not root, up cannot switch accounts: it runs
the jobs of the user admin (yours) as you, and refuses other users' (--self-users; docs/SECURITY.md).

With --demo it starts on a fresh temporary store, submits a small workload of deterministic
trainers (more jobs than GPUs), shows them being pre-run, scheduled, time-sliced and packed,
checks that every trainer's checksum equals an uninterrupted run's, and exits when they are
done (status 1 if any is not). As root without ` + agent.DefaultAccount + `, the demo's jobs run as nobody.`,
		Example: `  gandiva up
  gandiva up --demo`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			stderr := cmd.ErrOrStderr()
			if err := firstErr(positiveDuration("--timeout", timeout), positiveDuration("--grace", af.grace),
				positiveDuration("--demo-startup", startUp)); err != nil {
				return err
			}
			host, _ := os.Hostname()
			if host == "" {
				host = "local"
			}
			if isDemo {
				if !cmd.Flags().Changed("data-dir") {
					d, err := os.MkdirTemp("", "gandiva-demo-")
					if err != nil {
						return err
					}
					defer os.RemoveAll(d)
					sf.dataDir = d
				}
				if af.workDir == "" {
					d, err := os.MkdirTemp("", "gandiva-demo-agent-")
					if err != nil {
						return err
					}
					defer os.RemoveAll(d)
					af.workDir = d
				}
				if !cmd.Flags().Changed("listen") {
					sf.listen = demo.Listen
				}
				if sf.policy == "" && defaultPolicy() == "gandiva" {
					sf.policy = demo.Policy
				}
				if !cmd.Flags().Changed("checkpoint-every") {
					sf.ckptEvery = demo.CheckpointEvery
				}
				if af.runAs == "" && af.userMap == "" && os.Geteuid() == 0 {
					if _, err := user.Lookup(agent.DefaultAccount); err != nil {
						af.runAs = "nobody" // (a throw-away demo; a real up needs the dedicated account)
						fmt.Fprintf(stderr, "gandiva up --demo: no account %s: the demo's jobs run as nobody\n", agent.DefaultAccount)
					}
				}
			}
			if af.workDir == "" {
				af.workDir = defaultWorkDir(host)
			}
			if sf.ckptRoot == "" {
				sf.ckptRoot = filepath.Join(af.workDir, "checkpoints") // (the data directory is the server's alone)
			}
			logOut := stderr
			if isDemo && !sf.verbose {
				logOut = io.Discard // the demo prints its own story
			}
			log := newLogger(logOut, sf.verbose)
			cfg, err := sf.config(log)
			if err != nil {
				return err
			}
			rule, err := af.runAsRule()
			if err == nil && !rule.Self && rule.Pattern == "" && len(rule.Map) == 0 {
				rule.Pattern = agent.DefaultAccount
			}
			if err == nil {
				err = rule.Check() // (before the store is made)
			}
			if err != nil {
				return err
			}
			gpus, desc, err := af.gpus(cmd.Context(), "4xV100")
			if err != nil {
				return err
			}
			syscall.Umask(0o077) // (the jobs inherit it: what they write is theirs alone)
			// The agent stops first (it checkpoints its jobs and leaves the
			// server), then the server.
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			sctx, scancel := context.WithCancel(context.Background())
			defer scancel()
			quiet := io.Discard
			if !isDemo {
				quiet = stderr
			}
			srv, url, wait, err := startServer(sctx, cfg, sf.listen, sf.resetAdmin, quiet)
			if err != nil {
				return err
			}
			serverDone := make(chan error, 1)
			go func() { serverDone <- wait() }()
			stopServer := func() error { scancel(); return <-serverDone }
			// up owns both sides: its agent's credential lives with the store
			// (DATA/node.credential), not in the work directory, which is per
			// host and outlives a store (a credential of another store there
			// was refused, and no job ever ran).
			cred, err := ownCredential(ctx, srv, cfg.DataDir, host)
			if err != nil {
				return errors.Join(err, stopServer())
			}
			// Its own agent enrols, when it has no credential, with a token
			// for its name only, used once, that expires in minutes: not
			// DATA/agent.token, whose uses and lifetime are for other nodes.
			// (None when it has one: nothing would use it.)
			var tok string
			if _, err := os.Lstat(cred); errors.Is(err, os.ErrNotExist) {
				if tok, err = srv.NodeToken(host); err != nil {
					return errors.Join(fmt.Errorf("the agent's enrolment token: %w", err), stopServer())
				}
			}
			a, err := agent.New(agent.Config{Server: url, Token: tok, Name: host, GPUs: gpus, WorkRoot: af.workDir,
				CredentialFile: cred, RunAs: rule, Grace: af.grace, ClientDeadline: af.clientDeadline, Log: log})
			if err != nil {
				return errors.Join(err, stopServer())
			}
			agentDone := make(chan error, 1)
			go func() { agentDone <- a.Run(ctx) }()
			adminTok := srv.AdminToken
			if adminTok == "" {
				data, _ := os.ReadFile(filepath.Join(cfg.DataDir, "admin.token"))
				adminTok = strings.TrimSpace(string(data))
			}
			if adminTok != "" {
				// (a URL fragment is never sent to the server; the page moves the token to the tab's storage)
				fmt.Fprintf(cmd.OutOrStdout(), "dashboard: %s/ui/#token=%s\n", url, adminTok)
			}
			var runErr error
			if isDemo {
				runErr = runDemo(ctx, cmd.OutOrStdout(), rule, af.workDir, demo.Config{Client: api.NewClient(url, adminTok),
					GPUs: len(gpus), Server: url, Node: desc, Policy: cfg.Policy, Timeout: timeout,
					StartUp: startUp / 2, FirstBatch: startUp - startUp/2})
				cancel()
			} else {
				fmt.Fprintf(stderr, "gandiva is up: API %s, node %s with %s, policy %s, data %s, jobs run as %s\n", url, host, desc, cfg.Policy, cfg.DataDir, rule)
				fl := strings.Join(clientArgs(url, cfg.DataDir), " ")
				fmt.Fprintf(stderr, "  try:  gandiva submit%s --gpus 1 -- python train.py\n", fl)
				fmt.Fprintf(stderr, "        gandiva jobs%s; gandiva nodes%s    Ctrl-C stops it.\n", fl, fl)
			}
			var agentErr, serverErr error
			select {
			case agentErr = <-agentDone: // Ctrl-C, or the demo is done, or the agent failed
				serverErr = stopServer()
			case serverErr = <-serverDone: // the server failed
				cancel()
				agentErr = <-agentDone
			}
			return errors.Join(runErr, agentErr, serverErr)
		},
	}
	sf.add(cmd, "127.0.0.1:7070")
	af.add(cmd, false)
	cmd.Flags().StringVar(&af.workDir, "work-dir", "", "the agent's work directory: logs, jobs' default working directories, checkpoints (default: "+defaultWorkHelp+")")
	cmd.Flags().BoolVar(&isDemo, "demo", false, "run a demo workload of deterministic trainers on a fresh store and exit when it is done")
	cmd.Flags().DurationVar(&timeout, "timeout", demo.Timeout, "--demo: give up after this long")
	cmd.Flags().DurationVar(&startUp, "demo-startup", demo.StartUp+demo.FirstBatch,
		"--demo: each trainer's start-up to the end of its first mini-batch (half before the in-job client's hello)")
	return cmd
}

// ownCredential returns the file that keeps the node credential of up's
// own agent: in the data directory, with the store it belongs to. A file
// whose credential this store does not hold (the store was moved away to
// start a new cluster and the file left behind, or the node was removed) is
// removed: it can only be refused. When the file is not there but the store
// has enrolled the node (a release whose up kept it in the work directory,
// or a file removed), that credential, which no file holds, is revoked and
// the node removed, so that the agent enrols again: only up's own agent
// uses this node name on this store.
func ownCredential(ctx context.Context, srv *server.Server, dataDir, host string) (string, error) {
	path := filepath.Join(dataDir, "node.credential")
	admin := api.Principal{User: "admin", Admin: true}
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return path, nil // (the agent says what is wrong with it)
	default:
		ts, err := srv.Tokens(ctx, admin)
		if err != nil {
			return "", fmt.Errorf("checking the node credential in %s: %w", path, err)
		}
		sum := sha256.Sum256([]byte(strings.TrimSpace(string(data))))
		id := hex.EncodeToString(sum[:])[:12]
		for _, t := range ts {
			if t.Kind == "node" && t.Label == host && t.ID == id {
				return path, nil
			}
		}
		if err := os.Remove(path); err != nil {
			return "", fmt.Errorf("removing %s, a node credential this store does not hold: %w", path, err)
		}
	}
	err = srv.RemoveNode(ctx, admin, host)
	if err != nil && !api.IsStatus(err, http.StatusNotFound) {
		return "", fmt.Errorf("replacing the node credential of %s that no file holds: %w", host, err)
	}
	return path, nil
}

// runDemo runs the demo's workload. Its trainers run as the jobs' account,
// so the demo's files go in a directory of that account's under the work
// directory, and the trainer is this binary copied where the account may
// run it.
func runDemo(ctx context.Context, w io.Writer, rule agent.RunAs, work string, cfg demo.Config) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cfg.Dir = work
	if !rule.Self {
		uid, gid, err := demoAccount(rule)
		if err != nil {
			return err
		}
		bin := filepath.Join(work, "bin")
		if err := os.MkdirAll(bin, 0o755); err != nil {
			return err
		}
		os.Chmod(bin, 0o755)
		if exe, err = copyExecutable(exe, filepath.Join(bin, "gandiva")); err != nil {
			return err
		}
		dir := filepath.Join(work, "demo")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		if err := os.Chown(dir, uid, gid); err != nil {
			return err
		}
	}
	cfg.Trainer = []string{exe, "trainer"}
	return demo.Run(ctx, w, cfg)
}

// demoAccount is the account the demo's jobs run as (the admin's, who
// submits them).
func demoAccount(rule agent.RunAs) (int, int, error) {
	name, ok := rule.Map["admin"]
	if !ok {
		name = strings.ReplaceAll(rule.Pattern, "{user}", "admin")
	}
	u, err := user.Lookup(name)
	if err != nil {
		return 0, 0, fmt.Errorf("the demo's jobs run as %s: %w", name, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return uid, gid, nil
}

// copyExecutable copies the binary at src to dst, mode 0755.
func copyExecutable(src, dst string) (string, error) {
	in, err := os.Open(src)
	if err != nil {
		return "", err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return "", err
	}
	if err := out.Close(); err != nil {
		return "", err
	}
	return dst, os.Chmod(dst, 0o755)
}

// clientArgs are the flags a client command needs to reach a server at url
// with the admin token of dataDir, where the defaults do not (the "try:"
// hint of up), each with a leading space.
func clientArgs(url, dataDir string) []string {
	var out []string
	if url != envOr("GANDIVA_SERVER", defaultServer) {
		out = append(out, " --server "+url)
	}
	home, _ := os.UserHomeDir()
	if filepath.Clean(dataDir) != filepath.Clean(defaultDataDir()) || os.Getenv("GANDIVA_TOKEN") != "" ||
		fileExists(filepath.Join(home, ".gandiva", "token")) { // (either would come before the admin token)
		out = append(out, " --token-file "+filepath.Join(dataDir, "admin.token"))
	}
	return out
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// newTrainerCmd is the deterministic example trainer, built in so that the
// demo needs nothing but this binary.
func newTrainerCmd() *cobra.Command {
	return &cobra.Command{
		Use:                "trainer [flags]",
		Short:              "The deterministic example trainer (examples/trainer), built in for the demo",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if code := trainer.Main(args, cmd.OutOrStdout(), cmd.ErrOrStderr()); code != 0 {
				os.Exit(code)
			}
			return nil
		},
	}
}
