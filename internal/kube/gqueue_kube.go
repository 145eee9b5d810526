package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/ui"
)

// QueueGVR is the GandivaQueue resource (deploy/base/crds/gandivaqueues.yaml).
var QueueGVR = schema.GroupVersionResource{Group: "gandiva.io", Version: "v1alpha1", Resource: "gandivaqueues"}

// Status writes: a queue's status is written at most every queueStatusEvery,
// and, when only its GPU-seconds changed, at most every queueSecondsEvery.
const (
	queueStatusEvery  = 5 * time.Second
	queueSecondsEvery = 30 * time.Second
)

// gqState is the scheduler's side of the GandivaQueues: their informer (set
// by startQueues once the API server serves them) and what the loop made
// of them.
type gqState struct {
	mu  sync.Mutex
	inf cache.SharedIndexInformer
	// told: a failure to read them was logged (once a term)
	told bool
	// the rest is the loop goroutine's
	t  gqTree
	st gqStatus
}

// gqTree is the queues' tree as the loop last read it, and the shares it
// gave the namespaces with work.
type gqTree struct {
	sig    string // names and resourceVersions of the objects read
	tree   *queueTree
	objs   map[string]*unstructured.Unstructured
	quotas map[string][]engine.Quota // namespace → the quotas of its queues
	// active: the namespaces with work when tickets were last set; ns and
	// qs their shares and the queues'
	active []string
	ns, qs map[string]float64
	// use: GPUs held per "quota name/GPU type", computed in round useAt
	use   map[string]int
	useAt int
	// warned: ConfigMap keys warned about (the queues win)
	warned map[string]bool
}

// gqStatus is what the loop wrote of each queue's status.
type gqStatus struct {
	secs    map[string]float64        // GPU-seconds attained per queue
	held    map[string]map[string]int // per queue: GPUs held per type at acctAt
	acctAt  float64
	written map[string]string // the status last written (less GPU-seconds)
	at      map[string]time.Time
	secsAt  map[string]time.Time
}

func (g *gqState) informer() cache.SharedIndexInformer {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inf
}

// queueInformer is the GandivaQueues' informer, not yet started, when the
// API server serves them now (the CRD installed), else nil: run syncs it
// with the others, so that the first round knows the queues.
func (s *Scheduler) queueInformer(ctx context.Context) cache.SharedIndexInformer {
	dyn := s.o.Dynamic
	if dyn == nil {
		return nil
	}
	if _, err := dyn.Resource(QueueGVR).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		s.gq.mu.Lock()
		told := s.gq.told
		s.gq.told = true
		s.gq.mu.Unlock()
		if !apierrors.IsNotFound(err) && !told {
			s.log.Info("GandivaQueues not readable (looked for every 20 s)", "err", err)
		}
		return nil
	}
	inf := dynamicinformer.NewFilteredDynamicInformer(dyn, QueueGVR, "", 0, cache.Indexers{}, nil).Informer()
	mark := func(any) { s.q.Add(qkey{kind: keySettings}) }
	inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: mark, UpdateFunc: func(_, o any) { mark(o) }, DeleteFunc: mark})
	s.gq.mu.Lock()
	s.gq.inf = inf
	s.gq.mu.Unlock()
	return inf
}

// startQueues, when the term began without GandivaQueues (queueInformer
// found none), looks for them every poll until the API server serves
// them, then runs their informer, which marks the settings key at every
// change. It returns when ctx ends.
func (s *Scheduler) startQueues(ctx context.Context, poll time.Duration) {
	if s.o.Dynamic == nil || s.gq.informer() != nil {
		return
	}
	var inf cache.SharedIndexInformer
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(poll):
		}
		if inf = s.queueInformer(ctx); inf != nil {
			break
		}
	}
	s.gq.mu.Lock()
	s.gq.inf = nil // (shown to the loop once synced)
	s.gq.mu.Unlock()
	mark := func(any) { s.q.Add(qkey{kind: keySettings}) }
	done := make(chan struct{})
	go func() { defer close(done); inf.Run(ctx.Done()) }()
	if cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		s.gq.mu.Lock()
		s.gq.inf = inf
		s.gq.mu.Unlock()
		s.log.Info("GandivaQueues read")
		mark(nil)
	}
	<-done
}

