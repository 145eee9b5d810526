package server

import (
	"context"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/engine"
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
// reason says so (issue 12: "SEEN 19s ago" next to "no contact for 30s",
// because declaring a node lost restarted its clock). After a restart, a
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
// another node's job holds nothing back (issue 12: with the shared agent
// token anyone could register under any name, pull other users'
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
	if _, _, err := s.db.EnrolNode("a", time.Now()); err != nil {
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
