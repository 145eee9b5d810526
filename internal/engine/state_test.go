package engine

import (
	"bytes"
	"reflect"
	"slices"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/codec"
	"github.com/gandiva-sched/gandiva/internal/harness/perturb"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/registry"
)

// engineFields says, for every field of Engine, where Export keeps it:
// "state" (a field of State), "derived" (Restore rebuilds it from the
// state) or "config" (Restore is given it). A field added to Engine and
// not here fails TestEngineFieldsClassified: decide where it goes.
var engineFields = map[string]string{
	"c": "config", "pol": "config", "exec": "config", "opts": "config", "fail": "config", "log": "config", "check": "config",
	"now": "state", "jobs": "state", "gpus": "state", "servers": "state", "events": "state", "pending": "state",
	"retries": "state", "nodeErr": "state", "stats": "state", "wakeAt": "state",
	// byName and active from the jobs; dead is empty once active is
	// rebuilt; free from the servers; snap at each Snapshot; applied is
	// the last Result's buffer
	"byName": "derived", "active": "derived", "dead": "derived", "free": "derived", "snap": "derived", "applied": "derived",
	// the last Export's size, a buffer hint only
	"stateSize": "derived",
	// start-ups: families, noClient, sus and cooled in State.StartUps;
	// starting and warmOn from the jobs (restoreStartUps)
	"families": "state", "noClient": "state", "sus": "state", "cooled": "state",
	"starting": "derived", "warmOn": "derived",
	// the view and rules of Options.Constraints (constrain.go), built by New
	"cons": "config",
	// refusals not yet shown to the policy (reject.go): State.Refused and
	// State.Reported
	"refused": "state", "reported": "state",
}

func TestEngineFieldsClassified(t *testing.T) {
	et := reflect.TypeFor[Engine]()
	for i := 0; i < et.NumField(); i++ {
		if _, ok := engineFields[et.Field(i).Name]; !ok {
			t.Errorf("Engine.%s is new: add it to State (Export, Restore) or say how Restore rebuilds it, in engineFields", et.Field(i).Name)
		}
	}
}

