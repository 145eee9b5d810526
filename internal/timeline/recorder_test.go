package timeline_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/registry"
	"github.com/gandiva-sched/gandiva/internal/sim"
	"github.com/gandiva-sched/gandiva/internal/timeline"
	"github.com/gandiva-sched/gandiva/internal/trace"
)

// trio is what every random run feeds: a recorder that scans, one that is
// told what changed (Options.Noted), and the brute-force builder.
type trio struct {
	scan, noted *timeline.Recorder
	b           *brute
	obs         int
}

func newTrio(o timeline.Options) *trio {
	on := o
	on.Noted = true
	scan := timeline.NewRecorder(o)
	return &trio{scan: scan, noted: timeline.NewRecorder(on), b: newBrute(scan.Kinds(), o.Classify, o.NoParked)}
}

func (tr *trio) observe(s *cluster.Snapshot) error {
	tr.obs++
	if err := tr.scan.Observe(s); err != nil {
		return err
	}
	if err := tr.noted.Observe(s); err != nil {
		return err
	}
	tr.b.observe(s)
	return nil
}

func (tr *trio) check(jobs int) error {
	if err := compare(tr.b, tr.scan.Data(timeline.Query{}), jobs); err != nil {
		return fmt.Errorf("scanning recorder: %w", err)
	}
	if err := compare(tr.b, tr.noted.Data(timeline.Query{}), jobs); err != nil {
		return fmt.Errorf("noted recorder: %w", err)
	}
	return nil
}

