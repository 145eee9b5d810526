package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/store"
)

// fakeClock is a wall clock the test moves.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// waitNode waits until cond holds for node name (the loop runs on a real
// ticker; the clock it reads is the test's).
func waitNode(t *testing.T, s *Server, name string, cond func(api.Node) bool) api.Node {
	t.Helper()
	admin := api.Principal{User: "admin", Admin: true}
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		ns, _ := s.Nodes(context.Background(), admin)
		for _, n := range ns {
			if n.Name == name && cond(n) {
				return n
			}
		}
	}
	t.Fatalf("node %s never reached the expected state", name)
	return api.Node{}
}

// TestNodeLastSeenAgreesWithTimeout: a node declared lost shows the time
// it was last heard from, at least the node time-out before now, and the
// reason says so (it used to show "SEEN 19s ago" next to "no contact for
// 30s", because declaring a node lost restarted its clock). After a restart, a
// node not heard from since shows no time rather than the restart's.
func TestNodeLastSeenAgreesWithTimeout(t *testing.T) {
	clk := &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	cfg := Config{DataDir: t.TempDir(), Policy: "fifo", NodeTimeout: 30 * time.Second, Clock: clk.now}
	s, stop := runServer(t, cfg)
	t0 := clk.now()
	addNode(t, s, "n1")
	clk.advance(45 * time.Second)
	n := waitNode(t, s, "n1", func(n api.Node) bool { return !n.Up })
	if !n.LastSeen.Equal(t0) || !strings.Contains(n.Reason, "node time-out (30s)") {
		t.Fatalf("lost node: last seen %s (want %s), reason %q", n.LastSeen, t0, n.Reason)
	}
	clk.advance(time.Minute)
	time.Sleep(300 * time.Millisecond) // a few rounds of the loop
	if n := waitNode(t, s, "n1", func(api.Node) bool { return true }); !n.LastSeen.Equal(t0) {
		t.Fatalf("a minute later the node's last contact moved to %s", n.LastSeen)
	}
	stop()
	s2, stop2 := runServer(t, cfg)
	defer stop2()
	if n := waitNode(t, s2, "n1", func(api.Node) bool { return true }); !n.LastSeen.IsZero() {
		t.Fatalf("after a restart the node shows last seen %s; it has not been heard from since", n.LastSeen)
	}
}

