package kube

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/fair"
	"github.com/gandiva-sched/gandiva/internal/policy/registry"
	"github.com/gandiva-sched/gandiva/internal/timeline"
	"github.com/gandiva-sched/gandiva/internal/ui"
)

// The web dashboard of `gandiva kube --ui-listen` (package ui): a
// ui.DataSource over the leading Scheduler, and an api.Authenticator that
// checks bearer tokens with the Kubernetes API (TokenReview, then
// SubjectAccessReview).
//
// Only the leader has state. A replica that does not lead answers every
// /ui/api/ call 503, naming the replica that leads (port-forward to that
// pod instead); the page itself is served by every replica.
//
// The leader's loop holds uiState.mu while it works (rebuild, each step)
// and observes the engine into the timeline recorder at the end of each;
// the dashboard takes the same lock to read the engine, the recorder and
// the policy's explanations, so it sees the state between two steps.

// uiState is what a Scheduler keeps for the dashboard (only with
// Options.Dashboard).
type uiState struct {
	mu    sync.Mutex
	rec   *timeline.Recorder
	ready bool // observed once: the state is rebuilt
	// the whole queue, cached until the timeline or the rounds move, and
	// the time its waiting times are at
	qkey [2]uint64
	q    *ui.Queue
	qAt  float64
	// node statuses as last shown, and how often they changed
	nodeKey string
	nodeVer uint64
}

// newUIState returns a scheduler's dashboard state. Its recorder is not
// Noted: the engine's events are applied in many places of the loop, and
// an observation that compares every live job's Seq costs O(live jobs), a
// few microseconds per thousand jobs, once per step.
func newUIState() *uiState {
	return &uiState{rec: timeline.NewRecorder(timeline.Options{})}
}

// locked runs one piece of the loop's work (rebuild, step) under the
// dashboard's lock and records the engine's state after it. Without a
// dashboard it just runs f.
func (s *Scheduler) locked(f func()) {
	if s.ui == nil {
		f()
		return
	}
	s.ui.mu.Lock()
	defer s.ui.mu.Unlock()
	f()
	if err := s.ui.rec.Observe(s.eng.Snapshot()); err != nil {
		s.log.Warn("timeline: observation refused", "err", err)
	}
	s.ui.ready = true
}

// Dashboard is the dashboard's data source over whichever Scheduler of
// this process leads (ui.DataSource). Create it with NewDashboard, pass it
// as Options.Dashboard to Run, and serve it with Serve.
type Dashboard struct {
	mu       sync.Mutex
	s        *Scheduler // the leading term's; nil when this replica does not lead
	terms    uint64
	identity string
	leader   func() string // the Lease's holder, as last observed
}

var _ ui.DataSource = (*Dashboard)(nil)

// NewDashboard returns a dashboard that shows nothing until Run leads.
func NewDashboard() *Dashboard { return &Dashboard{} }

// lead is told of each term's Scheduler (nil when the term ends).
func (d *Dashboard) lead(s *Scheduler) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.s = s
	if s != nil {
		d.terms++
	}
}

// elected is told who this replica is, and how to learn the leader.
func (d *Dashboard) elected(identity string, leader func() string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.identity, d.leader = identity, leader
}

// Leading reports whether this replica leads (and so has state to show).
func (d *Dashboard) Leading() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.s != nil
}

// with runs f on the leading Scheduler under its dashboard lock, or
// returns a 503 naming the leader.
func (d *Dashboard) with(f func(s *Scheduler, term uint64) error) error {
	d.mu.Lock()
	s, term, id, leader := d.s, d.terms, d.identity, d.leader
	d.mu.Unlock()
	if s == nil || s.ui == nil {
		who := ""
		if leader != nil {
			who = leader()
		}
		if who == "" || who == id {
			return api.Unavailable("this replica of gandiva kube does not lead (yet): only the leader has the scheduler's state; try again in a few seconds")
		}
		return api.Unavailable("this replica of gandiva kube (%s) does not lead: the leader is %s (its pod's name is the identity without its last -suffix); port-forward to that pod", id, who)
	}
	s.ui.mu.Lock()
	defer s.ui.mu.Unlock()
	if !s.ui.ready {
		return api.Unavailable("gandiva kube is rebuilding its state from the API server; try again in a few seconds")
	}
	return f(s, term)
}

