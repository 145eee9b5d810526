// Package grafana holds the Grafana dashboard over the server's Prometheus
// metrics (gandiva.json) and its test.
package grafana

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/server"
)

type dashboard struct {
	Title  string  `json:"title"`
	UID    string  `json:"uid"`
	Panels []panel `json:"panels"`
}

type panel struct {
	ID      int    `json:"id"`
	Type    string `json:"type"`
	Title   string `json:"title"`
	GridPos *struct {
		X, Y, W, H int
	} `json:"gridPos"`
	Targets []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
}

// exported is what a real server's /metrics exposes: every series name,
// with the labels and label values seen on it.
type exported map[string]map[string]map[string]bool

// scrape starts a real server on an empty store, makes an API call (so
// the per-route series exist) and reads /metrics twice.
func scrape(t *testing.T) exported {
	t.Helper()
	dir := t.TempDir()
	s, err := server.Open(server.Config{DataDir: dir, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tok, err := os.ReadFile(filepath.Join(dir, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	get := func(path string) string {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
		}
		return string(b)
	}
	get("/v1/whoami")
	get("/metrics")
	text := get("/metrics")
	out := exported{}
	sample := regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? `)
	label := regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
	for _, line := range strings.Split(text, "\n") {
		m := sample.FindStringSubmatch(line)
		if m == nil || strings.HasPrefix(line, "#") {
			continue
		}
		if out[m[1]] == nil {
			out[m[1]] = map[string]map[string]bool{}
		}
		for _, l := range label.FindAllStringSubmatch(m[2], -1) {
			if out[m[1]][l[1]] == nil {
				out[m[1]][l[1]] = map[string]bool{}
			}
			out[m[1]][l[1]][l[2]] = true
		}
	}
	return out
}

var (
	metricName = regexp.MustCompile(`\b((?:gandiva|go|process)_[a-zA-Z0-9_]+)\b(\{[^}]*\})?`)
	matcher    = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"`)
	byClause   = regexp.MustCompile(`\bby\s*\(([^)]*)\)`)
	plainAlts  = regexp.MustCompile(`^[a-z]+(\|[a-z]+)*$`)
)

// TestDashboardNamesOnlyExportedMetrics: gandiva.json parses, its panels
// are laid out, and every query names metrics a real server exports, with
// labels they carry and, for exact matches, values they take.
func TestDashboardNamesOnlyExportedMetrics(t *testing.T) {
	raw, err := os.ReadFile("gandiva.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("gandiva.json: %v", err)
	}
	if d.Title == "" || d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("gandiva.json: title %q, uid %q, %d panels", d.Title, d.UID, len(d.Panels))
	}
	have := scrape(t)
	ids := map[int]bool{}
	used := map[string]bool{}
	queries := 0
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel %q: id %d used twice", p.Title, p.ID)
		}
		ids[p.ID] = true
		if p.GridPos == nil || p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q: bad gridPos %+v", p.Title, p.GridPos)
		}
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			queries++
			names := metricName.FindAllStringSubmatch(tg.Expr, -1)
			if len(names) == 0 {
				t.Errorf("panel %q, query %s: names no metric: %s", p.Title, tg.RefID, tg.Expr)
			}
			var labelsHere []string
			for _, m := range names {
				name, sel := m[1], m[2]
				labels, ok := have[name]
				if !ok {
					t.Errorf("panel %q: %s is not exported by the server", p.Title, name)
					continue
				}
				used[strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")] = true
				for l := range labels {
					labelsHere = append(labelsHere, l)
				}
				for _, mm := range matcher.FindAllStringSubmatch(sel, -1) {
					l, op, v := mm[1], mm[2], mm[3]
					if l == "instance" || l == "job" {
						continue // added by Prometheus when it scrapes
					}
					vals, ok := labels[l]
					if !ok {
						t.Errorf("panel %q: %s has no label %q", p.Title, name, l)
						continue
					}
					if op == "=" && !vals[v] {
						t.Errorf("panel %q: %s{%s} never takes the value %q (it takes %v)", p.Title, name, l, v, keys(vals))
					}
					if (op == "=~" || op == "!~") && plainAlts.MatchString(v) {
						for _, alt := range strings.Split(v, "|") {
							if !vals[alt] {
								t.Errorf("panel %q: %s{%s} never takes the value %q (it takes %v)", p.Title, name, l, alt, keys(vals))
							}
						}
					}
				}
			}
			for _, by := range byClause.FindAllStringSubmatch(tg.Expr, -1) {
				for _, l := range strings.Split(by[1], ",") {
					l = strings.TrimSpace(l)
					if l != "le" && l != "instance" && !slices.Contains(labelsHere, l) {
						t.Errorf("panel %q: sum by (%s): no metric of the query has it", p.Title, l)
					}
				}
			}
		}
	}
	// every metric the server documents appears in some panel
	for _, m := range []string{"gandiva_jobs", "gandiva_gpus", "gandiva_nodes", "gandiva_engine_actions_total", "gandiva_engine_rounds_total",
		"gandiva_engine_rejected_actions_total", "gandiva_prerun_failures_total", "gandiva_jobs_submitted_total", "gandiva_log_entries_total",
		"gandiva_store_commit_seconds", "gandiva_store_batch_entries", "gandiva_api_requests_total", "gandiva_api_request_seconds",
		"gandiva_replay_seconds", "gandiva_replay_divergences"} {
		if !used[m] {
			t.Errorf("no panel shows %s", m)
		}
	}
	for name := range have {
		if strings.HasPrefix(name, "gandiva_") {
			base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
			if !used[base] {
				t.Errorf("the server exports %s, which no panel shows (add a panel, or say why not)", base)
			}
		}
	}
	t.Logf("%d panels, %d queries, %d metrics checked against a server's /metrics", len(d.Panels), queries, len(used))
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
