package kube

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/eta"
	"github.com/gandiva-sched/gandiva/internal/kube/shared"
	"github.com/gandiva-sched/gandiva/internal/policy"
)

// Scheduler runs the engine for one term of leadership: it rebuilds the
// state from the API server, then turns informer events into engine events
// and the engine's decisions into API calls (see the package comment).
// Create it with newScheduler; Run owns it.
type Scheduler struct {
	o   Options
	log *slog.Logger
	// debug: the log takes debug records (what is applied and assigned)
	debug      bool
	kubeAPI    // clients, informers, listers
	inbox      // what informer handlers and answers hand the loop
	engineSide // the engine, its executor and the loop's clock (loop goroutine)
	world      // the loop's records of workloads and nodes (loop goroutine)
	calls      // API calls and the assumed state they made (loop goroutine)
	// ui is the dashboard's state (with Options.Dashboard; ui.go)
	ui *uiState
	// fc is the latest ETA forecast (eta.go)
	fc etaState
	// gq is the GandivaQueues (gqueue_kube.go)
	gq gqState
	counters
}

// kubeAPI is the scheduler's access to the API server: clients, the
// informers' caches and their listers.
type kubeAPI struct {
	cs  kubernetes.Interface
	low kubernetes.Interface // events and waiting reasons
	rec record.EventRecorder

	pods, node, cms cache.SharedIndexInformer
	// kinds: the informers of the workload kinds (kinds.go), in order
	kinds []*kindInf
	cl    Clients
	// trainJobs: the TrainJobs' informer, for their progress reports
	// (kind_trainjob.go)
	trainJobs trainJobWatch

	podLister  corelisters.PodLister
	nodeLister corelisters.NodeLister
}

// inbox is what informer handlers (any goroutine) hand the loop.
type inbox struct {
	// q holds the keys to look at again, set by informer handlers and
	// answers, taken by the loop
	q *workQueue
	// mu guards seenAt and gone
	mu     sync.Mutex
	seenAt map[types.UID]time.Time // when a pending pod was first seen, for BindLatency
	gone   []types.UID             // pods deleted since the last step, whose records go
}

// engineSide is the engine with its policy and executor, and the loop's
// engine clock.
type engineSide struct {
	eng    *engine.Engine
	x      *kexec // the engine's executor: what it wants of each workload
	pol    policy.Policy
	c      *cluster.Cluster
	last   float64 // engine time of the last event or round
	clk    clock   // wall time → engine time (clock.go)
	wakeAt float64
	// statusAt is when writeStatus has writes to make that it held back
	// (engine time; 0: none): the loop wakes for them, the engine does not
	// (conditions.go)
	statusAt float64
	recovery bool
	// rebuilding: the rebuild waits for PodGroup reads (rebuild)
	rebuilding bool
	settings   map[string]string
	pending    int // engine events applied since the last round
}

// world is the loop's record of workloads and nodes.
type world struct {
	ws      map[string]*wstate
	byID    []*wstate
	nodes   map[string]*nstate
	servers []*nstate
	fits    map[string][]int8 // constraint signature → per server: 0 unknown, 1 fits, 2 does not
	blocked []int
	groups  map[string]int // plain-pod workload key → PodGroup minMember (0: none)
	// waitRoom: per node, the running workloads whose pods wait for room there
	waitRoom map[string]map[string]bool
	// statusScan is when writeStatus last looked at the workloads (conditions.go)
	statusScan time.Time
}

// calls is the scheduler's API calls and what they changed that the
// informers do not show yet (cache.go).
type calls struct {
	// disp runs bindings, patches and assignments, lowDisp pending pods'
	// waiting conditions and PodGroup reads, on workers of their own;
	// refused are calls a full queue refused, reported as failed
	disp, lowDisp *dispatcher
	refused       []opResult
	// binds: pods bound by us, until the informer shows them; patched:
	// Jobs as our last patch returned them; asg: shared pods' assignments
	// being written and the last this term wrote, which stands whatever
	// the pod's annotation shows (shared.go, assignOf)
	binds   *assumeCache[types.UID, bindRec]
	patched *assumeCache[string, Object]
	asg     *assumeCache[types.UID, shared.Assign]
	// expireAt: when binds' expired entries are next looked for
	expireAt time.Time
	// etaWrites: the running pods' AnnETA writes of this second
	// (eta_running.go)
	etaWrites etaBudget
}

// counters is what the scheduler counts (for tests and benchmarks): stats,
// the loop's; shown, the copy Stats returns, guarded by statsMu.
type counters struct {
	stats   Stats
	statsMu sync.Mutex
	shown   Stats
}

// Stats counts what a Scheduler did.
type Stats struct {
	Rounds, Binds, BindConflicts, JobPatches, Errors int
	Submitted, Ended                                 int
	// RoundTime is the total wall time of rounds (the engine and policy,
	// Kubernetes' limits, telling waiting jobs why), MaxRound the longest.
	RoundTime, MaxRound time.Duration
	// BindLatency holds, for each pod bound, the time from the informer's
	// first sight of it pending to the binding's answer (the scheduler's
	// share of create→bound), in order; at most the last 100,000.
	BindLatency []time.Duration
	// BindCall holds, for the same pods, the binding call's share: from
	// the worker's call to its answer.
	BindCall []time.Duration
	// BindTimed counts the pods whose BindLatency (and BindCall) was
	// recorded, ever in this term (the lists keep the last 100,000 of them).
	BindTimed int
	// Queue is the work queue's counters; Calls the API calls made,
	// Refused those a full dispatcher queue refused.
	Queue          QueueStats
	Calls, Refused int
	// GaveUp counts the actions the engine applied that the executor gave
	// up on and reported back (engine.Engine.Refused): bindings the API
	// server refused for good.
	GaveUp int
	// ETALooks counts the looks at a running workload's pods to write
	// their end ETA (tellRunningOne).
	ETALooks int
}

// wstate is the loop's record of one workload.
type wstate struct {
	w     *workload
	id    cluster.JobID // NoJob until submitted
	ended bool          // the engine knows it is over
	// what users were last told about its wait
	waitClass string
	waitMsg   string
	waitAt    time.Time
	lastState cluster.JobState
	announced bool // the Warning for a bad workload was emitted
	// withdrawn: what a workload withdrawn from the engine by a reshape
	// carries to its next submission (reshape.go); nil once submitted;
	// reshapes: how many times it was withdrawn so (at most maxReshapes)
	withdrawn *carried
	reshapes  int
	// shared mode: the last Warning of reconcileShared, the last bad
	// agent status warned about, the agent failures warned about (pod →
	// generation+1), and the progress last passed to the engine
	warned    string
	badStatus string
	failed    map[types.UID]int64
	done      int64
	iterTime  float64
	// reportAt is when the progress report last passed to the engine was
	// observed (progressReporter; kind_trainjob.go)
	reportAt float64
	// the ETAs users are shown (eta.go, eta_running.go)
	shown etaShown
	// the status last written on its object (conditions.go)
	status statusShown
}