func visibleTo(v api.Principal) func(string) bool {
	if v.Admin {
		return nil
	}
	return func(user string) bool { return user == v.User }
}

// liveRun is the one timeline: what happened since this term began.
const liveRun = "live"

func checkRun(run string) error {
	if run != "" && run != liveRun {
		return api.NotFound("no run %q: gandiva kube has only %q", run, liveRun)
	}
	return nil
}

// wallEpoch is Summary.Epoch. The engine's time here is Unix time itself,
// so the Unix time of engine time 0 is 0; but the page takes an Epoch of 0
// to mean simulated time (shown as offsets), so it gets a nanosecond,
// which shows every time as the wall clock it is.
const wallEpoch = 1e-9

// nodeStatus is a node's status on the dashboard: "up", "drained"
// (cordoned) or "down" (not Ready, being deleted).
func nodeStatus(ns *nstate) string {
	switch {
	case ns.usable:
		return "up"
	case ns.node != nil && ns.node.Spec.Unschedulable:
		return "drained"
	default:
		return "down"
	}
}

// free is the GPUs of a node that Gandiva may give now.
func (s *Scheduler) free(snap *cluster.Snapshot, ns *nstate) int {
	if !ns.usable || int(ns.id) >= len(snap.Servers) {
		return 0
	}
	return max(snap.Servers[ns.id].NumFree()-s.Blocked(ns.id), 0)
}

// Summary implements ui.DataSource.
func (d *Dashboard) Summary(_ context.Context, v api.Principal) (*ui.Summary, error) {
	var sum *ui.Summary
	err := d.with(func(s *Scheduler, term uint64) error {
		rec := s.ui.rec
		sum = &ui.Summary{Cluster: s.c.Name, Policy: s.o.Policy, Now: s.shownNow(), Epoch: wallEpoch,
			Nodes: map[string]int{}, Jobs: rec.States(visibleTo(v)),
			Runs: []ui.Run{{ID: liveRun, Label: "what happened (since this replica leads)", Kind: "live", Policy: s.o.Policy}}}
		snap := s.eng.Snapshot()
		var key strings.Builder
		for _, ns := range s.servers {
			if !ns.alive {
				continue
			}
			st := nodeStatus(ns)
			sum.Nodes[st]++
			sum.GPUs += ns.shape.gpus
			f := s.free(snap, ns)
			sum.FreeGPUs += f
			fmt.Fprintf(&key, "%d:%s:%d,", ns.id, st, f)
		}
		if k := key.String(); k != s.ui.nodeKey {
			s.ui.nodeKey = k
			s.ui.nodeVer++
		}
		sum.Version = term<<48 + rec.Version() + uint64(s.stats.Rounds) + s.ui.nodeVer + uint64(len(s.settings))
		sum.Queues = s.queueRows() // GandivaQueues (gqueue_kube.go)
		return nil
	})
	return sum, err
}

// Timeline implements ui.DataSource. Jobs are named NAMESPACE/NAME (plain
// pods NAMESPACE/pods:GROUP), their users are their namespaces.
func (d *Dashboard) Timeline(_ context.Context, v api.Principal, run string, w ui.Window) (*timeline.Data, error) {
	if err := checkRun(run); err != nil {
		return nil, err
	}
	var data *timeline.Data
	err := d.with(func(s *Scheduler, _ uint64) error {
		data = s.ui.rec.Data(timeline.Query{From: w.From, To: w.To, Visible: visibleTo(v)})
		return nil
	})
	return data, err
}

// Shares implements ui.DataSource; under gandiva-fair the namespaces'
// tickets (its tickets parameter, then the settings ConfigMap's
// tickets.NAMESPACE keys) give the entitlements.
func (d *Dashboard) Shares(_ context.Context, v api.Principal, run string, w ui.Window) (*timeline.Shares, error) {
	if err := checkRun(run); err != nil {
		return nil, err
	}
	var sh *timeline.Shares
	err := d.with(func(s *Scheduler, _ uint64) error {
		q := timeline.ShareQuery{From: w.From, To: w.To, Window: w.Step, Visible: visibleTo(v)}
		if s.pol.Name() == fair.Name {
			q.Tickets, q.DefaultTickets = s.tickets()
		}
		sh = s.ui.rec.Shares(q)
		return nil
	})
	return sh, err
}