// refreshQueues rebuilds the tree when the informer shows other objects.
func (s *Scheduler) refreshQueues() {
	t := &s.gq.t
	inf := s.gq.informer()
	if inf == nil {
		return
	}
	objs := inf.GetStore().List()
	var sig strings.Builder
	byName := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		if u, ok := o.(*unstructured.Unstructured); ok && len(byName) < maxQueues {
			byName[u.GetName()] = u
		}
	}
	names := slices.Sorted(maps.Keys(byName))
	for _, n := range names {
		fmt.Fprintf(&sig, "%s@%s,", n, byName[n].GetResourceVersion())
	}
	if sig.String() == t.sig && t.tree != nil {
		return
	}
	t.sig, t.objs = sig.String(), byName
	var qs []Queue
	bad := map[string]string{}
	for _, n := range names {
		data, err := json.Marshal(byName[n].Object)
		if err != nil {
			bad[n] = err.Error()
			continue
		}
		q, err := parseQueue(data)
		if err != nil {
			bad[n] = err.Error()
			continue
		}
		q.Quota = canonicalQuota(q.Quota)
		qs = append(qs, q)
	}
	t.tree = buildQueueTree(qs, bad)
	t.quotas = map[string][]engine.Quota{}
	for ns := range t.tree.ns {
		var out []engine.Quota
		for _, q := range t.tree.path(ns) {
			if len(q.Quota) > 0 {
				out = append(out, engine.Quota{Name: "queue " + q.Name, Max: q.Quota})
			}
		}
		t.quotas[ns] = out
	}
	t.useAt = -1
	for _, n := range t.tree.names {
		if why := t.tree.invalid[n]; why != "" {
			s.log.Warn("GandivaQueue not valid", "queue", n, "why", why)
		}
	}
}

// canonicalQuota spells known GPU types as the engine does (h100: H100).
func canonicalQuota(q map[string]int) map[string]int {
	if len(q) == 0 {
		return q
	}
	out := make(map[string]int, len(q))
	for typ, n := range q {
		if kt, err := cluster.LookupGPUType(typ); err == nil {
			typ = kt.Name
		}
		out[typ] = n
	}
	return out
}

// queuesOn reports whether some GandivaQueue is valid: then the queues'
// tree, not the settings ConfigMap alone, gives the namespaces' tickets.
func (s *Scheduler) queuesOn() bool { return s.gq.t.tree != nil && len(s.gq.t.tree.qs) > 0 }

// activeNamespaces is the namespaces with work: a workload submitted and
// not over. Sorted.
func (s *Scheduler) activeNamespaces() []string {
	seen := map[string]bool{}
	for _, ws := range s.byID {
		if ws != nil && !ws.ended {
			seen[ws.w.ns] = true
		}
	}
	return keysOf(seen)
}

// queuesDue reports whether the namespaces with work changed since the
// tickets were last split down the queues' tree (then syncSettings splits
// them again before the round).
func (s *Scheduler) queuesDue() bool {
	return s.queuesOn() && s.pending > 0 && !slices.Equal(s.activeNamespaces(), s.gq.t.active)
}

