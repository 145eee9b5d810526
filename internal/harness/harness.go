// Package harness is the test harness (a harness, not mocks): an in-memory
// cluster, the real engine and a recording executor, driven by golden
// scenario scripts (testdata/*.txt in the datadriven format that etcd's raft
// uses; rewrite the expectations with `go test ./... -rewrite`, then review
// the diff).
//
// Commands (one per block; arguments are key=value):
//
//	cluster preset=NAME | servers=N gpus=G [type=V100] [domains=D] [hostmem=GiB]
//	                                            (or a YAML cluster spec as the command's input)
//	policy name=NAME [compat] [prerun] [startups [grace=S]] [warm=N] [key=value ...]
//	                                            build the engine (other keys are policy parameters;
//	                                            prerun: engine Options.PreRun; startups: Options.StartUps;
//	                                            grace=S: Options.StartUpGrace, uncharged start-ups;
//	                                            warm=N: Options.Warm with N start-ups per node, 4 warm
//	                                            processes per GPU, 1 GiB of context each);
//	                                            name=script is a policy that returns the queued `act`s
//	act KIND name=A [gpus=0,1] [share] [unaligned] [fail]   queue an action for the script policy
//	at t=SECONDS                                set the time of the next commands
//	submit name=A gpus=N [user=U] [group=G] [iters=N] [itertime=S] [mem=GiB] [model=M] [skew=X] [min=N] [max=N]
//	round                                       one engine round: prints applied actions and rejections
//	finish name=A | fail name=A [user] | cancel name=A | done name=A | failed name=A
//	profile name=A done=N itertime=S [metric=X] [saved=T]  (saved: the time of its last checkpoint)
//	ready name=A [startup=S] [noclient]          the job's process reached its first boundary (EvReady)
//	reason name=A                               the job's state and the cause of its last transition
//	node-down server=N | node-up server=N
//	setting key=K value=V                       an operator's run-time setting (EvSetting), e.g. key=tickets/alice value=4
//	state                                       every job's state, GPUs and attained service
//	explain name=A                              the policy's explanation of a waiting job (policy.Explainer):
//	                                            its queue, place in the policy's order, reasons per server
//	job name=A gpus=N at=T [user=U] [iters=N] [itertime=S] [mem=GiB] [model=M] [skew=X] [group=G] [min=N] [max=N]
//	simulate [until=T] [perf=default|compat|h100] [log=actions|all]
//	                                            run the simulator on the jobs declared with `job`
//	                                            under the current policy and print its event log
//
// Every command checks the engine's invariants afterwards.
package harness

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/registry"
	"github.com/gandiva-sched/gandiva/internal/sim"
)

// Recorder is an executor that records what it is asked to do.
type Recorder struct {
	Log []engine.Applied
}

// Execute implements engine.Executor.
func (r *Recorder) Execute(_ float64, acts []engine.Applied) { r.Log = append(r.Log, acts...) }

// H is one scenario's state.
type H struct {
	C       *cluster.Cluster
	E       *engine.Engine
	P       policy.Policy
	Rec     *Recorder
	Now     float64
	specs   []*cluster.JobSpec // declared with `job`, for simulate
	polName string
	polCfg  policy.Config
	preRun  bool
	startUp bool
	grace   float64 // engine Options.StartUpGrace
	warm    engine.WarmOptions
	script  *scripted
	input   string
	curves  map[string]curve
}

// curve is a scripted job's hidden learning curve.
type curve struct{ acc, tau, epoch float64 }

// scripted is a policy that returns the actions a script queued with `act`.
type scripted struct{ next []cluster.Action }

func (s *scripted) Name() string { return "script" }

func (s *scripted) Schedule(*cluster.Snapshot) cluster.Decision {
	d := cluster.Decision{Actions: s.next}
	s.next = nil
	return d
}

