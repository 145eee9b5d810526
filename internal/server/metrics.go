package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// serverMetrics are the server's Prometheus metrics, on a registry of its own
// (several servers can live in one test process).
type serverMetrics struct {
	reg       *prometheus.Registry
	submitted prometheus.Counter
	entries   prometheus.Counter
	commitDur prometheus.Histogram
	batch     prometheus.Histogram
	failed    *prometheus.CounterVec
	requests  *prometheus.CounterVec
	reqDur    *prometheus.HistogramVec
	conns     *prometheus.CounterVec
	snap      snapMetrics // snapshot.go
}

func newMetrics(s *Server) *serverMetrics {
	m := &serverMetrics{reg: prometheus.NewRegistry()}
	m.submitted = prometheus.NewCounter(prometheus.CounterOpts{Name: "gandiva_jobs_submitted_total", Help: "Jobs submitted through the API since the server started."})
	m.entries = prometheus.NewCounter(prometheus.CounterOpts{Name: "gandiva_log_entries_total", Help: "Entries appended to the write-ahead log since the server started."})
	m.commitDur = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "gandiva_store_commit_seconds", Help: "Time to commit (and fsync) one batch to the store.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)})
	m.batch = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "gandiva_store_batch_entries", Help: "Log entries per committed batch.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 11)})
	m.failed = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gandiva_log_entries_failed_total",
		Help: "Log entries that failed to apply, by kind (each is logged; a request's caller gets the error)."}, []string{"kind"})
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gandiva_api_requests_total", Help: "API requests by route and status."}, []string{"route", "code"})
	m.reqDur = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "gandiva_api_request_seconds", Help: "API request durations by route (long polls included).",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}, []string{"route"})
	m.conns = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gandiva_api_connections_closed_total",
		Help: "Connections the API closed at its connection cap: evicted (the longest waiting without a request, to make room) or refused (every connection busy)."}, []string{"why"})
	m.conns.WithLabelValues("evicted")
	m.conns.WithLabelValues("refused")
	m.reg.MustRegister(m.submitted, m.entries, m.failed, m.commitDur, m.batch, m.requests, m.reqDur, m.conns, &stateCollector{s},
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	replay := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "gandiva_replay_seconds", Help: "Time the last start took to recover its state (its snapshot and the log after it)."},
		func() float64 { return s.replayInfo().Took.Seconds() })
	diverged := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "gandiva_replay_divergences", Help: "State changes that differed from the recorded ones at the last replay (0 expected)."},
		func() float64 { return float64(s.replayInfo().Diverged) })
	m.reg.MustRegister(replay, diverged)
	m.snap = newSnapMetrics(m.reg, s)
	return m
}

func (m *serverMetrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

func (m *serverMetrics) observe(route string, status int, d time.Duration) {
	m.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
	m.reqDur.WithLabelValues(route).Observe(d.Seconds())
}

// failedEntry counts a log entry of kind that failed to apply.
func (m *serverMetrics) failedEntry(kind string) { m.failed.WithLabelValues(kind).Inc() }

func (m *serverMetrics) commit(d time.Duration, entries int) {
	m.commitDur.Observe(d.Seconds())
	m.batch.Observe(float64(entries))
	m.entries.Add(float64(entries))
}

// stateCollector reports the machine's state at scrape time.
type stateCollector struct{ s *Server }

var (
	descJobs     = prometheus.NewDesc("gandiva_jobs", "Jobs by state.", []string{"state"}, nil)
	descGPUs     = prometheus.NewDesc("gandiva_gpus", "GPUs of registered nodes, by use (free counts only schedulable nodes).", []string{"use"}, nil)
	descNodes    = prometheus.NewDesc("gandiva_nodes", "Nodes by status.", []string{"status"}, nil)
	descActions  = prometheus.NewDesc("gandiva_engine_actions_total", "Actions the engine applied, by kind (since the store was created: replayed).", []string{"kind"}, nil)
	descRounds   = prometheus.NewDesc("gandiva_engine_rounds_total", "Scheduling rounds (replayed included).", nil, nil)
	descRejected = prometheus.NewDesc("gandiva_engine_rejected_actions_total", "Policy actions the engine rejected.", nil, nil)
	descPreRun   = prometheus.NewDesc("gandiva_prerun_failures_total", "Jobs failed by their pre-run.", nil, nil)
)

func (sc *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descJobs, descGPUs, descNodes, descActions, descRounds, descRejected, descPreRun} {
		ch <- d
	}
}

func (sc *stateCollector) Collect(ch chan<- prometheus.Metric) {
	s := sc.s
	select {
	case <-s.ready:
	default:
		return // recovering: no state yet
	}
	if s.recErr != nil {
		return
	}
	s.mu.Lock() // Snapshot compacts the engine's lists
	defer s.mu.Unlock()
	c := s.m
	counts := map[string]int{}
	for _, j := range c.order {
		counts[c.eng.Job(j.eid).State.String()]++
	}
	for _, st := range []string{"queued", "running", "suspended", "migrating", "finished", "failed", "cancelled"} {
		ch <- prometheus.MustNewConstMetric(descJobs, prometheus.GaugeValue, float64(counts[st]), st)
	}
	snap := c.eng.Snapshot()
	up, down, drained := 0, 0, 0
	for i := range snap.Servers {
		switch {
		case !snap.Servers[i].Up:
			down++
		case snap.Servers[i].Drained:
			drained++
		default:
			up++
		}
	}
	ch <- prometheus.MustNewConstMetric(descGPUs, prometheus.GaugeValue, float64(c.c.NumGPUs()), "total")
	ch <- prometheus.MustNewConstMetric(descGPUs, prometheus.GaugeValue, float64(snap.FreeGPUs), "free")
	ch <- prometheus.MustNewConstMetric(descNodes, prometheus.GaugeValue, float64(up), "up")
	ch <- prometheus.MustNewConstMetric(descNodes, prometheus.GaugeValue, float64(down), "down")
	ch <- prometheus.MustNewConstMetric(descNodes, prometheus.GaugeValue, float64(drained), "drained")
	st := c.eng.Stats()
	for k, v := range map[string]int{"start": st.Starts, "suspend": st.Suspends, "resume": st.Resumes, "migrate": st.Migrations,
		"resize": st.Resizes, "kill": st.Kills, "pack": st.Packs, "retry": st.Retries} {
		ch <- prometheus.MustNewConstMetric(descActions, prometheus.CounterValue, float64(v), k)
	}
	ch <- prometheus.MustNewConstMetric(descRounds, prometheus.CounterValue, float64(st.Rounds))
	ch <- prometheus.MustNewConstMetric(descRejected, prometheus.CounterValue, float64(c.rejected))
	ch <- prometheus.MustNewConstMetric(descPreRun, prometheus.CounterValue, float64(st.PreRunFailures))
}
