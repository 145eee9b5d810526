package sim_test

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/codec"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/registry"
	"github.com/gandiva-sched/gandiva/internal/sim"
)

// restartEvery: one round in so many, on average, restarts the engine.
const restartEvery = 8

// forkJobs is randomJobs with what exercises every policy's state: groups
// (early feedback), elastic jobs (grow-shrink), several users (fair shares).
func forkJobs(seed uint64, n int) []*cluster.JobSpec {
	jobs := randomJobs(seed, n)
	rng := rand.New(rand.NewPCG(seed, 9))
	for i, j := range jobs {
		if rng.IntN(3) == 0 {
			j.Group = fmt.Sprintf("g%d", i%4)
		}
		if j.GPUs >= 2 && rng.IntN(2) == 0 {
			j.MinGPUs, j.MaxGPUs = 1, 2*j.GPUs
		}
	}
	return jobs
}

// forkRun is one run of a policy on the fork workload; restart, when set,
// replaces the engine after some rounds (sim.Config.Restart): one in
// restartEvery, chosen at random (seeded). It returns the run's event log
// and results, or the error that stopped it.
func forkRun(t *testing.T, name string, seed uint64, restart func(policy.Config, engine.Options) func(float64, *engine.Engine, engine.Executor) (*engine.Engine, error)) (string, error) {
	t.Helper()
	c, err := cluster.Load("tiresias-n4g4")
	if err != nil {
		t.Fatal(err)
	}
	pcfg := policy.Config{Seed: seed}
	if name == "gandiva" {
		pcfg.Params = map[string]string{"quantum": "30"}
	}
	p, err := registry.New(name, pcfg)
	if err != nil {
		t.Fatal(err)
	}
	fail := sim.PhillyFailures()
	fail.InfraPerGPUHour = 0.2
	opts := engine.Options{PreRun: true, CheckSnapshot: true}
	var log strings.Builder
	cfg := sim.Config{Cluster: c, Jobs: forkJobs(seed, 40), Policy: p, Failures: &fail, Seed: seed, Check: true, Engine: opts,
		Log: func(l string) { log.WriteString(l); log.WriteByte('\n') },
		Curve: func(s *cluster.JobSpec, done float64) float64 {
			return 1 - math.Exp(-done/(200+float64(len(s.Name))*50))
		},
		ReportEvery: func(*cluster.JobSpec) float64 { return 150 },
		Settings:    []cluster.Event{{Time: 600, Kind: cluster.EvSetting, Key: "tickets/ann", Value: "3"}}}
	if name != "gandiva-fair" {
		cfg.Settings = nil
	}
	if restart != nil {
		rng := rand.New(rand.NewPCG(seed, 77))
		again := restart(pcfg, opts)
		cfg.Restart = func(now float64, e *engine.Engine, x engine.Executor) (*engine.Engine, error) {
			if rng.IntN(restartEvery) != 0 {
				return e, nil
			}
			return again(now, e, x)
		}
	}
	res, err := sim.Run(cfg)
	if err != nil {
		return "", fmt.Errorf("%s seed %d: %w", name, seed, err)
	}
	out, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	return log.String() + string(out), nil
}

// restartFrom builds the Restart of a run of policy name: the engine's
// export, encoded and decoded (as the server's snapshots are), restored
// over the same cluster and executor with a fresh policy. skip, when set,
// leaves fields of the policy's state out (the test that the test fails).
func restartFrom(t *testing.T, name string, skip []codec.Field) func(policy.Config, engine.Options) func(float64, *engine.Engine, engine.Executor) (*engine.Engine, error) {
	return func(pcfg policy.Config, opts engine.Options) func(float64, *engine.Engine, engine.Executor) (*engine.Engine, error) {
		return func(_ float64, e *engine.Engine, x engine.Executor) (*engine.Engine, error) {
			st, err := e.Export()
			if err != nil {
				return nil, err
			}
			if skip != nil {
				if st.PolicyState, err = skipFields(e, pcfg, name, skip); err != nil {
					return nil, err
				}
			}
			data, err := codec.Marshal(st, nil)
			if err != nil {
				return nil, err
			}
			var back engine.State
			if err := codec.Unmarshal(data, &back, nil); err != nil {
				return nil, err
			}
			pol, err := registry.New(name, pcfg)
			if err != nil {
				return nil, err
			}
			return engine.Restore(e.Cluster(), pol, x, opts, &back)
		}
	}
}

// skipFields is the policy's state with some fields left out: restored
// into a fresh policy, those fields keep their fresh values.
func skipFields(e *engine.Engine, pcfg policy.Config, name string, skip []codec.Field) ([]byte, error) {
	snap := e.Snapshot()
	refs := []codec.Extern{
		codec.ExternOf(func(c *cluster.Cluster) (int64, bool) { return 0, c == e.Cluster() },
			func(int64) (*cluster.Cluster, error) { return e.Cluster(), nil }),
		codec.ExternOf(func(s *cluster.Snapshot) (int64, bool) { return 0, s == snap },
			func(int64) (*cluster.Snapshot, error) { return snap, nil }),
		codec.ExternOf(func(j *cluster.Job) (int64, bool) { return int64(j.ID), e.Job(j.ID) == j },
			func(id int64) (*cluster.Job, error) { return e.Job(cluster.JobID(id)), nil }),
	}
	data, err := codec.Marshal(e.Policy(), &codec.Options{Externs: refs, Skip: skip})
	if err != nil {
		return nil, err
	}
	// decoded into a fresh policy (the skipped fields fresh), then encoded
	// as a whole, as Export would have
	fresh, err := registry.New(name, pcfg)
	if err != nil {
		return nil, err
	}
	if err := codec.Unmarshal(data, fresh, &codec.Options{Externs: refs, Skip: skip}); err != nil {
		return nil, err
	}
	return policy.MarshalState(fresh, policy.Refs{Cluster: e.Cluster(), Snapshot: snap, Jobs: e.Jobs()})
}

