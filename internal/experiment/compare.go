// Package experiment runs simulations: one trace under several policies side
// by side (Compare), and the paper reproductions of `gandiva reproduce`.
package experiment

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/registry"
	"github.com/gandiva-sched/gandiva/internal/sim"
	"github.com/gandiva-sched/gandiva/internal/timeline"
)

// Setup is one trace on one cluster under several policies.
type Setup struct {
	Cluster  *cluster.Cluster
	Jobs     []*cluster.JobSpec
	Policies []string
	// Params holds each policy's parameters (parallel to Policies; may be nil).
	Params []map[string]string
	// Compat selects the Tiresias simulator's semantics: its policy
	// settings (policy.TiresiasCompat) and its performance model.
	Compat   bool
	Seed     uint64
	Horizon  float64
	Failures *sim.Failures
	Check    bool
	// PreRun pre-runs every job's first mini-batch on one GPU (engine
	// Options.PreRun); PreRunIf, when set, only the jobs it returns true for.
	PreRun   bool
	PreRunIf func(*cluster.JobSpec) bool
	// Perf overrides the performance model (zero value: default, or the
	// Tiresias-compatible one when Compat).
	Perf sim.PerfModel
	// Progress receives the jobs ended so far over all policies, and the total.
	Progress func(ended, total int)
	// Parallel bounds concurrent runs (0: GOMAXPROCS).
	Parallel int
	// Observe, when set, gives each run (by policy index) its
	// sim.Config.Observe hook (nil for none); runs go in parallel, so each
	// hook must keep to its own run.
	Observe func(policy int) func(now float64, e *engine.Engine)
	// Timelines, when set, holds a recorder per policy (parallel to
	// Policies; nil entries record nothing): sim.Config.Timeline.
	Timelines []*timeline.Recorder
}

// Compare runs every policy on the same jobs and returns the results in the
// order of s.Policies. Runs are independent and deterministic, so running
// them concurrently changes nothing but the wall time.
func Compare(s Setup) ([]*sim.Result, error) {
	pols := make([]policy.Policy, len(s.Policies))
	for i, name := range s.Policies {
		var params map[string]string
		if i < len(s.Params) {
			params = s.Params[i]
		}
		cfg := policy.Config{Seed: s.Seed, Params: params}
		if s.Compat {
			cfg = policy.TiresiasCompat(cfg)
		}
		p, err := registry.New(name, cfg)
		if err != nil {
			return nil, err
		}
		pols[i] = p
	}
	perf := s.Perf
	if perf.Name == "" {
		perf = sim.DefaultPerf()
		if s.Compat {
			perf = sim.CompatPerf()
		}
	}
	par := s.Parallel
	if par <= 0 {
		par = runtime.GOMAXPROCS(0)
	}
	results := make([]*sim.Result, len(pols))
	errs := make([]error, len(pols))
	ended := make([]atomic.Int64, len(pols))
	total := len(s.Jobs) * len(pols)
	var mu sync.Mutex
	report := func() {
		if s.Progress == nil {
			return
		}
		sum := 0
		for i := range ended {
			sum += int(ended[i].Load())
		}
		mu.Lock()
		s.Progress(sum, total)
		mu.Unlock()
	}
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	for i, p := range pols {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			cfg := sim.Config{Cluster: s.Cluster, Jobs: s.Jobs, Policy: p, Perf: perf, Failures: s.Failures,
				Seed: s.Seed, Horizon: s.Horizon, Check: s.Check, Engine: engine.Options{PreRun: s.PreRun, PreRunIf: s.PreRunIf},
				Progress: func(e, _ int) { ended[i].Store(int64(e)); report() }}
			if s.Observe != nil {
				cfg.Observe = s.Observe(i)
			}
			if i < len(s.Timelines) {
				cfg.Timeline = s.Timelines[i]
			}
			r, err := sim.Run(cfg)
			if err != nil {
				errs[i] = fmt.Errorf("policy %s: %w", p.Name(), err)
				return
			}
			ended[i].Store(int64(len(s.Jobs)))
			report()
			results[i] = r
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return results, nil
}
