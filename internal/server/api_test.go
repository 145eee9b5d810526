package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/api"
)

// testServer starts a server on a temporary store and serves its API.
func testServer(t *testing.T, cfg Config) (*Server, *httptest.Server) {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	s, stop := runServer(t, cfg)
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		hs.Close()
		stop()
	})
	return s, hs
}

type call struct {
	method, path, token, body string
	header                    map[string]string
	status                    int
	field                     string // the error must name this field
	contains                  string
}

func do(t *testing.T, base string, c call) []byte {
	t.Helper()
	var body io.Reader
	if c.body != "" {
		body = strings.NewReader(c.body)
	}
	rq, _ := http.NewRequest(c.method, base+c.path, body)
	if c.token != "" {
		rq.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, v := range c.header {
		rq.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(rq)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != c.status {
		t.Fatalf("%s %s: status %d, want %d: %s", c.method, c.path, resp.StatusCode, c.status, data)
	}
	if c.status >= 400 {
		var env struct{ Error *api.Error }
		if err := json.Unmarshal(data, &env); err != nil || env.Error == nil {
			t.Fatalf("%s %s: error body is not {\"error\": ...}: %s", c.method, c.path, data)
		}
		if c.field != "" && (env.Error.Field != c.field || !strings.HasPrefix(env.Error.Message, c.field+":")) {
			t.Fatalf("%s %s: error names field %q (%q), want %q", c.method, c.path, env.Error.Field, env.Error.Message, c.field)
		}
	}
	if c.contains != "" && !strings.Contains(string(data), c.contains) {
		t.Fatalf("%s %s: answer lacks %q: %s", c.method, c.path, c.contains, data)
	}
	return data
}

// TestAPISecurityAndErrors: every call is authenticated (401), users see
// and cancel only their own jobs (403), a job is charged to the token's user,
// and bad requests are 4xx errors that name the field.
func TestAPISecurityAndErrors(t *testing.T) {
	s, hs := testServer(t, Config{Policy: "fifo"})
	ctx := context.Background()
	admin := api.NewClient(hs.URL, s.AdminToken)
	alice, err := admin.CreateToken(ctx, api.TokenRequest{User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	bob, err := admin.CreateToken(ctx, api.TokenRequest{User: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	a, b := alice.Token, bob.Token
	agent := s.AgentToken
	addNode(t, s, "n0")
	ok := `{"command": ["python", "train.py"], "gpus": 1}`

	// Authentication.
	do(t, hs.URL, call{method: "GET", path: "/healthz", status: 200})
	for _, p := range []string{"/v1/jobs", "/v1/nodes", "/v1/whoami", "/metrics", "/v1/nope"} {
		do(t, hs.URL, call{method: "GET", path: p, status: 401})
		do(t, hs.URL, call{method: "GET", path: p, token: "gdv_forged", status: 401})
	}
	do(t, hs.URL, call{method: "POST", path: "/v1/jobs", body: ok, status: 401})
	do(t, hs.URL, call{method: "GET", path: "/v1/jobs", token: agent, status: 403})
	do(t, hs.URL, call{method: "POST", path: "/v1/agent/register", token: a, body: "{}", status: 403})
	do(t, hs.URL, call{method: "GET", path: "/v1/nope", token: a, status: 404})

	// Bad specs name the field.
	for _, c := range []struct{ body, field string }{
		{`{"command": ["x"], "gpus": 1, "user": "bob"}`, "user"},
		{`{"command": ["x"], "gpus": 0}`, "gpus"},
		{`{"command": ["x"], "gpus": 100000}`, "gpus"},
		{`{"command": ["x"], "gpus": "two"}`, "gpus"},
		{`{"command": [], "gpus": 1}`, "command"},
		{`{"command": [""], "gpus": 1}`, "command[0]"},
		{`{"command": ["x"], "gpus": 1, "gpu": 2}`, "gpu"},
		{`{"command": ["x"], "gpus": 2, "min_gpus": 3}`, "min_gpus"},
		{`{"command": ["x"], "gpus": 1, "mem_gib": -1}`, "mem_gib"},
		{`{"command": ["x"], "gpus": 1, "workdir": "relative/dir"}`, "workdir"},
		{`{"command": ["x"], "gpus": 1, "env": {"GANDIVA_FD": "3"}}`, "env.GANDIVA_FD"},
		{`{"command": ["x"], "gpus": 1, "env": {"A B": "3"}}`, "env"},
		{`{"command": ["x"], "gpus": 1, "checkpoint_every": -5}`, "checkpoint_every"},
		{`{"command": ["x"], "gpus": 1, "name": "a\u0007b"}`, "name"},
		{`{"command": ["x"], "gpus": 1`, "body"},
		{`{"command": ["x"], "gpus": 1} {}`, "body"},
		{``, "body"},
	} {
		do(t, hs.URL, call{method: "POST", path: "/v1/jobs", token: a, body: c.body, status: 400, field: c.field})
	}
	do(t, hs.URL, call{method: "GET", path: "/v1/jobs?state=sleeping", token: a, status: 400, field: "state"})
	do(t, hs.URL, call{method: "GET", path: "/v1/jobs?all=maybe", token: a, status: 400, field: "all"})

	// Ownership.
	var j api.Job
	if err := json.Unmarshal(do(t, hs.URL, call{method: "POST", path: "/v1/jobs", token: a, body: ok, status: 201}), &j); err != nil {
		t.Fatal(err)
	}
	if j.User != "alice" || (j.State != "queued" && j.State != "running") {
		t.Fatalf("job %+v: want alice's, queued or running", j)
	}
	do(t, hs.URL, call{method: "GET", path: "/v1/jobs/" + j.ID, token: b, status: 403})
	do(t, hs.URL, call{method: "GET", path: "/v1/jobs/" + j.ID + "/explain", token: b, status: 403})
	do(t, hs.URL, call{method: "GET", path: "/v1/jobs/" + j.ID + "/logs", token: b, status: 403})
	do(t, hs.URL, call{method: "POST", path: "/v1/jobs/" + j.ID + "/cancel", token: b, status: 403})
	do(t, hs.URL, call{method: "DELETE", path: "/v1/jobs/" + j.ID, token: b, status: 403})
	do(t, hs.URL, call{method: "GET", path: "/v1/jobs?all=true", token: b, status: 403})
	do(t, hs.URL, call{method: "GET", path: "/v1/jobs?user=alice", token: b, status: 403})
	if data := do(t, hs.URL, call{method: "GET", path: "/v1/jobs", token: b, status: 200}); strings.Contains(string(data), j.ID) {
		t.Fatalf("bob's list shows alice's job: %s", data)
	}
	do(t, hs.URL, call{method: "GET", path: "/v1/jobs/" + j.ID, token: a, status: 200, contains: `"user": "alice"`})
	do(t, hs.URL, call{method: "GET", path: "/v1/jobs/" + j.ID, token: s.AdminToken, status: 200})
	do(t, hs.URL, call{method: "GET", path: "/v1/jobs?all=true", token: s.AdminToken, status: 200, contains: j.ID})
	do(t, hs.URL, call{method: "GET", path: "/v1/jobs/j999", token: a, status: 404})
	do(t, hs.URL, call{method: "GET", path: "/v1/jobs/j999/logs", token: a, status: 404})
	do(t, hs.URL, call{method: "GET", path: "/v1/jobs/" + j.ID + "/explain", token: a, status: 200, contains: `"job": "` + j.ID + `"`})
	do(t, hs.URL, call{method: "POST", path: "/v1/jobs/" + j.ID + "/cancel", token: a, status: 200, contains: `"cancelled"`})
	do(t, hs.URL, call{method: "POST", path: "/v1/jobs/" + j.ID + "/cancel", token: a, status: 409})

	// Admin-only calls.
	do(t, hs.URL, call{method: "POST", path: "/v1/tokens", token: a, body: `{"user": "eve", "admin": true}`, status: 403})
	do(t, hs.URL, call{method: "POST", path: "/v1/tokens", token: s.AdminToken, body: `{"user": "Bad Name"}`, status: 400, field: "user"})
	do(t, hs.URL, call{method: "POST", path: "/v1/settings", token: a, body: `{"key": "tickets/alice", "value": "9"}`, status: 403})
	do(t, hs.URL, call{method: "POST", path: "/v1/settings", token: s.AdminToken, body: `{"key": "tickets/alice", "value": "2"}`, status: 400, field: "key"})
	do(t, hs.URL, call{method: "POST", path: "/v1/settings", token: s.AdminToken, body: `{"key": "quota/queued-jobs/alice", "value": "20"}`, status: 200})
	do(t, hs.URL, call{method: "POST", path: "/v1/nodes/n1/undrain", token: a, status: 403})
	do(t, hs.URL, call{method: "POST", path: "/v1/nodes/n1/undrain", token: s.AdminToken, status: 404})
	do(t, hs.URL, call{method: "GET", path: "/metrics", token: a, status: 200, contains: `gandiva_jobs{state="cancelled"} 1`})

	// The agent token only enrols: it gets a node's own credential, once.
	var cred api.Credential
	json.Unmarshal(do(t, hs.URL, call{method: "POST", path: "/v1/agent/enrol", token: agent, body: `{"name": "n1"}`, status: 201}), &cred)
	n1 := cred.Token
	do(t, hs.URL, call{method: "POST", path: "/v1/agent/enrol", token: agent, body: `{"name": "n1"}`, status: 409, contains: "nodes remove n1"})
	do(t, hs.URL, call{method: "POST", path: "/v1/agent/enrol", token: agent, body: `{"name": "a b"}`, status: 400, field: "name"})
	do(t, hs.URL, call{method: "POST", path: "/v1/agent/enrol", token: n1, body: `{"name": "n9"}`, status: 403})
	reg := `{"name": "n1", "gpus": [{"index": 0, "type": "V100", "mem_gib": 16}], "incarnation": "x", "addr": "http://h:1", "log_key": "0123456789abcdef"}`
	do(t, hs.URL, call{method: "POST", path: "/v1/agent/register", token: agent, body: reg, status: 403, contains: "only enrols"})
	do(t, hs.URL, call{method: "GET", path: "/v1/agent/assignments?node=n1&session=s&version=0", token: agent, status: 403})
	do(t, hs.URL, call{method: "POST", path: "/v1/agent/reports", token: agent, body: `{"node": "n1", "session": "s", "reports": []}`, status: 403})
	// The agent API checks its input too.
	do(t, hs.URL, call{method: "POST", path: "/v1/agent/register", token: n1, body: `{"name": "n1", "gpus": [], "incarnation": "x", "addr": "http://h:1"}`, status: 400, field: "gpus"})
	do(t, hs.URL, call{method: "POST", path: "/v1/agent/reports", token: n1, body: `{"node": "n1", "session": "s", "reports": [{"job": "j1", "kind": "exploded"}]}`, status: 400, field: "reports[0].kind"})
	do(t, hs.URL, call{method: "POST", path: "/v1/agent/reports", token: n1, body: `{"node": "n1", "session": "s", "reports": []}`, status: 409})
	do(t, hs.URL, call{method: "GET", path: "/v1/agent/assignments?node=n1&session=s&version=0", token: n1, status: 409})
	do(t, hs.URL, call{method: "GET", path: "/v1/agent/assignments?session=s", token: n1, status: 400, field: "node"})
	// A node's credential acts for that node only; an agent token made
	// for one node enrols that node only.
	do(t, hs.URL, call{method: "POST", path: "/v1/agent/register", token: n1, body: reg, status: 200})
	do(t, hs.URL, call{method: "POST", path: "/v1/agent/register", token: n1, body: strings.Replace(reg, "n1", "n0", 1), status: 403})
	do(t, hs.URL, call{method: "GET", path: "/v1/agent/assignments?node=n0&session=s&version=0", token: n1, status: 403})
	do(t, hs.URL, call{method: "POST", path: "/v1/agent/reports", token: n1, body: `{"node": "n0", "session": "s", "reports": []}`, status: 403})
	do(t, hs.URL, call{method: "POST", path: "/v1/agent/leave", token: n1, body: `{"node": "n0", "session": "s"}`, status: 403})
	n2, err := admin.CreateToken(ctx, api.TokenRequest{Agent: true, Label: "n2"})
	if err != nil {
		t.Fatal(err)
	}
	do(t, hs.URL, call{method: "POST", path: "/v1/agent/enrol", token: n2.Token, body: `{"name": "n3"}`, status: 403})
	do(t, hs.URL, call{method: "POST", path: "/v1/agent/enrol", token: n2.Token, body: `{"name": "n2"}`, status: 201})
	do(t, hs.URL, call{method: "GET", path: "/v1/whoami", token: n1, status: 200, contains: `"node": "n1"`})
}

// TestStoreRecordsBeforeAck: a submission that got its 201 is in the store's
// log and job bucket, so a server opened on the store afterwards has it.
func TestStoreRecordsBeforeAck(t *testing.T) {
	dir := t.TempDir()
	s, stop := runServer(t, Config{DataDir: dir, Policy: "fifo"})
	addNode(t, s, "n0")
	ctx := context.Background()
	p := api.Principal{User: "carol"}
	var ids []string
	for i := 0; i < 5; i++ {
		j, _, err := s.Submit(ctx, p, &api.JobRequest{Command: []string{"true"}, GPUs: 1, Name: "x"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	// The acknowledged jobs are on disk now, before any orderly shutdown.
	for _, id := range ids {
		if _, ok, err := s.db.Job(id); err != nil || !ok {
			t.Fatalf("acknowledged job %s is not in the store: %v", id, err)
		}
	}
	stop()
	s2, err := Open(Config{DataDir: dir, Policy: "fifo"})
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := s2.List(ctx, api.Principal{User: "carol"}, api.ListOptions{})
	if err != nil || len(jobs) != 5 {
		t.Fatalf("after reopening: %d jobs (%v), want 5", len(jobs), err)
	}
	if s2.Replay.Diverged != 0 {
		t.Fatalf("replay diverged %d times", s2.Replay.Diverged)
	}
	// Another policy on the same store is refused, naming both.
	s2.Close()
	if _, err := Open(Config{DataDir: dir, Policy: "philly"}); err == nil || !strings.Contains(err.Error(), "philly") {
		t.Fatalf("opening a fifo store under philly: %v", err)
	}
}

func newHTTPTest(s *Server) *httptest.Server { return httptest.NewServer(s.Handler()) }

// TestSubmitIdempotent: a submission repeated with its idempotency key (in
// the body or the Idempotency-Key header) gets the first job back with 200,
// also after a restart; the same key with another request is a 409; keys
// are per user; bad keys are 400s naming the field or header.
func TestSubmitIdempotent(t *testing.T) {
	dir := t.TempDir()
	s, stop := runServer(t, Config{DataDir: dir, Policy: "fifo"})
	addNode(t, s, "n0")
	ctx := context.Background()
	hs := httptest.NewServer(s.Handler())
	admin := api.NewClient(hs.URL, s.AdminToken)
	var tok [2]string
	for i, u := range []string{"alice", "bob"} {
		c, err := admin.CreateToken(ctx, api.TokenRequest{User: u})
		if err != nil {
			t.Fatal(err)
		}
		tok[i] = c.Token
	}
	a, b := tok[0], tok[1]
	body := `{"command": ["python", "train.py"], "gpus": 1, "workdir": "/w", "idempotency_key": "run-42"}`
	id := func(data []byte) string {
		var j api.Job
		if err := json.Unmarshal(data, &j); err != nil || j.ID == "" {
			t.Fatalf("no job in %s", data)
		}
		return j.ID
	}
	first := id(do(t, hs.URL, call{method: "POST", path: "/v1/jobs", token: a, body: body, status: 201}))
	for range 3 {
		if again := id(do(t, hs.URL, call{method: "POST", path: "/v1/jobs", token: a, body: body, status: 200})); again != first {
			t.Fatalf("retry created %s, want %s", again, first)
		}
	}
	// The header is the same key.
	plain := `{"command": ["python", "train.py"], "gpus": 1, "workdir": "/w"}`
	if again := id(do(t, hs.URL, call{method: "POST", path: "/v1/jobs", token: a, body: plain, header: map[string]string{"Idempotency-Key": "run-42"}, status: 200})); again != first {
		t.Fatalf("retry by header created %s, want %s", again, first)
	}
	// Another request under the same key is refused, naming the job.
	do(t, hs.URL, call{method: "POST", path: "/v1/jobs", token: a, status: 409, contains: first,
		body: `{"command": ["python", "train.py"], "gpus": 2, "workdir": "/w", "idempotency_key": "run-42"}`})
	// Keys are per user: bob's run-42 is a job of his own.
	if other := id(do(t, hs.URL, call{method: "POST", path: "/v1/jobs", token: b, body: body, status: 201})); other == first {
		t.Fatalf("bob's submission returned alice's job %s", first)
	}
	// Bad keys.
	do(t, hs.URL, call{method: "POST", path: "/v1/jobs", token: a, status: 400, field: "idempotency_key",
		body: `{"command": ["x"], "gpus": 1, "idempotency_key": "has space"}`})
	do(t, hs.URL, call{method: "POST", path: "/v1/jobs", token: a, status: 400, field: "idempotency_key",
		body: `{"command": ["x"], "gpus": 1, "idempotency_key": "` + strings.Repeat("k", api.MaxIdempotencyKey+1) + `"}`})
	do(t, hs.URL, call{method: "POST", path: "/v1/jobs", token: a, status: 400, field: api.IdempotencyHeader,
		body: body, header: map[string]string{"Idempotency-Key": "other"}})
	// Without a key, the same request twice is two jobs.
	if x, y := id(do(t, hs.URL, call{method: "POST", path: "/v1/jobs", token: a, body: plain, status: 201})),
		id(do(t, hs.URL, call{method: "POST", path: "/v1/jobs", token: a, body: plain, status: 201})); x == y {
		t.Fatalf("two submissions without a key gave one job %s", x)
	}
	jobs, err := s.List(ctx, api.Principal{Admin: true}, api.ListOptions{All: true})
	if err != nil || len(jobs) != 4 {
		t.Fatalf("%d jobs (%v), want 4: alice's keyed one, bob's, two without a key", len(jobs), err)
	}

	// After a restart the key still finds the job: it is in the job's record.
	hs.Close()
	stop()
	s2, stop2 := runServer(t, Config{DataDir: dir, Policy: "fifo"})
	defer stop2()
	rq := &api.JobRequest{Command: []string{"python", "train.py"}, GPUs: 1, WorkDir: "/w", IdempotencyKey: "run-42"}
	if err := rq.Validate(); err != nil {
		t.Fatal(err)
	}
	j, created, err := s2.Submit(ctx, api.Principal{User: "alice"}, rq)
	if err != nil || created || j.ID != first {
		t.Fatalf("after a restart: job %v, created %v, err %v; want %s, not created", j, created, err, first)
	}
}