// etaShown is what a workload's users were last shown of its ETA.
type etaShown struct {
	// the ETA its waiting condition shows, and its text
	wait    eta.Estimate
	waitMsg string
	// while it runs: the end ETA its pods' AnnETA shows, its text, and
	// when each pod's was last written
	run    eta.Estimate
	runMsg string
	at     map[types.UID]time.Time
	// quietMsg is the text of the last look at its pods that found
	// nothing to write ("": none, or something to write): every live
	// bound pod showed it, or had its write held back until quietUntil
	// (zero: none held back; quietDue, the engine time then). The
	// round's sweep skips the workload while its text is still that,
	// until then (tellRunning).
	quietMsg   string
	quietUntil time.Time
	quietDue   float64
}

// nstate is the loop's record of one node.
type nstate struct {
	name   string
	id     cluster.ServerID
	shape  nodeShape
	alive  bool
	usable bool
	why    string
	node   *corev1.Node
	// GPUs of non-terminal pods bound here: of other schedulers, and Gandiva's
	foreign, ours int
	alloc         int
	// shared mode (shared.go): a node labelled gandiva.io/shared=true;
	// resv is its reservation pod (nil: none), reserved says it holds the
	// node's GPUs for Gandiva now; sharedPods counts the non-terminal
	// shared pods bound here.
	shared     bool
	resv       *corev1.Pod
	reserved   bool
	sharedPods int
	// relook: its labels or taints changed since the last round (see
	// computeBlocked)
	relook bool
}

// bindRec is a binding we made that the informer has not shown yet.
type bindRec struct {
	node   string
	gpus   int
	shared bool
	pod    *corev1.Pod // a shared pod, as we bound it
}

// op is one API call (or a short sequence) run by a worker.
type op struct {
	key string // in-flight key: at most one op per key
	wl  string // the workload to look at again when it is done
	do  func(ctx context.Context) opResult
	tok tokens // the assumptions it made (cache.go)
	// fail is its result should it never run (refused, replaced): what
	// do returns on an error, less the error
	fail opResult
}

// tokens are the assume-cache tokens of an op's assumptions (0: none).
type tokens struct{ bind, asg, job uint64 }

type opResult struct {
	key, wl  string
	err      error
	bound    *corev1.Pod // a binding made
	boundTo  string
	job      Object         // the workload's object as patched
	asg      types.UID      // a shared pod whose assignment was not written
	wrote    *shared.Assign // the assignment written on pod bound (shared mode)
	wroteOn  types.UID
	conflict bool
	called   time.Time    // when the call was made (bindings)
	at       time.Time    // when the call returned
	tok      tokens       // the op's
	group    *groupAnswer // a PodGroup read (podgroup.go)
}

const (
	indexWorkload = "gandiva.io/workload"
	indexNode     = "gandiva.io/node"
)

// workloadKey is the workload a pod of Gandiva belongs to, or "".
func workloadKey(p *corev1.Pod) string {
	if p.Spec.SchedulerName != SchedulerName {
		return ""
	}
	if _, ok := p.Labels[shared.LabelReservation]; ok {
		return "" // a reservation pod (shared.go)
	}
	return podKind(p)
}

func newScheduler(cs, low kubernetes.Interface, o Options, rec record.EventRecorder) (*Scheduler, error) {
	clk, err := newClock(o.ClockSpeed, time.Now())
	if err != nil {
		return nil, err
	}
	s := &Scheduler{o: o, log: o.Log,
		kubeAPI:    kubeAPI{cs: cs, low: low, rec: rec},
		inbox:      inbox{q: newWorkQueue(retryBase, retryMax), seenAt: map[types.UID]time.Time{}},
		engineSide: engineSide{settings: map[string]string{}, clk: clk},
		world: world{ws: map[string]*wstate{}, nodes: map[string]*nstate{}, fits: map[string][]int8{},
			groups: map[string]int{}, waitRoom: map[string]map[string]bool{}},
		calls: calls{binds: newAssumeCache[types.UID, bindRec](bindExpiry, false),
			patched: newAssumeCache[string, Object](0, false),
			asg:     newAssumeCache[types.UID, shared.Assign](0, true)}}
	s.disp = newDispatcher(dispatchQueue, callTimeout, s.q.poke)
	s.lowDisp = newDispatcher(dispatchQueue, callTimeout, s.q.poke)
	s.debug = o.Log.Enabled(context.Background(), slog.LevelDebug)
	inner, err := o.newPolicy()
	if err != nil {
		return nil, err
	}
	s.pol = inner
	if o.Dashboard != nil {
		s.ui = newUIState()
	}
	s.c = &cluster.Cluster{Name: "kubernetes"}
	fail := engine.FailurePolicy{MaxAttempts: 1} // the Job controller retries pods; a failed Job is over
	s.x = &kexec{c: s.c, node: func(sv cluster.ServerID) string { return s.servers[sv].name }}
	s.eng = engine.New(s.c, s.pol, s.x, engineOptions(o, clk, &fail, s))

	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTransform(trim))
	s.pods = f.Core().V1().Pods().Informer()
	s.node = f.Core().V1().Nodes().Informer()
	s.podLister = f.Core().V1().Pods().Lister()
	s.cl = Clients{Typed: cs, Dynamic: o.Dynamic, Factory: f}
	for _, k := range workloadKinds {
		ki := &kindInf{k: k}
		s.kinds = append(s.kinds, ki)
		inf, err := k.Informer(&s.cl)
		if err != nil {
			ki.why = err.Error()
			s.log.Info("workload kind off until the API server serves it", "kind", k.GVK().String(), "why", err)
			continue
		}
		s.watchKind(ki, inf)
		ki.inf = inf
	}
	s.nodeLister = f.Core().V1().Nodes().Lister()
	if err := s.pods.AddIndexers(cache.Indexers{
		indexWorkload: func(obj any) ([]string, error) {
			if k := workloadKey(obj.(*corev1.Pod)); k != "" {
				return []string{k}, nil
			}
			return nil, nil
		},
		indexNode: func(obj any) ([]string, error) {
			if n := obj.(*corev1.Pod).Spec.NodeName; n != "" {
				return []string{n}, nil
			}
			return nil, nil
		},
	}); err != nil {
		return nil, err
	}
	s.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.podChanged(nil, obj) },
		UpdateFunc: func(old, obj any) { s.podChanged(old, obj) },
		DeleteFunc: func(obj any) {
			s.podChanged(nil, obj)
			if p, ok := unwrap(obj).(*corev1.Pod); ok {
				s.mu.Lock()
				delete(s.seenAt, p.UID)
				s.gone = append(s.gone, p.UID)
				s.mu.Unlock()
			}
		},
	})
	s.node.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    s.nodeChanged,
		UpdateFunc: func(_, obj any) { s.nodeChanged(obj) },
		DeleteFunc: s.nodeChanged,
	})
	if o.Namespace != "" && o.SettingsConfigMap != "" {
		cf := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(o.Namespace),
			informers.WithTweakListOptions(func(lo *metav1ListOptions) { lo.FieldSelector = "metadata.name=" + o.SettingsConfigMap }))
		s.cms = cf.Core().V1().ConfigMaps().Informer()
		mark := func(any) { s.q.Add(qkey{kind: keySettings}) }
		s.cms.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: mark, UpdateFunc: func(_, o any) { mark(o) }, DeleteFunc: mark})
	}
	return s, nil
}