// stateEngine builds an engine whose state has something in every list:
// jobs that ran, were suspended, packed, profiled (with neighbours),
// failed and back off, a node failure, a cancelled job's pending kill,
// events not yet shown to the policy, pre-runs, and gandiva's own state.
func stateEngine(t *testing.T) *Engine {
	t.Helper()
	b := cluster.NewBuilder("s", nil)
	b.Add(cluster.ServerGroup{Type: "V100", Count: 2, GPUs: 4, HostMemGiB: 64})
	c, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	pol, err := registry.New("gandiva", policy.Config{Params: map[string]string{"quantum": "10"}})
	if err != nil {
		t.Fatal(err)
	}
	fp := DefaultFailurePolicy()
	e := New(c, pol, nil, Options{PreRun: true, Failure: &fp, PreRunIf: func(s *cluster.JobSpec) bool { return s.Name != "solo" }})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	now := 0.0
	round := func() {
		t.Helper()
		now++
		_, err := e.Round(now)
		must(err)
	}
	for i, g := range []int{1, 2, 4, 1, 1, 2, 4, 1} {
		_, err := e.Submit(now, &cluster.JobSpec{Name: string(rune('a' + i)), User: "u", GPUs: g, Iters: 1000, IterTime: 1, MemGiB: 2, Model: "resnet50"})
		must(err)
	}
	_, err = e.Submit(now, &cluster.JobSpec{Name: "solo", User: "v", GPUs: 1, Iters: 10, IterTime: 1, MinGPUs: 1, MaxGPUs: 2})
	must(err)
	round()
	// pre-runs finish, jobs start
	for _, j := range e.jobs {
		if j.Probe && j.State.Holding() {
			must(e.Apply(cluster.Event{Time: now, Kind: cluster.EvFinish, Job: j.ID, Done: 1}))
		}
	}
	for k := 0; k < 4; k++ {
		round()
		for _, j := range e.jobs {
			if j.State.Holding() {
				must(e.Apply(cluster.Event{Time: now, Kind: cluster.EvProfile, Job: j.ID, Done: float64(10 * k), IterTime: 0.5 + float64(j.ID)/10, HasMetric: true, Metric: 0.1}))
			}
		}
		now += 10
	}
	var failed, cancel *cluster.Job
	for _, j := range e.jobs {
		if j.State.Holding() && !j.Probe {
			if failed == nil {
				failed = j
			} else if cancel == nil {
				cancel = j
			}
		}
	}
	if failed == nil || cancel == nil {
		t.Fatal("not two running jobs")
	}
	must(e.Apply(cluster.Event{Time: now, Kind: cluster.EvFail, Job: failed.ID, Node: cluster.NoServer, Reason: "boom"}))
	round()
	// unshown events and a pending kill
	must(e.Apply(cluster.Event{Time: now, Kind: cluster.EvCancel, Job: cancel.ID}))
	must(e.Apply(cluster.Event{Time: now, Kind: cluster.EvSetting, Key: "k", Value: "v"}))
	// (as if two jobs had been packed: no policy here packs in so few rounds)
	for _, j := range e.jobs {
		if len(j.Profile.Samples) > 0 {
			j.Profile.Samples[0].Neighbors = []cluster.JobID{0}
			break
		}
	}
	// refusals not yet shown to the policy: one of the last round's (as if
	// the engine had refused an action: gandiva asks for none here), then
	// one an executor reported since
	e.refused = append(e.refused, Rejection{Action: cluster.Action{Kind: cluster.Start, Job: 1, GPUs: []cluster.GPUID{2, 3}, Reason: "r"},
		Code: cluster.RejectStale, Reason: "taken"})
	e.Refused(Rejection{Action: cluster.Action{Kind: cluster.Start, Job: 2, GPUs: []cluster.GPUID{5}}, Code: cluster.RejectRetry, Reason: "node refused the pod"})
	if len(e.events) == 0 || len(e.pending) == 0 || len(e.retries) == 0 || len(e.nodeErr[0])+len(e.nodeErr[1]) == 0 || e.wakeAt == 0 {
		t.Fatalf("the engine's lists are not all filled: events %d pending %d retries %d node failures %v wake %v",
			len(e.events), len(e.pending), len(e.retries), e.nodeErr, e.wakeAt)
	}
	return e
}

// restorers are the two ways to restore a decoded state.
var restorers = map[string]func(*cluster.Cluster, policy.Policy, Executor, Options, *State) (*Engine, error){
	"Restore": Restore, "Adopt": Adopt}

// roundTrip exports e's state, encodes, decodes and restores it (with a
// fresh policy), and exports the restored engine.
func roundTrip(t *testing.T, e *Engine, st *State) (*Engine, *State) {
	t.Helper()
	return roundTripWith(t, e, st, Restore)
}

