package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gandiva-sched/gandiva/examples/trainer/trainer"
	"github.com/gandiva-sched/gandiva/internal/agent"
	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/demo"
)

func newUpCmd() *cobra.Command {
	var (
		sf      serverFlags
		af      agentFlags
		isDemo  bool
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run the live scheduler on this machine: server and one agent in one process",
		Long: `Run the server and one agent in one process, with the embedded store, using this
machine's GPUs (fake ones, 4xV100, if nvidia-smi finds none). Then submit jobs from another
terminal: gandiva submit --gpus 1 -- python train.py. It runs until Ctrl-C.

With --demo it starts on a fresh temporary store, submits a small workload of deterministic
trainers (more jobs than GPUs), shows them being pre-run, scheduled, time-sliced and packed,
checks that every trainer's checksum equals an uninterrupted run's, and exits when they are
done (status 1 if any is not).`,
		Example: `  gandiva up
  gandiva up --demo`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			stderr := cmd.ErrOrStderr()
			if isDemo {
				if !cmd.Flags().Changed("data-dir") {
					d, err := os.MkdirTemp("", "gandiva-demo-")
					if err != nil {
						return err
					}
					defer os.RemoveAll(d)
					sf.dataDir = d
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
			gpus, desc, err := af.gpus(cmd.Context(), "4xV100")
			if err != nil {
				return err
			}
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			quiet := io.Discard
			if !isDemo {
				quiet = stderr
			}
			srv, url, wait, err := startServer(ctx, cfg, sf.listen, sf.resetAdmin, quiet)
			if err != nil {
				return err
			}
			tok := srv.AgentToken
			if tok == "" {
				data, err := os.ReadFile(filepath.Join(cfg.DataDir, "agent.token"))
				if err != nil {
					cancel()
					wait()
					return fmt.Errorf("the agent token: %w", err)
				}
				tok = strings.TrimSpace(string(data))
			}
			host, _ := os.Hostname()
			if host == "" {
				host = "local"
			}
			a, err := agent.New(agent.Config{Server: url, Token: tok, Name: host, GPUs: gpus,
				WorkRoot: filepath.Join(cfg.DataDir, "agent-"+host), ClientDeadline: af.clientDeadline, Log: log})
			if err != nil {
				cancel()
				wait()
				return err
			}
			agentDone := make(chan error, 1)
			go func() { agentDone <- a.Run(ctx) }()
			adminTok := srv.AdminToken
			if adminTok == "" {
				data, _ := os.ReadFile(filepath.Join(cfg.DataDir, "admin.token"))
				adminTok = strings.TrimSpace(string(data))
			}
			var runErr error
			if isDemo {
				exe, err := os.Executable()
				runErr = err
				if err == nil {
					runErr = demo.Run(ctx, cmd.OutOrStdout(), demo.Config{Client: api.NewClient(url, adminTok), Trainer: []string{exe, "trainer"},
						Dir: cfg.DataDir, GPUs: len(gpus), Server: url, Node: desc, Policy: cfg.Policy, Timeout: timeout})
				}
				cancel()
			} else {
				fmt.Fprintf(stderr, "gandiva is up: API %s, node %s with %s, policy %s, data %s\n", url, host, desc, cfg.Policy, cfg.DataDir)
				fmt.Fprintf(stderr, "  try:  gandiva submit --gpus 1 -- python train.py      (token: %s)\n", filepath.Join(cfg.DataDir, "admin.token"))
				fmt.Fprintf(stderr, "        gandiva jobs; gandiva nodes; gandiva explain JOB    Ctrl-C stops it.\n")
			}
			err = wait()
			<-agentDone
			return errors.Join(runErr, err)
		},
	}
	sf.add(cmd, "127.0.0.1:7070")
	af.add(cmd, false)
	cmd.Flags().BoolVar(&isDemo, "demo", false, "run a demo workload of deterministic trainers on a fresh store and exit when it is done")
	cmd.Flags().DurationVar(&timeout, "timeout", demo.Timeout, "--demo: give up after this long")
	return cmd
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
