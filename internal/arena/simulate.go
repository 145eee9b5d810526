package arena

import (
	"strings"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/experiment"
	"github.com/gandiva-sched/gandiva/internal/metrics"
	"github.com/gandiva-sched/gandiva/internal/policy/registry"
	"github.com/gandiva-sched/gandiva/internal/sim"
)

// SimFigures are the simulator's figures of a run, beside the arena's.
type SimFigures struct {
	AvgJCT   float64 `json:"avg_jct_s"`
	P50JCT   float64 `json:"p50_jct_s"`
	P95JCT   float64 `json:"p95_jct_s"`
	Makespan float64 `json:"makespan_s"`
	GPUUtil  float64 `json:"gpu_utilization"`
	// Ratio is the arena's average JCT ÷ the simulator's.
	Ratio float64 `json:"arena_over_sim_avg_jct"`
	// The average JCT split in two, over the jobs finished in both: from
	// submission to the first start (in the arena: all pods Running), and
	// from there to the end; the arena's, then the simulator's.
	ArenaWait float64 `json:"arena_avg_wait_s"`
	ArenaRun  float64 `json:"arena_avg_run_s"`
	SimWait   float64 `json:"sim_avg_wait_s"`
	SimRun    float64 `json:"sim_avg_run_s"`
}

// Simulated is the simulator's run of one scheduler's policy.
type Simulated struct {
	Summary metrics.Summary
	// Jobs by trace job name.
	Jobs map[string]metrics.Job
}

// AddSim sets each gandiva result's Sim from the simulator's runs.
func AddSim(res []Result, plan *Plan, sims map[string]Simulated) {
	name := map[string]string{}
	for _, j := range plan.Jobs {
		name[j.Key()] = j.Spec.Name
	}
	for i := range res {
		s, ok := sims[res[i].Scheduler]
		if !ok || res[i].Status == "" || strings.HasPrefix(res[i].Status, "failed") {
			continue
		}
		m := s.Summary
		f := &SimFigures{AvgJCT: m.AvgJCT, P50JCT: m.P50JCT, P95JCT: m.P95JCT, Makespan: m.Makespan, GPUUtil: m.GPUUtil}
		if m.AvgJCT > 0 {
			f.Ratio = res[i].AvgJCT / m.AvgJCT
		}
		if rec := res[i].Record; rec != nil {
			n := 0
			for _, j := range rec.Jobs {
				sj, ok := s.Jobs[name[j.Key]]
				if !ok || j.Completed < 0 || j.FirstRun < 0 || sj.End < 0 || sj.FirstStart < 0 {
					continue
				}
				n++
				f.ArenaWait += j.FirstRun - j.Submit
				f.ArenaRun += j.Completed - j.FirstRun
				f.SimWait += sj.FirstStart - sj.Submit
				f.SimRun += sj.End - sj.FirstStart
			}
			if n > 0 {
				f.ArenaWait, f.ArenaRun, f.SimWait, f.SimRun = f.ArenaWait/float64(n), f.ArenaRun/float64(n), f.SimWait/float64(n), f.SimRun/float64(n)
			}
		}
		res[i].Sim = f
	}
}

// Simulate runs the plan's trace in `gandiva sim` under each gandiva
// scheduler's simulator policy (SimPolicy), on the same cluster with the
// same performance model and seed, and returns the simulator's runs keyed
// by scheduler (for the arena's validation: its gandiva rows against the
// simulator's).
func Simulate(p *Plan, scheds []Scheduler, perf sim.PerfModel, seed uint64) (map[string]Simulated, error) {
	out := map[string]Simulated{}
	specs := make([]*cluster.JobSpec, len(p.Jobs))
	for i, j := range p.Jobs {
		specs[i] = j.Spec
	}
	for _, s := range scheds {
		if s.Kind != "gandiva" {
			continue
		}
		pol := s.SimPolicy
		if pol == "" {
			pol = s.Policy
		}
		names, params, err := registry.Parse(pol)
		if err != nil {
			return nil, err
		}
		res, err := experiment.Compare(experiment.Setup{Cluster: p.Cluster, Jobs: specs, Policies: names, Params: params,
			Seed: seed, Perf: perf, Parallel: 1})
		if err != nil {
			return nil, err
		}
		run := res[0].Records()
		sd := Simulated{Summary: metrics.Summarize(run), Jobs: map[string]metrics.Job{}}
		for _, j := range run.Jobs {
			sd.Jobs[j.Name] = j
		}
		out[s.String()] = sd
	}
	return out, nil
}
