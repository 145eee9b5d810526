package arena

import (
	"math"
	"slices"
	"sort"

	"gonum.org/v1/gonum/stat"
)

// Record is what the player saw of one scheduler's run, in seconds of
// trace time from the start of the replay.
type Record struct {
	// Capacity is the cluster's GPUs.
	Capacity int       `json:"capacity_gpus"`
	Jobs     []JobSeen `json:"jobs"`
	// Holds are the GPUs each pod held: bound to ended (or deleted).
	Holds []Hold `json:"-"`
	// End is when the replay stopped (every job done, or the time limit).
	End float64 `json:"end_s"`
}

// JobSeen is one job's record.
type JobSeen struct {
	Key       string  `json:"job"`
	Namespace string  `json:"namespace"`
	GPUs      int     `json:"gpus"`
	Submit    float64 `json:"submit_s"`
	// FirstBind is when a pod of the job was first seen bound (-1: never).
	FirstBind float64 `json:"first_bind_s"`
	// FirstRun is when all its pods first ran (-1: never).
	FirstRun float64 `json:"first_run_s"`
	// Completed is when the last of its pods was seen Succeeded: its work
	// ended and its GPUs were free (-1: not by End).
	Completed float64 `json:"completed_s"`
	// JobComplete is when its Job was seen Complete (-1: not by End), up
	// to the Job controller's sync period after Completed.
	JobComplete float64 `json:"job_complete_s"`
	// Preemptions: times all its pods ran and then one stopped before its
	// work was done.
	Preemptions int `json:"preemptions"`
	// LostGPUSeconds is the progress those stops lost, in GPU-seconds.
	LostGPUSeconds float64 `json:"lost_gpu_s"`
	// RanGPUSeconds is the GPU-seconds it held with all its pods running
	// (its gang whole: start-ups, checkpoint reads and progress, kept or
	// later lost), to End. A gang bound in part holds GPUs but counts
	// nothing here. Absent (0) in records written before it was kept.
	RanGPUSeconds float64 `json:"ran_gpu_s,omitempty"`
}

// Hold is one pod's GPUs held from From to To (To < 0: still at End).
type Hold struct {
	Namespace string
	GPUs      int
	From, To  float64
}

// Summary is one scheduler's figures.
type Summary struct {
	Jobs     int `json:"jobs"`
	Finished int `json:"finished"`
	// JCT: completion less submission, over the finished jobs.
	AvgJCT float64 `json:"avg_jct_s"`
	P50JCT float64 `json:"p50_jct_s"`
	P95JCT float64 `json:"p95_jct_s"`
	// Makespan is from the first submission to the last completion (to
	// End when a job did not finish).
	Makespan float64 `json:"makespan_s"`
	// GPUUtil is the GPU-seconds held by pods ÷ (capacity × makespan).
	GPUUtil float64 `json:"gpu_utilization"`
	// Util is GPUUtil over each tenth of the makespan.
	Util []float64 `json:"utilization_over_time"`
	// RunUtil is the GPU-seconds held by jobs whose pods all ran
	// (JobSeen.RanGPUSeconds) ÷ (capacity × makespan): GPUUtil less what
	// gangs bound in part held while waiting for the rest of their pods,
	// and what pods held before their gang's last pod ran or after its
	// first stopped.
	RunUtil float64 `json:"run_utilization"`
	// Jain is Jain's fairness index of the namespaces' ratios of GPU-time
	// held to entitlement (1: each got exactly its entitlement).
	Jain float64 `json:"jain_fairness"`
	// Shares are the namespaces' ratios, sorted by namespace.
	Shares []Share `json:"shares"`
	// Preemptions and LostGPUHours over every job.
	Preemptions  int     `json:"preemptions"`
	LostGPUHours float64 `json:"lost_gpu_hours"`
	// Submission to first binding, over the jobs ever bound.
	AvgFirstBind float64 `json:"avg_first_bind_s"`
	P50FirstBind float64 `json:"p50_first_bind_s"`
	P95FirstBind float64 `json:"p95_first_bind_s"`
}

// Share is one namespace's GPU-time against its entitlement: the max-min
// fair share of the capacity among the namespaces with unfinished
// submitted jobs at each instant, each capped at its demand (the GPUs of
// those jobs), integrated over the makespan.
type Share struct {
	Namespace   string  `json:"namespace"`
	HeldGPUSec  float64 `json:"held_gpu_s"`
	EntitledSec float64 `json:"entitled_gpu_s"`
	Ratio       float64 `json:"ratio"`
}