// queueTickets turns the settings' tickets (from the ConfigMap: key
// "tickets/NS") into the tickets the policy is given when GandivaQueues
// exist: each namespace with work gets its share of the tree (queueShares)
// as tickets, 100 for the whole cluster. Namespaces of no queue weigh
// their ConfigMap tickets (else 1) beside the root queues; a namespace a
// queue holds ignores its ConfigMap tickets, with a warning: the queues
// win. Without a valid queue, want is returned as it is.
func (s *Scheduler) queueTickets(want map[string]string) map[string]string {
	s.refreshQueues()
	t := &s.gq.t
	if !s.queuesOn() {
		t.active, t.ns, t.qs = nil, nil, nil
		return want
	}
	if t.warned == nil {
		t.warned = map[string]bool{}
	}
	other := map[string]float64{}
	for _, k := range keysOf(boolKeys(want)) {
		ns, ok := strings.CutPrefix(k, "tickets/")
		if !ok {
			continue
		}
		if q := t.tree.ns[ns]; q != "" {
			if !t.warned[k] {
				t.warned[k] = true
				s.log.Warn("settings: the ConfigMap's tickets of a namespace that a GandivaQueue holds are ignored (the queue's tree gives its share)",
					"key", "tickets."+ns, "queue", q)
			}
		} else if n, err := strconv.ParseFloat(want[k], 64); err == nil && n >= 0 && n <= maxQueueTickets {
			other[ns] = n
		}
		delete(want, k)
	}
	t.active = s.activeNamespaces()
	t.ns, t.qs = t.tree.queueShares(t.active, other, 1)
	for _, ns := range t.active {
		want["tickets/"+ns] = strconv.FormatFloat(100*t.ns[ns], 'g', 6, 64)
	}
	return want
}

// Quotas implements engine.Quotas: the GPU quotas of the queues of job j's
// namespace (its own queue's first).
func (s *Scheduler) Quotas(j cluster.JobID) []engine.Quota {
	ws := s.wsOf(j)
	if ws == nil || s.gq.t.quotas == nil {
		return nil
	}
	return s.gq.t.quotas[ws.w.ns]
}

var _ engine.Quotas = (*Scheduler)(nil)

// quotaUse is the GPUs held, per "quota name/GPU type", by the workloads
// the engine runs now (computed once per round).
func (s *Scheduler) quotaUse() map[string]int {
	t := &s.gq.t
	if t.use != nil && t.useAt == s.stats.Rounds {
		return t.use
	}
	t.use, t.useAt = map[string]int{}, s.stats.Rounds
	for _, ws := range s.byID {
		if ws == nil || ws.ended {
			continue
		}
		qs := t.quotas[ws.w.ns]
		j := s.eng.Job(ws.id)
		if len(qs) == 0 || j == nil {
			continue
		}
		for _, g := range j.GPUs {
			typ := s.c.GPUType(g).Name
			for _, q := range qs {
				t.use[q.Name+"/"+typ]++
			}
		}
	}
	return t.use
}

// quotaWaitReason says why job j waits when its queues' GPU quotas are
// the cause (ok false otherwise): on every GPU type of the nodes its pods
// may run on, one of its queues' quotas has less room than the job needs.
func (s *Scheduler) quotaWaitReason(j *cluster.Job, state string, need int, where string) (class, msg string, ok bool) {
	ws := s.wsOf(j.ID)
	if ws == nil || len(s.gq.t.quotas[ws.w.ns]) == 0 {
		return "", "", false
	}
	qs := s.gq.t.quotas[ws.w.ns]
	typesOf := map[string]bool{}
	for _, ns := range s.servers {
		if ns.alive && s.Fits(j.ID, ns.id) {
			typesOf[s.c.TypeOf(ns.id).Name] = true
		}
	}
	if len(typesOf) == 0 {
		return "", "", false
	}
	use := s.quotaUse()
	var why []string
	for _, typ := range keysOf(typesOf) {
		denied := false
		for _, q := range qs {
			if m, capped := q.Max[typ]; capped && use[q.Name+"/"+typ]+need > m {
				why = append(why, fmt.Sprintf("%s allows %d %s GPUs and its workloads hold %d", q.Name, m, typ, use[q.Name+"/"+typ]))
				denied = true
				break
			}
		}
		if !denied {
			return "", "", false
		}
	}
	return "quota", fmt.Sprintf("%s: needs %d GPUs, over its GandivaQueue's GPU quota (spec.quota): %s; it may start once its queue's workloads hold fewer: %s",
		state, need, strings.Join(why, "; "), where), true
}

// queueStatus is the status Gandiva writes on a GandivaQueue.
type queueStatus struct {
	// GPUs held now by the workloads of its namespaces and of the queues
	// under it, in all and per GPU type
	GPUs  int            `json:"gpus"`
	Usage map[string]int `json:"usage,omitempty"`
	// GPUSeconds attained by them while Gandiva led (carried on by each
	// new leader from the status it finds)
	GPUSeconds float64 `json:"gpuSeconds"`
	// Share is the fraction of the cluster's GPUs its tickets give it now,
	// split down the tree among the queues and namespaces with work;
	// Entitlement is that share in GPUs.
	Share       float64            `json:"share"`
	Entitlement float64            `json:"entitlement"`
	Conditions  []metav1.Condition `json:"conditions"`
}

