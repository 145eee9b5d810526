// Package metrics turns the records of a run, one per job (Job, in a Run),
// into the figures Gandiva reports: job completion time (average and
// percentiles), queueing delay, time to the first 100 mini-batches,
// makespan, GPU utilisation, cluster throughput, per-user shares, and
// preemption and migration counts. The simulator builds the records from its
// ground truth (sim.Result.Records) and the live server from its history
// (server.Server.Records), so both are summarised by the same code.
//
// Definitions (also in docs/SIMULATOR.md, "Metrics"):
//   - JCT: end − submit, over finished jobs.
//   - Queueing delay: first start − submit, over jobs that started.
//   - Time to the first 100 mini-batches: from submit until the job had done
//     min(100, its total) mini-batches, over jobs that got there.
//   - Makespan: from the first submission to the last job's end (or the horizon).
//   - GPU utilisation: GPU-seconds held by at least one job ÷ (GPUs × makespan).
//     A GPU shared by two packed jobs counts once per job, so packing can
//     push it above 1 only if a policy packs; it is capped at neither.
//   - Run time: end − first start over finished jobs (it includes time
//     suspended); slowdown: run time ÷ the job's run time alone on reference
//     GPUs, consolidated. Spread jobs: jobs that ever ran across servers.
//   - Cluster throughput: training work done per second of makespan, in
//     reference-GPU-seconds per second. One unit of work is one second of a
//     job's training on one reference GPU (V100), alone, with perfect
//     locality; a job's work is its mini-batches done × its reference
//     seconds per mini-batch × its gang size. A cluster of N reference GPUs
//     running ideally-placed jobs back to back has throughput N.
package metrics

import (
	"math"
	"slices"
	"sort"

	"gonum.org/v1/gonum/stat"

	"github.com/gandiva-sched/gandiva/internal/cluster"
)

// Job is one job's record: what the figures are computed from. Times are
// seconds on the run's clock (simulated, or the live server's engine time).
type Job struct {
	Name, User, Group string
	// GPUs is the gang size asked for.
	GPUs       int
	Submit     float64
	FirstStart float64 // -1: never started
	End        float64 // -1: did not end within the run
	State      cluster.JobState
	// Done is the mini-batches done; Iters the job's total (0: unknown).
	Done, Iters float64
	// Work is the reference-GPU-seconds of training done (Done × the job's
	// reference seconds per mini-batch × GPUs): see the package comment.
	Work float64
	// T100 is when the job had done min(100, Iters) mini-batches, -1 if never.
	T100 float64
	// Busy is the GPU-seconds the job held GPUs (its pre-run's included).
	Busy                                  float64
	Suspends, Migrations, Attempts, Packs int
	// Metric is the last quality metric the job reported.
	Metric float64
	// Spread is set when the job ever ran across servers.
	Spread bool
	// Duration is the job's run time alone on reference GPUs (Iters ×
	// reference seconds per mini-batch), 0 when unknown.
	Duration float64
	// PreRun is the GPU-seconds its pre-run held (included in Busy).
	// Pre-runs have no record of their own.
	PreRun float64
}

// Run is one run's records: what Summarize reads.
type Run struct {
	// Policy, Perf (the performance model, or "live") and Cluster name the run.
	Policy, Perf, Cluster string
	// GPUs is the cluster's size; the run lasted from Start to End.
	GPUs       int
	Start, End float64
	// Jobs are the records, in submission order.
	Jobs []Job
	// Counts of what the engine did (engine.Stats) and saw.
	Preemptions, Migrations, Packs, Retries int
	Events, RejectedActions                 int
}

