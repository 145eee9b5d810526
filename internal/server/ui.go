package server

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/fair"
	"github.com/gandiva-sched/gandiva/internal/timeline"
	"github.com/gandiva-sched/gandiva/internal/ui"
)

// The dashboard's data source (ui.DataSource) over the machine: the GPU
// timeline its recorder keeps (machine.rec, fed after every log entry, so a
// restarted server has the whole history), the waiting jobs in the
// policy's own order with their ETAs, and the nodes as GET /v1/nodes shows
// them. Every answer is built under the server's lock and copied out; the
// handler encodes it after the lock is released.

// newRecorder is the machine's timeline recorder. It is Noted: the machine
// notes every event it applies and every action a round applies, so each
// observation costs what changed.
func newRecorder() *timeline.Recorder {
	return timeline.NewRecorder(timeline.Options{Noted: true, Classify: classify})
}

// classify is the live timeline's Classify: the engine's states, a running
// job whose process has not reached its first boundary as
// timeline.StartUp (DefaultClassify).
func classify(j *cluster.Job, shared bool) timeline.Kind { return timeline.DefaultClassify(j, shared) }

// observe records the machine's state after an entry. The engine's time
// never goes backwards, so the recorder refuses nothing; were it to, the
// timeline would miss a change, which is logged, and nothing else.
func (m *machine) observe() {
	if err := m.rec.Observe(m.eng.Snapshot()); err != nil {
		m.cfg.Log.Warn("timeline: observation refused", "seq", m.seq, "err", err)
	}
}

// dashboard implements ui.DataSource over a Server.
type dashboard struct {
	s *Server

	// the queue in the policy's order, cached until the timeline, the
	// rounds or the ETAs move (computing it asks the policy to explain a
	// few jobs);
	// qmu is taken before the server's lock, never after
	qmu  sync.Mutex
	qkey [3]uint64
	q    *ui.Queue // every user's
}

var _ ui.DataSource = (*dashboard)(nil)

// maxExplains bounds the policy explanations one queue order may ask for
// (see policyOrder); past it, the rest follow in submission order.
// maxReasons is how many jobs at the head of the queue get the policy's own
// account of where they wait as their reason (an explanation costs about
// as much as ordering the queue); the others show the engine's reason.
const (
	maxExplains = 48
	maxReasons  = 20
)

// DashboardHandler serves the dashboard (package ui) over this server's
// state, behind the same tokens as the /v1 API. Handler mounts it at /ui/.
func (s *Server) DashboardHandler() http.Handler {
	return ui.Handler(s.Dashboard(), authenticator{s.db, s.cfg.Clock}, ui.Options{Observe: s.met.observe, Log: s.cfg.Log})
}

// Dashboard returns the dashboard's data source over this server.
func (s *Server) Dashboard() ui.DataSource {
	s.dashOnce.Do(func() { s.dash = &dashboard{s: s} })
	return s.dash
}

func visibleTo(v api.Principal) func(string) bool {
	if v.Admin {
		return nil
	}
	return func(user string) bool { return user == v.User }
}

// liveRun is the one timeline the server has: what happened.
const liveRun = "live"

func (d *dashboard) runs() []ui.Run {
	return []ui.Run{{ID: liveRun, Label: "what happened", Kind: "live", Policy: d.s.cfg.Policy}}
}

func checkRun(run string) error {
	if run != "" && run != liveRun {
		return api.NotFound("no run %q: this server has only %q", run, liveRun)
	}
	return nil
}

// Summary implements ui.DataSource.
func (d *dashboard) Summary(ctx context.Context, v api.Principal) (*ui.Summary, error) {
	if err := d.s.await(ctx); err != nil {
		return nil, err
	}
	s := d.s
	s.mu.Lock() // Snapshot compacts the engine's lists
	defer s.mu.Unlock()
	m := s.m
	busy, _ := m.rec.Busy()
	gpus := m.c.NumGPUs()
	sum := &ui.Summary{Cluster: m.c.Name, Policy: s.policyText(), Now: m.rec.Now(), Epoch: float64(s.epoch.UnixNano()) / 1e9,
		Version: m.rec.Version() + m.nodeChanges + uint64(len(m.settings)) + s.etaVersion(),
		GPUs:    gpus, FreeGPUs: max(gpus-busy, 0), Nodes: map[string]int{}, Jobs: m.rec.States(visibleTo(v)), Runs: d.runs()}
	snap := m.eng.Snapshot()
	for i := range snap.Servers {
		switch st := &snap.Servers[i]; {
		case !st.Up:
			sum.Nodes["down"]++
		case st.Drained:
			sum.Nodes["drained"]++
		default:
			sum.Nodes["up"]++
		}
	}
	if m.now > sum.Now {
		sum.Now = m.now
	}
	return sum, nil
}

