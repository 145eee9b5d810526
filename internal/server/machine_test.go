package server

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/metrics"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/registry"
)

// TestMachineScripts drives the state machine directly with log entries
// from seeded simulated agents (no store, no clock, no goroutines), and
// prints the state changes it records and the jobs and assignments it ends
// with: testdata/machine.txt (rewrite with -rewrite). Each run is also
// replayed from its entries, as JSON, into a fresh machine, which must
// record the same changes and end with the same assignments.
//
//	run policy=gandiva:quantum=5 seed=1 steps=400 [prerun] [nodes=3] [startups]
//
// With startups the machine knows start-ups and warms jobs (two per node)
// as the server does, and the simulated processes report ready after a
// random start-up, holding a warm start at its first boundary.
func TestMachineScripts(t *testing.T) {
	datadriven.RunTest(t, "testdata/machine.txt", func(t *testing.T, d *datadriven.TestData) string {
		if d.Cmd != "run" {
			d.Fatalf(t, "unknown command %q", d.Cmd)
		}
		sc := scenario{steps: 300, nodes: 3}
		for _, a := range d.CmdArgs {
			v := ""
			if len(a.Vals) > 0 {
				v = a.Vals[0]
			}
			switch a.Key {
			case "policy":
				sc.policy = v
			case "seed":
				fmt.Sscan(v, &sc.seed)
			case "steps":
				fmt.Sscan(v, &sc.steps)
			case "nodes":
				fmt.Sscan(v, &sc.nodes)
			case "prerun":
				sc.prerun = true
			case "startups":
				sc.startups = true
			default:
				d.Fatalf(t, "unknown argument %q", a.Key)
			}
		}
		out, entries, changes, final := sc.run(t)
		// The replay: the same entries into a fresh machine.
		m := sc.newMachine(t)
		for i, data := range entries {
			var e entry
			if err := json.Unmarshal(data, &e); err != nil {
				t.Fatal(err)
			}
			if err := m.apply(uint64(i+1), &e); err != nil {
				t.Fatalf("replay of entry %d: %v", i+1, err)
			}
		}
		if got := changesText(m.takeChanges()); got != changes {
			t.Fatalf("replay recorded other changes:\n%s\nwant:\n%s", got, changes)
		}
		if got := assignmentsText(m); got != final {
			t.Fatalf("replay ended with other assignments:\n%s\nwant:\n%s", got, final)
		}
		view := viewText(t, m)
		// The replay again, the machine snapshotted and restored (into a
		// fresh machine and policy) every so many entries.
		m = sc.newMachine(t)
		var got []change
		for i, data := range entries {
			var e entry
			if err := json.Unmarshal(data, &e); err != nil {
				t.Fatal(err)
			}
			_ = m.apply(uint64(i+1), &e)
			got = append(got, m.takeChanges()...)
			if i%23 == 11 {
				m = sc.snapshotRestore(t, m)
			}
		}
		if changesText(got) != changes {
			t.Fatalf("replay through snapshots recorded other changes:\n%s\nwant:\n%s", changesText(got), changes)
		}
		if got := assignmentsText(m); got != final {
			t.Fatalf("replay through snapshots ended with other assignments:\n%s\nwant:\n%s", got, final)
		}
		if got := viewText(t, m); got != view {
			t.Fatalf("replay through snapshots ended with other jobs or records:\n%s\nwant:\n%s", got, view)
		}
		return out
	})
}

type scenario struct {
	policy string
	seed   uint64
	steps  int
	nodes  int
	prerun bool
	// startups: start-ups reported, warm starts on
	startups bool
}

var machineEpoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func (sc scenario) newMachine(t *testing.T) *machine {
	t.Helper()
	names, params, err := registry.Parse(sc.policy)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := registry.New(names[0], policy.Config{Seed: sc.seed, Params: params[0]})
	if err != nil {
		t.Fatal(err)
	}
	fp := engine.DefaultFailurePolicy()
	fp.Backoff = 3
	mc := machineConfig{Policy: pol, PreRun: sc.prerun, Failure: &fp, CheckpointRoot: "/ckpt", Epoch: machineEpoch}
	if sc.startups {
		mc.StartUps, mc.Warm = true, engine.WarmOptions{PerNode: 2, PerGPU: 2, ContextGiB: 1}
	}
	return newMachine(mc)
}