// Summary is one policy's figures. JSON field names are a contract.
type Summary struct {
	Policy      string  `json:"policy"`
	PerfModel   string  `json:"perf_model"`
	Cluster     string  `json:"cluster"`
	GPUs        int     `json:"gpus"`
	Jobs        int     `json:"jobs"`
	Finished    int     `json:"finished"`
	Failed      int     `json:"failed"`
	Cancelled   int     `json:"cancelled"`
	Unfinished  int     `json:"unfinished"`
	AvgJCT      float64 `json:"avg_jct_s"`
	P50JCT      float64 `json:"p50_jct_s"`
	P95JCT      float64 `json:"p95_jct_s"`
	P99JCT      float64 `json:"p99_jct_s"`
	AvgQueue    float64 `json:"avg_queue_s"`
	P95Queue    float64 `json:"p95_queue_s"`
	Makespan    float64 `json:"makespan_s"`
	AvgT100     float64 `json:"avg_time_to_100_minibatches_s"`
	AvgRun      float64 `json:"avg_run_s"`
	AvgSlowdown float64 `json:"avg_slowdown"`
	SpreadJobs  int     `json:"spread_jobs"`
	// The same for multi-GPU jobs only (the ones locality affects).
	MultiJobs        int     `json:"multi_gpu_jobs"`
	MultiAvgQueue    float64 `json:"multi_gpu_avg_queue_s"`
	MultiAvgSlowdown float64 `json:"multi_gpu_avg_slowdown"`
	GPUUtil          float64 `json:"gpu_utilization"`
	Throughput       float64 `json:"cluster_throughput"`
	Preemptions      int     `json:"preemptions"`
	Migrations       int     `json:"migrations"`
	Packs            int     `json:"packs"`
	Retries          int     `json:"retries"`
	Events           int     `json:"events"`
	UserShare        []Share `json:"user_share"`
	RejectedActions  int     `json:"rejected_actions"`
}

// Share is one user's part of the work done.
type Share struct {
	User  string  `json:"user"`
	Work  float64 `json:"work"`
	Share float64 `json:"share"`
	Jobs  int     `json:"jobs"`
}

// Summarize computes the summary of a run.
func Summarize(r *Run) Summary {
	s := Summary{Policy: r.Policy, PerfModel: r.Perf, Cluster: r.Cluster, GPUs: r.GPUs, Jobs: len(r.Jobs),
		Preemptions: r.Preemptions, Migrations: r.Migrations, Packs: r.Packs, Retries: r.Retries,
		Events: r.Events, RejectedActions: r.RejectedActions}
	var jct, queue, t100, run, slow, mqueue, mslow []float64
	busy, work := 0.0, 0.0
	users := map[string]*Share{}
	for i := range r.Jobs {
		j := &r.Jobs[i]
		switch j.State {
		case cluster.Finished:
			s.Finished++
			jct = append(jct, j.End-j.Submit)
			run = append(run, j.End-j.FirstStart)
			if j.Duration > 0 {
				slow = append(slow, (j.End-j.FirstStart)/j.Duration)
				if j.GPUs > 1 {
					mslow = append(mslow, (j.End-j.FirstStart)/j.Duration)
				}
			}
		case cluster.Failed:
			s.Failed++
		case cluster.Cancelled:
			s.Cancelled++
		default:
			s.Unfinished++
		}
		if j.FirstStart >= 0 {
			queue = append(queue, j.FirstStart-j.Submit)
			if j.GPUs > 1 {
				mqueue = append(mqueue, j.FirstStart-j.Submit)
			}
		}
		if j.GPUs > 1 {
			s.MultiJobs++
		}
		if j.T100 >= 0 {
			t100 = append(t100, j.T100-j.Submit)
		}
		if j.Spread {
			s.SpreadJobs++
		}
		busy += j.Busy
		work += j.Work
		u := users[j.User]
		if u == nil {
			u = &Share{User: j.User}
			users[j.User] = u
		}
		u.Work += j.Work
		u.Jobs++
	}
	s.AvgJCT, s.P50JCT, s.P95JCT, s.P99JCT = mean(jct), quantile(jct, 0.5), quantile(jct, 0.95), quantile(jct, 0.99)
	s.AvgQueue, s.P95Queue = mean(queue), quantile(queue, 0.95)
	s.AvgT100 = mean(t100)
	s.AvgRun, s.AvgSlowdown = mean(run), mean(slow)
	s.MultiAvgQueue, s.MultiAvgSlowdown = mean(mqueue), mean(mslow)
	s.Makespan = r.End - r.Start
	if s.Makespan > 0 {
		s.GPUUtil = busy / (float64(r.GPUs) * s.Makespan)
		s.Throughput = work / s.Makespan
	}
	for _, u := range users {
		if work > 0 {
			u.Share = u.Work / work
		}
		s.UserShare = append(s.UserShare, *u)
	}
	sort.Slice(s.UserShare, func(i, j int) bool { return s.UserShare[i].User < s.UserShare[j].User })
	return s
}

func mean(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	return stat.Mean(x, nil)
}

// quantile is the empirical (nearest-rank, lower) quantile, 0 for no data.
func quantile(x []float64, p float64) float64 {
	if len(x) == 0 {
		return 0
	}
	y := slices.Clone(x)
	slices.Sort(y)
	q := stat.Quantile(p, stat.Empirical, y, nil)
	if math.IsNaN(q) {
		return 0
	}
	return q
}
