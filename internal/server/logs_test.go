package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/gandiva-sched/gandiva/internal/api"
)

// TestLogStreamRevoked: `gandiva logs -f` opened before its
// token is revoked ends soon after `gandiva token revoke` (it streamed on
// for as long as the job wrote), through the real store's authentication
// and a node's agent that keeps writing.
func TestLogStreamRevoked(t *testing.T) {
	s, hs := testServer(t, Config{Policy: "fifo", NodeTimeout: time.Hour})
	ctx := context.Background()
	admin := api.NewClient(hs.URL, s.AdminToken)
	at, err := admin.CreateToken(ctx, api.TokenRequest{User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	alice := api.NewClient(hs.URL, at.Token)
	const key = "0123456789abcdef0123"
	agent := logAgent(t, key, func(w http.ResponseWriter, r *http.Request) {
		for i := 0; ; i++ { // a job that never stops writing
			if _, err := fmt.Fprintf(w, "step %d\n", i); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	})
	node := evilNode(t, hs, admin, "n1")
	rep, err := node.Register(ctx, &api.Registration{Name: "n1", GPUs: []api.GPU{{Index: 0, Type: "V100", MemGiB: 16}},
		HostMemGiB: 8, Addr: "http://" + agent, LogKey: key, Incarnation: "i1", Running: []api.Running{}})
	if err != nil {
		t.Fatal(err)
	}
	j, err := alice.Submit(ctx, &api.JobRequest{Command: []string{"train"}, GPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		as, err := node.Assignments(ctx, "n1", rep.Session, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if find(as.Items, j.ID, false) != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the job was never assigned to the node")
		}
	}
	rc, err := alice.Logs(ctx, j.ID, api.LogOptions{Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if _, err := io.ReadFull(rc, make([]byte, 20)); err != nil {
		t.Fatalf("the stream, before the revocation: %v", err)
	}
	if _, err := admin.RevokeToken(ctx, at.ID); err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() { _, err := io.Copy(io.Discard, rc); ended <- err }()
	select {
	case <-ended:
	case <-time.After(time.Minute):
		t.Fatal("the log stream went on for a minute after its token was revoked")
	}
	if _, err := alice.Logs(ctx, j.ID, api.LogOptions{Follow: true}); !api.IsStatus(err, 401) {
		t.Fatalf("logs with the revoked token: %v, want a 401", err)
	}
}