// TestRestoreContinuesExactly: for every registered policy, several seeds,
// with pre-runs, failures, early feedback and elastic jobs, a run whose
// engine and policy are exported, encoded, decoded and restored into a
// fresh engine and a fresh policy after every round is the same run as one
// left alone: the same event and action log, the same results, the same
// counters. A piece of state that Export or the policy's state leaves out
// shows here (TestRestoreTestFails).
func TestRestoreContinuesExactly(t *testing.T) {
	seeds := []uint64{1, 2, 3}
	if testing.Short() {
		seeds = seeds[:1]
	}
	for _, name := range registry.Names() {
		for _, seed := range seeds {
			want, err := forkRun(t, name, seed, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := forkRun(t, name, seed, restartFrom(t, name, nil))
			if err != nil {
				t.Fatalf("restored: %v", err)
			}
			if got != want {
				t.Errorf("%s seed %d: the restored run differs from the plain one:\n%s", name, seed, firstDiff(got, want))
			}
		}
	}
}

// TestRestoreTestFails: the test above fails when a policy's state loses a
// piece that matters: each of these fields, left out of the state.
func TestRestoreTestFails(t *testing.T) {
	for _, tc := range []struct {
		policy string
		field  codec.Field
	}{
		{"gandiva", field[gandivaPolicy]("pairs")},
		{"gandiva", field[gandivaState]("Jobs")},
		{"tiresias-l", field[tiresiasPolicy]("jobs")},
		{"gandiva-fair", field[fairPolicy]("users")},
		{"optimus", field[optimusEstimator]("speeds")},
		{"philly", field[phillyPolicy]("waiting")},
	} {
		t.Run(tc.policy+"/"+tc.field.Name, func(t *testing.T) {
			if tc.field.Type == nil {
				t.Fatalf("no type for %s", tc.policy)
			}
			differs := false
			for seed := uint64(1); seed <= 3 && !differs; seed++ {
				want, err := forkRun(t, tc.policy, seed, nil)
				if err != nil {
					t.Fatal(err)
				}
				differs = forkRunRecover(t, tc.policy, seed, restartFrom(t, tc.policy, []codec.Field{tc.field})) != want
			}
			if !differs {
				t.Errorf("%s without its field %s.%s: the restored runs are the same as the plain ones; the test would not see it lost",
					tc.policy, tc.field.Type, tc.field.Name)
			}
		})
	}
}

// forkRunRecover is forkRun, with an error or a panic (a policy whose
// state lost a piece may index what it no longer has) as its result.
func forkRunRecover(t *testing.T, name string, seed uint64, restart func(policy.Config, engine.Options) func(float64, *engine.Engine, engine.Executor) (*engine.Engine, error)) (out string) {
	defer func() {
		if r := recover(); r != nil {
			out = fmt.Sprint("panic: ", r)
		}
	}()
	out, err := forkRun(t, name, seed, restart)
	if err != nil {
		return "error: " + err.Error()
	}
	return out
}

func firstDiff(a, b string) string {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < min(len(la), len(lb)); i++ {
		if la[i] != lb[i] {
			return fmt.Sprintf("line %d:\n  got  %.300s\n  want %.300s", i+1, la[i], lb[i])
		}
	}
	return fmt.Sprintf("lengths %d and %d lines", len(la), len(lb))
}

// The policies' types, found through a policy of each kind (their
// packages keep them unexported where they are).
type (
	gandivaPolicy    struct{}
	gandivaState     struct{}
	tiresiasPolicy   struct{}
	fairPolicy       struct{}
	optimusEstimator struct{}
	phillyPolicy     struct{}
)

var typeOf = map[reflect.Type]func() reflect.Type{
	reflect.TypeFor[gandivaPolicy]():    func() reflect.Type { return policyType("gandiva") },
	reflect.TypeFor[gandivaState]():     func() reflect.Type { return fieldType(policyType("gandiva"), "st") },
	reflect.TypeFor[tiresiasPolicy]():   func() reflect.Type { return policyType("tiresias-l") },
	reflect.TypeFor[fairPolicy]():       func() reflect.Type { return policyType("gandiva-fair") },
	reflect.TypeFor[optimusEstimator](): func() reflect.Type { return keyerType("optimus") },
	reflect.TypeFor[phillyPolicy]():     func() reflect.Type { return policyType("philly") },
}

func field[T any](name string) codec.Field {
	return codec.Field{Type: typeOf[reflect.TypeFor[T]()](), Name: name}
}

func policyType(name string) reflect.Type {
	p, err := registry.New(name, policy.Config{})
	if err != nil {
		panic(err)
	}
	return reflect.TypeOf(p).Elem()
}

// keyerType is the type of the Keyer a shortest-first policy holds.
func keyerType(name string) reflect.Type {
	p, err := registry.New(name, policy.Config{})
	if err != nil {
		panic(err)
	}
	return reflect.ValueOf(p).Elem().FieldByName("keyer").Elem().Type().Elem()
}

// fieldType is the struct type of t's field name (through pointers).
func fieldType(t reflect.Type, name string) reflect.Type {
	f, ok := t.FieldByName(name)
	if !ok {
		return nil
	}
	ft := f.Type
	for ft.Kind() == reflect.Pointer {
		ft = ft.Elem()
	}
	return ft
}