// viewText is what the API shows of every job (its history and notes
// included), the jobs' records for metrics, and what the shell reads of
// the machine (its time, wake-up, idempotency keys, nodes' sessions and
// report numbers).
func viewText(t *testing.T, m *machine) string {
	t.Helper()
	s := &Server{m: m}
	var jobs []*api.Job
	for _, j := range m.order {
		jobs = append(jobs, s.view(j, true, api.Principal{User: "admin", Admin: true}))
	}
	var keys []string
	for k, j := range m.idem {
		keys = append(keys, k+"="+j.rec.ID)
	}
	slices.Sort(keys)
	var nodes []string
	for _, n := range m.x.byID {
		nodes = append(nodes, fmt.Sprintf("%s %s %s %d %v", n.name, n.incarnation, n.session, n.repSeq, n.confirmed))
	}
	data, err := json.Marshal(map[string]any{"jobs": jobs, "records": m.records("p"), "now": m.now, "wake": m.wakeAt,
		"events": m.events, "idem": keys, "nodes": nodes})
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// snapshotRestore encodes m and restores it into a fresh machine (and
// policy), which must encode to the same bytes: all of it was restored.
func (sc scenario) snapshotRestore(t *testing.T, m *machine) *machine {
	t.Helper()
	data, err := m.marshal(0)
	if err != nil {
		t.Fatal(err)
	}
	fresh := sc.newMachine(t)
	r, err := restoreMachine(fresh.cfg, data)
	if err != nil {
		t.Fatal(err)
	}
	again, err := r.marshal(0)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, data) {
		t.Fatalf("a restored machine encodes to other bytes (%d, was %d)", len(again), len(data))
	}
	return r
}

// simAgent is one simulated agent: the processes it runs and how far each got.
type simAgent struct {
	startups  bool // processes report ready (after a start-up of a few steps)
	name, inc string
	session   bool // registered, not declared lost since
	seq       uint64
	procs     map[wkey]*simProc
	gen       int
}

type simProc struct {
	a         api.Assignment
	suspended bool
	done      float64
	ready     bool // its start-up is over (startups)
}