// trim drops what Gandiva never reads from cached objects (managed fields
// are most of a pod's size).
func trim(obj any) (any, error) {
	if a, err := meta.Accessor(obj); err == nil {
		a.SetManagedFields(nil)
	}
	return obj, nil
}

const (
	// retryBase and retryMax bound the back-off of a key whose API call
	// failed (workQueue.Retry)
	retryBase = 5 * time.Millisecond
	retryMax  = 10 * time.Second
	// bindExpiry is how long a binding answered but never shown by the
	// informer counts (the pod deleted meanwhile, an informer that missed it)
	bindExpiry = 5 * time.Minute
	// dispatchQueue is the most API calls queued per dispatcher;
	// callTimeout bounds each call
	dispatchQueue = 4096
	callTimeout   = 30 * time.Second
)

// busy reports whether an API call for key is queued, in flight, or
// answered and not yet taken by the loop.
func (s *Scheduler) busy(key string) bool { return s.disp.Busy(key) || s.lowDisp.Busy(key) }

// submit queues a call; one a full queue refuses is reported as failed
// at the next step (its workload is then retried after a back-off).
func (s *Scheduler) submit(o op) { s.add(s.disp, o) }

// submitLow queues a call that may wait behind bindings.
func (s *Scheduler) submitLow(o op) { s.add(s.lowDisp, o) }

func (s *Scheduler) add(d *dispatcher, o op) {
	if d.Add(o) {
		return
	}
	r := o.fail
	r.key, r.wl, r.tok, r.err = o.key, o.wl, o.tok, errDispatchFull
	s.refused = append(s.refused, r)
	s.q.poke()
}

func unwrap(obj any) any {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return obj
}

func (s *Scheduler) podChanged(old, obj any) {
	p, ok := unwrap(obj).(*corev1.Pod)
	if !ok {
		return
	}
	if k := workloadKey(p); k != "" {
		if old == nil && p.Spec.NodeName == "" && p.DeletionTimestamp == nil {
			s.mu.Lock()
			s.seenAt[p.UID] = time.Now()
			s.mu.Unlock()
		}
		s.q.Add(qkey{keyWorkload, k})
	}
	if p.Spec.NodeName != "" {
		s.q.Add(qkey{keyNode, p.Spec.NodeName})
	}
	if o, ok := unwrap(old).(*corev1.Pod); ok && o != nil && o.Spec.NodeName != "" && o.Spec.NodeName != p.Spec.NodeName {
		s.q.Add(qkey{keyNode, o.Spec.NodeName})
	}
}

// watchKind has the loop look at the workloads of kind ki whose objects
// inf shows changing.
func (s *Scheduler) watchKind(ki *kindInf, inf cache.SharedIndexInformer) {
	changed := func(obj any) {
		if o, ok := unwrap(obj).(Object); ok {
			s.q.Add(qkey{keyWorkload, objectKey(ki.k, o.GetNamespace(), o.GetName())})
		}
	}
	inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    changed,
		UpdateFunc: func(_, obj any) { changed(obj) },
		DeleteFunc: changed,
	})
}

func (s *Scheduler) nodeChanged(obj any) {
	n, ok := unwrap(obj).(*corev1.Node)
	if !ok {
		return
	}
	s.markNode(n.Name)
}

// markNode has the loop look at node name again (safe from any goroutine).
func (s *Scheduler) markNode(name string) { s.q.Add(qkey{keyNode, name}) }

// Stats returns a copy of the counters (safe from any goroutine).
func (s *Scheduler) Stats() Stats {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	st := s.shown
	st.BindLatency, st.BindCall = slices.Clone(st.BindLatency), slices.Clone(st.BindCall)
	return st
}

// now is the engine's time: seconds since the Unix epoch, never decreasing.
func (s *Scheduler) now() float64 {
	t := s.clk.of(time.Now())
	if t < s.last {
		t = s.last
	}
	s.last = t
	return t
}

// run is one term of leadership: informers, rebuild, then the loop until ctx ends.
func (s *Scheduler) run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	infs := []cache.SharedIndexInformer{s.pods, s.node}
	for _, ki := range s.kinds {
		if ki.inf != nil {
			infs = append(infs, ki.inf)
		}
	}
	if s.cms != nil {
		infs = append(infs, s.cms)
	}
	if inf := s.queueInformer(ctx); inf != nil { // GandivaQueues (gqueue_kube.go)
		infs = append(infs, inf)
	}
	synced := make([]cache.InformerSynced, 0, len(infs))
	for _, inf := range infs {
		wg.Add(1)
		go func() { defer wg.Done(); inf.Run(ctx.Done()) }()
		synced = append(synced, inf.HasSynced)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("kube: informers did not sync: %w", ctx.Err())
	}
	wg.Add(5)
	go func() { defer wg.Done(); s.startQueues(ctx, kindPoll) }()
	go func() { defer wg.Done(); s.startKinds(ctx, kindPoll) }()
	go func() { defer wg.Done(); s.watchTrainJobs(ctx, kindPoll) }()
	go func() { defer wg.Done(); s.disp.run(ctx, max(s.o.Workers, 1)) }()
	go func() { defer wg.Done(); s.lowDisp.run(ctx, 4) }()
	s.locked(s.rebuild)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		s.locked(s.step)
		d := time.Hour
		if s.wakeAt > 0 {
			d = s.clk.wall(s.wakeAt - s.clk.of(time.Now()))
			d = max(d, time.Millisecond)
		}
		if t := s.q.NextRetry(); !t.IsZero() {
			d = max(min(d, time.Until(t)), time.Millisecond)
		}
		if s.statusAt > 0 { // (status writes held back, no round)
			d = max(min(d, s.clk.wall(s.statusAt-s.clk.of(time.Now()))), time.Millisecond)
		}
		if t := s.fc.due; !t.IsZero() { // (a stale re-forecast, no round)
			d = max(min(d, time.Until(t)), time.Millisecond)
		}
		timer.Reset(d)
		select {
		case <-ctx.Done():
			return nil
		case <-s.q.Kick():
		case <-timer.C:
		}
	}
}