// waitItems polls a's assignments until cond holds.
func waitItems(t *testing.T, a *fakeAgent, cond func([]api.Assignment) bool) []api.Assignment {
	t.Helper()
	for i := 0; i < 500; i++ {
		if items := a.assignments(); cond(items) {
			return items
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s: assignments never matched; now %+v", a.name, a.assignments())
	return nil
}

func jobState(t *testing.T, s *Server, id string) api.Job {
	t.Helper()
	j, err := s.Get(context.Background(), api.Principal{User: "admin", Admin: true}, id)
	if err != nil {
		t.Fatal(err)
	}
	return *j
}

// TestNodeIdentity: a node sees only its own assignments (with their env),
// its reports about another node's job change nothing, and claiming to run
// another node's job holds nothing back (with the shared agent token
// anyone once could register under any name, pull other users'
// assignments with their env, and mark their jobs finished). An admin
// drains, undrains and removes a node; removal revokes its credential and
// requeues its jobs at once.
func TestNodeIdentity(t *testing.T) {
	s, stop := runServer(t, Config{DataDir: t.TempDir(), Policy: "fifo", NodeTimeout: time.Hour})
	defer stop()
	ctx := context.Background()
	admin := api.Principal{User: "admin", Admin: true}
	alice := api.Principal{User: "alice"}
	a := addNode(t, s, "a")
	b := addNode(t, s, "b")
	if err := s.Drain(ctx, admin, "b"); err != nil {
		t.Fatal(err)
	}
	j, _, err := s.Submit(ctx, alice, &api.JobRequest{Command: []string{"train"}, GPUs: 4, Env: map[string]string{"SECRET": "s3cr3t"}})
	if err != nil {
		t.Fatal(err)
	}
	items := waitItems(t, a, func(it []api.Assignment) bool { return find(it, j.ID, false) != nil })
	w := find(items, j.ID, false)
	if w.Env["SECRET"] != "s3cr3t" || w.User != "alice" {
		t.Fatalf("a's assignment %+v: want alice's env and user", w)
	}
	a.report(api.Report{Job: j.ID, Attempt: w.Attempt, Kind: api.RepStarted})
	// b sees nothing of it, and cannot ask for a's assignments.
	if items := b.assignments(); len(items) != 0 {
		t.Fatalf("b's assignments hold a's job: %+v", items)
	}
	if _, err := s.Assignments(ctx, nodeP("b"), "a", a.session, 0, 0); !api.IsStatus(err, 403) {
		t.Fatalf("b polling a's assignments: %v, want 403", err)
	}
	// b's reports about a's job change nothing.
	b.report(api.Report{Job: j.ID, Attempt: w.Attempt, Kind: api.RepExited, Outcome: "finished"},
		api.Report{Job: j.ID, Attempt: w.Attempt, Kind: api.RepProgress, Done: 1e9})
	if err := s.Report(ctx, nodeP("b"), &api.ReportBatch{Node: "a", Session: a.session,
		Reports: []api.Report{{Seq: 99, Job: j.ID, Attempt: w.Attempt, Kind: api.RepExited, Outcome: "finished"}}}); !api.IsStatus(err, 403) {
		t.Fatalf("b reporting as a: %v, want 403", err)
	}
	if v := jobState(t, s, j.ID); v.State != "running" || v.Done != 0 {
		t.Fatalf("after b's reports the job is %s with %v done; want running, 0", v.State, v.Done)
	}
	// b registering again, claiming to run the job, is not believed.
	b.register(api.Running{Job: j.ID, Attempt: w.Attempt, State: "running", GPUs: []int{0}})
	s.mu.RLock()
	strays := len(s.m.x.nodes["b"].strays)
	s.mu.RUnlock()
	if strays != 0 {
		t.Fatalf("b's claim to run a's job was kept as %d strays", strays)
	}

	// An admin removes a: its credential is revoked and the job requeued at
	// once (the node time-out is an hour); it then runs on b, undrained.
	_, via, err := s.db.CreateEnrolToken(store.EnrolOptions{Label: "a", Uses: 1, TTL: time.Hour}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.db.EnrolNode("a", via.ID, time.Now()); err != nil {
		t.Fatal(err) // (addNode made no credential: make one, to see it revoked)
	}
	if err := s.RemoveNode(ctx, alice, "a"); !api.IsStatus(err, 403) {
		t.Fatalf("alice removing a node: %v", err)
	}
	if err := s.RemoveNode(ctx, admin, "a"); err != nil {
		t.Fatal(err)
	}
	if gone, _ := s.db.RevokeNode("a"); len(gone) != 0 {
		t.Fatalf("a's credential survived its removal")
	}
	n := waitNode(t, s, "a", func(n api.Node) bool { return !n.Up })
	if n.Reason != "removed by an admin" {
		t.Fatalf("a: %+v", n)
	}
	if v := jobState(t, s, j.ID); v.State != "queued" {
		t.Fatalf("a's job after a's removal: %s (%s), want queued", v.State, v.Reason)
	}
	if err := s.Undrain(ctx, admin, "b"); err != nil {
		t.Fatal(err)
	}
	waitItems(t, b, func(it []api.Assignment) bool { return find(it, j.ID, false) != nil })
	if err := s.RemoveNode(ctx, admin, "nowhere"); !api.IsStatus(err, 404) {
		t.Fatalf("removing an unknown node: %v", err)
	}
	if err := s.Drain(ctx, admin, "nowhere"); !api.IsStatus(err, 404) {
		t.Fatalf("draining an unknown node: %v", err)
	}
}

// TestRateLimitPerToken: beyond its rate, a token gets 429 with
// Retry-After; another token is served meanwhile; the bucket refills with
// the (server's) clock.
func TestRateLimitPerToken(t *testing.T) {
	clk := &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	s, hs := testServer(t, Config{Policy: "fifo", Clock: clk.now, RateLimit: api.RateLimit{Rate: 1, Burst: 3}})
	alice, err := api.NewClient(hs.URL, s.AdminToken).CreateToken(context.Background(), api.TokenRequest{User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		do(t, hs.URL, call{method: "GET", path: "/v1/whoami", token: alice.Token, status: 200})
	}
	rq, _ := http.NewRequest("GET", hs.URL+"/v1/whoami", nil)
	rq.Header.Set("Authorization", "Bearer "+alice.Token)
	resp, err := http.DefaultClient.Do(rq)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("the 4th request in a burst of 3: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	do(t, hs.URL, call{method: "GET", path: "/v1/whoami", token: s.AdminToken, status: 200})
	clk.advance(time.Second)
	do(t, hs.URL, call{method: "GET", path: "/v1/whoami", token: alice.Token, status: 200})
	do(t, hs.URL, call{method: "GET", path: "/v1/whoami", token: alice.Token, status: 429})
}

// TestLeave: an agent that leaves (SIGTERM) has its node declared down at
// once, its jobs requeued without a back-off (the node time-out here is an
// hour, the retry back-off a minute), its other reports applied; only its
// own node's credential may say it leaves.
func TestLeave(t *testing.T) {
	fp := engine.DefaultFailurePolicy() // back-off 60 s
	s, stop := runServer(t, Config{DataDir: t.TempDir(), Policy: "fifo", NodeTimeout: time.Hour, Failure: &fp})
	defer stop()
	ctx := context.Background()
	a := addNode(t, s, "a")
	j, _, err := s.Submit(ctx, api.Principal{User: "alice"}, &api.JobRequest{Command: []string{"train"}, GPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	w := find(waitItems(t, a, func(it []api.Assignment) bool { return find(it, j.ID, false) != nil }), j.ID, false)
	a.report(api.Report{Job: j.ID, Attempt: w.Attempt, Kind: api.RepStarted})
	if err := s.Leave(ctx, nodeP("b"), &api.Leave{Node: "a", Session: a.session}); !api.IsStatus(err, 403) {
		t.Fatalf("b saying a leaves: %v", err)
	}
	err = s.Leave(ctx, nodeP("a"), &api.Leave{Node: "a", Session: a.session, Reason: "shutting down", Reports: []api.Report{
		{Seq: a.seq + 1, Job: j.ID, Attempt: w.Attempt, Kind: api.RepProgress, Done: 42},
		{Seq: a.seq + 2, Job: j.ID, Attempt: w.Attempt, Kind: api.RepExited, Outcome: "lost", Message: "stopped by its agent"}}})
	if err != nil {
		t.Fatal(err)
	}
	n := waitNode(t, s, "a", func(api.Node) bool { return true })
	if n.Up || n.Reason != "its agent left: shutting down" {
		t.Fatalf("a after leaving: %+v", n)
	}
	v := jobState(t, s, j.ID)
	if v.State != "queued" || v.BackoffUntil != nil || v.Done != 42 {
		t.Fatalf("the job after its node left: %s, back-off %v, done %v; want queued at once with 42 done", v.State, v.BackoffUntil, v.Done)
	}
}

// TestDataDirPrivate: the data directory and the token files are readable
// by the server's account alone, also when the directory was made wider.
func TestDataDirPrivate(t *testing.T) {
	dir := t.TempDir() + "/data"
	os.Mkdir(dir, 0o755)
	s, stop := runServer(t, Config{DataDir: dir, Policy: "fifo"})
	os.Chmod(dir+"/admin.token", 0o644)
	if _, err := s.ResetAdminToken(); err != nil {
		t.Fatal(err)
	}
	stop()
	for _, c := range []struct {
		path string
		mode os.FileMode
	}{{dir, 0o700}, {dir + "/admin.token", 0o600}, {dir + "/agent.token", 0o600}, {dir + "/gandiva.db", 0o600}} {
		if st, err := os.Stat(c.path); err != nil || st.Mode().Perm() != c.mode {
			t.Errorf("%s: %v %v, want mode %04o", c.path, st.Mode().Perm(), err, c.mode)
		}
	}
}

// evilNode enrols node name through the API with an agent token an admin
// makes for it, and returns a client with its credential.
func evilNode(t *testing.T, hs *httptest.Server, admin *api.Client, name string) *api.Client {
	t.Helper()
	ctx := context.Background()
	tok, err := admin.CreateToken(ctx, api.TokenRequest{Agent: true, Label: name})
	if err != nil {
		t.Fatal(err)
	}
	cred, err := api.NewClient(hs.URL, tok.Token).Enrol(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	return api.NewClient(hs.URL, cred.Token)
}

// userClient makes a token for user through admin and returns a client
// of hs with it.
func userClient(t *testing.T, hs *httptest.Server, admin *api.Client, user string) *api.Client {
	t.Helper()
	tok, err := admin.CreateToken(context.Background(), api.TokenRequest{User: user})
	if err != nil {
		t.Fatal(err)
	}
	return api.NewClient(hs.URL, tok.Token)
}

// logAgent serves a node agent's log endpoint on 127.0.0.1 and returns its
// host:port: it refuses a request without key as its bearer token, and
// answers the others with the proof of key and what log writes.
func logAgent(t *testing.T, key string, log http.HandlerFunc) string {
	t.Helper()
	return serveOn(t, "127.0.0.1", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+key {
			http.Error(w, "invalid key", http.StatusUnauthorized)
			return
		}
		w.Header().Set(api.LogProofHeader, api.LogProof(key, r.Header.Get(api.LogNonceHeader), r.URL.RawQuery))
		log(w, r)
	})
}

// serveOn serves h on a new listener at ip (a loopback address) and
// returns its host:port.
func serveOn(t *testing.T, ip string, h http.HandlerFunc) string {
	t.Helper()
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// TestNodeLogAddr: a node cannot make the server fetch another service's
// pages through `gandiva logs` (a registration's addr used to be used
// unchecked, redirects followed, and a user's logs returned the body of an
// internal loopback service). Its addr is http://HOST:PORT only; a host
// other than the address it registered from is refused; neither another
// service on its own address nor a redirect gets its body (or its error
// text) relayed; the agent's own answer, with its proof, is.
func TestNodeLogAddr(t *testing.T) {
	s, hs := testServer(t, Config{Policy: "fifo", NodeTimeout: time.Hour})
	ctx := context.Background()
	admin := api.NewClient(hs.URL, s.AdminToken)
	alice := userClient(t, hs, admin, "alice")
	const secret = "TOP-SECRET internal page"
	leak := func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, secret) }
	other := serveOn(t, "127.0.0.2", leak) // a service of another host (as far as the node is concerned)
	same := serveOn(t, "127.0.0.1", leak)  // another service at the node's own address
	fail := serveOn(t, "127.0.0.1", func(w http.ResponseWriter, r *http.Request) { http.Error(w, secret, http.StatusTeapot) })
	redirect := serveOn(t, "127.0.0.1", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://"+other+"/secret", http.StatusFound)
	})
	const key = "0123456789abcdef0123"
	agent := logAgent(t, key, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "the job's own output")
	})

	node := evilNode(t, hs, admin, "evil")
	var running []api.Running
	reg := func(addr string) (*api.RegistrationReply, error) {
		return node.Register(ctx, &api.Registration{Name: "evil", GPUs: []api.GPU{{Index: 0, Type: "V100", MemGiB: 16}},
			HostMemGiB: 8, Addr: addr, LogKey: key, Incarnation: "i1", Running: running})
	}
	for _, bad := range []string{"http://" + same + "/x", "http://u:p@" + same, "https://" + same, "http://127.0.0.1",
		"http://" + same + "?a=b", "http://" + same + "#f", "file:///etc/passwd", "http://[::1%25lo]:80", "http://0.0.0.0:80",
		"http://127.0.0.1:0", "http://127.0.0.1:99999", "http://ho_st:80", "gopher://" + same} {
		if _, err := reg(bad); !api.IsStatus(err, 400) || !strings.HasPrefix(err.Error(), "addr:") {
			t.Errorf("registering addr %q: %v, want a 400 naming addr", bad, err)
		}
	}
	if _, err := reg("http://" + other); !api.IsStatus(err, 403) || !strings.Contains(err.Error(), "--node-addr any") {
		t.Fatalf("registering another host's address: %v, want 403", err)
	}
	rep, err := reg("http://" + same)
	if err != nil {
		t.Fatal(err)
	}
	j, err := alice.Submit(ctx, &api.JobRequest{Command: []string{"train"}, GPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	var w *api.Assignment
	for deadline := time.Now().Add(20 * time.Second); w == nil && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		as, err := node.Assignments(ctx, "evil", rep.Session, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		w = find(as.Items, j.ID, false)
	}
	if w == nil {
		t.Fatal("the job was never assigned to the node")
	}
	if err := node.Report(ctx, &api.ReportBatch{Node: "evil", Session: rep.Session,
		Reports: []api.Report{{Seq: 1, Job: j.ID, Attempt: w.Attempt, Kind: api.RepStarted}}}); err != nil {
		t.Fatal(err)
	}
	running = []api.Running{{Job: j.ID, Attempt: w.Attempt, State: "running", GPUs: []int{0}}}
	logs := func() (string, error) {
		rc, err := alice.Logs(ctx, j.ID, api.LogOptions{})
		if err != nil {
			return err.Error(), err
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		return string(b), err
	}
	for _, addr := range []string{same, fail, redirect} {
		if addr != same {
			if _, err := reg("http://" + addr); err != nil {
				t.Fatal(err)
			}
		}
		if out, err := logs(); err == nil || strings.Contains(out, "TOP-SECRET") {
			t.Fatalf("logs with the node's addr at %s: %v %q; want an error without the page", addr, err, out)
		}
	}
	if _, err := reg("http://" + agent); err != nil {
		t.Fatal(err)
	}
	if out, err := logs(); err != nil || out != "the job's own output" {
		t.Fatalf("logs from the agent itself: %q %v", out, err)
	}
	if v := jobState(t, s, j.ID); v.State != "running" {
		t.Fatalf("the job after the node's re-registrations: %s (%s)", v.State, v.Reason)
	}
}

// TestNodeAddrAny: with --node-addr any, a node's address is taken as
// registered (agents behind NAT), and still nothing but its agent's own
// answer is relayed.
func TestNodeAddrAny(t *testing.T) {
	s, hs := testServer(t, Config{Policy: "fifo", NodeTimeout: time.Hour, NodeAddr: NodeAddrAny})
	ctx := context.Background()
	other := serveOn(t, "127.0.0.2", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "TOP-SECRET") })
	node := evilNode(t, hs, api.NewClient(hs.URL, s.AdminToken), "nat")
	_, err := node.Register(ctx, &api.Registration{Name: "nat", GPUs: []api.GPU{{Index: 0, Type: "V100", MemGiB: 16}},
		HostMemGiB: 8, Addr: "http://" + other, LogKey: "0123456789abcdef", Incarnation: "i1", Running: []api.Running{}})
	if err != nil {
		t.Fatalf("--node-addr any: %v", err)
	}
	j, _, err := s.Submit(ctx, api.Principal{User: "alice"}, &api.JobRequest{Command: []string{"train"}, GPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); jobState(t, s, j.ID).Attempts == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the job never got an attempt")
		}
	}
	if rc, err := s.Logs(ctx, api.Principal{User: "alice"}, j.ID, api.LogOptions{}); err == nil {
		b, _ := io.ReadAll(rc)
		rc.Close()
		t.Fatalf("logs relayed %q from a service that is not the agent", b)
	}
}

// TestRegistrationBounds: what a node reports of itself is bounded (issue
// 22: memory of 1e300 GiB was accepted, control characters in GPU types
// and racks reached admins' terminals; a domain of 1<<62 made the server
// allocate a topology that large): each is a 400 naming the field.
func TestRegistrationBounds(t *testing.T) {
	s, hs := testServer(t, Config{Policy: "fifo", NodeTimeout: time.Hour})
	node := evilNode(t, hs, api.NewClient(hs.URL, s.AdminToken), "n1")
	gpu := `{"index": 0, "type": "V100", "mem_gib": 16}`
	body := func(field, value string) string {
		f := map[string]string{"name": `"n1"`, "gpus": "[" + gpu + "]", "host_mem_gib": "64", "incarnation": `"i1"`,
			"addr": `"http://127.0.0.1:7071"`, "log_key": `"0123456789abcdef"`}
		if field != "" {
			f[field] = value
		}
		var parts []string
		for k, v := range f {
			parts = append(parts, fmt.Sprintf("%q: %s", k, v))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	gpus := func(g string) string { return "[" + g + "]" }
	many := strings.TrimSuffix(strings.Repeat(gpu+",", 65), ",")
	for _, c := range []struct{ field, value, want string }{
		{"host_mem_gib", "1e300", "host_mem_gib"},
		{"host_mem_gib", "65537", "host_mem_gib"},
		{"gpus", gpus(`{"index": 0, "type": "V100", "mem_gib": 1e300}`), "gpus[0].mem_gib"},
		{"gpus", gpus(`{"index": 0, "type": "V100\u001b[2J\u001b[31m", "mem_gib": 16}`), "gpus[0].type"},
		{"gpus", gpus(`{"index": 0, "type": "V100\u202e001A", "mem_gib": 16}`), "gpus[0].type"},
		{"gpus", gpus(`{"index": 0, "type": "` + strings.Repeat("V", 65) + `", "mem_gib": 16}`), "gpus[0].type"},
		{"gpus", gpus(`{"index": 0, "type": "V100", "mem_gib": 16, "uuid": "GPU-\u0007"}`), "gpus[0].uuid"},
		{"gpus", "[" + many + "]", "gpus"},
		{"rack", `"r1\u001b]0;pwned\u0007"`, "rack"},
		{"rack", `"r\u2066x"`, "rack"},
		{"rack", `"` + strings.Repeat("r", 129) + `"`, "rack"},
		{"domain", "4611686018427387904", "domain"},
		{"domain", "4096", "domain"},
		{"incarnation", `"a b"`, "incarnation"},
		{"incarnation", `"` + strings.Repeat("i", 65) + `"`, "incarnation"},
		{"log_key", `"short"`, "log_key"},
		{"log_key", `"0123456789abcdef\r\nX-Evil: 1"`, "log_key"},
		{"name", `"n1\u202e"`, "name"},
	} {
		do(t, hs.URL, call{method: "POST", path: "/v1/agent/register", token: node.Token, body: body(c.field, c.value), status: 400, field: c.want})
	}
	do(t, hs.URL, call{method: "POST", path: "/v1/agent/register", token: node.Token, body: body("rack", `"rack-7 (Zürich)"`), status: 200})
}

// TestRemovedNodeLeavesCapacity: the GPUs of a node an admin removed no
// longer count (after a 1-GPU node of five was removed, a 5-GPU
// job was accepted and queued for ever on 4 live GPUs): a job too big for
// what is left is refused, a queued one says why, also after a restart
// (replay); the node registering again brings them back.
func TestRemovedNodeLeavesCapacity(t *testing.T) {
	cfg := Config{DataDir: t.TempDir(), Policy: "fifo", NodeTimeout: time.Hour}
	s, stop := runServer(t, cfg)
	ctx := context.Background()
	admin := api.Principal{User: "admin", Admin: true}
	alice := api.Principal{User: "alice"}
	addNode(t, s, "a")
	b := addNode(t, s, "b") // 4 GPUs each
	first, _, err := s.Submit(ctx, alice, &api.JobRequest{Command: []string{"train"}, GPUs: 4})
	if err != nil {
		t.Fatal(err)
	}
	big, _, err := s.Submit(ctx, alice, &api.JobRequest{Command: []string{"train"}, GPUs: 8})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveNode(ctx, admin, "b"); err != nil {
		t.Fatal(err)
	}
	waitNode(t, s, "b", func(n api.Node) bool { return !n.Up })
	check := func(s *Server) {
		t.Helper()
		if _, _, err := s.Submit(ctx, alice, &api.JobRequest{Command: []string{"train"}, GPUs: 5}); !api.IsStatus(err, 400) || !strings.Contains(err.Error(), "4 GPUs on 1 node (") {
			t.Fatalf("a 5-GPU job with 4 GPUs left: %v, want a 400 saying so", err)
		}
		if v := jobState(t, s, big.ID); v.State != "queued" || !strings.Contains(v.Reason, "needs 8 GPUs") || !strings.Contains(v.Reason, "has 4 on 1 node:") {
			t.Fatalf("the queued 8-GPU job: %s, reason %q; want queued, saying it needs 8 of 4", v.State, v.Reason)
		}
		e, err := s.Explain(ctx, alice, big.ID)
		if err != nil || e.TotalGPUs != 4 || !strings.Contains(e.Reason, "needs 8 GPUs") {
			t.Fatalf("explain: %+v %v; want 4 GPUs in all and the reason", e, err)
		}
	}
	check(s)
	stop()
	s, stop = runServer(t, cfg) // (the removal is in the log: replayed, it still holds)
	defer stop()
	check(s)
	if v := jobState(t, s, first.ID); v.State == "failed" {
		t.Fatalf("the 4-GPU job: %s", v.State)
	}
	b.s = s
	b.register()
	if _, _, err := s.Submit(ctx, alice, &api.JobRequest{Command: []string{"train"}, GPUs: 5}); err != nil {
		t.Fatalf("a 5-GPU job once b is back: %v", err)
	}
	if v := jobState(t, s, big.ID); strings.Contains(v.Reason, "needs 8 GPUs") {
		t.Fatalf("the 8-GPU job still says it does not fit: %q", v.Reason)
	}
}