// tickets are gandiva-fair's tickets per namespace: its parameters, then
// the settings applied since.
func (s *Scheduler) tickets() (map[string]float64, float64) {
	def := 1.0
	t := map[string]float64{}
	if _, params, err := registry.Parse(s.o.Policy); err == nil && len(params) == 1 {
		if x, err := strconv.ParseFloat(params[0]["default"], 64); err == nil && x >= 0 {
			def = x
		}
		if p, err := fair.ParseTickets(params[0]["tickets"]); err == nil {
			t = p
		}
	}
	for k, val := range s.settings {
		if user, ok := strings.CutPrefix(k, "tickets/"); ok && user != "" {
			if x, err := strconv.ParseFloat(val, 64); err == nil && x >= 0 {
				t[user] = x
			}
		}
	}
	return t, def
}

// maxExplains bounds the policy explanations one queue order may ask for
// (policy.Order); maxReasons is how many jobs at the head of the queue get
// the policy's own account of where they wait as their reason.
const (
	maxExplains = 48
	maxReasons  = 20
)

// Queue implements ui.DataSource: the waiting jobs in the policy's own
// order (its explanations, when it gives them; else submission order),
// each with its reason. No ETAs: gandiva kube makes no forecasts.
func (d *Dashboard) Queue(_ context.Context, v api.Principal) (*ui.Queue, error) {
	var all *ui.Queue
	var since float64 // seconds since the cached queue's waiting times
	if err := d.with(func(s *Scheduler, _ uint64) error {
		all = s.queue()
		since = max(s.shownNow()-s.ui.qAt, 0)
		return nil
	}); err != nil {
		return nil, err
	}
	q := &ui.Queue{Policy: all.Policy, Order: all.Order, Jobs: make([]ui.QueuedJob, 0, len(all.Jobs))}
	for _, j := range all.Jobs {
		if !v.Admin && j.User != v.User {
			q.Hidden++
			continue
		}
		j.Waited += since // (a copy: the cached queue is not modified)
		q.Jobs = append(q.Jobs, j)
	}
	return q, nil
}

// queue is the whole queue, cached until the timeline or the rounds move
// (under the dashboard lock). The cached queue is never modified.
func (s *Scheduler) queue() *ui.Queue {
	key := [2]uint64{s.ui.rec.Version(), uint64(s.stats.Rounds)}
	if s.ui.q != nil && s.ui.qkey == key {
		return s.ui.q
	}
	snap := s.eng.Snapshot()
	var order []cluster.JobID
	for _, j := range snap.Active() {
		if j.State.Waiting() && !j.Probe {
			order = append(order, j.ID)
		}
	}
	q := &ui.Queue{Policy: s.o.Policy, Order: "submission"}
	reasons := map[cluster.JobID]string{}
	if ex, ok := s.pol.(policy.Explainer); ok {
		q.Order = "policy"
		order = policy.Order(snap, ex, order, maxExplains)
		for _, id := range order[:min(len(order), maxReasons)] {
			if e := ex.Explain(snap, id); e.Queue != "" {
				reasons[id] = e.Queue
			}
		}
	}
	q.Jobs = make([]ui.QueuedJob, 0, len(order))
	now := s.shownNow()
	for i, id := range order {
		ws, ej := s.wsOf(id), s.eng.Job(id)
		if ws == nil || ej == nil {
			continue
		}
		qj := ui.QueuedJob{Position: i + 1, ID: ej.Spec.Name, Name: ws.w.name, User: ws.w.ns, State: ej.State.String(),
			GPUs: ej.Spec.GPUs, Submitted: ej.Submitted, Waited: max(now-ej.QueuedAt, 0), Reason: ej.Reason}
		if ws.waitMsg != "" {
			qj.Reason = ws.waitMsg // what its pods' PodScheduled condition says
		}
		if r, ok := reasons[id]; ok {
			qj.Reason = r
		}
		q.Jobs = append(q.Jobs, qj)
	}
	s.ui.q, s.ui.qkey, s.ui.qAt = q, key, now
	return q
}