// accountQueues adds to each queue's GPU-seconds what it held since the
// last accounting, and returns what it holds now: per queue, the GPUs of
// each type its namespaces' workloads and its sub-queues' hold.
func (s *Scheduler) accountQueues(now float64) map[string]map[string]int {
	t, st := &s.gq.t, &s.gq.st
	held := map[string]map[string]int{}
	for _, ws := range s.byID {
		if ws == nil || ws.ended {
			continue
		}
		j := s.eng.Job(ws.id)
		if j == nil || len(j.GPUs) == 0 {
			continue
		}
		for _, q := range t.tree.path(ws.w.ns) {
			if held[q.Name] == nil {
				held[q.Name] = map[string]int{}
			}
			for _, g := range j.GPUs {
				held[q.Name][s.c.GPUType(g).Name]++
			}
		}
	}
	dt := max(0, now-st.acctAt)
	for q, per := range st.held {
		for _, n := range per {
			st.secs[q] += float64(n) * dt
		}
	}
	st.held, st.acctAt = held, now
	return held
}

// schedulableGPUs is the GPUs of the nodes alive and usable.
func (s *Scheduler) schedulableGPUs() int {
	total := 0
	for _, ns := range s.servers {
		if ns.alive && ns.usable {
			total += s.c.Servers[ns.id].NumGPUs
		}
	}
	return total
}

// writeQueueStatus writes the queues' status through the low dispatcher:
// one whose usage, share, entitlement or validity changed at most every
// queueStatusEvery, one whose GPU-seconds alone changed at most every
// queueSecondsEvery. It returns when a status held back is due (0: none).
func (s *Scheduler) writeQueueStatus(now float64) float64 {
	t, st := &s.gq.t, &s.gq.st
	if t.tree == nil || len(t.tree.names) == 0 || s.o.Dynamic == nil {
		return 0
	}
	if st.secs == nil {
		st.secs, st.held, st.written, st.at, st.secsAt = map[string]float64{}, map[string]map[string]int{}, map[string]string{}, map[string]time.Time{}, map[string]time.Time{}
		st.acctAt = now - 1
	}
	if every := s.clk.engineSecs(time.Second); now < st.acctAt+every {
		return st.acctAt + every // (at most once a wall second: it looks at every workload)
	}
	held := s.accountQueues(now)
	total := s.schedulableGPUs()
	wall := time.Now()
	due := 0.0
	for _, name := range t.tree.names {
		u := t.objs[name]
		if u == nil {
			continue
		}
		if _, ok := st.secs[name]; !ok {
			if v, found, _ := unstructured.NestedFieldNoCopy(u.Object, "status", "gpuSeconds"); found {
				st.secs[name] = nonNegative(v)
			}
		}
		qs := queueStatus{Usage: held[name], Share: t.qs[name]}
		for _, n := range held[name] {
			qs.GPUs += n
		}
		qs.Entitlement = math.Round(qs.Share*float64(total)*1000) / 1000
		qs.Share = math.Round(qs.Share*1e6) / 1e6
		cond := validCondition(u, t.tree.invalid[name], wall)
		qs.Conditions = []metav1.Condition{cond}
		qs.Conditions[0].LastTransitionTime = metav1.Time{}
		key, _ := json.Marshal(qs)
		qs.Conditions[0] = cond
		qs.GPUSeconds = math.Round(st.secs[name]*10) / 10
		changed := string(key) != st.written[name]
		if !changed && (qs.GPUSeconds == 0 || wall.Sub(st.secsAt[name]) < queueSecondsEvery) {
			continue
		}
		if wait := queueStatusEvery - wall.Sub(st.at[name]); wait > 0 {
			if d := now + s.clk.engineSecs(wait); due == 0 || d < due {
				due = d
			}
			continue
		}
		if s.busy("gq:" + name) {
			continue
		}
		st.written[name], st.at[name], st.secsAt[name] = string(key), wall, wall
		body, _ := json.Marshal([]map[string]any{{"op": "add", "path": "/status", "value": qs}})
		dyn, qname := s.o.Dynamic, name
		s.submitLow(op{key: "gq:" + name, do: func(ctx context.Context) opResult {
			_, err := dyn.Resource(QueueGVR).Patch(ctx, qname, types.JSONPatchType, body, metav1.PatchOptions{}, "status")
			if err != nil && !apierrors.IsNotFound(err) {
				return opResult{err: fmt.Errorf("writing GandivaQueue %s status: %w", qname, err)}
			}
			return opResult{}
		}})
	}
	return due
}