// randomRun drives a real engine under a real policy with random events
// (submissions, completions, failures, cancels, profiles, lost nodes,
// migrations done or failed), observing after every event and every round,
// and checks the recorders against the brute-force builder as it goes.
func randomRun(t *testing.T, seed uint64, pol string, preRun bool, seen map[timeline.Kind]int) {
	rng := rand.New(rand.NewPCG(seed, 7))
	c, err := cluster.NewBuilder("rand", nil).
		Add(cluster.ServerGroup{Type: "V100", Count: 2, GPUs: 4, Domain: 0, HostMemGiB: 8}).
		Add(cluster.ServerGroup{Type: "K80", Count: 1, GPUs: 2, Domain: 1, HostMemGiB: 64}).Build()
	if err != nil {
		t.Fatal(err)
	}
	p, err := registry.New(pol, policy.Config{Seed: seed, Params: params(pol)})
	if err != nil {
		t.Fatal(err)
	}
	e := engine.New(c, p, nil, engine.Options{PreRun: preRun})
	tr := newTrio(timeline.Options{})
	now := 0.0
	jobs := 0
	apply := func(ev cluster.Event) {
		ev.Time = now
		err := e.Apply(ev)
		if errors.Is(err, engine.ErrStale) {
			return
		}
		if err != nil {
			t.Fatalf("seed %d: %s: %v", seed, ev, err)
		}
		tr.noted.NoteEvent(ev)
		if err := tr.observe(e.Snapshot()); err != nil {
			t.Fatal(err)
		}
	}
	pick := func(ok func(*cluster.Job) bool) *cluster.Job {
		var cand []*cluster.Job
		for _, j := range e.Jobs() {
			if ok(j) {
				cand = append(cand, j)
			}
		}
		if len(cand) == 0 {
			return nil
		}
		return cand[rng.IntN(len(cand))]
	}
	for step := range 400 {
		if rng.IntN(3) == 0 {
			now += rng.ExpFloat64() * 20
		}
		switch r := rng.IntN(20); {
		case r < 5 && jobs < 60:
			jobs++
			spec := &cluster.JobSpec{Name: fmt.Sprintf("j%d", jobs), User: fmt.Sprintf("u%d", rng.IntN(3)),
				GPUs: []int{1, 1, 1, 2, 4}[rng.IntN(5)], Iters: 1000, IterTime: 0.5, MemGiB: float64(rng.IntN(8))}
			if rng.IntN(6) == 0 {
				spec.MinGPUs, spec.MaxGPUs = 1, 4
			}
			if _, err := e.Submit(now, spec); err != nil {
				t.Fatal(err)
			}
			if err := tr.observe(e.Snapshot()); err != nil {
				t.Fatal(err)
			}
		case r < 8:
			if j := pick(func(j *cluster.Job) bool { return j.State.Holding() || j.State == cluster.Suspended }); j != nil {
				apply(cluster.Event{Kind: cluster.EvFinish, Job: j.ID, Done: 1000})
			}
		case r < 9:
			if j := pick(func(j *cluster.Job) bool { return j.State.Holding() }); j != nil {
				apply(cluster.Event{Kind: cluster.EvFail, Job: j.ID, Node: -1, UserError: rng.IntN(2) == 0, Reason: "random"})
			}
		case r < 10:
			if j := pick(func(j *cluster.Job) bool { return !j.State.Terminal() }); j != nil {
				apply(cluster.Event{Kind: cluster.EvCancel, Job: j.ID})
			}
		case r < 13:
			if j := pick(func(j *cluster.Job) bool { return j.State.Holding() }); j != nil {
				apply(cluster.Event{Kind: cluster.EvProfile, Job: j.ID, Done: j.Done + 10, IterTime: 0.3 + rng.Float64()})
			}
		case r < 15:
			if j := pick(func(j *cluster.Job) bool { return j.State == cluster.Migrating }); j != nil {
				if rng.IntN(4) == 0 {
					apply(cluster.Event{Kind: cluster.EvActionFailed, Job: j.ID, Reason: "random"})
				} else {
					apply(cluster.Event{Kind: cluster.EvActionDone, Job: j.ID})
				}
			}
		case r < 16:
			s := cluster.ServerID(rng.IntN(len(c.Servers)))
			if e.Snapshot().Servers[s].Up {
				apply(cluster.Event{Kind: cluster.EvNodeDown, Node: s, Reason: "random"})
			} else {
				apply(cluster.Event{Kind: cluster.EvNodeUp, Node: s})
			}
		default:
			res, err := e.Round(now)
			if err != nil {
				t.Fatal(err)
			}
			tr.noted.NoteApplied(res.Applied)
			if err := tr.observe(e.Snapshot()); err != nil {
				t.Fatal(err)
			}
			if res.WakeAt > now && rng.IntN(2) == 0 {
				now = res.WakeAt
				apply(cluster.Event{Kind: cluster.EvTick})
			}
		}
		if err := e.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
		if step%25 == 0 {
			if err := tr.check(len(e.Jobs())); err != nil {
				t.Fatalf("seed %d policy %s step %d: %v", seed, pol, step, err)
			}
		}
	}
	if err := tr.check(len(e.Jobs())); err != nil {
		t.Fatalf("seed %d policy %s: %v", seed, pol, err)
	}
	d := tr.noted.Data(timeline.Query{})
	for _, row := range d.GPUs {
		for _, s := range row {
			seen[d.Kinds[s.Kind].Kind]++
		}
	}
	for _, j := range d.Jobs {
		for _, s := range j.Lane {
			seen["lane:"+d.Kinds[s.Kind].Kind]++
		}
	}
}

func params(pol string) map[string]string {
	switch pol {
	case "gandiva":
		return map[string]string{"quantum": "30"}
	}
	return nil
}

func TestRecorderMatchesBruteForceOnRandomEngineRuns(t *testing.T) {
	seen := map[timeline.Kind]int{}
	for _, pol := range []string{"gandiva", "gandiva-fair", "tiresias-l", "fifo", "optimus"} {
		for seed := range uint64(12) {
			randomRun(t, seed, pol, seed%3 == 0, seen)
		}
	}
	// the runs must have shown every kind the engine's states give
	for _, k := range []timeline.Kind{timeline.Running, timeline.Packed, timeline.Migrating, timeline.PreRun, timeline.Suspended,
		"lane:" + timeline.Queued, "lane:" + timeline.Running, "lane:" + timeline.Packed, "lane:" + timeline.Suspended, "lane:" + timeline.Migrating} {
		if seen[k] == 0 {
			t.Errorf("no %s segment in any run: %v", k, seen)
		}
	}
	t.Logf("segments by kind: %v", seen)
}