// run plays the scenario; it returns the transcript, the entries applied
// (JSON), and the changes and final assignments as text.
func (sc scenario) run(t *testing.T) (string, [][]byte, string, string) {
	t.Helper()
	m := sc.newMachine(t)
	rng := rand.New(rand.NewPCG(sc.seed, 7))
	var entries [][]byte
	var all []change
	apply := func(e *entry) {
		data, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, data)
		if err := m.apply(uint64(len(entries)), e); err != nil {
			t.Logf("entry %d (%s): %v", len(entries), e.Kind, err)
		}
		if err := cmp.Or(m.x.checkDirty(), m.x.checkReconciled()); err != nil {
			t.Fatalf("entry %d (%s): %v", len(entries), e.Kind, err)
		}
		all = append(all, m.takeChanges()...)
	}
	agents := []*simAgent{}
	addAgent := func() {
		a := &simAgent{name: fmt.Sprintf("n%d", len(agents)+1), procs: map[wkey]*simProc{}, startups: sc.startups}
		a.inc = a.name + ".0"
		agents = append(agents, a)
	}
	for range sc.nodes {
		addAgent()
	}
	register := func(a *simAgent, now float64) {
		reg := &api.Registration{Name: a.name, HostMemGiB: 32, Addr: "http://" + a.name + ":7071", LogKey: "k", Incarnation: a.inc}
		for g := range 4 {
			reg.GPUs = append(reg.GPUs, api.GPU{Index: g, Type: "V100", MemGiB: 16})
		}
		for _, k := range sortedKeys(a.procs) {
			p := a.procs[k]
			st := "running"
			if p.suspended {
				st = "suspended"
			}
			reg.Running = append(reg.Running, api.Running{Job: k.job, Attempt: k.attempt, Rank: k.rank, State: st, GPUs: p.a.GPUs})
		}
		apply(&entry{Kind: entRegister, T: now, Reg: reg})
		a.session = true
	}
	jobs := 0
	for step := 1; step <= sc.steps; step++ {
		now := float64(step)
		if w := m.wakeAt; w > 0 && w <= now && w >= m.now {
			apply(&entry{Kind: entRound, T: w})
		}
		// Something from outside, now and then.
		switch r := rng.IntN(100); {
		case r < 12 && jobs < 40:
			jobs++
			rq := api.JobRequest{Name: fmt.Sprintf("t%d", jobs), Command: []string{"train"}, GPUs: []int{1, 1, 1, 2, 2, 4, 6}[rng.IntN(7)],
				MemGiB: float64(1 + rng.IntN(8)), Iters: float64(20 + rng.IntN(200)), IterTime: 0.5}
			rec := &Record{ID: fmt.Sprintf("j%d", jobs), User: []string{"alice", "bob"}[rng.IntN(2)], Request: rq,
				Submitted: m.wall(now), PreRun: sc.prerun && rng.IntN(3) > 0, CkptEvery: 10}
			apply(&entry{Kind: entSubmit, T: now, Job: rec})
		case r < 14 && jobs > 0:
			apply(&entry{Kind: entCancel, T: now, ID: fmt.Sprintf("j%d", 1+rng.IntN(jobs))})
		case r < 15:
			a := agents[rng.IntN(len(agents))]
			if a.session {
				apply(&entry{Kind: entNodeDown, T: now, Node: a.name, Reason: "no contact"})
				a.session = false
			}
		case r < 16:
			// The agent restarts: its processes die with it.
			a := agents[rng.IntN(len(agents))]
			a.gen++
			a.inc = fmt.Sprintf("%s.%d", a.name, a.gen)
			a.procs, a.seq, a.session = map[wkey]*simProc{}, 0, false
		case r < 17 && len(agents) < sc.nodes+2:
			addAgent()
		}
		// The agents: register, then carry out their assignments and report.
		for _, a := range agents {
			if !a.session {
				if step > 2 && rng.IntN(3) == 0 || step == 1 {
					register(a, now)
				}
				continue
			}
			n := m.x.nodes[a.name]
			reps := a.act(m.x.assignments(n).Items, rng)
			if len(reps) > 0 {
				apply(&entry{Kind: entReport, T: now, Node: a.name, Reports: reps})
			}
		}
		if m.roundDue(now) {
			apply(&entry{Kind: entRound, T: now})
		}
	}
	var b strings.Builder
	changes := changesText(all)
	b.WriteString(changes)
	fmt.Fprintf(&b, "entries: %d\n", len(entries))
	for _, j := range m.order {
		ej := m.eng.Job(j.eid)
		fmt.Fprintf(&b, "job %s: %s attempts=%d suspends=%d resumes=%d migrations=%d packs=%d done=%g notes=%d\n", j.rec.ID, ej.State,
			ej.Attempts, ej.Suspends, ej.Resumes, ej.Migrations, ej.Packs, j.done, len(j.notes))
	}
	final := assignmentsText(m)
	b.WriteString(final)
	return b.String(), entries, changes, final
}