func (h *H) act(d *datadriven.TestData, a args) error {
	if h.script == nil {
		return fmt.Errorf("act: the policy is not name=script")
	}
	if len(d.CmdArgs) == 0 {
		return fmt.Errorf("act: missing action kind")
	}
	kindName := d.CmdArgs[0].Key
	delete(a, kindName)
	kind := cluster.ActionKind(255)
	for k := cluster.Start; k <= cluster.Kill; k++ {
		if k.String() == kindName {
			kind = k
		}
	}
	if kind == 255 {
		return fmt.Errorf("act: unknown action %q", kindName)
	}
	name := a.str("name", "")
	j, ok := h.E.Lookup(name)
	if !ok {
		return fmt.Errorf("act: no job %q", name)
	}
	act := cluster.Action{Kind: kind, Job: j.ID, Share: a.flag("share"), Unaligned: a.flag("unaligned"), Fail: a.flag("fail")}
	if g := a.str("gpus", ""); g != "" {
		for _, f := range strings.Split(g, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				return fmt.Errorf("act: gpus: %w", err)
			}
			act.GPUs = append(act.GPUs, cluster.GPUID(n))
		}
	}
	h.script.next = append(h.script.next, act)
	return a.rest()
}

// Run runs every script under dir (a file or a directory).
func Run(t *testing.T, path string) {
	datadriven.Walk(t, path, func(t *testing.T, path string) {
		h := &H{}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			out, err := h.Do(d)
			if err != nil {
				return "error: " + err.Error() + "\n"
			}
			if h.E != nil {
				if err := h.E.CheckInvariants(); err != nil {
					t.Fatalf("%s: invariant violated after %q: %v", d.Pos, d.Cmd, err)
				}
			}
			return out
		})
	})
}

type args map[string]string

func parseArgs(d *datadriven.TestData) args {
	a := args{}
	for _, c := range d.CmdArgs {
		a[c.Key] = strings.Join(c.Vals, ",")
	}
	return a
}

func (a args) str(k, def string) string {
	if v, ok := a[k]; ok {
		delete(a, k)
		return v
	}
	return def
}

func (a args) num(k string, def float64) (float64, error) {
	v, ok := a[k]
	if !ok {
		return def, nil
	}
	delete(a, k)
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return 0, fmt.Errorf("argument %s: %w", k, err)
	}
	return f, nil
}

func (a args) flag(k string) bool {
	_, ok := a[k]
	delete(a, k)
	return ok
}