// rebuild makes the engine's state from the informers' caches: every node,
// every workload not over, submitted in creation order; the next round is
// a recovery round.
func (s *Scheduler) rebuild() {
	t0 := time.Now()
	now := s.now()
	keys := map[string]bool{}
	for _, ki := range s.kinds {
		inf := ki.informer()
		if inf == nil {
			continue
		}
		for _, o := range inf.GetStore().List() {
			if obj, ok := o.(Object); ok {
				keys[objectKey(ki.k, obj.GetNamespace(), obj.GetName())] = true
			}
		}
	}
	for _, k := range s.pods.GetIndexer().ListIndexFuncValues(indexWorkload) {
		keys[k] = true
	}
	type cand struct {
		key     string
		created time.Time
	}
	var cands []cand
	reading := false
	for k := range keys {
		w, _, pods := s.observe(k)
		if w != nil {
			cands = append(cands, cand{k, w.created})
		} else if _, ok := s.groups[k]; !ok && len(pods) > 0 && strings.HasPrefix(k, "pods/") {
			reading = true // its PodGroup is being read
		}
	}
	if s.rebuilding = reading; reading {
		return // again at each step until every PodGroup is read
	}
	slices.SortFunc(cands, func(a, b cand) int { return cmp.Or(a.created.Compare(b.created), cmp.Compare(a.key, b.key)) })
	// submissions at their creation times (so FIFO order survives a
	// restart), in order, never after now
	s.last = 0
	for _, c := range cands {
		t := s.clk.of(c.created)
		if t > now {
			t = now
		}
		s.last = max(s.last, t)
		s.syncWorkload(c.key, s.last)
	}
	s.last = now
	// the nodes after the submissions: their events are at now
	nodes, _ := s.nodeLister.List(labelsEverything())
	slices.SortFunc(nodes, func(a, b *corev1.Node) int { return cmp.Compare(a.Name, b.Name) })
	for _, n := range nodes {
		s.syncNode(n.Name, now)
	}
	s.syncSettings(now)
	s.recovery = true
	s.pending++ // a round now, even with nothing to submit
	s.log.Info("state rebuilt from the API server", "nodes", len(s.nodes), "workloads", len(cands), "took", time.Since(t0).Round(time.Millisecond))
}

// step takes the dirty marks and results, applies events, runs a round if
// due, and reconciles.
func (s *Scheduler) step() {
	s.mu.Lock()
	gone := s.gone
	s.gone = nil
	s.mu.Unlock()
	wall := time.Now()
	rs := append(s.refused, s.disp.Take()...)
	s.refused = nil
	rs = append(rs, s.lowDisp.Take()...)
	for _, r := range rs {
		if strings.HasPrefix(r.key, "podgroup:") {
			s.groupRead(r)
		}
		s.result(r, wall)
		if r.wl == "" {
			continue
		}
		if r.err != nil {
			s.q.Retry(qkey{keyWorkload, r.wl}, wall)
		} else {
			s.q.Forget(qkey{keyWorkload, r.wl})
			s.q.Add(qkey{keyWorkload, r.wl})
		}
	}
	s.forgetGone(gone)
	if s.rebuilding {
		if s.rebuild(); s.rebuilding {
			return
		}
	}
	var uids []types.UID
	var recs []bindRec
	if !wall.Before(s.expireAt) { // (at most once a second: it looks at every binding)
		s.expireAt = wall.Add(time.Second)
		uids, recs = s.binds.Expire(wall)
	}
	for i, uid := range uids {
		s.log.Warn("binding never shown by the informer; no longer counted", "pod", uid, "node", recs[i].node)
		s.markNode(recs[i].node) // its usage without it
	}
	dn, dw, cfg := map[string]bool{}, map[string]bool{}, false
	for _, k := range s.q.Take(wall) {
		switch k.kind {
		case keyNode:
			dn[k.name] = true
		case keyWorkload:
			dw[k.name] = true
		case keySettings:
			cfg = true
		}
	}
	now := s.now()
	names := keysOf(dn)
	for _, n := range names {
		for _, k := range s.syncNode(n, now) {
			dw[k] = true
		}
	}
	if cfg {
		s.syncSettings(now)
	}
	keys := keysOf(dw)
	for _, k := range keys {
		s.syncWorkload(k, now)
	}
	if s.queuesDue() { // (tickets split among the namespaces with work)
		s.syncSettings(now)
	}
	if s.pending > 0 || (s.wakeAt > 0 && now >= s.wakeAt) {
		for _, k := range s.round(now) {
			dw[k] = true
		}
		keys = keysOf(dw)
	} else if s.takeFresh() {
		// a forecast came: the waiting are told their ETAs, the running
		// their ends
		if w := s.tellWaiting(now); w > 0 && (s.wakeAt == 0 || w < s.wakeAt) {
			s.wakeAt = w
		}
		if w := s.tellRunning(now); w > 0 && (s.wakeAt == 0 || w < s.wakeAt) {
			s.wakeAt = w
		}
		if w := s.forecastSoon(); w > 0 && (s.wakeAt == 0 || w < s.wakeAt) {
			s.wakeAt = w // (the state changed while it ran)
		}
	} else if !s.fc.due.IsZero() && !time.Now().Before(s.fc.due) {
		// the last forecast is stale: made again, with no round (its end
		// pokes the loop, which then tells the ETAs as above)
		if w := s.forecastSoon(); w > 0 && (s.wakeAt == 0 || w < s.wakeAt) {
			s.wakeAt = w
		}
	}
	for _, k := range keys {
		if ws := s.ws[k]; ws != nil {
			s.reconcile(ws, now)
			if ws.id >= 0 && !ws.ended {
				// (its pods may have been bound since its ETA came)
				if w := s.tellRunningOne(ws, s.eng.Job(ws.id), now); w > 0 && (s.wakeAt == 0 || w < s.wakeAt) {
					s.wakeAt = w
				}
			}
		}
	}
	if w := s.writeQueueStatus(now); w > 0 && (s.wakeAt == 0 || w < s.wakeAt) {
		s.wakeAt = w
	}
	// (a status write held back wakes the loop, not the engine: no round)
	s.statusAt = s.writeStatus()
	if intentCheck != nil {
		intentCheck(s)
	}
	s.statsMu.Lock()
	s.shown = s.stats
	s.shown.Queue = s.q.Stats()
	s.shown.Calls, s.shown.Refused = s.disp.Stats().Calls+s.lowDisp.Stats().Calls, s.disp.Stats().Refused+s.lowDisp.Stats().Refused
	// (shared, not copied: the loop only appends past them, and starts
	// new arrays when it drops them; Stats copies them)
	s.shown.BindLatency = s.stats.BindLatency[:len(s.stats.BindLatency):len(s.stats.BindLatency)]
	s.shown.BindCall = s.stats.BindCall[:len(s.stats.BindCall):len(s.stats.BindCall)]
	s.statsMu.Unlock()
}