// Summarize computes the figures of a record.
func Summarize(r *Record) Summary {
	s := Summary{Jobs: len(r.Jobs)}
	var jct, bind []float64
	ran := 0.0
	start, last := math.Inf(1), 0.0
	unfinished := false
	for _, j := range r.Jobs {
		start = math.Min(start, j.Submit)
		if j.Completed >= 0 {
			s.Finished++
			jct = append(jct, j.Completed-j.Submit)
			last = math.Max(last, j.Completed)
		} else {
			unfinished = true
		}
		if j.FirstBind >= 0 {
			bind = append(bind, j.FirstBind-j.Submit)
		}
		s.Preemptions += j.Preemptions
		s.LostGPUHours += j.LostGPUSeconds / 3600
		ran += j.RanGPUSeconds
	}
	if len(r.Jobs) == 0 {
		return s
	}
	end := last
	if unfinished {
		end = r.End
	}
	s.Makespan = end - start
	s.AvgJCT, s.P50JCT, s.P95JCT = mean(jct), quantile(jct, 0.5), quantile(jct, 0.95)
	s.AvgFirstBind, s.P50FirstBind, s.P95FirstBind = mean(bind), quantile(bind, 0.5), quantile(bind, 0.95)
	if s.Makespan > 0 && r.Capacity > 0 {
		held := heldBetween(r.Holds, start, end, "")
		s.GPUUtil = held / (float64(r.Capacity) * s.Makespan)
		s.RunUtil = ran / (float64(r.Capacity) * s.Makespan)
		step := s.Makespan / 10
		for i := range 10 {
			a := start + float64(i)*step
			s.Util = append(s.Util, heldBetween(r.Holds, a, a+step, "")/(float64(r.Capacity)*step))
		}
	}
	s.Shares = shares(r, start, end)
	var sum, sq float64
	for _, sh := range s.Shares {
		sum += sh.Ratio
		sq += sh.Ratio * sh.Ratio
	}
	if sq > 0 {
		s.Jain = sum * sum / (float64(len(s.Shares)) * sq)
	}
	return s
}

// heldBetween is the GPU-seconds held within [a, b] (by namespace ns, or
// all if ns is "").
func heldBetween(hs []Hold, a, b float64, ns string) float64 {
	total := 0.0
	for _, h := range hs {
		if ns != "" && h.Namespace != ns {
			continue
		}
		to := h.To
		if to < 0 {
			to = b
		}
		if d := math.Min(to, b) - math.Max(h.From, a); d > 0 {
			total += d * float64(h.GPUs)
		}
	}
	return total
}

// shares integrates each namespace's max-min fair entitlement over
// [start, end] and compares it with the GPU-time it held.
func shares(r *Record, start, end float64) []Share {
	type change struct {
		t    float64
		ns   string
		gpus int
	}
	var ch []change
	nsSet := map[string]bool{}
	for _, j := range r.Jobs {
		nsSet[j.Namespace] = true
		ch = append(ch, change{j.Submit, j.Namespace, j.GPUs})
		if j.Completed >= 0 {
			ch = append(ch, change{j.Completed, j.Namespace, -j.GPUs})
		}
	}
	sort.SliceStable(ch, func(a, b int) bool { return ch[a].t < ch[b].t })
	names := make([]string, 0, len(nsSet))
	for ns := range nsSet {
		names = append(names, ns)
	}
	slices.Sort(names)
	demand := map[string]int{}
	entitled := map[string]float64{}
	at := start
	for i := 0; i <= len(ch); i++ {
		t := end
		if i < len(ch) {
			t = math.Min(ch[i].t, end)
		}
		if dt := t - at; dt > 0 {
			for ns, g := range fairShares(demand, float64(r.Capacity), names) {
				entitled[ns] += g * dt
			}
			at = t
		}
		if i < len(ch) {
			demand[ch[i].ns] += ch[i].gpus
		}
	}
	out := make([]Share, 0, len(names))
	for _, ns := range names {
		sh := Share{Namespace: ns, HeldGPUSec: heldBetween(r.Holds, start, end, ns), EntitledSec: entitled[ns]}
		if sh.EntitledSec > 0 {
			sh.Ratio = sh.HeldGPUSec / sh.EntitledSec
		}
		out = append(out, sh)
	}
	return out
}

// fairShares is the max-min fair division of capacity among the
// namespaces' demands (water-filling): each gets an equal part of what is
// left, capped at its demand, the surplus divided again among the rest.
func fairShares(demand map[string]int, capacity float64, names []string) map[string]float64 {
	out := map[string]float64{}
	var open []string
	for _, ns := range names {
		if demand[ns] > 0 {
			open = append(open, ns)
		}
	}
	left := capacity
	for len(open) > 0 && left > 1e-12 {
		part := left / float64(len(open))
		var next []string
		given := 0.0
		for _, ns := range open {
			want := float64(demand[ns]) - out[ns]
			g := math.Min(part, want)
			out[ns] += g
			given += g
			if want > part {
				next = append(next, ns)
			}
		}
		left -= given
		if len(next) == len(open) {
			break // every one took a full part: the capacity is spent
		}
		open = next
	}
	return out
}

func mean(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	s := 0.0
	for _, v := range x {
		s += v
	}
	return s / float64(len(x))
}

// quantile is the empirical (nearest-rank, lower) quantile, 0 for no
// data, as the simulator's metrics compute it (gonum's stat.Empirical).
func quantile(x []float64, p float64) float64 {
	if len(x) == 0 {
		return 0
	}
	y := slices.Clone(x)
	slices.Sort(y)
	return stat.Quantile(p, stat.Empirical, y, nil)
}
