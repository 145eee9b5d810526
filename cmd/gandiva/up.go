package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gandiva-sched/gandiva/examples/trainer/trainer"
	"github.com/gandiva-sched/gandiva/internal/agent"
	"github.com/gandiva-sched/gandiva/internal/api"
)

func newUpCmd() *cobra.Command {
	var (
		sf      serverFlags
		af      agentFlags
		demo    bool
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
			if demo {
				if !cmd.Flags().Changed("data-dir") {
					d, err := os.MkdirTemp("", "gandiva-demo-")
					if err != nil {
						return err
					}
					defer os.RemoveAll(d)
					sf.dataDir = d
				}
				if !cmd.Flags().Changed("listen") {
					sf.listen = "127.0.0.1:0"
				}
				if sf.policy == "" && defaultPolicy() == "gandiva" {
					sf.policy = "gandiva:quantum=4;cooldown=20"
				}
				if !cmd.Flags().Changed("checkpoint-every") {
					sf.ckptEvery = 2
				}
			}
			logOut := stderr
			if demo && !sf.verbose {
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
			if !demo {
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
				WorkRoot: filepath.Join(cfg.DataDir, "agent-"+host), Log: log})
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
			if demo {
				fmt.Fprintf(cmd.OutOrStdout(), "gandiva up --demo: server at %s, one agent with %s, policy %s\n", url, desc, cfg.Policy)
				runErr = runDemo(ctx, cmd.OutOrStdout(), api.NewClient(url, adminTok), cfg.DataDir, len(gpus), timeout)
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
	cmd.Flags().BoolVar(&demo, "demo", false, "run a demo workload of deterministic trainers on a fresh store and exit when it is done")
	cmd.Flags().DurationVar(&timeout, "timeout", 3*time.Minute, "--demo: give up after this long")
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

// demoJob is one trainer of the demo workload.
type demoJob struct {
	name        string
	gpus, steps int
	seed        uint64
	mem         float64
}

func demoWorkload(gpus int) []demoJob {
	var out []demoJob
	names := "abcdefghijklmnop"
	n := gpus + gpus/2 + 2 // more jobs than GPUs
	for i := 0; i < n && i < len(names); i++ {
		j := demoJob{name: "train-" + names[i:i+1], gpus: 1, steps: 150 + 25*(i%4), seed: uint64(i + 1), mem: 3}
		if i == 1 && gpus >= 2 {
			j.gpus = 2
		}
		out = append(out, j)
	}
	return out
}

func (d demoJob) args(dir string) []string {
	return []string{"trainer", "-steps", fmt.Sprint(d.steps), "-step-time", "100ms", "-dim", "4096", "-seed", fmt.Sprint(d.seed),
		"-out", filepath.Join(dir, d.name+".json"), "-ledger", filepath.Join(dir, d.name+".ledger")}
}

// runDemo submits the workload, narrates what happens and checks the result.
func runDemo(ctx context.Context, w io.Writer, cl *api.Client, dataDir string, gpus int, timeout time.Duration) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	dir := filepath.Join(dataDir, "demo")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	jobs := demoWorkload(gpus)
	// The checksums of uninterrupted runs, to compare with.
	want := map[string]string{}
	for _, d := range jobs {
		args := d.args(filepath.Join(dir, "reference"))
		args[4] = "0s" // -step-time
		os.MkdirAll(filepath.Join(dir, "reference"), 0o755)
		if code := trainer.Main(args[1:], io.Discard, io.Discard); code != 0 {
			return fmt.Errorf("reference run of %s failed (status %d)", d.name, code)
		}
		sum, err := readChecksum(filepath.Join(dir, "reference", d.name+".json"))
		if err != nil {
			return err
		}
		want[d.name] = sum
	}
	ids := map[string]string{}
	start := time.Now()
	for _, d := range jobs {
		j, err := cl.Submit(ctx, &api.JobRequest{Name: d.name, Command: append([]string{exe}, d.args(dir)...), GPUs: d.gpus,
			MemGiB: d.mem, Iters: float64(d.steps), IterTime: 0.1, WorkDir: dir})
		if err != nil {
			return fmt.Errorf("submitting %s: %w", d.name, err)
		}
		ids[j.ID] = d.name
	}
	fmt.Fprintf(w, "submitted %d deterministic trainers (%d to %d mini-batches of 100 ms each) to %d GPUs:\n", len(jobs), jobs[0].steps, 225, gpus)
	deadline := time.After(timeout)
	last := map[string]string{}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var final []api.Job
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return fmt.Errorf("demo: not done after %s", timeout)
		case <-tick.C:
		}
		list, err := cl.List(ctx, api.ListOptions{})
		if err != nil {
			return err
		}
		ended := 0
		for _, j := range list {
			line := describe(j, list)
			if line != last[j.ID] {
				fmt.Fprintf(w, "  %5.1fs  %-3s %-8s %s\n", time.Since(start).Seconds(), j.ID, j.Name, line)
				last[j.ID] = line
			}
			if j.State == "finished" || j.State == "failed" || j.State == "cancelled" {
				ended++
			}
		}
		if ended == len(list) {
			final = list
			break
		}
	}
	fmt.Fprintf(w, "all %d jobs ended in %.1f s\n\n", len(final), time.Since(start).Seconds())
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tNAME\tGPUS\tSTATE\tPRE-RUN\tSUSPENDS\tPACKS\tMIGRATIONS\tCHECKSUM\tUNINTERRUPTED RUN")
	var bad []string
	sort.Slice(final, func(a, b int) bool { return final[a].ID < final[b].ID })
	for _, j := range final {
		got, err := readChecksum(filepath.Join(dir, j.Name+".json"))
		if err != nil {
			got = "none"
		}
		ok := "✓ equal"
		if got != want[j.Name] || j.State != "finished" {
			ok = "✗ " + want[j.Name]
			bad = append(bad, j.ID)
		}
		if n, err := ledgerDone(filepath.Join(dir, j.Name+".ledger")); err != nil || n != 1 {
			ok += fmt.Sprintf(" (completed %d times)", n)
			bad = append(bad, j.ID)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%d\t%d\t%d\t%s\t%s\n", j.ID, j.Name, j.GPUs, j.State, orDash(j.PreRun), j.Suspends, j.Packs, j.Migrations, got, ok)
	}
	tw.Flush()
	if len(bad) > 0 {
		return fmt.Errorf("demo: jobs %s did not finish exactly once with the checksum of an uninterrupted run", strings.Join(bad, ", "))
	}
	fmt.Fprintln(w, "\nevery trainer finished once, with the checksum of an uninterrupted run.")
	return nil
}

// describe is one line about a job's state for the demo's narration.
func describe(j api.Job, all []api.Job) string {
	switch j.State {
	case "queued":
		switch j.PreRun {
		case "pending":
			return "queued: waiting for its pre-run (first mini-batch on one GPU)"
		case "running":
			return "pre-running its first mini-batch on one GPU"
		}
		if j.BackoffUntil != nil {
			return "queued: backing off after a failure"
		}
		return "queued"
	case "running", "migrating":
		s := j.State + " on " + workersText(j.Workers)
		var with []string
		for _, o := range all {
			if o.ID == j.ID || (o.State != "running" && o.State != "migrating") {
				continue
			}
			if sharesGPU(j.Workers, o.Workers) {
				with = append(with, o.ID)
			}
		}
		if len(with) > 0 {
			s += " (packed with " + strings.Join(with, ",") + ")"
		}
		return s
	case "suspended":
		return "suspended (time-sliced out; its state waits in host memory)"
	case "finished":
		return fmt.Sprintf("finished: %.0f mini-batches, %d suspends, %d packs, %d migrations", j.Done, j.Suspends, j.Packs, j.Migrations)
	}
	return j.State + ": " + j.Reason
}

func sharesGPU(a, b []api.Worker) bool {
	for _, x := range a {
		for _, y := range b {
			if x.Node != y.Node {
				continue
			}
			for _, g := range x.GPUs {
				for _, h := range y.GPUs {
					if g == h {
						return true
					}
				}
			}
		}
	}
	return false
}

func readChecksum(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var r struct {
		Checksum string `json:"checksum"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return r.Checksum, nil
}

// ledgerDone counts the completions a trainer's ledger records; an overlap
// (two copies of the job at once) is an error.
func ledgerDone(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, l := range strings.Split(string(data), "\n") {
		switch {
		case strings.HasPrefix(l, "done "):
			n++
		case strings.HasPrefix(l, "overlap"):
			return n, fmt.Errorf("%s: %s", path, l)
		}
	}
	return n, nil
}