// round runs the engine and returns the keys of the workloads whose desired
// state changed.
func (s *Scheduler) round(now float64) []string {
	t0 := time.Now()
	defer func() {
		d := time.Since(t0)
		s.stats.RoundTime += d
		s.stats.MaxRound = max(s.stats.MaxRound, d)
	}()
	s.computeBlocked(now)
	if s.recovery {
		s.eng.Recover()
	}
	res, err := s.eng.Round(now)
	s.stats.Rounds++
	s.recovery = false
	s.pending = 0
	if err != nil {
		s.log.Error("engine round", "err", err)
		return nil
	}
	s.wakeAt = res.WakeAt
	// the workloads whose intent the executor changed
	var keys []string
	for _, id := range s.x.take() {
		if ws := s.wsOf(id); ws != nil {
			keys = append(keys, ws.w.key)
		}
	}
	for _, a := range res.Applied {
		ws := s.wsOf(a.Job)
		if ws == nil {
			continue
		}
		if s.debug {
			s.log.Debug("applied", "job", ws.w.key, "action", a.Action.String())
		}
		s.announce(ws, a)
	}
	for _, r := range res.Rejected {
		if ws := s.wsOf(r.Action.Job); ws != nil {
			s.log.Debug("action rejected", "job", ws.w.key, "action", r.Action.String(), "code", r.Code.String(), "reason", r.Reason)
		}
	}
	if w := s.tellWaiting(now); w > 0 && (s.wakeAt == 0 || w < s.wakeAt) {
		s.wakeAt = w
	}
	if w := s.tellRunning(now); w > 0 && (s.wakeAt == 0 || w < s.wakeAt) {
		s.wakeAt = w
	}
	if w := s.forecastSoon(); w > 0 && (s.wakeAt == 0 || w < s.wakeAt) {
		s.wakeAt = w
	}
	return keys
}

func (s *Scheduler) wsOf(id cluster.JobID) *wstate {
	if id < 0 || int(id) >= len(s.byID) {
		return nil
	}
	return s.byID[id]
}

// ---- nodes ----

// syncNode brings the engine's view of a node up to date and returns the
// workloads with pods on it (their capacity may have changed).
func (s *Scheduler) syncNode(name string, now float64) []string {
	n, err := s.nodeLister.Get(name)
	ns := s.nodes[name]
	if err != nil || n == nil {
		if ns != nil && ns.alive {
			ns.alive = false
			ns.node = nil
			s.fitsChanged()
			if err := s.apply(cluster.Event{Time: now, Kind: cluster.EvNodeDown, Node: ns.id, Reason: "node " + name + " deleted"}); err != nil {
				s.log.Error("node down", "node", name, "err", err)
			}
			s.pending++
			s.log.Info("node gone", "node", name)
		}
		return s.workloadsOn(name)
	}
	shape := shapeOf(n)
	if shape.gpus == 0 {
		if ns != nil && ns.alive {
			ns.alive = false
			s.apply(cluster.Event{Time: now, Kind: cluster.EvNodeDown, Node: ns.id, Reason: "node " + name + " has no GPUs now"})
			s.pending++
		}
		return nil
	}
	if ns != nil && ns.shape.sameServer(shape) && shape.hostMem != ns.shape.hostMem {
		// the label gandiva.io/shared=true set or removed, or a shared
		// node's memory changed: the same server (its jobs keep their
		// GPUs). Host memory is read on shared nodes only; a node that
		// stops being shared keeps what it had, for the jobs suspended
		// in it (its shared pods run on there until they end).
		if shape.hostMem == 0 {
			shape.hostMem = ns.shape.hostMem
		}
		ns.shape.hostMem = shape.hostMem
		s.c.Servers[ns.id].HostMemGiB = shape.hostMem
	}
	if ns == nil || ns.shape != shape {
		if ns != nil && ns.alive {
			// another GPU count, type, rack or domain is another
			// server: the old one goes down, and is no node any more
			s.apply(cluster.Event{Time: now, Kind: cluster.EvNodeDown, Node: ns.id, Reason: "node " + name + " changed shape"})
			ns.alive = false
			s.pending++
		}
		sname := name
		if ns != nil {
			sname = fmt.Sprintf("%s#%d", name, len(s.servers))
		}
		id, err := s.c.AddServer(sname, shape.gpuType, shape.gpus, shape.rack, shape.domain, shape.hostMem)
		if err != nil {
			s.log.Error("adding node", "node", name, "err", err)
			return nil
		}
		s.eng.AddServer()
		ns = &nstate{name: name, id: id, shape: shape}
		s.nodes[name] = ns
		s.servers = append(s.servers, ns)
		s.fitsChanged()
	}
	if !ns.alive || s.eng.Snapshot().Servers[ns.id].Up == false {
		ns.alive = true
		if err := s.eng.Apply(cluster.Event{Time: now, Kind: cluster.EvNodeUp, Node: ns.id}); err != nil {
			s.log.Error("node up", "node", name, "err", err)
		}
		s.pending++
		s.log.Info("node up", "node", name, "gpus", shape.gpus, "type", shape.gpuType)
	}
	// where jobs may run changed (labels, taints; gandiva.io/shared=true
	// set or removed): the policy looks again
	constraints := ns.node == nil || !sameConstraints(ns.node, n)
	if constraints {
		s.fitsChanged()
		ns.relook = ns.node != nil
	}
	usable, why := nodeUsable(n)
	if n.Spec.Unschedulable {
		usable, why = false, "node is cordoned"
	}
	changed := usable != ns.usable || constraints
	ns.usable, ns.why, ns.node = usable, why, n
	ns.alloc = shape.gpus
	old := ns.foreign + ns.ours
	oldReserved := ns.reserved
	ns.shared = isSharedNode(n)
	s.usage(ns)
	if ns.foreign+ns.ours != old || ns.reserved != oldReserved {
		changed = true
	}
	s.keepReservation(ns)
	out := s.workloadsOn(name)
	if changed {
		s.pending++ // free GPUs changed: the policy may place more
	}
	if ns.foreign+ns.ours < old || (changed && usable) || ns.shared {
		// (on a shared node, any pod change may be the acknowledgement
		// or the departure a workload waits for)
		// room freed: the gangs waiting for it may bind
		for k := range s.waitRoom[name] {
			out = append(out, k)
		}
		delete(s.waitRoom, name)
	}
	return out
}

