package kube

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/gandiva-sched/gandiva/internal/kube/shared"
)

// Metrics are the Prometheus metrics of `gandiva kube` (--metrics-addr;
// the table in docs/KUBERNETES.md). Create them with NewMetrics, pass
// them as Options.Metrics to Run, and serve Handler.
//
// Nothing here takes a lock of the scheduler's loop: at each scrape the
// collector reads the leading Scheduler's Stats (the copy the loop
// publishes after each step) and its informers' caches (safe from any
// goroutine), and counts the Events the scheduler records as they go by.
// A replica that does not lead reports gandiva_leader 0 and its process
// metrics only. Labels are bounded: namespaces that hold Gandiva's pods,
// the Event reasons of this package's code, fixed states; never a pod's
// or a Job's name.
type Metrics struct {
	reg *prometheus.Registry

	mu     sync.Mutex
	s      *Scheduler // the leading term's (nil: not leading)
	events map[[2]string]float64
	// the term's histograms, built from Stats' bind latencies as they come
	sched, call *cumHist
}

// NewMetrics returns metrics that show no scheduler until Run leads.
func NewMetrics() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), events: map[[2]string]float64{}}
	m.reg.MustRegister(metricsCollector{m},
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	return m
}

// Registry is the registry the metrics are on (tests lint it).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in Prometheus' exposition formats.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{MaxRequestsInFlight: 4, Timeout: 30 * time.Second})
}

// Serve serves /metrics on ln until ctx ends.
func (m *Metrics) Serve(ctx context.Context, ln net.Listener) error {
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 60 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 16 << 10}
	go func() {
		<-ctx.Done()
		c, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		srv.Shutdown(c)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// lead is told of each term's Scheduler (nil when the term ends). A new
// term's counters start again from zero (as after a restart: Prometheus'
// rate and increase take it as a counter reset).
func (m *Metrics) lead(s *Scheduler) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.s = s
	m.sched, m.call = newCumHist(schedBuckets), newCumHist(callBuckets)
}

// maxEventReasons bounds the reasons gandiva_events_total counts
// separately (the package's code has about twenty; the rest, if ever,
// go under "other").
const maxEventReasons = 64