func (a args) rest() error {
	if len(a) == 0 {
		return nil
	}
	keys := make([]string, 0, len(a))
	for k := range a {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return fmt.Errorf("unknown arguments %v", keys)
}

// Do runs one command and returns its output.
func (h *H) Do(d *datadriven.TestData) (string, error) {
	a := parseArgs(d)
	switch d.Cmd {
	case "cluster":
		h.input = d.Input
		return h.cluster(a)
	case "policy":
		return h.policy(a)
	case "at":
		t, err := a.num("t", h.Now)
		if err != nil {
			return "", err
		}
		h.Now = t
		return "", a.rest()
	case "job":
		var cv curve
		var err error
		if cv.acc, err = a.num("acc", 0); err != nil {
			return "", err
		}
		if cv.tau, err = a.num("tau", 10); err != nil {
			return "", err
		}
		if cv.epoch, err = a.num("epoch", 100); err != nil {
			return "", err
		}
		spec, err := specFrom(a)
		if err != nil {
			return "", err
		}
		h.specs = append(h.specs, spec)
		if cv.acc > 0 {
			if h.curves == nil {
				h.curves = map[string]curve{}
			}
			h.curves[spec.Name] = cv
		}
		return "", a.rest()
	case "simulate":
		return h.simulate(a)
	}
	if h.E == nil {
		return "", fmt.Errorf("%s: no engine yet (use cluster and policy first)", d.Cmd)
	}
	switch d.Cmd {
	case "submit":
		spec, err := specFrom(a)
		if err != nil {
			return "", err
		}
		if err := a.rest(); err != nil {
			return "", err
		}
		if _, err := h.E.Submit(h.Now, spec); err != nil {
			return "", err
		}
		return "", nil
	case "round":
		if err := a.rest(); err != nil {
			return "", err
		}
		return h.round()
	case "finish", "fail", "cancel", "done", "failed", "profile", "ready":
		return h.jobEvent(d.Cmd, a)
	case "reason":
		name := a.str("name", "")
		j, ok := h.E.Lookup(name)
		if !ok {
			return "", fmt.Errorf("reason: no job %q", name)
		}
		return fmt.Sprintf("%s %s: %s\n", name, j.State, j.Reason), a.rest()
	case "node-down", "node-up":
		s, err := a.num("server", -1)
		if err != nil {
			return "", err
		}
		kind := cluster.EvNodeDown
		if d.Cmd == "node-up" {
			kind = cluster.EvNodeUp
		}
		if err := h.E.Apply(cluster.Event{Time: h.Now, Kind: kind, Node: cluster.ServerID(s)}); err != nil {
			return "", err
		}
		return "", a.rest()
	case "state":
		return h.state(), a.rest()
	case "explain":
		name := a.str("name", "")
		if err := a.rest(); err != nil {
			return "", err
		}
		return h.explain(name)
	case "act":
		return "", h.act(d, a)
	case "setting":
		key, value := a.str("key", ""), a.str("value", "")
		if err := a.rest(); err != nil {
			return "", err
		}
		return "", h.E.Apply(cluster.Event{Time: h.Now, Kind: cluster.EvSetting, Key: key, Value: value})
	}
	return "", fmt.Errorf("unknown command %q", d.Cmd)
}

func (h *H) cluster(a args) (string, error) {
	var c *cluster.Cluster
	var err error
	if in := strings.TrimSpace(h.input); in != "" {
		c, err = cluster.ParseYAML(strings.NewReader(in))
	} else if p := a.str("preset", ""); p != "" {
		c, err = cluster.Load(p)
	} else {
		n, _ := a.num("servers", 1)
		g, _ := a.num("gpus", 4)
		doms, _ := a.num("domains", 1)
		mem, _ := a.num("hostmem", cluster.DefaultHostMemGiB)
		typ := a.str("type", "V100")
		b := cluster.NewBuilder("test", nil)
		per := int(n) / int(doms)
		for d := 0; d < int(doms); d++ {
			cnt := per
			if d == int(doms)-1 {
				cnt = int(n) - per*(int(doms)-1)
			}
			b.Add(cluster.ServerGroup{Type: typ, Count: cnt, GPUs: int(g), Domain: d, HostMemGiB: mem})
		}
		c, err = b.Build()
	}
	if err != nil {
		return "", err
	}
	h.C = c
	return c.Summary() + "\n", a.rest()
}

func (h *H) policy(a args) (string, error) {
	name := a.str("name", "")
	cfg := policy.Config{Params: map[string]string{}}
	if a.flag("compat") {
		cfg = policy.TiresiasCompat(cfg)
	}
	h.preRun = a.flag("prerun")
	h.startUp = a.flag("startups")
	h.warm = engine.WarmOptions{}
	h.grace = 0
	if _, ok := a["grace"]; ok {
		g, err := a.num("grace", 0)
		if err != nil {
			return "", err
		}
		h.grace = g
		delete(a, "grace")
	}
	if _, ok := a["warm"]; ok {
		n, err := a.num("warm", 0)
		if err != nil {
			return "", err
		}
		h.warm = engine.WarmOptions{PerNode: int(n), PerGPU: 4, ContextGiB: 1}
	}
	for k, v := range a {
		cfg.Params[k] = v
	}
	if h.C == nil {
		return "", fmt.Errorf("policy: no cluster yet")
	}
	var p policy.Policy
	var err error
	if name == "script" {
		h.script = &scripted{}
		p = h.script
	} else if p, err = registry.New(name, cfg); err != nil {
		return "", err
	}
	h.P, h.polName, h.polCfg = p, name, cfg
	h.Rec = &Recorder{}
	h.E = engine.New(h.C, p, h.Rec, engine.Options{PreRun: h.preRun, StartUps: h.startUp, StartUpGrace: h.grace, Warm: h.warm, CheckSnapshot: true})
	return "", nil
}

func specFrom(a args) (*cluster.JobSpec, error) {
	s := &cluster.JobSpec{Name: a.str("name", ""), User: a.str("user", "u"), Group: a.str("group", ""), Model: a.str("model", "")}
	vals := []struct {
		key string
		def float64
		dst func(float64)
	}{
		{"gpus", 1, func(v float64) { s.GPUs = int(v) }},
		{"iters", 1000, func(v float64) { s.Iters = v }},
		{"itertime", 1, func(v float64) { s.IterTime = v }},
		{"mem", 0, func(v float64) { s.MemGiB = v }},
		{"skew", 0, func(v float64) { s.Skew = v }},
		{"at", 0, func(v float64) { s.Submit = v }},
		{"min", 0, func(v float64) { s.MinGPUs = int(v) }},
		{"max", 0, func(v float64) { s.MaxGPUs = int(v) }},
		{"prio", 0, func(v float64) { s.Priority = int(v) }},
	}
	for _, v := range vals {
		f, err := a.num(v.key, v.def)
		if err != nil {
			return nil, err
		}
		v.dst(f)
	}
	return s, s.Validate()
}

func (h *H) jobEvent(cmd string, a args) (string, error) {
	name := a.str("name", "")
	j, ok := h.E.Lookup(name)
	if !ok {
		return "", fmt.Errorf("no job %q", name)
	}
	ev := cluster.Event{Time: h.Now, Job: j.ID, Node: -1}
	switch cmd {
	case "finish":
		ev.Kind, ev.Done = cluster.EvFinish, j.Spec.Iters
	case "fail":
		ev.Kind, ev.UserError, ev.Reason = cluster.EvFail, a.flag("user"), "scripted failure"
	case "cancel":
		ev.Kind = cluster.EvCancel
	case "done":
		ev.Kind = cluster.EvActionDone
	case "failed":
		ev.Kind, ev.Reason = cluster.EvActionFailed, "scripted"
	case "ready":
		ev.Kind, ev.NoClient = cluster.EvReady, a.flag("noclient")
		var err error
		if ev.StartUp, err = a.num("startup", 0); err != nil {
			return "", err
		}
	case "profile":
		ev.Kind = cluster.EvProfile
		var err error
		if ev.Done, err = a.num("done", 0); err != nil {
			return "", err
		}
		if ev.IterTime, err = a.num("itertime", 0); err != nil {
			return "", err
		}
		if _, ok := a["metric"]; ok {
			ev.HasMetric = true
			if ev.Metric, err = a.num("metric", 0); err != nil {
				return "", err
			}
		}
		if _, ok := a["saved"]; ok { // the time of its last checkpoint
			ev.Saved = true
			if ev.SavedAt, err = a.num("saved", 0); err != nil {
				return "", err
			}
		}
	}
	if err := a.rest(); err != nil {
		return "", err
	}
	return "", h.E.Apply(ev)
}

func (h *H) name(id cluster.JobID) string { return h.E.Job(id).Spec.Name }

func (h *H) round() (string, error) {
	res, err := h.E.Round(h.Now)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, ap := range res.Applied {
		fmt.Fprintf(&b, "%s %s", ap.Kind, h.name(ap.Job))
		if len(ap.GPUs) > 0 {
			fmt.Fprintf(&b, " gpus=%v", ap.GPUs)
		}
		for _, f := range []struct {
			on   bool
			name string
		}{{ap.Remote, "remote"}, {ap.Checkpointed, "checkpoint"}, {ap.Packed, "packed"}, {ap.Internal, "internal"}, {ap.Unaligned, "unaligned"},
			{ap.NewProcess, "new-process"}, {ap.StillStarting, "still-starting"}} {
			if f.on {
				b.WriteString(" " + f.name)
			}
		}
		if ap.Reason != "" {
			fmt.Fprintf(&b, " (%s)", ap.Reason)
		}
		b.WriteString("\n")
	}
	for _, r := range res.Rejected {
		fmt.Fprintf(&b, "rejected %s: %s\n", h.name(r.Action.Job), r.Reason)
	}
	if res.WakeAt > 0 {
		fmt.Fprintf(&b, "wake at %s\n", strconv.FormatFloat(res.WakeAt, 'f', -1, 64))
	}
	if b.Len() == 0 {
		return "nothing\n", nil
	}
	return b.String(), nil
}

func (h *H) explain(name string) (string, error) {
	j, ok := h.E.Lookup(name)
	if !ok {
		return "", fmt.Errorf("explain: no job %q", name)
	}
	if !j.State.Waiting() {
		return fmt.Sprintf("%s is %s: not waiting\n", name, j.State), nil
	}
	ex, ok := h.P.(policy.Explainer)
	if !ok {
		return "", fmt.Errorf("explain: policy %s does not explain itself", h.P.Name())
	}
	e := ex.Explain(h.E.Snapshot(), j.ID)
	var b strings.Builder
	fmt.Fprintf(&b, "queue: %s\nplace %d of %d waiting", e.Queue, e.Position, e.Waiting)
	if len(e.Ahead) > 0 {
		names := make([]string, len(e.Ahead))
		for i, id := range e.Ahead {
			names[i] = h.name(id)
		}
		fmt.Fprintf(&b, "; ahead: %s", strings.Join(names, " "))
	}
	b.WriteString("\n")
	for _, r := range e.Servers {
		mark := "✗"
		if r.Fits {
			mark = "✓"
		}
		fmt.Fprintf(&b, "%s %s: %s\n", mark, r.Name, r.Why)
	}
	return b.String(), nil
}

func (h *H) state() string {
	var b strings.Builder
	for _, j := range h.E.Jobs() {
		fmt.Fprintf(&b, "%s: %s", j.Spec.Name, j.State)
		if len(j.GPUs) > 0 {
			fmt.Fprintf(&b, " gpus=%v", j.GPUs)
		}
		if j.State == cluster.Warming || j.Warmed {
			fmt.Fprintf(&b, " warm-on=%v", j.Last)
		}
		fmt.Fprintf(&b, " attained=%s", strconv.FormatFloat(j.Attained(h.Now), 'f', -1, 64))
		if j.Saved {
			fmt.Fprintf(&b, " unsaved=%s", strconv.FormatFloat(j.Unsaved(h.Now), 'f', -1, 64))
		}
		if st := engine.StartUpText(j, h.Now); st != "" {
			b.WriteString(" " + st)
		}
		if j.StartUp > 0 || j.StartUpEst > 0 {
			fmt.Fprintf(&b, " startup=%s est=%s", strconv.FormatFloat(j.StartUp, 'f', -1, 64), strconv.FormatFloat(j.StartUpEst, 'f', -1, 64))
		}
		if j.State.Terminal() || j.State == cluster.Queued && j.Reason != "" {
			fmt.Fprintf(&b, " (%s)", j.Reason)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func (h *H) simulate(a args) (string, error) {
	if h.C == nil || h.polName == "" {
		return "", fmt.Errorf("simulate: set cluster and policy first")
	}
	until, err := a.num("until", 0)
	if err != nil {
		return "", err
	}
	perf := sim.DefaultPerf()
	switch name := a.str("perf", "default"); name {
	case "compat":
		perf = sim.CompatPerf()
	default:
		var err error
		if perf, err = sim.LookupPerf(name); err != nil {
			return "", err
		}
	}
	mode := a.str("log", "actions")
	if err := a.rest(); err != nil {
		return "", err
	}
	p, err := registry.New(h.polName, h.polCfg)
	if err != nil {
		return "", err
	}
	var lines []string
	var curveFn, everyFn func(*cluster.JobSpec, float64) float64
	if len(h.curves) > 0 {
		curveFn = func(spec *cluster.JobSpec, done float64) float64 {
			cv, ok := h.curves[spec.Name]
			if !ok {
				return 0
			}
			return math.Round(1e4*cv.acc*(1-math.Exp(-math.Floor(done/cv.epoch+1e-9)/cv.tau))) / 1e4
		}
		everyFn = func(spec *cluster.JobSpec, _ float64) float64 { return h.curves[spec.Name].epoch }
	}
	res, err := sim.Run(sim.Config{Cluster: h.C, Jobs: slices.Clone(h.specs), Policy: p, Perf: perf, Horizon: until, Check: true,
		Engine: engine.Options{PreRun: h.preRun}, Curve: curveFn, ReportEvery: func(s *cluster.JobSpec) float64 {
			if everyFn == nil {
				return 0
			}
			return everyFn(s, 0)
		},
		Log: func(l string) {
			if mode == "all" || strings.Contains(l, " act ") || strings.Contains(l, " finish ") || strings.Contains(l, " fail ") {
				lines = append(lines, l)
			}
		}})
	if err != nil {
		return strings.Join(lines, "\n") + "\n", err
	}
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l + "\n")
	}
	for _, j := range res.Jobs {
		fmt.Fprintf(&b, "job %s: %s", j.Name, j.State)
		if j.End >= 0 {
			fmt.Fprintf(&b, " end=%.3f", j.End)
		}
		fmt.Fprintf(&b, " done=%.1f/%.0f\n", j.Done, j.Iters)
	}
	return b.String(), nil
}