// forgetGone drops the assumed writes and bindings of deleted pods (after
// the step's results: a write's result may come after its pod went). A
// binding still counted in its node's usage (assumed, not yet shown by the
// informer: a pod deleted while we bound it) frees its room there
// (roomFreed): its GPUs were otherwise counted until some other pod on
// that node changed, and the gangs waiting for room on it waited for ever.
func (s *Scheduler) forgetGone(gone []types.UID) {
	for _, uid := range gone {
		s.asg.Forget(uid)
		b, ok := s.binds.Get(uid)
		s.binds.Forget(uid)
		if ok {
			s.roomFreed(b.node)
		}
	}
}

// roomFreed recounts node name's usage after a binding of ours there was
// dropped (refused, or its pod gone before it was shown bound) and has the
// gangs waiting for room there look again. It asks for no policy round:
// the binding never held GPUs the engine counted as taken by others.
func (s *Scheduler) roomFreed(name string) {
	if ns := s.nodes[name]; ns != nil {
		s.usage(ns)
	}
	for k := range s.waitRoom[name] {
		s.q.Add(qkey{keyWorkload, k})
	}
	delete(s.waitRoom, name)
}

func sameConstraints(a, b *corev1.Node) bool {
	if len(a.Labels) != len(b.Labels) || len(a.Spec.Taints) != len(b.Spec.Taints) {
		return false
	}
	for k, v := range a.Labels {
		if b.Labels[k] != v {
			return false
		}
	}
	for i := range a.Spec.Taints {
		if !a.Spec.Taints[i].MatchTaint(&b.Spec.Taints[i]) || a.Spec.Taints[i].Value != b.Spec.Taints[i].Value {
			return false
		}
	}
	return true
}

func (s *Scheduler) fitsChanged() { clear(s.fits) }

// usage counts the GPUs of non-terminal pods bound to a node, ours and
// others', with our bindings the informer has not shown yet.
func (s *Scheduler) usage(ns *nstate) {
	ns.foreign, ns.ours = 0, 0
	ns.resv, ns.reserved, ns.sharedPods = nil, false, 0
	objs, _ := s.pods.GetIndexer().ByIndex(indexNode, ns.name)
	for _, o := range objs {
		p := o.(*corev1.Pod)
		s.binds.Confirm(p.UID) // the informer shows it now
		if s.isReservation(p) {
			ns.resv = p
			ns.reserved = !terminal(p) && p.DeletionTimestamp == nil && gpusOf(&p.Spec) >= ns.shape.gpus
			if !ns.shared && !terminal(p) {
				// a node no longer shared: its reservation holds the GPUs
				// from exclusive jobs too until it is deleted
				ns.foreign += gpusOf(&p.Spec)
			}
			continue
		}
		if terminal(p) {
			continue
		}
		if _, ok := p.Annotations[shared.AnnGPUs]; ok && p.Spec.SchedulerName == SchedulerName {
			ns.sharedPods++
		}
		g := gpusOf(&p.Spec)
		if p.Spec.SchedulerName == SchedulerName {
			ns.ours += g
		} else {
			ns.foreign += g
		}
	}
	s.binds.Range(func(_ types.UID, b bindRec) bool {
		if b.node == ns.name {
			ns.ours += b.gpus
			if b.shared {
				ns.sharedPods++
			}
		}
		return true
	})
}

func terminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// workloadsOn lists the workloads with pods bound to a node.
func (s *Scheduler) workloadsOn(node string) []string {
	objs, _ := s.pods.GetIndexer().ByIndex(indexNode, node)
	var out []string
	for _, o := range objs {
		if k := workloadKey(o.(*corev1.Pod)); k != "" {
			out = append(out, k)
		}
	}
	return out
}

// computeBlocked sets Blocked for every server before a round. A server
// with fewer GPUs blocked than at the last round (another scheduler's pods
// gone, a shared node's reservation made, pods that were leaving gone) is
// told to the engine as an EvNodeUp, as is one whose labels or taints
// changed (syncNode): GPUs came free for Gandiva with no job's event, and
// policies that plan only on events (preempt.Gate) must look again.
func (s *Scheduler) computeBlocked(now float64) {
	snap := s.eng.Snapshot()
	prev := len(s.blocked)
	s.blocked = slices.Grow(s.blocked[:0], len(s.servers))[:len(s.servers)]
	var up []*nstate
	for i, ns := range s.servers {
		before := -1
		if i < prev {
			before = s.blocked[i]
		}
		s.blocked[i] = s.blockedOn(snap, i, ns)
		if (s.blocked[i] < before || ns.relook) && ns.alive {
			up = append(up, ns)
		}
		ns.relook = false
	}
	// (after the loop: the snapshot is valid until the engine's next call)
	for _, ns := range up {
		if err := s.eng.Apply(cluster.Event{Time: now, Kind: cluster.EvNodeUp, Node: ns.id}); err != nil {
			s.log.Error("node up", "node", ns.name, "err", err)
		}
	}
}

// blockedOn is the GPUs of server i (node ns) that Gandiva may not place
// on now (Blocked).
func (s *Scheduler) blockedOn(snap *cluster.Snapshot, i int, ns *nstate) int {
	b := 0
	switch {
	case !ns.alive:
	case !ns.usable:
		b = ns.shape.gpus
	case ns.shared:
		// a shared node's GPUs are Gandiva's once its reservation pod
		// holds them; pods of other schedulers bound before it was
		// there still hold theirs
		b = ns.foreign
		if !ns.reserved {
			b = ns.shape.gpus
		}
	case ns.sharedPods > 0:
		// a node no longer shared whose shared pods still run: they
		// request no nvidia.com/gpu, and only the reservation keeps
		// other pods off their GPUs; none goes to exclusive jobs
		b = ns.shape.gpus
	default:
		held := ns.shape.gpus - snap.Servers[i].NumFree()
		ours := ns.ours
		b = ns.foreign
		if !s.recovery {
			b += max(0, ours-held)
		}
		// allocatable below what the node's shape says
		b += max(0, ns.shape.gpus-ns.alloc)
	}
	return min(b, ns.shape.gpus)
}