// event counts one Event the scheduler recorded (the broadcaster's
// watcher calls it, from its own goroutine).
func (m *Metrics) event(e *corev1.Event) {
	if e.Source.Component != "gandiva" {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [2]string{e.Type, e.Reason}
	if _, ok := m.events[k]; !ok && len(m.events) >= maxEventReasons {
		k = [2]string{e.Type, "other"}
	}
	m.events[k]++
}

// Bucket bounds: create→bound includes the wait in the queue (seconds to
// hours); the binding call is milliseconds.
var (
	schedBuckets = prometheus.ExponentialBuckets(0.001, 2, 26) // 1 ms … 9.3 h
	callBuckets  = prometheus.ExponentialBuckets(0.0005, 2, 16)
)

// cumHist is a cumulative histogram fed from a Stats list of durations
// that grows by appending and is emptied when it reaches its bound, with
// the count of entries ever appended.
type cumHist struct {
	bounds []float64
	counts []uint64 // per bucket, not cumulative
	sum    float64
	n      uint64
	total  int // entries ever appended, as of the last add
	// Lost counts entries appended and dropped from the list between two
	// adds (more than the list's bound between two scrapes)
	lost int
}

func newCumHist(bounds []float64) *cumHist {
	return &cumHist{bounds: bounds, counts: make([]uint64, len(bounds))}
}

// add counts the entries appended since the last add: the last
// total-h.total of list (all of it, and the rest lost, if it holds fewer).
func (h *cumHist) add(list []time.Duration, total int) {
	fresh := total - h.total
	if fresh < 0 { // (a new term's counters; lead resets h)
		fresh = len(list)
	}
	if fresh > len(list) {
		h.lost += fresh - len(list)
		fresh = len(list)
	}
	for _, d := range list[len(list)-fresh:] {
		v := d.Seconds()
		h.sum += v
		h.n++
		for i, b := range h.bounds {
			if v <= b {
				h.counts[i]++
				break
			}
		}
	}
	h.total = total
}

func (h *cumHist) metric(d *prometheus.Desc) prometheus.Metric {
	buckets := make(map[float64]uint64, len(h.bounds))
	var c uint64
	for i, b := range h.bounds {
		c += h.counts[i]
		buckets[b] = c
	}
	return prometheus.MustNewConstHistogram(d, h.n, h.sum, buckets)
}

// The metrics' names follow Prometheus' conventions (base units, _total
// for counters) and the ecosystem's: kube-scheduler's
// scheduler_pod_scheduling_sli_duration_seconds and client-go's
// workqueue_* have their gandiva_ counterparts here.
var (
	descLeader = prometheus.NewDesc("gandiva_leader",
		"1 while this replica leads (holds the Lease and schedules), else 0.", nil, nil)
	descRounds = prometheus.NewDesc("gandiva_engine_rounds_total",
		"Scheduling rounds of the engine and policy in this term.", nil, nil)
	descRoundDur = prometheus.NewDesc("gandiva_engine_round_duration_seconds",
		"Wall time of scheduling rounds (the engine and policy, Kubernetes' limits, telling waiting jobs why) in this term.", nil, nil)
	descRoundMax = prometheus.NewDesc("gandiva_engine_round_max_duration_seconds",
		"The longest scheduling round of this term.", nil, nil)
	descSubmitted = prometheus.NewDesc("gandiva_workloads_submitted_total",
		"Workloads (Jobs, pod gangs, ...) given to the engine in this term (a restart submits the running ones again).", nil, nil)
	descEnded = prometheus.NewDesc("gandiva_workloads_ended_total",
		"Workloads the engine saw end (completed, failed or deleted) in this term.", nil, nil)
	descBound = prometheus.NewDesc("gandiva_pods_bound_total",
		"Pods bound to nodes by this scheduler in this term.", nil, nil)
	descPatches = prometheus.NewDesc("gandiva_workload_patches_total",
		"Patches of workloads' suspend field and annotations (suspend, resume, placement) in this term.", nil, nil)
	descCalls = prometheus.NewDesc("gandiva_api_calls_total",
		"Calls to the Kubernetes API server by the scheduler's workers (bindings, patches, conditions) in this term.", nil, nil)
	descCallErrors = prometheus.NewDesc("gandiva_api_call_errors_total",
		"Calls that failed, by cause: conflict (the caches were behind; retried), error (logged), queue_full (refused before being made: the dispatcher's queue was full).", []string{"cause"}, nil)
	descGaveUp = prometheus.NewDesc("gandiva_bindings_refused_total",
		"Bindings the API server refused for good, given back to the engine as failed actions, in this term.", nil, nil)
	descSchedDur = prometheus.NewDesc("gandiva_pod_scheduling_duration_seconds",
		"Per pod bound: from the scheduler's first sight of it pending to the binding's answer (its wait in the queue included).", nil, nil)
	descBindDur = prometheus.NewDesc("gandiva_binding_duration_seconds",
		"Per pod bound: the binding call, from the worker's call to its answer.", nil, nil)
	descQueueDepth = prometheus.NewDesc("gandiva_workqueue_depth",
		"Keys (workloads, nodes) marked for the scheduler's loop to look at, at its last step.", nil, nil)
	descQueueBackoff = prometheus.NewDesc("gandiva_workqueue_backoff_keys",
		"Keys waiting out a retry back-off, at the loop's last step.", nil, nil)
	descQueueAdds = prometheus.NewDesc("gandiva_workqueue_adds_total",
		"Marks of keys (merged or not) in this term.", nil, nil)
	descQueueRetries = prometheus.NewDesc("gandiva_workqueue_retries_total",
		"Retry back-offs started in this term.", nil, nil)
	descEvents = prometheus.NewDesc("gandiva_events_total",
		"Kubernetes Events the scheduler recorded, by type and reason (reason Preempted counts preemptions, Waiting tells why a workload waits; docs/KUBERNETES.md).", []string{"type", "reason"}, nil)
	descWorkloads = prometheus.NewDesc("gandiva_workloads",
		"Workloads of Gandiva with live pods, by namespace and state: pending (no pod bound yet) or running (some bound). Suspended workloads have no pods and are not counted.", []string{"namespace", "state"}, nil)
	descNSGPUs = prometheus.NewDesc("gandiva_namespace_gpus",
		"GPUs of Gandiva's live pods by namespace: bound (held) or pending (waited for).", []string{"namespace", "state"}, nil)
	descGPUs = prometheus.NewDesc("gandiva_gpus",
		"GPUs of the cluster's nodes by use: total (allocatable), gandiva (held by Gandiva's pods and shared nodes' reservations), other (other schedulers' pods), free (on nodes that are up).", []string{"use"}, nil)
	descNodes = prometheus.NewDesc("gandiva_nodes",
		"Nodes with GPUs by status: up, drained (cordoned) or down (not Ready, or being deleted).", []string{"status"}, nil)
)

type metricsCollector struct{ m *Metrics }

func (c metricsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLeader, descRounds, descRoundDur, descRoundMax, descSubmitted, descEnded, descBound,
		descPatches, descCalls, descCallErrors, descGaveUp, descSchedDur, descBindDur, descQueueDepth, descQueueBackoff,
		descQueueAdds, descQueueRetries, descEvents, descWorkloads, descNSGPUs, descGPUs, descNodes} {
		ch <- d
	}
}

