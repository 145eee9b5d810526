package server

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gandiva-sched/gandiva/internal/api"
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