// Blocked implements engine.Constraints.
func (s *Scheduler) Blocked(sv cluster.ServerID) int {
	if int(sv) < len(s.blocked) {
		return s.blocked[sv]
	}
	return 0
}

// Fits implements engine.Constraints: taints, tolerations, node selector, required node affinity.
func (s *Scheduler) Fits(j cluster.JobID, sv cluster.ServerID) bool {
	ws := s.wsOf(j)
	if ws == nil || int(sv) >= len(s.servers) {
		return false
	}
	ns := s.servers[sv]
	if !ns.alive || ns.node == nil || ns.node.Name != ns.name {
		return false
	}
	if ws.w.shared != isSharedNode(ns.node) {
		return false // shared jobs on shared nodes only, exclusive ones on the others
	}
	f := s.fits[ws.w.sig]
	for len(f) < len(s.servers) {
		f = append(f, 0)
	}
	s.fits[ws.w.sig] = f
	if f[sv] == 0 {
		f[sv] = 2
		if podFits(ws.w.template, ns.node) {
			f[sv] = 1
		}
	}
	return f[sv] == 1
}

// podFits reports whether a pod may go to a node: its required node
// affinity and node selector match, and it tolerates the node's NoSchedule
// and NoExecute taints.
func podFits(p *corev1.Pod, n *corev1.Node) bool {
	if ok, _ := nodeaffinity.GetRequiredNodeAffinity(p).Match(n); !ok {
		return false
	}
	_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(n.Spec.Taints, p.Spec.Tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	})
	return !untolerated
}

// PodGPUs implements engine.Constraints.
func (s *Scheduler) PodGPUs(j cluster.JobID) int {
	if ws := s.wsOf(j); ws != nil {
		return ws.w.podGPUs
	}
	return 1
}

// Movable implements engine.Constraints.
func (s *Scheduler) Movable(j cluster.JobID) bool {
	ws := s.wsOf(j)
	return ws != nil && ws.w.preemptible
}

// Current implements engine.Constraints: the nodes of the workload's pods that hold
// GPUs now (bound), and of a moving Job, its recorded placement.
func (s *Scheduler) Current(j cluster.JobID) map[cluster.ServerID]int {
	ws := s.wsOf(j)
	if ws == nil {
		return nil
	}
	_, _, pods := s.observe(ws.w.key)
	out := map[cluster.ServerID]int{}
	for _, p := range pods {
		if p.DeletionTimestamp != nil || terminal(p) {
			continue
		}
		node := p.Spec.NodeName
		ns := s.nodes[node]
		if node == "" || ns == nil || !ns.alive {
			continue
		}
		out[ns.id] += ws.w.podGPUs
	}
	if ws.w.kind != nil {
		// a workload moving to its recorded placement counts as there
		if j, _ := s.object(ws.w); j != nil && j.GetAnnotations()[AnnState] == StateMoving {
			if p, err := parsePlacement(j.GetAnnotations()[AnnPlacement]); err == nil && len(out) == 0 {
				for node, k := range p {
					if ns := s.nodes[node]; ns != nil && ns.alive {
						out[ns.id] += k
					}
				}
			}
		}
	}
	return out
}

// ---- workloads ----

// object returns the object of a workload of a kind, newest of the
// informer's and the one our last patch returned.
func (s *Scheduler) object(w *workload) (Object, error) {
	j, err := s.cached(w.kind, w.ns, w.name)
	if p, _, ok := s.patched.Done(w.key); ok && p != nil {
		if err != nil || newer(p.GetResourceVersion(), j.GetResourceVersion()) {
			if err != nil && j == nil && p.GetUID() != w.uid {
				return nil, err
			}
			return p, nil
		}
		s.patched.Confirm(w.key)
	}
	return j, err
}

// cached is the informer's object of kind k named ns/name.
func (s *Scheduler) cached(k Kind, ns, name string) (Object, error) {
	i := kindIndex(k)
	if i < 0 || i >= len(s.kinds) {
		return nil, fmt.Errorf("kind %s not registered", k.Prefix())
	}
	inf := s.kinds[i].informer()
	if inf == nil {
		return nil, fmt.Errorf("kind %s not served: %s", k.GVK(), s.kinds[i].reason())
	}
	o, ok, err := inf.GetIndexer().GetByKey(ns + "/" + name)
	if err != nil {
		return nil, err
	}
	obj, isObj := o.(Object)
	if !ok || !isObj {
		return nil, fmt.Errorf("%s %s/%s not found", k.GVK().Kind, ns, name)
	}
	return obj, nil
}

// newer reports whether resource version a is after b (etcd revisions).
func newer(a, b string) bool {
	var x, y uint64
	if _, err := fmt.Sscan(a, &x); err != nil {
		return false
	}
	if _, err := fmt.Sscan(b, &y); err != nil {
		return false
	}
	return x > y
}

// observe reads a workload from the caches: its description (nil when it
// does not exist or is not Gandiva's), its object (a kind's; nil for
// plain pods) and its pods (all, sorted by completion index then name).
func (s *Scheduler) observe(key string) (*workload, Object, []*corev1.Pod) {
	kind, ns, name := splitKey(key)
	objs, _ := s.pods.GetIndexer().ByIndex(indexWorkload, key)
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		pods = append(pods, o.(*corev1.Pod))
	}
	slices.SortFunc(pods, func(a, b *corev1.Pod) int {
		return cmp.Or(cmp.Compare(podIndex(a), podIndex(b)), cmp.Compare(a.Name, b.Name))
	})
	if k := kindOf(kind); k != nil {
		probe := &workload{key: key, kind: k, ns: ns, name: name}
		j, err := s.object(probe)
		if err != nil || j == nil || !managedObject(k, j) {
			return nil, nil, pods
		}
		// keep only the pods of this object (not of one deleted with the same name)
		out := pods[:0]
		for _, p := range pods {
			if k.Owns(j, p) {
				out = append(out, p)
			}
		}
		return fromObject(k, j), j, out
	}
	switch kind {
	case "pods":
		if len(pods) == 0 {
			return nil, nil, nil
		}
		n, known := s.podGroupMin(key, pods[0])
		if !known {
			return nil, nil, pods // described once its PodGroup is read
		}
		return fromPods(ns, name, pods, n), nil, pods
	}
	return nil, nil, nil
}