func (c metricsCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.m
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, v := range m.events {
		ch <- prometheus.MustNewConstMetric(descEvents, prometheus.CounterValue, v, k[0], k[1])
	}
	s := m.s
	if s == nil {
		ch <- prometheus.MustNewConstMetric(descLeader, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(descLeader, prometheus.GaugeValue, 1)
	st := s.Stats()
	counter := func(d *prometheus.Desc, v int, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), lv...)
	}
	gauge := func(d *prometheus.Desc, v int, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), lv...)
	}
	counter(descRounds, st.Rounds)
	ch <- prometheus.MustNewConstSummary(descRoundDur, uint64(max(st.Rounds, 0)), st.RoundTime.Seconds(), nil)
	ch <- prometheus.MustNewConstMetric(descRoundMax, prometheus.GaugeValue, st.MaxRound.Seconds())
	counter(descSubmitted, st.Submitted)
	counter(descEnded, st.Ended)
	counter(descBound, st.Binds)
	counter(descPatches, st.JobPatches)
	counter(descCalls, st.Calls)
	counter(descCallErrors, st.BindConflicts, "conflict")
	counter(descCallErrors, st.Errors, "error")
	counter(descCallErrors, st.Refused, "queue_full")
	counter(descGaveUp, st.GaveUp)
	m.sched.add(st.BindLatency, st.BindTimed)
	m.call.add(st.BindCall, st.BindTimed)
	ch <- m.sched.metric(descSchedDur)
	ch <- m.call.metric(descBindDur)
	gauge(descQueueDepth, st.Queue.Depth)
	gauge(descQueueBackoff, st.Queue.Waiting)
	counter(descQueueAdds, st.Queue.Adds)
	counter(descQueueRetries, st.Queue.Retries)
	if s.podLister == nil || s.nodeLister == nil || s.pods == nil {
		return
	}
	cs := clusterState(s)
	for ns, n := range cs.workloads {
		gauge(descWorkloads, n[0], ns, "pending")
		gauge(descWorkloads, n[1], ns, "running")
	}
	for ns, n := range cs.gpus {
		gauge(descNSGPUs, n[0], ns, "pending")
		gauge(descNSGPUs, n[1], ns, "bound")
	}
	gauge(descGPUs, cs.total, "total")
	gauge(descGPUs, cs.ours, "gandiva")
	gauge(descGPUs, cs.other, "other")
	gauge(descGPUs, cs.free, "free")
	gauge(descNodes, cs.up, "up")
	gauge(descNodes, cs.drained, "drained")
	gauge(descNodes, cs.down, "down")
}

// metricsState is what the informers' caches show at a scrape.
type metricsState struct {
	// per namespace: workloads pending and running; GPUs pending and bound
	workloads, gpus          map[string][2]int
	total, ours, other, free int
	up, drained, down        int
}

// clusterState counts from the Scheduler's informer caches (safe from
// any goroutine; the loop is not involved).
func clusterState(s *Scheduler) metricsState {
	st := metricsState{workloads: map[string][2]int{}, gpus: map[string][2]int{}}
	perNode := map[string][2]int{} // ours, other
	pods, _ := s.podLister.List(labels.Everything())
	for _, p := range pods {
		if terminal(p) {
			continue
		}
		g := gpusOf(&p.Spec)
		_, resv := p.Labels[shared.LabelReservation]
		if p.Spec.NodeName != "" {
			u := perNode[p.Spec.NodeName]
			if p.Spec.SchedulerName == SchedulerName {
				u[0] += g
			} else {
				u[1] += g
			}
			perNode[p.Spec.NodeName] = u
		}
		if p.Spec.SchedulerName != SchedulerName || resv || p.DeletionTimestamp != nil {
			continue
		}
		if n, ok, _ := sharedGPUs(p.Annotations, &p.Spec, ""); ok {
			g = n
		}
		u := st.gpus[p.Namespace]
		if p.Spec.NodeName == "" {
			u[0] += g
		} else {
			u[1] += g
		}
		st.gpus[p.Namespace] = u
	}
	// workloads: the scheduler's own index of pods by workload
	idx := s.pods.GetIndexer()
	for _, k := range idx.ListIndexFuncValues(indexWorkload) {
		objs, _ := idx.ByIndex(indexWorkload, k)
		ns, alive, bound := "", false, false
		for _, o := range objs {
			p, ok := o.(*corev1.Pod)
			if !ok || terminal(p) || p.DeletionTimestamp != nil {
				continue
			}
			ns, alive, bound = p.Namespace, true, bound || p.Spec.NodeName != ""
		}
		if !alive {
			continue
		}
		n := st.workloads[ns]
		if bound {
			n[1]++
		} else {
			n[0]++
		}
		st.workloads[ns] = n
	}
	nodes, _ := s.nodeLister.List(labels.Everything())
	for _, n := range nodes {
		g := shapeOf(n).gpus
		if g == 0 {
			continue
		}
		u := perNode[n.Name]
		st.total += g
		st.ours += u[0]
		st.other += u[1]
		usable, _ := nodeUsable(n)
		switch {
		case !usable:
			st.down++
		case n.Spec.Unschedulable:
			st.drained++
		default:
			st.up++
			st.free += max(g-u[0]-u[1], 0)
		}
	}
	return st
}