// shownNow is the dashboard's clock (under the dashboard lock): the wall
// clock, as engine time. The engine's own time moves only when the loop
// steps, and a cluster with nothing happening may not step for hours; its
// clock and waiting times must not stop with it.
func (s *Scheduler) shownNow() float64 {
	return max(s.ui.rec.Now(), s.last, s.clk.of(time.Now()))
}

// Nodes implements ui.DataSource: the nodes with GPUs (a node deleted is
// gone), the viewer's jobs on each by name and the others counted.
func (d *Dashboard) Nodes(_ context.Context, v api.Principal) ([]api.Node, error) {
	var out []api.Node
	err := d.with(func(s *Scheduler, _ uint64) error {
		snap := s.eng.Snapshot()
		for _, ns := range s.servers {
			if !ns.alive {
				continue
			}
			st := nodeStatus(ns)
			n := api.Node{Name: ns.name, GPUType: ns.shape.gpuType, GPUs: ns.shape.gpus, FreeGPUs: s.free(snap, ns),
				Up: st != "down", Drained: st == "drained", Reason: ns.why}
			if st == "drained" {
				n.Reason = "node is cordoned"
			}
			for _, j := range s.ui.rec.OnServer(ns.id) {
				if v.Admin || j.User == v.User {
					n.Jobs = append(n.Jobs, j.Name)
				} else {
					n.OtherJobs++
				}
			}
			out = append(out, n)
		}
		return nil
	})
	return out, err
}

// namespaces lists the namespaces with workloads of Gandiva's, in order
// (nil when this replica does not lead).
func (d *Dashboard) namespaces() []string {
	var out []string
	d.with(func(s *Scheduler, _ uint64) error {
		seen := map[string]bool{}
		for _, ws := range s.ws {
			if !seen[ws.w.ns] {
				seen[ws.w.ns] = true
				out = append(out, ws.w.ns)
			}
		}
		return nil
	})
	slices.Sort(out)
	return out
}

// ---- authentication ----

// Reviewer is the dashboard's api.Authenticator on Kubernetes: a bearer
// token is authenticated by the API server (TokenReview) and authorized
// with SubjectAccessReviews of "list pods":
//
//   - a principal that may list pods in every namespace is an admin: it
//     sees every job;
//   - any other principal sees one namespace's jobs by name (api.Principal
//     has one user, and the user is the namespace): a ServiceAccount's own
//     namespace if it may list pods there, else the one namespace with
//     Gandiva's workloads in which it may list pods. A principal that may
//     list pods in several such namespaces (and is not a ServiceAccount of
//     one of them) is refused (403, naming them): it should use a
//     ServiceAccount token of the namespace it wants to see. One that may
//     list pods in none sees no job by name.
//
// Other namespaces' jobs are shown as taken GPUs, as the live server's
// dashboard shows other users'. Answers are cached for TTL (failed
// authentications for a fifth of it), keyed by the token's SHA-256.
type Reviewer struct {
	cs  kubernetes.Interface
	d   *Dashboard
	ttl time.Duration
	now func() time.Time

	mu    sync.Mutex
	cache map[[32]byte]review
}

type review struct {
	p     api.Principal
	err   error
	until time.Time
}

// maxCached bounds the cache; when full, expired answers are dropped, and
// if none is, all.
const maxCached = 4096

// NewReviewer returns a Reviewer asking the API server of cs, for the
// namespaces of d's workloads; ttl 0 is 30 s.
func NewReviewer(cs kubernetes.Interface, d *Dashboard, ttl time.Duration) *Reviewer {
	if ttl <= 0 {
		ttl = 30 * time.Second
	}
	return &Reviewer{cs: cs, d: d, ttl: ttl, now: time.Now, cache: map[[32]byte]review{}}
}

var _ api.Authenticator = (*Reviewer)(nil)

// errNotAuthenticated is what a token the API server does not accept gets.
var errNotAuthenticated = errors.New("the Kubernetes API server does not accept the token")