// act carries out the node's assignments on its simulated processes and
// returns the reports: starts, suspends, resumes, checkpoints, kills,
// progress, finishes, and some failures.
func (a *simAgent) act(items []api.Assignment, rng *rand.Rand) []api.Report {
	var reps []api.Report
	rep := func(k wkey, r api.Report) {
		a.seq++
		r.Seq, r.Job, r.Attempt, r.Rank = a.seq, k.job, k.attempt, k.rank
		reps = append(reps, r)
	}
	want := map[wkey]bool{}
	for _, it := range items {
		k := wkey{it.Job, it.Attempt, it.Rank}
		want[k] = true
		p := a.procs[k]
		switch {
		case p == nil && (it.Want == api.WantRun || it.Want == api.WantWarm):
			a.procs[k] = &simProc{a: it, ready: !a.startups}
			rep(k, api.Report{Kind: api.RepStarted})
			continue
		case p == nil:
			continue
		}
		p.a = it
		switch it.Want {
		case api.WantRun:
			if p.suspended {
				p.suspended = false
				rep(k, api.Report{Kind: api.RepResumed})
			}
		case api.WantSuspend, api.WantWarm:
			if !p.suspended && p.ready {
				p.suspended = true
				rep(k, api.Report{Kind: api.RepSuspended, Mode: "memory"})
			}
		case api.WantCheckpoint:
			delete(a.procs, k)
			rep(k, api.Report{Kind: api.RepCheckpointed, Outcome: "checkpointed", Done: p.done})
		case api.WantKill:
			delete(a.procs, k)
			rep(k, api.Report{Kind: api.RepExited, Outcome: "killed", Done: p.done})
		}
	}
	for _, k := range sortedKeys(a.procs) {
		p := a.procs[k]
		switch {
		case !want[k]:
			// A stray: the agent kills it.
			delete(a.procs, k)
			rep(k, api.Report{Kind: api.RepExited, Outcome: "killed", Done: p.done})
		case p.suspended:
		case !p.ready:
			// starting up: ready after a few steps, at its first boundary,
			// where a warm start (or a suspension) holds it
			if rng.IntN(3) == 0 {
				p.ready = true
				p.done++
				rep(k, api.Report{Kind: api.RepReady, Done: p.done, Took: float64(1 + rng.IntN(5))})
				if p.a.Want == api.WantWarm || p.a.Want == api.WantSuspend {
					p.suspended = true
					rep(k, api.Report{Kind: api.RepSuspended, Mode: "memory", Done: p.done})
				}
			}
		case rng.IntN(60) == 0:
			delete(a.procs, k)
			rep(k, api.Report{Kind: api.RepExited, Outcome: "failed", Code: 1, UserError: rng.IntN(2) == 0, Done: p.done, Message: "boom"})
		case p.a.PreRun:
			delete(a.procs, k)
			rep(k, api.Report{Kind: api.RepProgress, Done: 1, IterTime: 0.5})
			rep(k, api.Report{Kind: api.RepExited, Outcome: "finished", Done: 1})
		default:
			p.done += float64(1 + rng.IntN(4))
			rep(k, api.Report{Kind: api.RepProgress, Done: p.done, IterTime: 0.5 + float64(rng.IntN(3))/10})
			if rng.IntN(8) == 0 {
				rep(k, api.Report{Kind: api.RepSaved, Done: p.done})
			}
			if p.done >= 60 {
				delete(a.procs, k)
				rep(k, api.Report{Kind: api.RepExited, Outcome: "finished", Done: p.done})
			}
		}
	}
	return reps
}