func nonNegative(v any) float64 {
	var f float64
	switch x := v.(type) {
	case int64:
		f = float64(x)
	case float64:
		f = x
	}
	if !(f >= 0) || math.IsInf(f, 0) {
		return 0
	}
	return f
}

// validCondition is a queue's Valid condition: True, or False with why;
// its transition time stays the one the object shows while its status
// does not change.
func validCondition(u *unstructured.Unstructured, why string, wall time.Time) metav1.Condition {
	c := metav1.Condition{Type: "Valid", Status: metav1.ConditionTrue, Reason: "Valid", Message: "in the tree of queues"}
	if why != "" {
		c.Status, c.Message = metav1.ConditionFalse, why
		switch {
		case strings.Contains(why, "cycle"):
			c.Reason = "Cycle"
		case strings.Contains(why, "no GandivaQueue of that name"):
			c.Reason = "UnknownParent"
		case strings.Contains(why, "belongs to queue"):
			c.Reason = "NamespaceClaimed"
		case strings.Contains(why, "not valid"):
			c.Reason = "ParentNotValid"
		case strings.Contains(why, "deep"):
			c.Reason = "TooDeep"
		default:
			c.Reason = "BadSpec"
		}
	}
	c.LastTransitionTime = metav1.NewTime(wall.UTC().Truncate(time.Second))
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, x := range conds {
		m, ok := x.(map[string]any)
		if !ok || m["type"] != c.Type || m["status"] != string(c.Status) {
			continue
		}
		if ts, ok := m["lastTransitionTime"].(string); ok {
			if at, err := time.Parse(time.RFC3339, ts); err == nil {
				c.LastTransitionTime = metav1.NewTime(at)
			}
		}
	}
	return c
}

// queueRows is the dashboard's view of the queues: the valid ones depth
// first (each queue's children in name order under it), then the others.
// Their GPUs are those of the last status accounting (at most a second
// old), their shares those of the last split of the tickets.
func (s *Scheduler) queueRows() []ui.QueueRow {
	t := s.gq.t.tree
	if t == nil || len(t.names) == 0 {
		return nil
	}
	total := s.schedulableGPUs()
	row := func(name string, depth int) ui.QueueRow {
		r := ui.QueueRow{Name: name, Depth: depth, Valid: t.invalid[name] == "", Why: t.invalid[name]}
		if q := t.qs[name]; q != nil {
			r.Parent, r.Tickets, r.Share = q.Parent, q.Tickets, s.gq.t.qs[name]
			r.Entitlement = math.Round(r.Share*float64(total)*100) / 100
			var quota []string
			for _, typ := range slices.Sorted(maps.Keys(q.Quota)) {
				quota = append(quota, fmt.Sprintf("%s: %d", typ, q.Quota[typ]))
			}
			r.Quota = strings.Join(quota, ", ")
		}
		for _, n := range s.gq.st.held[name] {
			r.GPUs += n
		}
		return r
	}
	var out []ui.QueueRow
	var walk func(parent string, depth int)
	walk = func(parent string, depth int) {
		for _, k := range t.kids[parent] {
			out = append(out, row(k, depth))
			walk(k, depth+1)
		}
	}
	walk("", 0)
	for _, name := range t.names {
		if t.invalid[name] != "" {
			out = append(out, row(name, 0))
		}
	}
	return out
}