// policyText is the policy with its parameters, as --policy takes it.
func (s *Server) policyText() string {
	if len(s.cfg.PolicyParams) == 0 {
		return s.cfg.Policy
	}
	keys := make([]string, 0, len(s.cfg.PolicyParams))
	for k := range s.cfg.PolicyParams {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + s.cfg.PolicyParams[k]
	}
	return s.cfg.Policy + ":" + strings.Join(parts, ";")
}

// Timeline implements ui.DataSource. Jobs are named by their ID and, when
// the submitter gave one, their name ("j3 resnet-lr0.1").
func (d *dashboard) Timeline(ctx context.Context, v api.Principal, run string, w ui.Window) (*timeline.Data, error) {
	if err := d.s.await(ctx); err != nil {
		return nil, err
	}
	if err := checkRun(run); err != nil {
		return nil, err
	}
	s := d.s
	s.mu.RLock()
	defer s.mu.RUnlock()
	data := s.m.rec.Data(timeline.Query{From: w.From, To: w.To, Visible: visibleTo(v)})
	for i := range data.Jobs {
		data.Jobs[i].Name = s.m.label(data.Jobs[i].Name)
	}
	return data, nil
}

// label is how the dashboard names the engine's job name: the job's ID
// and the name its submitter gave it (a pre-run keeps its engine name).
func (m *machine) label(name string) string {
	j := m.jobs[name]
	if j == nil || j.rec.Request.Name == "" || j.rec.Request.Name == name {
		return name
	}
	return name + " " + j.rec.Request.Name
}

// Shares implements ui.DataSource; under gandiva-fair the users' tickets
// (its tickets parameter, then the tickets/USER settings) give the
// entitlements.
func (d *dashboard) Shares(ctx context.Context, v api.Principal, run string, w ui.Window) (*timeline.Shares, error) {
	if err := d.s.await(ctx); err != nil {
		return nil, err
	}
	if err := checkRun(run); err != nil {
		return nil, err
	}
	s := d.s
	s.mu.RLock()
	defer s.mu.RUnlock()
	q := timeline.ShareQuery{From: w.From, To: w.To, Window: w.Step, Visible: visibleTo(v)}
	if s.cfg.Policy == fair.Name {
		q.Tickets, q.DefaultTickets = s.tickets()
	}
	return s.m.rec.Shares(q), nil
}

// tickets are gandiva-fair's tickets per user, as the policy has them:
// its parameters, then the settings applied since (under the lock).
func (s *Server) tickets() (map[string]float64, float64) {
	def := 1.0
	if x, err := strconv.ParseFloat(s.cfg.PolicyParams["default"], 64); err == nil && x >= 0 {
		def = x
	}
	t, err := fair.ParseTickets(s.cfg.PolicyParams["tickets"])
	if err != nil {
		t = map[string]float64{}
	}
	for k, val := range s.m.settings {
		if user, ok := strings.CutPrefix(k, "tickets/"); ok && user != "" {
			if x, err := strconv.ParseFloat(val, 64); err == nil && x >= 0 {
				t[user] = x
			}
		}
	}
	return t, def
}