func sortedKeys(m map[wkey]*simProc) []wkey {
	ks := make([]wkey, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.SortFunc(ks, wkey.compare)
	return ks
}

func changesText(chs []change) string {
	var b strings.Builder
	for _, ch := range chs {
		fmt.Fprintf(&b, "%d t=%g %s: %s -> %s", ch.Seq, ch.T, ch.Job, orDefault(ch.From, "-"), ch.To)
		if ch.Reason != "" {
			fmt.Fprintf(&b, " (%s)", ch.Reason)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// assignmentsText is every node's assignments, and a hash of them all.
func assignmentsText(m *machine) string {
	var b strings.Builder
	h := fnv.New64a()
	for _, n := range m.x.byID {
		as := m.x.assignments(n)
		data, _ := json.Marshal(as)
		h.Write(data)
		var items []string
		for _, it := range as.Items {
			items = append(items, fmt.Sprintf("%s/%d/r%d:%s%v", it.Job, it.Attempt, it.Rank, it.Want, it.GPUs))
		}
		fmt.Fprintf(&b, "node %s v%d: %s\n", n.name, as.Version, strings.Join(slices.Clip(items), " "))
	}
	fmt.Fprintf(&b, "assignments hash %x\n", h.Sum64())
	return b.String()
}

// applier returns a function that applies an entry to m with the next
// sequence number, and then a round when one is due at the entry's time;
// it fails the test on an error.
func applier(t *testing.T, m *machine) func(e *entry) {
	seq := uint64(0)
	return func(e *entry) {
		t.Helper()
		seq++
		if err := m.apply(seq, e); err != nil {
			t.Fatal(err)
		}
		if m.roundDue(e.T) {
			seq++
			if err := m.apply(seq, &entry{Kind: entRound, T: e.T}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// fourV100 is the registration of node name: 4 V100 GPUs of 16 GiB and
// 32 GiB of host memory, at http://NAME:7071.
func fourV100(name string) *api.Registration {
	reg := &api.Registration{Name: name, HostMemGiB: 32, Addr: "http://" + name + ":7071", Incarnation: name + ".0"}
	for g := range 4 {
		reg.GPUs = append(reg.GPUs, api.GPU{Index: g, Type: "V100", MemGiB: 16})
	}
	return reg
}

// TestRecordsSummarizeALiveRun: the records of a live run (machine.records,
// Server.Records) are summarised by package metrics, the simulator's code,
// into the figures the run had.
func TestRecordsSummarizeALiveRun(t *testing.T) {
	pol, err := registry.New("fifo", policy.Config{})
	if err != nil {
		t.Fatal(err)
	}
	m := newMachine(machineConfig{Policy: pol, Epoch: machineEpoch})
	apply := applier(t, m)
	apply(&entry{Kind: entRegister, T: 0, Reg: fourV100("n1")})
	submit := func(id string, gpus int, iters, iterTime float64) {
		apply(&entry{Kind: entSubmit, T: 1, Job: &Record{ID: id, User: "alice", Submitted: m.wall(1),
			Request: api.JobRequest{Command: []string{"train"}, GPUs: gpus, Iters: iters, IterTime: iterTime}}})
	}
	submit("j1", 1, 100, 0.5)
	submit("j2", 2, 50, 1)
	attempt := map[string]int64{}
	for _, it := range m.x.assignments(m.x.nodes["n1"]).Items {
		attempt[it.Job] = it.Attempt
	}
	if len(attempt) != 2 {
		t.Fatalf("assignments %v, want both jobs running", m.x.assignments(m.x.nodes["n1"]).Items)
	}
	repSeq := uint64(0)
	report := func(at float64, id string, r api.Report) {
		repSeq++
		r.Seq, r.Job, r.Attempt = repSeq, id, attempt[id]
		apply(&entry{Kind: entReport, T: at, Node: "n1", Reports: []api.Report{r}})
	}
	report(2, "j1", api.Report{Kind: api.RepStarted})
	report(2, "j2", api.Report{Kind: api.RepStarted})
	report(20, "j1", api.Report{Kind: api.RepProgress, Done: 40, IterTime: 0.5})
	report(30, "j2", api.Report{Kind: api.RepExited, Outcome: "finished", Done: 50})
	report(60, "j1", api.Report{Kind: api.RepProgress, Done: 100, IterTime: 0.5})
	report(60, "j1", api.Report{Kind: api.RepExited, Outcome: "finished", Done: 100})

	s := metrics.Summarize(m.records("fifo"))
	// j1 ran from 1 to 60 on 1 GPU, j2 from 1 to 30 on 2; the run lasted
	// from the first submission (1) to the last end (60).
	want := metrics.Summary{Policy: "fifo", PerfModel: "live", Cluster: "live", GPUs: 4, Jobs: 2, Finished: 2,
		AvgJCT: 44, P50JCT: 29, P95JCT: 59, P99JCT: 59, Makespan: 59, AvgT100: 44, AvgRun: 44, AvgSlowdown: (59.0/50 + 29.0/50) / 2,
		MultiJobs: 1, MultiAvgSlowdown: 29.0 / 50, GPUUtil: (59 + 2*29) / (4 * 59.0), Throughput: (100*0.5 + 50*1*2) / 59.0,
		Events: s.Events, UserShare: []metrics.Share{{User: "alice", Work: 150, Share: 1, Jobs: 2}}}
	if math.Abs(s.AvgSlowdown-want.AvgSlowdown) < 1e-12 { // (summed in another order)
		want.AvgSlowdown = s.AvgSlowdown
	}
	if got, _ := json.Marshal(s); string(got) != mustJSON(t, want) {
		t.Errorf("summary of the live run:\n%s\nwant:\n%s", got, mustJSON(t, want))
	}
	if s.Events == 0 {
		t.Errorf("no engine events counted")
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
