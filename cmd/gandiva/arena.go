package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gandiva-sched/gandiva/internal/arena"
	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/dataset"
	"github.com/gandiva-sched/gandiva/internal/sim"
	"github.com/gandiva-sched/gandiva/internal/trace"
)

type arenaFlags struct {
	trace, traceFormat, cluster, schedulers, format, perf string
	vc                                                    []string
	limit, synthetic, users                               int
	gangs                                                 []int
	seed                                                  uint64
	load, maxDuration, speed, ckEvery                     float64
	ckOnTerm, declare, records, compareSim, verbose       bool
	profile                                               bool
	gandivaArgs                                           []string
	timeout                                               time.Duration
	html, workload                                        string
}

func newKubeArenaCmd() *cobra.Command {
	var f arenaFlags
	cmd := &cobra.Command{
		Use:   "arena",
		Short: "Replay a trace through a local control plane under gandiva's policies and kube-scheduler, side by side",
		Long: `Replay a job trace through a real local control plane (etcd, kube-apiserver, the Job controller,
kwok GPU nodes made from --cluster), once per scheduler, each on a fresh plane with the same nodes,
time compressed by --speed (one wall second is --speed seconds of the trace).

Each job becomes an Indexed batch/v1 Job in its user's namespace at its submission time: pods of
the largest number of GPUs that divides its gang and fits a server. It progresses only while all
its pods are Running, at the rate the simulator's performance model gives it where they run
(after its start-up, and reading its checkpoint when it resumes from one); when its work is
done its pods exit 0. When a scheduler stops its pods first, it keeps what its last checkpoint
saved (--checkpoint-every, --checkpoint-on-term): the same rules for every scheduler.

Schedulers (--schedulers): gandiva:POLICY (gandiva kube in exclusive mode with any policy of
gandiva sim --policy), kube-scheduler (v1.34.4 alone: no gangs, no preemption, pods of equal
priority bound in the order they were created) and kueue (Kueue v0.17.0 admitting the Jobs in
front of that kube-scheduler: a ClusterQueue per namespace with its fair share of the GPUs in one
cohort, borrowing, preemption and fair sharing), volcano (Volcano v1.14.4: gangs by its PodGroups,
a proportion queue per namespace, preemption and reclaim) and kai (KAI-Scheduler v0.13.0: a queue
per namespace under one parent, a PodGroup per Job); the peers are built by
scripts/arena-peers kueue|volcano|kai, else their rows say "not run". Gandiva runs with its engine's clock at --speed (gandiva kube --clock-speed), so
a policy's time constants (quanta, thresholds) and the declared seconds per mini-batch are in
trace seconds, as in gandiva sim; gandiva:POLICY@SIMPOLICY compares a run with the simulator's
SIMPOLICY instead of POLICY.

--workload pods makes each job a plain-pod gang instead of a Job: its pods created by the arena
with no owner, labelled as one gang (Gandiva's gang annotations), made again by the arena when a
scheduler deletes them, as a job controller would.

--html FILE also writes the results as one self-contained HTML page (a JCT CDF and GPU
utilisation over time of every scheduler, the settings, the load); gandiva kube arena report
merges saved --format json --records results of separate runs into one.

Measured from the API server's record: JCT (average, median, p95), makespan, GPU utilisation,
fairness (each namespace's GPU-time against its max-min fair entitlement; Jain's index),
preemptions and work lost, submission to first binding, and the scheduler's CPU time and peak
RSS (rusage of its process). docs/ARENA.md. Needs scripts/kube-tools' binaries.`,
		Example: `  gandiva kube arena --synthetic 30 --max-duration 3600 --cluster tiresias-n2g4 --speed 200
  gandiva kube arena --trace internal/dataset/files/60_job.csv --cluster tiresias-n8g8 --schedulers gandiva:fifo,gandiva:tiresias-l,kube-scheduler --format json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runArena(cmd, &f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.trace, "trace", "", "trace file (default: the embedded Philly sample, or --synthetic)")
	fl.StringVar(&f.traceFormat, "trace-format", "auto", "trace format: auto, tiresias, philly-csv, philly-json, gavel")
	fl.StringSliceVar(&f.vc, "vc", nil, "Philly traces: keep only these virtual clusters")
	fl.IntVar(&f.limit, "limit", 0, "keep only the first N jobs of the trace")
	fl.IntVar(&f.synthetic, "synthetic", 0, "instead of a trace, N synthetic jobs modelled on Philly's (gang sizes, run times, users)")
	fl.Float64Var(&f.load, "load", 0.9, "--synthetic: offered load as a fraction of the cluster's GPUs")
	fl.IntVar(&f.users, "users", 10, "--synthetic: users (namespaces), Zipf-like")
	fl.IntSliceVar(&f.gangs, "gang-sizes", nil, "--synthetic: draw gang sizes uniformly from this list (repeat one to weight it) instead of Philly's distribution")
	fl.Float64Var(&f.maxDuration, "max-duration", 0, "--synthetic: cap each job's run time, in seconds on a V100 (0: none)")
	fl.Uint64Var(&f.seed, "seed", 1, "random seed of the trace reader and of --synthetic")
	fl.StringVar(&f.cluster, "cluster", "", "cluster: preset name, YAML file or Tiresias spec CSV (default: "+defaultCluster+")")
	fl.StringVar(&f.schedulers, "schedulers", "gandiva:tiresias-l,kube-scheduler", "schedulers, in order: gandiva:POLICY[@SIMPOLICY], kube-scheduler, kueue, volcano, kai (SIMPOLICY: what --compare-sim runs, default POLICY)")
	fl.Float64Var(&f.speed, "speed", 100, "trace seconds per wall second")
	fl.Float64Var(&f.ckEvery, "checkpoint-every", 0, "jobs checkpoint every this many seconds of trace time spent progressing (0: never)")
	fl.BoolVar(&f.ckOnTerm, "checkpoint-on-term", true, "jobs checkpoint on SIGTERM within the grace period, keeping all their progress")
	fl.BoolVar(&f.declare, "declare-work", true, "annotate each Job with its mini-batches and seconds per mini-batch (gandiva.io/iters, gandiva.io/iter-time, in trace seconds: gandiva's clock runs at --speed)")
	fl.StringVar(&f.perf, "perf", "default", "performance model of the jobs' rates and start-ups: default, h100, h100-cold")
	fl.DurationVar(&f.timeout, "timeout", 30*time.Minute, "wall-time limit of each scheduler's replay (jobs not done count as unfinished)")
	fl.BoolVar(&f.compareSim, "compare-sim", true, "also run gandiva sim on the same trace, cluster, performance model and seed under each gandiva policy, and show its average JCT beside the arena's")
	fl.StringVar(&f.format, "format", "table", "output: table, json or csv")
	fl.BoolVar(&f.verbose, "verbose", false, "log every job's starts (where, at what rate), stops and ends")
	fl.BoolVar(&f.records, "records", false, "--format json: include each job's record")
	fl.StringVar(&f.html, "html", "", "also write the results as a self-contained HTML report (JCT CDF, GPU utilisation over time) to this file")
	fl.StringVar(&f.workload, "workload", arena.WorkloadJob, "how each job is made: job (an Indexed batch/v1 Job) or pods (a plain-pod gang, remade by the arena when deleted)")
	fl.StringArrayVar(&f.gandivaArgs, "gandiva-arg", nil, "one more flag of gandiva kube for the gandiva rows (repeat for more), e.g. --gandiva-arg=--lease-renew-deadline=100s")
	fl.BoolVar(&f.profile, "profile", false, "sample each process of the plane, the scheduler and the machine (CPU, peak RSS, load) every second of the replay, and gandiva's round times (its metrics); add bindings per second and these figures to the results (a 'scale' object in JSON, two more tables after the table; docs/PERFORMANCE.md)")
	cmd.AddCommand(newKubeArenaReportCmd())
	return cmd
}

func runArena(cmd *cobra.Command, f *arenaFlags) error {
	if err := firstErr(positive("--speed", f.speed), nonNegative("--checkpoint-every", f.ckEvery), intAtLeast("--limit", f.limit, 0),
		intBetween("--synthetic", f.synthetic, 0, 100_000), between("--load", f.load, 1e-3, 100), nonNegative("--max-duration", f.maxDuration),
		positiveDuration("--timeout", f.timeout)); err != nil {
		return err
	}
	if !contains(arena.Formats, f.format) {
		return fmt.Errorf("--format %q: use %s", f.format, strings.Join(arena.Formats, ", "))
	}
	if !contains(arena.Workloads, f.workload) {
		return fmt.Errorf("--workload %q: use %s", f.workload, strings.Join(arena.Workloads, " or "))
	}
	if f.records && f.format != "json" {
		return fmt.Errorf("--records: only with --format json (got --format %s)", f.format)
	}
	perf, err := sim.LookupPerf(f.perf)
	if err != nil {
		return fmt.Errorf("--perf: %w", err)
	}
	scheds, err := arena.ParseSchedulers(f.schedulers)
	if err != nil {
		return fmt.Errorf("--schedulers: %w", err)
	}
	if err := arena.CheckWorkload(f.workload, scheds); err != nil {
		return fmt.Errorf("--workload: %w", err)
	}
	clusterArg := f.cluster
	if clusterArg == "" {
		clusterArg = defaultCluster
	}
	c, err := loadCluster(clusterArg)
	if err != nil {
		return err
	}
	jobs, name, err := arenaJobs(f, c)
	if err != nil {
		return err
	}
	plan, err := arena.NewPlan(c, jobs)
	if err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this program to run gandiva kube: %w", err)
	}
	cfg := arena.Config{Plan: plan, Schedulers: scheds, Speed: f.speed, Perf: perf, DeclareWork: f.declare,
		Checkpoints: arena.Checkpoints{Every: f.ckEvery, OnTerm: f.ckOnTerm}, Timeout: f.timeout,
		Gandiva: append([]string{exe, "kube"}, f.gandivaArgs...), Log: cmd.ErrOrStderr(), Verbose: f.verbose, Profile: f.profile, Workload: f.workload}
	html, err := createArenaHTML(f.html) // (before the run: a bad path fails now)
	if err != nil {
		return err
	}
	if html != nil {
		defer html.Close()
	}
	res, runErr := arena.Run(cmd.Context(), cfg)
	if f.compareSim {
		sums, err := arena.Simulate(plan, scheds, perf, f.seed)
		if err != nil {
			return fmt.Errorf("--compare-sim: %w", err)
		}
		arena.AddSim(res, plan, sums)
	}
	st := arena.Settings{Trace: name, Cluster: c.Name + ": " + c.Summary(), Jobs: len(jobs), Speed: f.speed,
		Checkpoints: cfg.Checkpoints, DeclareWork: f.declare, Perf: perf.Name, Workload: f.workload}
	if err := arena.Write(cmd.OutOrStdout(), f.format, st, res, f.records); err != nil {
		return err
	}
	if f.format == "table" {
		arena.WriteScale(cmd.OutOrStdout(), res)
	}
	if html != nil {
		if err := writeArenaHTML(html, arena.Report{Settings: st, Results: res}); err != nil {
			return err
		}
	}
	return runErr
}

// arenaJobs reads the trace of the flags (or makes the synthetic one).
func arenaJobs(f *arenaFlags, c *cluster.Cluster) ([]*cluster.JobSpec, string, error) {
	if f.synthetic > 0 {
		if f.trace != "" {
			return nil, "", fmt.Errorf("--synthetic and --trace: choose one")
		}
		if f.users < 1 {
			return nil, "", fmt.Errorf("--users: must be at least 1, got %d", f.users)
		}
		for _, g := range f.gangs {
			if g < 1 || g > c.NumGPUs() {
				return nil, "", fmt.Errorf("--gang-sizes: %d is not from 1 to the cluster's %d GPUs", g, c.NumGPUs())
			}
		}
		jobs := trace.Synthetic(trace.SynthConfig{Jobs: f.synthetic, Seed: f.seed, Users: f.users, Load: f.load * float64(c.NumGPUs()),
			GPUs: f.gangs, MaxGPUs: c.NumGPUs(), MaxDuration: f.maxDuration})
		return jobs, fmt.Sprintf("synthetic (%d jobs, seed %d, %d users, load %g, gang sizes %v, max duration %gs)",
			f.synthetic, f.seed, f.users, f.load, f.gangs, f.maxDuration), nil
	}
	opts := trace.Options{VC: f.vc, Limit: f.limit, Seed: f.seed}
	if f.trace == "" {
		data, err := dataset.ReadFile(defaultTrace)
		if err != nil {
			return nil, "", err
		}
		jobs, _, err := trace.Read(bytes.NewReader(data), defaultTrace, trace.Format(f.traceFormat), opts)
		return jobs, "embedded " + defaultTrace, err
	}
	jobs, _, err := trace.ReadFile(f.trace, trace.Format(f.traceFormat), opts)
	if err != nil {
		return nil, "", fmt.Errorf("--trace: %w", err)
	}
	return jobs, f.trace, nil
}
