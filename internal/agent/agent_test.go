package agent_test

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gandiva-sched/gandiva/internal/agent"
	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/server"
)

func testServer(t *testing.T) (*server.Server, string) {
	t.Helper()
	s, err := server.Open(server.Config{DataDir: t.TempDir(), Policy: "fifo", NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(func() { hs.Close(); cancel(); <-done; s.Close() })
	return s, hs.URL
}

// runAgent starts an agent; the returned channel gets Run's result.
func runAgent(t *testing.T, url, token, name, work string) (stop func(), result <-chan error) {
	t.Helper()
	g, _ := agent.ParseFakeGPUs("1xV100")
	rule := agent.RunAs{Self: true, SelfUsers: []string{"*"}}
	if os.Geteuid() == 0 {
		rule = agent.RunAs{Pattern: "nobody"}
	}
	a, err := agent.New(agent.Config{Server: url, Token: token, Name: name, GPUs: g, WorkRoot: work, PollWait: time.Second, RunAs: rule})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	res := make(chan error, 1)
	go func() { res <- a.Run(ctx) }()
	t.Cleanup(cancel)
	return cancel, res
}

// openDir is a directory the accounts jobs run as can reach.
func openDir(t *testing.T) string {
	d, err := os.MkdirTemp("", "gandiva-agent-test-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(d, 0o755)
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func waitUp(t *testing.T, cl *api.Client, name string, up bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		ns, _ := cl.Nodes(context.Background())
		for _, n := range ns {
			if n.Name == name && n.Up == up {
				return
			}
		}
	}
	t.Fatalf("node %s never became up=%v", name, up)
}

func wantErr(t *testing.T, res <-chan error, contains string) {
	t.Helper()
	select {
	case err := <-res:
		if err == nil || !strings.Contains(err.Error(), contains) {
			t.Fatalf("agent ended with %v, want an error saying %q", err, contains)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the agent did not stop (want an error saying %q)", contains)
	}
}

// TestEnrolment: an agent enrols its node once with the agent token and
// keeps the credential (0600), which it reuses after a restart without the
// agent token; another agent cannot take the name; a removed node's agent
// stops, refused.
func TestEnrolment(t *testing.T) {
	s, url := testServer(t)
	admin := api.NewClient(url, s.AdminToken)
	work := openDir(t)
	stop, _ := runAgent(t, url, s.AgentToken, "n1", work)
	waitUp(t, admin, "n1", true)
	stop()
	cred := filepath.Join(work, "node.credential")
	st, err := os.Stat(cred)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("credential file: %v %v, want mode 0600", st, err)
	}
	data, _ := os.ReadFile(cred)
	if who, err := api.NewClient(url, strings.TrimSpace(string(data))).WhoAmI(context.Background()); err != nil || who.Node != "n1" {
		t.Fatalf("the kept credential: %+v %v, want node n1's", who, err)
	}
	// A restart without the agent token: the credential is enough.
	stop, res := runAgent(t, url, "", "n1", work)
	waitUp(t, admin, "n1", true)
	// An impostor under the same name is refused.
	_, bad := runAgent(t, url, s.AgentToken, "n1", openDir(t))
	wantErr(t, bad, "enrolled already")
	// Removal revokes the credential: the agent stops, saying why.
	if err := admin.RemoveNode(context.Background(), "n1"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, res, "refused this node's credential")
	stop()
	// With its credential file removed, it enrols afresh.
	os.Remove(cred)
	runAgent(t, url, s.AgentToken, "n1", work)
	waitUp(t, admin, "n1", true)
	// A token made for one node enrols it once; a second agent with it is
	// refused, saying what to do (the agent token used to be reusable).
	one, err := admin.CreateToken(context.Background(), api.TokenRequest{Agent: true, Uses: 1})
	if err != nil {
		t.Fatal(err)
	}
	runAgent(t, url, one.Token, "n2", openDir(t))
	waitUp(t, admin, "n2", true)
	_, bad = runAgent(t, url, one.Token, "n3", openDir(t))
	wantErr(t, bad, "used up, expired or revoked")
}