// Queue implements ui.DataSource: the waiting jobs (queued or suspended;
// pre-runs wait with their jobs) in the policy's own order, each with its
// reason and ETA. The whole queue is built under the server's lock once
// per change of state (queue); each viewer's is a filtered copy of it,
// made outside the lock.
func (d *dashboard) Queue(ctx context.Context, v api.Principal) (*ui.Queue, error) {
	if err := d.s.await(ctx); err != nil {
		return nil, err
	}
	all := d.queue()
	q := &ui.Queue{Policy: all.Policy, Order: all.Order, Jobs: make([]ui.QueuedJob, 0, len(all.Jobs))}
	for _, j := range all.Jobs {
		if !v.Admin && j.User != v.User {
			q.Hidden++
			continue
		}
		q.Jobs = append(q.Jobs, j)
	}
	return q, nil
}

// queue returns the whole queue, from the cache while the machine's
// timeline and rounds have not moved. The cached queue is never modified.
func (d *dashboard) queue() *ui.Queue {
	s := d.s
	s.mu.RLock()
	key := [3]uint64{s.m.rec.Version(), uint64(s.m.eng.Stats().Rounds), s.etaVersion()}
	s.mu.RUnlock()
	d.qmu.Lock()
	defer d.qmu.Unlock()
	if d.q != nil && d.qkey == key {
		return d.q
	}
	s.mu.Lock() // Snapshot, and the policy's explainer
	defer s.mu.Unlock()
	m := s.m
	d.qkey = [3]uint64{m.rec.Version(), uint64(m.eng.Stats().Rounds), s.etaVersion()}
	order, byPolicy, reasons := d.order()
	q := &ui.Queue{Policy: s.policyText(), Order: "submission", Jobs: make([]ui.QueuedJob, 0, len(order))}
	if byPolicy {
		q.Order = "policy"
	}
	for i, id := range order {
		j := m.byEID[id]
		ej := m.eng.Job(id)
		if j == nil || ej == nil {
			continue
		}
		qj := ui.QueuedJob{Position: i + 1, ID: j.rec.ID, Name: j.rec.Request.Name, User: j.rec.User, State: ej.State.String(),
			GPUs: ej.Spec.GPUs, Submitted: ej.Submitted, Waited: max(m.now-ej.QueuedAt, 0), Reason: ej.Reason}
		if r, ok := reasons[id]; ok {
			qj.Reason = r
		}
		if e, at, ok := s.estimate(j.rec.ID); ok {
			qj.ETANote = fmt.Sprintf("%s (forecast from the state at %s)", e.Note, m.wall(at).Local().Format("15:04:05"))
			qj.ETAStart, qj.ETAFinish = finite(e.Start), finite(e.Finish)
			if e.Samples > 1 {
				qj.ETASamples = e.Samples
				qj.ETAStartLow, qj.ETAStartHigh = finite(e.StartLow), finite(e.StartHigh)
				qj.ETAFinishLow, qj.ETAFinishHigh = finite(e.FinishLow), finite(e.FinishHigh)
			}
		}
		q.Jobs = append(q.Jobs, qj)
	}
	d.q = q
	return q
}

// order returns the waiting jobs (not pre-runs) in the policy's order, and
// the policy's reasons for the first maxReasons of them (under the
// server's write lock).
func (d *dashboard) order() ([]cluster.JobID, bool, map[cluster.JobID]string) {
	m := d.s.m
	snap := m.eng.Snapshot()
	var waiting []cluster.JobID
	for _, j := range snap.Active() {
		if j.State.Waiting() && !j.Probe {
			waiting = append(waiting, j.ID)
		}
	}
	ex, ok := m.eng.Policy().(policy.Explainer)
	if !ok {
		return waiting, false, nil
	}
	order := policyOrder(snap, ex, waiting, maxExplains)
	reasons := map[cluster.JobID]string{}
	for _, id := range order[:min(len(order), maxReasons)] {
		if e := ex.Explain(snap, id); e.Queue != "" {
			reasons[id] = e.Queue
		}
	}
	return order, true, reasons
}

// policyOrder orders the waiting jobs as the policy does (policy.Order).
func policyOrder(snap *cluster.Snapshot, ex policy.Explainer, waiting []cluster.JobID, max int) []cluster.JobID {
	return policy.Order(snap, ex, waiting, max)
}

// Nodes implements ui.DataSource: GET /v1/nodes' answer.
func (d *dashboard) Nodes(ctx context.Context, v api.Principal) ([]api.Node, error) {
	return d.s.Nodes(ctx, v)
}