// noting wraps a policy to note, for a Noted recorder, the jobs of the
// events each round sees and of the actions it returns: how a driver that
// cannot be changed (the simulator, here) tells the recorder what changed.
type noting struct {
	policy.Policy
	r *timeline.Recorder
}

func (n noting) Schedule(s *cluster.Snapshot) cluster.Decision {
	for _, ev := range s.Events {
		n.r.NoteEvent(ev)
	}
	d := n.Policy.Schedule(s)
	for _, a := range d.Actions {
		n.r.Note(a.Job)
	}
	return d
}

// TestRecorderMatchesBruteForceInTheSimulator runs the simulator on
// synthetic workloads under policies that time-slice, pack, migrate and
// resize, with failures and pre-runs, observing after every round.
func TestRecorderMatchesBruteForceInTheSimulator(t *testing.T) {
	c, err := cluster.NewBuilder("sim", nil).
		Add(cluster.ServerGroup{Type: "V100", Count: 4, GPUs: 4, Domain: 0, HostMemGiB: 64}).
		Add(cluster.ServerGroup{Type: "K80", Count: 2, GPUs: 4, Domain: 1, HostMemGiB: 64}).Build()
	if err != nil {
		t.Fatal(err)
	}
	for _, pol := range []string{"gandiva", "gandiva-fair", "tiresias-l"} {
		for seed := range uint64(3) {
			t.Run(fmt.Sprintf("%s/seed=%d", pol, seed), func(t *testing.T) {
				jobs := trace.Synthetic(trace.SynthConfig{Jobs: 150, Seed: seed, Load: 30, MaxGPUs: 8, MaxDuration: 7200, Users: 4})
				p, err := registry.New(pol, policy.Config{Seed: seed})
				if err != nil {
					t.Fatal(err)
				}
				tr := newTrio(timeline.Options{})
				var oerr error
				f := sim.PhillyFailures()
				res, err := sim.Run(sim.Config{Cluster: c, Jobs: jobs, Policy: noting{p, tr.noted}, Seed: seed, Check: true,
					Failures: &f, Engine: engine.Options{PreRun: seed == 1},
					Observe: func(_ float64, e *engine.Engine) {
						if oerr == nil {
							oerr = tr.observe(e.Snapshot())
						}
					}})
				if err != nil {
					t.Fatal(err)
				}
				if oerr != nil {
					t.Fatal(oerr)
				}
				if err := tr.check(len(jobs) * 2); err != nil {
					t.Fatal(err)
				}
				d := tr.scan.Data(timeline.Query{})
				n := 0
				for _, row := range d.GPUs {
					n += len(row)
				}
				if n == 0 || res.Stats.Starts == 0 {
					t.Fatalf("nothing recorded: %d segments, %d starts", n, res.Stats.Starts)
				}
				t.Logf("%d observations, %d GPU segments, %d suspends, %d packs, %d migrations", tr.obs, n,
					res.Stats.Suspends, res.Stats.Packs, res.Stats.Migrations)
			})
		}
	}
}

// TestObserveRejectsTimeGoingBack: a snapshot older than the last one is an error.
func TestObserveRejectsTimeGoingBack(t *testing.T) {
	r := timeline.NewRecorder(timeline.Options{})
	c, _ := cluster.NewBuilder("x", nil).Add(cluster.ServerGroup{Type: "V100", Count: 1, GPUs: 1}).Build()
	e := engine.New(c, mustPolicy(t, "fifo"), nil, engine.Options{})
	if _, err := e.Round(10); err != nil {
		t.Fatal(err)
	}
	if err := r.Observe(e.Snapshot()); err != nil {
		t.Fatal(err)
	}
	s := *e.Snapshot()
	s.Now = 5
	if err := r.Observe(&s); err == nil {
		t.Fatal("an older snapshot was accepted")
	}
}

func mustPolicy(t testing.TB, name string) policy.Policy {
	p, err := registry.New(name, policy.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}
