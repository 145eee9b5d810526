package kube

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/registry"
)

// engineIntent is the simple version of an intent: read from the
// engine's job state (what reconcile read before Kubernetes had an
// executor).
func engineIntent(e *engine.Engine, x *kexec, id cluster.JobID) intent {
	j := e.Job(id)
	switch {
	case j == nil:
		return intent{}
	case j.State.Terminal():
		return intent{killed: j.State == cluster.Cancelled || j.State == cluster.Failed}
	case !j.State.Holding():
		return intent{}
	}
	return intent{run: true, gpus: j.GPUs, place: x.placement(j.GPUs), moving: j.State == cluster.Migrating}
}

func sameIntent(a, b intent) bool {
	return a.run == b.run && a.killed == b.killed && a.moving == b.moving && slices.Equal(a.gpus, b.gpus) && a.place.equal(b.place)
}

func (in intent) String() string {
	return fmt.Sprintf("{run %v killed %v moving %v gpus %v place %v}", in.run, in.killed, in.moving, in.gpus, in.place)
}

// In every test of the package that runs a scheduler in this process, the
// loop holds its executor's intents against the engine's state after each
// step.
func init() {
	intentCheck = func(s *Scheduler) {
		for _, ws := range s.byID {
			if ws == nil {
				continue
			}
			if got, want := s.x.get(ws.id), engineIntent(s.eng, s.x, ws.id); !sameIntent(got, want) {
				panic(fmt.Sprintf("kube: intent of %s is %v, the engine's state says %v", ws.w.key, got, want))
			}
		}
	}
}

// TestExecutorIntentsFollowEngine drives an engine with Kubernetes'
// executor through random workloads and events (finishes, failures,
// cancels, nodes lost and back, migrations done) under several policies,
// and after every round and event holds each job's intent against what
// the engine's state says.
func TestExecutorIntentsFollowEngine(t *testing.T) {
	for _, pol := range []string{"tiresias-l", "gandiva", "gandiva-fair", "fifo"} {
		if !slices.Contains(registry.Names(), pol) {
			continue
		}
		for seed := range uint64(4) {
			t.Run(fmt.Sprintf("%s/%d", pol, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 7))
				c := &cluster.Cluster{Name: "kubernetes"}
				names := []string{}
				for i := range 4 {
					if _, err := c.AddServer(fmt.Sprintf("n%d", i), "V100", 4, "r", 0, 64); err != nil {
						t.Fatal(err)
					}
					names = append(names, fmt.Sprintf("n%d", i))
				}
				p, err := registry.New(pol, policy.Config{})
				if err != nil {
					t.Fatal(err)
				}
				x := &kexec{c: c, node: func(sv cluster.ServerID) string { return names[sv] }}
				fail := engine.FailurePolicy{MaxAttempts: 1}
				// Kubernetes' engine options with start-ups not charged
				// (--start-up-grace): start-ups known, ended by EvReady
				e := engine.New(c, p, x, engineOptions(Options{StartUpGrace: 10 * time.Minute}, clock{}, &fail, nil))
				apply := func(ev cluster.Event) {
					var ids []cluster.JobID
					if ev.Kind == cluster.EvNodeDown {
						ids = x.on(ev.Node)
					} else if ev.Job != cluster.NoJob {
						ids = []cluster.JobID{ev.Job}
					}
					_ = e.Apply(ev) // (stale events are refused: nothing changes)
					for _, id := range ids {
						x.settle(id, e.Job(id).State)
					}
				}
				var jobs []cluster.JobID
				check := func(when string) {
					t.Helper()
					for _, id := range jobs {
						if got, want := x.get(id), engineIntent(e, x, id); !sameIntent(got, want) {
							t.Fatalf("%s: job %d: intent %v, engine says %v", when, id, got, want)
						}
					}
				}
				now := 1.0
				for step := range 300 {
					now += float64(1 + rng.IntN(60))
					switch k := rng.IntN(10); {
					case k < 4:
						sizes := []int{1, 1, 2, 4, 8}
						id, err := e.Submit(now, &cluster.JobSpec{Name: fmt.Sprint("j", step), User: fmt.Sprint("u", rng.IntN(3)),
							GPUs: sizes[rng.IntN(len(sizes))], Iters: 1000, IterTime: 1})
						if err != nil {
							t.Fatal(err)
						}
						jobs = append(jobs, id)
					case k == 4 && len(jobs) > 0:
						apply(cluster.Event{Time: now, Kind: cluster.EvFinish, Job: jobs[rng.IntN(len(jobs))]})
					case k == 5 && len(jobs) > 0:
						apply(cluster.Event{Time: now, Kind: cluster.EvFail, Job: jobs[rng.IntN(len(jobs))], Reason: "pod failed"})
					case k == 6 && len(jobs) > 0:
						apply(cluster.Event{Time: now, Kind: cluster.EvCancel, Job: jobs[rng.IntN(len(jobs))], Reason: "deleted"})
					case k == 7:
						sv := cluster.ServerID(rng.IntN(len(names)))
						if e.Snapshot().Servers[sv].Up {
							apply(cluster.Event{Time: now, Kind: cluster.EvNodeDown, Node: sv, Reason: "lost"})
						} else {
							apply(cluster.Event{Time: now, Kind: cluster.EvNodeUp, Node: sv})
						}
					case k == 8:
						for _, id := range jobs {
							if x.get(id).moving {
								apply(cluster.Event{Time: now, Kind: cluster.EvActionDone, Job: id})
							}
						}
					case k == 9:
						for _, id := range jobs {
							if e.Job(id).StartingUp && rng.IntN(2) == 0 {
								apply(cluster.Event{Time: now, Kind: cluster.EvReady, Job: id, Node: cluster.NoServer})
							}
						}
					}
					check(fmt.Sprintf("step %d, after the event", step))
					if _, err := e.Round(now); err != nil {
						t.Fatal(err)
					}
					check(fmt.Sprintf("step %d, after the round", step))
				}
			})
		}
	}
}

// TestExecutorTouched: Execute notes the jobs whose intent it changed,
// once taken.
func TestExecutorTouched(t *testing.T) {
	c := &cluster.Cluster{}
	if _, err := c.AddServer("a", "V100", 2, "r", 0, 0); err != nil {
		t.Fatal(err)
	}
	x := &kexec{c: c, node: func(cluster.ServerID) string { return "a" }}
	x.Execute(0, []engine.Applied{
		{Action: cluster.Action{Kind: cluster.Start, Job: 2, GPUs: []cluster.GPUID{0, 1}}},
		{Action: cluster.Action{Kind: cluster.Kill, Job: 0}},
	})
	if got := fmt.Sprint(x.take()); got != "[2 0]" {
		t.Fatalf("touched %s, want [2 0]", got)
	}
	if len(x.take()) != 0 {
		t.Fatal("touched twice")
	}
	if in := x.get(2); !in.run || in.place["a"] != 2 || in.moving {
		t.Fatalf("intent of job 2: %v", in)
	}
	if in := x.get(0); in.run || !in.killed {
		t.Fatalf("intent of job 0: %v", in)
	}
	if in := x.get(9); in.run || in.killed {
		t.Fatalf("intent of an unknown job: %v", in)
	}
}
