package server

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
)

// TestMetricsLint: the live server's metric names follow Prometheus'
// conventions (promlint finds no problem), as gandiva kube's do.
func TestMetricsLint(t *testing.T) {
	s, stop := runServer(t, Config{DataDir: t.TempDir(), Policy: "fifo"})
	defer stop()
	addNode(t, s, "n1")
	rec := httptest.NewRecorder()
	s.met.handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	out := rec.Body.String()
	if !strings.Contains(out, "gandiva_engine_rounds_total") {
		t.Fatalf("no gandiva metrics:\n%s", out)
	}
	probs, err := promlint.New(strings.NewReader(out)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range probs {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}