// roundTripWith is roundTrip with Restore or Adopt.
func roundTripWith(t *testing.T, e *Engine, st *State, restore func(*cluster.Cluster, policy.Policy, Executor, Options, *State) (*Engine, error)) (*Engine, *State) {
	t.Helper()
	data, err := codec.Marshal(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	var back State
	if err := codec.Unmarshal(data, &back, nil); err != nil {
		t.Fatal(err)
	}
	pol, err := registry.New("gandiva", policy.Config{Params: map[string]string{"quantum": "10"}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := restore(e.c, pol, nil, e.opts, &back)
	if err != nil {
		t.Fatal(err)
	}
	again, err := r.Export()
	if err != nil {
		t.Fatal(err)
	}
	return r, again
}

// perturbAll changes every field of v in place, recursively: every element
// of its slices, every field of its structs, what its pointers point to
// (except specs, which never change).
func perturbAll(t *testing.T, v reflect.Value) {
	v = perturb.Settable(v)
	switch v.Kind() {
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			perturbAll(t, v.Index(i))
		}
	case reflect.Struct:
		for f := 0; f < v.NumField(); f++ {
			if v.Type().Field(f).Type != reflect.TypeFor[*cluster.JobSpec]() {
				perturbAll(t, v.Field(f))
			}
		}
	case reflect.Pointer:
		if !v.IsNil() {
			perturbAll(t, v.Elem())
		}
	default:
		perturb.Value(t, v)
	}
}

// diffState names the fields of State in which a and b differ.
func diffState(a, b *State) []string {
	var out []string
	va, vb := reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem()
	for f := 0; f < va.NumField(); f++ {
		if !reflect.DeepEqual(perturb.Settable(va.Field(f)).Interface(), perturb.Settable(vb.Field(f)).Interface()) {
			out = append(out, va.Type().Field(f).Name)
		}
	}
	return out
}

func encode(t *testing.T, st *State) []byte {
	t.Helper()
	data, err := codec.Marshal(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestStateRoundTripsEveryField: a state with any field of a job record
// (its profile's, its samples' included) or of the state itself changed
// is restored with that change: a field added to cluster.Job, Profile,
// Sample, GPUState, ServerState, Event, Applied, Stats or State and not
// carried by Export or Restore fails here.
func TestStateRoundTripsEveryField(t *testing.T) {
	e := stateEngine(t)
	check := func(what string, change func(st *State) reflect.Value) {
		t.Helper()
		base, err := e.Export()
		if err != nil {
			t.Fatal(err)
		}
		v := change(base)
		for f := 0; f < v.NumField(); f++ {
			st, _ := e.Export()
			name := v.Type().Field(f).Name
			if skipField[what+"."+name] {
				continue
			}
			perturb.Value(t, change(st).Field(f))
			for how, restore := range restorers {
				_, again := roundTripWith(t, e, st, restore)
				if !bytes.Equal(encode(t, again), encode(t, st)) {
					t.Errorf("%s.%s changed before the export and %s; after them, State's %v differ", what, name, how, diffState(again, st))
				}
			}
		}
	}
	job := func(st *State) *cluster.Job {
		for i := range st.Jobs {
			if j := &st.Jobs[i]; len(j.Profile.Samples) > 0 && len(j.Profile.Samples[0].Neighbors) > 0 && len(j.Profile.Solo) > 0 {
				return j
			}
		}
		t.Fatal("no job was profiled")
		return nil
	}
	check("State", func(st *State) reflect.Value { return reflect.ValueOf(st).Elem() })
	check("Job", func(st *State) reflect.Value { return reflect.ValueOf(job(st)).Elem() })
	check("JobSpec", func(st *State) reflect.Value { return reflect.ValueOf(job(st).Spec).Elem() })
	check("Profile", func(st *State) reflect.Value { return reflect.ValueOf(&job(st).Profile).Elem() })
	check("Sample", func(st *State) reflect.Value { return reflect.ValueOf(&job(st).Profile.Samples[0]).Elem() })
	check("GPUState", func(st *State) reflect.Value {
		for g := range st.GPUs {
			if h := st.GPUs[g].Jobs; len(h) > 0 && int(h[0])+1 < len(st.Jobs) {
				return reflect.ValueOf(&st.GPUs[g]).Elem()
			}
		}
		t.Fatal("no GPU is held")
		return reflect.Value{}
	})
	check("ServerState", func(st *State) reflect.Value { return reflect.ValueOf(&st.Servers[1]).Elem() })
	check("Event", func(st *State) reflect.Value { return reflect.ValueOf(&st.Events[0]).Elem() })
	check("Applied", func(st *State) reflect.Value { return reflect.ValueOf(&st.Pending[0]).Elem() })
	check("Action", func(st *State) reflect.Value { return reflect.ValueOf(&st.Pending[0].Action).Elem() })
	check("Rejection", func(st *State) reflect.Value { return reflect.ValueOf(&st.Refused[0]).Elem() })
	check("Stats", func(st *State) reflect.Value { return reflect.ValueOf(&st.Stats).Elem() })
}

// skipField are the fields TestStateRoundTripsEveryField leaves alone: a
// change to them makes the state invalid, which Restore refuses (tested
// in TestRestoreRefusesBadStates), or cannot be decoded (the policy's);
// the jobs and GPUs are checked field by field.
var skipField = map[string]bool{"State.Jobs": true, "State.GPUs": true, "Job.ID": true, "Job.PreRun": true, "Job.Parent": true, "Job.Probe": true, "State.PolicyState": true, "State.Policy": true, "JobSpec.Name": true}

// TestExportIsACopy: changing the engine after Export changes nothing in
// the export, and changing a state after Restore changes nothing in the
// engine; every field of every job record, in place (slices' elements
// included), except specs, which never change.
func TestExportIsACopy(t *testing.T) {
	e := stateEngine(t)
	st, err := e.Export()
	if err != nil {
		t.Fatal(err)
	}
	before := encode(t, st)
	mutate := func(jobs []*cluster.Job, gpus []cluster.GPUState, servers []cluster.ServerState, events []cluster.Event, pending []Applied, nodeErr [][]float64) {
		for _, j := range jobs {
			perturbAll(t, reflect.ValueOf(j).Elem())
		}
		for _, v := range []any{&gpus, &servers, &events, &pending, &nodeErr} {
			perturbAll(t, reflect.ValueOf(v).Elem())
		}
	}
	mutate(e.jobs, e.gpus, e.servers, e.events, e.pending, e.nodeErr)
	e.retries[0]++
	perturbAll(t, reflect.ValueOf(&e.refused).Elem())
	if !bytes.Equal(encode(t, st), before) {
		t.Error("changing the engine changed its export")
	}
	e2 := stateEngine(t)
	st2, _ := e2.Export()
	r, _ := roundTrip(t, e2, st2)
	mine, _ := r.Export()
	was := encode(t, mine)
	var jobs []*cluster.Job
	for i := range st2.Jobs {
		jobs = append(jobs, &st2.Jobs[i])
	}
	mutate(jobs, st2.GPUs, st2.Servers, st2.Events, st2.Pending, st2.NodeFailures)
	st2.Retries[0]++
	perturbAll(t, reflect.ValueOf(&st2.Refused).Elem())
	if now, _ := r.Export(); !bytes.Equal(encode(t, now), was) {
		t.Error("changing a state after Restore changed the engine")
	}
}

// TestRestoredEngineRunsTheSame: an engine restored between events and a
// round (events not yet shown to the policy, a kill pending) runs the next
// rounds as the original does, and a fork runs forward without touching
// the original.
func TestRestoredEngineRunsTheSame(t *testing.T) {
	e := stateEngine(t)
	st, _ := e.Export()
	r, _ := roundTrip(t, e, st)
	ad, _ := roundTripWith(t, e, st, Adopt)
	pol, _ := registry.New("gandiva", policy.Config{Params: map[string]string{"quantum": "10"}})
	f, err := e.Fork(pol, nil)
	if err != nil {
		t.Fatal(err)
	}
	origBefore := encode(t, st)
	now := e.now
	for k := 0; k < 5; k++ {
		now += 7
		a, err := e.Round(now)
		if err != nil {
			t.Fatal(err)
		}
		wantApplied := slices.Clone(a.Applied)
		for _, x := range []*Engine{r, ad, f} {
			b, err := x.Round(now)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(wantApplied, b.Applied) || a.WakeAt != b.WakeAt || !reflect.DeepEqual(a.Rejected, b.Rejected) {
				t.Fatalf("round at %v: the original applied %v (wake %v), the restored engine %v (wake %v)", now, wantApplied, a.WakeAt, b.Applied, b.WakeAt)
			}
		}
		for _, j := range e.jobs {
			if j.State.Holding() {
				ev := cluster.Event{Time: now, Kind: cluster.EvProfile, Job: j.ID, Done: float64(k), IterTime: 0.7}
				for _, x := range []*Engine{e, r, ad, f} {
					if err := x.Apply(ev); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}
	se, _ := e.Export()
	sr, _ := r.Export()
	sf, _ := f.Export()
	sa, _ := ad.Export()
	if !bytes.Equal(encode(t, se), encode(t, sr)) || !bytes.Equal(encode(t, se), encode(t, sf)) || !bytes.Equal(encode(t, se), encode(t, sa)) {
		t.Error("after the same rounds and events, the restored (or adopted) engine's or the fork's state differs")
	}
	// The fork's cluster is its own.
	if _, err := f.c.AddServer("x", "V100", 2, "r", 0, 0); err != nil {
		t.Fatal(err)
	}
	f.AddServer()
	if len(e.c.Servers) != 2 || len(e.servers) != 2 {
		t.Error("a server added to the fork was added to the original")
	}
	_ = origBefore
}

// TestRestoreRefusesBadStates: a state that does not fit the cluster or
// contradicts itself is refused with an error saying what.
func TestRestoreRefusesBadStates(t *testing.T) {
	e := stateEngine(t)
	for name, bad := range map[string]func(st *State){
		"job ID":       func(st *State) { st.Jobs[1].ID = 5 },
		"no spec":      func(st *State) { st.Jobs[0].Spec = nil },
		"name twice":   func(st *State) { st.Jobs[1].Spec = st.Jobs[0].Spec },
		"GPU":          func(st *State) { st.Jobs[0].Last = []cluster.GPUID{99} },
		"servers":      func(st *State) { st.Servers = st.Servers[:1] },
		"holder":       func(st *State) { st.GPUs[0].Jobs = []cluster.JobID{999} },
		"retry":        func(st *State) { st.Retries = []cluster.JobID{-3} },
		"pre-run pair": func(st *State) { st.Jobs[0].PreRun = 999 },
		"time":         func(st *State) { st.Now = -1 },
		"reported":     func(st *State) { st.Reported = len(st.Refused) + 1 },
		"reported < 0": func(st *State) { st.Reported = -1 },
	} {
		st, _ := e.Export()
		bad(st)
		for how, restore := range restorers {
			pol, _ := registry.New("gandiva", policy.Config{})
			if _, err := restore(e.c, pol, nil, e.opts, st); err == nil {
				t.Errorf("%s: %s accepted it", name, how)
			}
		}
	}
	st, _ := e.Export()
	pol, _ := registry.New("fifo", policy.Config{})
	if _, err := Restore(e.c, pol, nil, e.opts, st); err == nil {
		t.Error("a state of gandiva restored into fifo")
	}
}

// TestAdoptTakesTheState: Adopt takes the state's job records and lists
// as the engine's own (no second copy of every job at a restart), where
// Restore copies them.
func TestAdoptTakesTheState(t *testing.T) {
	e := stateEngine(t)
	for how, restore := range restorers {
		st, _ := e.Export()
		pol, _ := registry.New("gandiva", policy.Config{Params: map[string]string{"quantum": "10"}})
		r, err := restore(e.c, pol, nil, e.opts, st)
		if err != nil {
			t.Fatal(err)
		}
		held := -1
		for g := range st.GPUs {
			if len(st.GPUs[g].Jobs) > 0 {
				held = g
				break
			}
		}
		if held < 0 {
			t.Fatal("no GPU is held")
		}
		shared := r.jobs[0] == &st.Jobs[0] && &r.gpus[held].Jobs[0] == &st.GPUs[held].Jobs[0]
		if shared != (how == "Adopt") {
			t.Errorf("%s: the engine's records are the state's: %v", how, shared)
		}
	}
}
