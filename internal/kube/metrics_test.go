package kube

import (
	"io"
	"math/rand/v2"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
)

// scrape GETs /metrics of m, checks it with promlint and returns the text.
func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	probs, err := promlint.New(strings.NewReader(string(b))).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range probs {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	return string(b)
}

// The metrics of gandiva kube follow Prometheus' conventions (promlint
// finds no problem), carry the gandiva_ prefix, and show the leading
// term's Stats and the Events recorded.
func TestMetricsLint(t *testing.T) {
	m := NewMetrics()
	out := scrape(t, m)
	if !strings.Contains(out, "\ngandiva_leader 0\n") {
		t.Errorf("not leading: want gandiva_leader 0:\n%s", out)
	}
	s := &Scheduler{}
	s.shown = Stats{Rounds: 10, Binds: 3, BindConflicts: 1, JobPatches: 2, Errors: 4, Submitted: 5, Ended: 1,
		RoundTime: 2 * time.Second, MaxRound: 500 * time.Millisecond, Calls: 9, Refused: 1, GaveUp: 1,
		BindLatency: []time.Duration{time.Millisecond, 3 * time.Second, time.Hour}, BindCall: []time.Duration{time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond},
		BindTimed: 3, Queue: QueueStats{Depth: 2, Waiting: 1, Adds: 40, Retries: 3}}
	m.lead(s)
	m.event(&corev1.Event{Type: "Normal", Reason: "Preempted", Source: corev1.EventSource{Component: "gandiva"}})
	m.event(&corev1.Event{Type: "Normal", Reason: "Preempted", Source: corev1.EventSource{Component: "gandiva"}})
	m.event(&corev1.Event{Type: "Normal", Reason: "Other", Source: corev1.EventSource{Component: "kubelet"}}) // not ours
	out = scrape(t, m)
	for _, want := range []string{
		"\ngandiva_leader 1\n",
		"\ngandiva_engine_rounds_total 10\n",
		"\ngandiva_engine_round_duration_seconds_sum 2\n", "\ngandiva_engine_round_duration_seconds_count 10\n",
		"\ngandiva_engine_round_max_duration_seconds 0.5\n",
		"\ngandiva_pods_bound_total 3\n",
		"\ngandiva_workloads_submitted_total 5\n", "\ngandiva_workloads_ended_total 1\n",
		"\ngandiva_workload_patches_total 2\n",
		"\ngandiva_api_calls_total 9\n",
		`gandiva_api_call_errors_total{cause="conflict"} 1`, `gandiva_api_call_errors_total{cause="error"} 4`, `gandiva_api_call_errors_total{cause="queue_full"} 1`,
		"\ngandiva_bindings_refused_total 1\n",
		`gandiva_pod_scheduling_duration_seconds_bucket{le="0.001"} 1`, `gandiva_pod_scheduling_duration_seconds_bucket{le="4.096"} 2`,
		`gandiva_pod_scheduling_duration_seconds_bucket{le="+Inf"} 3`, "\ngandiva_pod_scheduling_duration_seconds_count 3\n",
		`gandiva_binding_duration_seconds_bucket{le="0.002"} 2`, "\ngandiva_binding_duration_seconds_count 3\n",
		"\ngandiva_workqueue_depth 2\n", "\ngandiva_workqueue_backoff_keys 1\n", "\ngandiva_workqueue_adds_total 40\n", "\ngandiva_workqueue_retries_total 3\n",
		`gandiva_events_total{reason="Preempted",type="Normal"} 2`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("want %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, `reason="Other"`) {
		t.Error("an Event of another component was counted")
	}
	for _, line := range strings.Split(out, "\n") {
		if line != "" && !strings.HasPrefix(line, "#") && !strings.HasPrefix(line, "gandiva_") && !strings.HasPrefix(line, "go_") &&
			!strings.HasPrefix(line, "process_") && !strings.HasPrefix(line, "promhttp_") {
			t.Errorf("a metric without the gandiva_ prefix: %s", line)
		}
	}
	// the next scrape counts only the latencies added since (the loop
	// appends to its list), and a list emptied at its bound anew
	s.shown.BindLatency = append(s.shown.BindLatency, 2*time.Millisecond)
	s.shown.BindTimed++
	if out := scrape(t, m); !strings.Contains(out, "\ngandiva_pod_scheduling_duration_seconds_count 4\n") {
		t.Errorf("after one more bind: want count 4:\n%s", out)
	}
	s.shown.BindLatency = []time.Duration{time.Second}
	s.shown.BindTimed++
	if out := scrape(t, m); !strings.Contains(out, "\ngandiva_pod_scheduling_duration_seconds_count 5\n") {
		t.Errorf("after the list was emptied and refilled: want count 5:\n%s", out)
	}
	m.lead(nil)
	if out := scrape(t, m); !strings.Contains(out, "\ngandiva_leader 0\n") || strings.Contains(out, "gandiva_engine_rounds_total") {
		t.Errorf("after the term: want gandiva_leader 0 and no scheduler's counters:\n%s", out)
	}
}

// Event reasons are bounded: past maxEventReasons, new ones count as other.
func TestMetricsEventReasonsBounded(t *testing.T) {
	m := NewMetrics()
	for i := range 3 * maxEventReasons {
		m.event(&corev1.Event{Type: "Warning", Reason: "R" + string(rune('a'+i%26)) + string(rune('a'+i/26)), Source: corev1.EventSource{Component: "gandiva"}})
	}
	if n := len(m.events); n > maxEventReasons+1 {
		t.Errorf("%d label sets, want at most %d", n, maxEventReasons+1)
	}
	if m.events[[2]string{"Warning", "other"}] != 2*maxEventReasons {
		t.Errorf("other: %v", m.events[[2]string{"Warning", "other"}])
	}
}

// cumHist, fed a list that grows and is emptied at a bound between
// scrapes, and the count of entries ever appended, counts what a plain
// histogram of the entries it could see counts: all but those appended
// since the last scrape and emptied, which it counts as lost.
func TestCumHistMatchesPlain(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	bounds := prometheus.ExponentialBuckets(0.001, 2, 12)
	for trial := range 10 {
		h := newCumHist(bounds)
		plain := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "x", Buckets: bounds})
		const bound = 100000             // exec.go's
		var list, unseen []time.Duration // unseen: appended since the last add
		total, lost := 0, 0
		for range 1 + r.IntN(12) {
			// the loop: some binds, the list emptied when full (as exec.go);
			// what was appended since the last add and emptied is lost
			for range r.IntN(bound / 2) {
				if len(list) >= bound {
					list = list[:0]
					lost += len(unseen)
					unseen = unseen[:0]
				}
				d := time.Duration(r.Int64N(int64(10 * time.Second)))
				list = append(list, d)
				unseen = append(unseen, d)
				total++
			}
			for _, d := range unseen {
				plain.Observe(d.Seconds())
			}
			unseen = unseen[:0]
			h.add(list, total)
		}
		if h.lost != lost {
			t.Fatalf("trial %d: lost %d, want %d", trial, h.lost, lost)
		}
		var want dto.Metric
		if err := plain.Write(&want); err != nil {
			t.Fatal(err)
		}
		var got dto.Metric
		if err := h.metric(prometheus.NewDesc("x", "x", nil, nil)).Write(&got); err != nil {
			t.Fatal(err)
		}
		wh, gh := want.GetHistogram(), got.GetHistogram()
		if wh.GetSampleCount() != gh.GetSampleCount() || abs(wh.GetSampleSum()-gh.GetSampleSum()) > 1e-6 {
			t.Fatalf("trial %d: count/sum %d/%g, want %d/%g", trial, gh.GetSampleCount(), gh.GetSampleSum(), wh.GetSampleCount(), wh.GetSampleSum())
		}
		for i, b := range wh.GetBucket() {
			if g := gh.GetBucket()[i]; g.GetUpperBound() != b.GetUpperBound() || g.GetCumulativeCount() != b.GetCumulativeCount() {
				t.Fatalf("trial %d: bucket %g: %d, want %d", trial, b.GetUpperBound(), g.GetCumulativeCount(), b.GetCumulativeCount())
			}
		}
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