// Authenticate implements api.Authenticator.
func (r *Reviewer) Authenticate(token string) (api.Principal, error) {
	key := sha256.Sum256([]byte(token))
	now := r.now()
	r.mu.Lock()
	c, ok := r.cache[key]
	r.mu.Unlock()
	if ok && now.Before(c.until) {
		return c.p, c.err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	p, keep, err := r.review(ctx, token)
	if keep {
		ttl := r.ttl
		if err != nil {
			ttl /= 5
		}
		r.mu.Lock()
		if len(r.cache) >= maxCached {
			for k, c := range r.cache {
				if !now.Before(c.until) {
					delete(r.cache, k)
				}
			}
			if len(r.cache) >= maxCached {
				clear(r.cache)
			}
		}
		r.cache[key] = review{p: p, err: err, until: now.Add(ttl)}
		r.mu.Unlock()
	}
	return p, err
}

// review asks the API server; keep is false when the answer must not be
// cached (the API server did not answer).
func (r *Reviewer) review(ctx context.Context, token string) (api.Principal, bool, error) {
	tr, err := r.cs.AuthenticationV1().TokenReviews().Create(ctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return api.Principal{}, false, api.Unavailable("cannot check the token: TokenReview: %v", err)
	}
	if !tr.Status.Authenticated {
		return api.Principal{}, true, errNotAuthenticated
	}
	u := tr.Status.User
	may := func(ns string) (bool, error) {
		sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{User: u.Username, Groups: u.Groups, UID: u.UID,
			ResourceAttributes: &authzv1.ResourceAttributes{Namespace: ns, Verb: "list", Resource: "pods"}}}
		if len(u.Extra) > 0 {
			sar.Spec.Extra = map[string]authzv1.ExtraValue{}
			for k, v := range u.Extra {
				sar.Spec.Extra[k] = authzv1.ExtraValue(v)
			}
		}
		res, err := r.cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		if err != nil {
			return false, api.Unavailable("cannot check the token's rights: SubjectAccessReview: %v", err)
		}
		return res.Status.Allowed, nil
	}
	all, err := may("")
	if err != nil {
		return api.Principal{}, false, err
	}
	if all {
		return api.Principal{User: u.Username, Admin: true}, true, nil
	}
	own := ""
	if rest, ok := strings.CutPrefix(u.Username, "system:serviceaccount:"); ok {
		own, _, _ = strings.Cut(rest, ":")
	}
	if own != "" {
		ok, err := may(own)
		if err != nil {
			return api.Principal{}, false, err
		}
		if ok {
			return api.Principal{User: own}, true, nil
		}
	}
	var allowed []string
	for _, ns := range r.d.namespaces() {
		if ns == own {
			continue
		}
		ok, err := may(ns)
		if err != nil {
			return api.Principal{}, false, err
		}
		if ok {
			allowed = append(allowed, ns)
		}
	}
	switch len(allowed) {
	case 0:
		// a name no namespace can have (namespaces are DNS labels): no job is its own
		return api.Principal{User: "kubernetes:" + u.Username}, true, nil
	case 1:
		return api.Principal{User: allowed[0]}, true, nil
	}
	return api.Principal{}, true, api.Forbidden("%s may list pods in several namespaces with Gandiva's jobs (%s), and the dashboard shows one namespace per token: use the token of a ServiceAccount of the namespace to see (kubectl -n NAMESPACE create token NAME)",
		u.Username, strings.Join(allowed, ", "))
}

// ---- serving ----

// Handler serves the dashboard under /ui/ (its page, and its JSON API
// behind auth's tokens) and GET /healthz ("leading" or "standing by",
// 200 either way); nothing else.
func (d *Dashboard) Handler(auth api.Authenticator, log *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	uh := ui.Handler(d, auth, ui.Options{Log: log})
	mux.Handle("/ui/", uh)
	mux.Handle("/ui", uh)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if d.Leading() {
			fmt.Fprintln(w, "leading")
		} else {
			fmt.Fprintln(w, "standing by")
		}
	})
	mux.HandleFunc("/", http.NotFound)
	return mux
}

// Serve serves d.Handler on ln, with tokens checked by a Reviewer over cs,
// until ctx ends.
func (d *Dashboard) Serve(ctx context.Context, ln net.Listener, cs kubernetes.Interface, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	srv := &http.Server{Handler: d.Handler(NewReviewer(cs, d, 0), log), ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout: 2 * time.Minute, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			srv.Shutdown(sctx)
			cancel()
		case <-done:
		}
	}()
	err := srv.Serve(ln)
	close(done)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("dashboard: %w", err)
}