// podIndex is a pod's completion index, or a large number.
func podIndex(p *corev1.Pod) int {
	if v, ok := p.Annotations[batchv1.JobCompletionIndexAnnotation]; ok {
		var i int
		if _, err := fmt.Sscan(v, &i); err == nil {
			return i
		}
	}
	return math.MaxInt32
}

// syncWorkload tells the engine what changed about a workload.
func (s *Scheduler) syncWorkload(key string, now float64) {
	w, j, pods := s.observe(key)
	ws := s.ws[key]
	if ws != nil && w != nil && ws.w.uid != w.uid && ws.w.kind != nil {
		// a new object with the old one's name: the old one is gone
		s.end(ws, now, cluster.EvCancel, "deleted")
		delete(s.ws, key)
		ws = nil
	}
	if w == nil {
		if ws != nil {
			s.end(ws, now, cluster.EvCancel, "deleted")
			delete(s.ws, key)
		}
		return
	}
	over, failed, why := false, false, ""
	if w.kind != nil {
		over, failed, why = w.kind.Finished(j)
		if st := j.GetAnnotations()[AnnState]; st == StateKilled {
			over, why = true, "killed by the policy"
		}
	} else {
		over, failed, why = podsFinished(pods, w.gang)
	}
	if ws == nil {
		if over {
			return // over before we saw it run: nothing to schedule
		}
		ws = &wstate{w: w, id: cluster.NoJob}
		s.ws[key] = ws
		if w.bad != "" {
			s.warnBad(ws, j, pods)
			return
		}
		s.submitWorkload(ws, w, now)
		return
	}
	if ws.reshapes >= maxReshapes && w.bad == "" {
		// (reshape.go: its next reshape, or its resubmission, is refused)
		if prev := s.eng.Job(ws.id); prev == nil || reshaped(prev, ws.w.podGPUs, w) {
			w.bad = fmt.Sprintf("its gang was changed on its object %d times since Gandiva first saw it: delete it and create it again", maxReshapes)
		}
	}
	if ws.id == cluster.NoJob {
		if (ws.withdrawn != nil || ws.w.bad != "") && w.bad == "" && !over {
			// one Gandiva would not schedule (as it was first seen, or
			// withdrawn by a reshape: reshape.go), fixed since
			ws.w = w
			ws.announced = false
			s.submitWorkload(ws, w, now)
			return
		}
		if w.bad != "" && w.bad != ws.w.bad {
			ws.w = w
			ws.announced = false
			s.warnBad(ws, j, pods)
		}
		return
	}
	if prev := s.reshapeDue(ws, w); prev != nil && !over {
		// a user changed its gang on the object (reshape.go)
		s.reshape(ws, w, j, pods, prev, now)
		if ws.id == cluster.NoJob {
			return
		}
	}
	// keep the description current (constraints, preemptible), but not
	// the engine's spec, which is fixed at submission (a changed gang is
	// submitted again above)
	w.spec = ws.w.spec
	ws.w = w
	if j != nil && !ws.ended {
		s.observeCheckpoint(ws, j, now)
		s.observeProgress(ws, j, now)
	}
	if w.shared && !ws.ended {
		s.sharedProgress(ws, pods, now)
	}
	if over && !ws.ended {
		kind := cluster.EvFinish
		if failed {
			kind = cluster.EvFail
		}
		s.end(ws, now, kind, why)
	}
}

// podsFinished: plain pods are over when all of the gang succeeded, or one failed.
func podsFinished(pods []*corev1.Pod, gang int) (over, failed bool, why string) {
	ok := 0
	for _, p := range pods {
		switch p.Status.Phase {
		case corev1.PodFailed:
			return true, true, "pod " + p.Name + " failed: " + p.Status.Reason + " " + p.Status.Message
		case corev1.PodSucceeded:
			ok++
		}
	}
	if ok >= gang {
		return true, false, "completed"
	}
	return false, false, ""
}

// end tells the engine a workload is over (finish, fail or cancel as its
// state allows).
func (s *Scheduler) end(ws *wstate, now float64, kind cluster.EventKind, why string) {
	if ws.ended || ws.id == cluster.NoJob {
		ws.ended = true
		return
	}
	ws.ended = true
	s.stats.Ended++
	j := s.eng.Job(ws.id)
	if j == nil || j.State.Terminal() {
		return
	}
	switch {
	case kind == cluster.EvFinish && (j.State.Holding() || j.State == cluster.Suspended):
	case kind == cluster.EvFail && j.State.Holding():
	default:
		kind = cluster.EvCancel
	}
	if err := s.apply(cluster.Event{Time: now, Kind: kind, Job: ws.id, Reason: why, UserError: kind == cluster.EvFail}); err != nil && !errors.Is(err, engine.ErrStale) {
		s.log.Error("ending workload", "workload", ws.w.key, "err", err)
	}
	s.pending++
}

// syncSettings sends the settings ConfigMap's entries to the policy: key
// "tickets.team-a" becomes setting "tickets/team-a"; where GandivaQueues
// exist, their tree gives the tickets (queueTickets).
func (s *Scheduler) syncSettings(now float64) {
	want := map[string]string{}
	var objs []any
	if s.cms != nil {
		objs = s.cms.GetStore().List()
	}
	if len(objs) > 0 {
		for k, v := range objs[0].(*corev1.ConfigMap).Data {
			kind, rest, ok := strings.Cut(k, ".")
			if !ok || rest == "" {
				s.log.Warn("settings: ignoring key (want KIND.NAMESPACE, e.g. tickets.team-a)", "key", k)
				continue
			}
			want[kind+"/"+rest] = strings.TrimSpace(v)
		}
	}
	want = s.queueTickets(want) // GandivaQueues' tickets (gqueue_kube.go)
	for _, k := range keysOf(boolKeys(want)) {
		if s.settings[k] == want[k] {
			continue
		}
		if err := s.eng.Apply(cluster.Event{Time: now, Kind: cluster.EvSetting, Key: k, Value: want[k]}); err != nil {
			s.log.Error("setting", "key", k, "err", err)
			continue
		}
		s.settings[k] = want[k]
		s.pending++
		s.log.Info("setting", "key", k, "value", want[k])
	}
}

func boolKeys(m map[string]string) map[string]bool {
	out := make(map[string]bool, len(m))
	for k := range m {
		out[k] = true
	}
	return out
}

var _ engine.Constraints = (*Scheduler)(nil)
