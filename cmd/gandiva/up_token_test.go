package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/store"
)

// TestUpRestartMakesNoEnrolmentToken: `gandiva up` makes its own agent an
// enrolment token only when the agent has no credential to use. Every
// restart on a store whose node was enrolled made one anyway, which nothing
// used: a live enrolment secret for the node's name, listed by `gandiva
// token list`, one more per restart.
func TestUpRestartMakesNoEnrolmentToken(t *testing.T) {
	data := filepath.Join(t.TempDir(), "A")
	args := append([]string{"--data-dir", data}, upWorkArgs(t)...)
	for i := range 2 {
		url, stop := startUp(t, args...)
		runJobToEnd(t, url, data) // (its agent has enrolled, or used its credential)
		tok, err := os.ReadFile(filepath.Join(data, "admin.token"))
		if err != nil {
			t.Fatal(err)
		}
		ts, err := api.NewClient(url, strings.TrimSpace(string(tok))).Tokens(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, tk := range ts {
			if tk.Kind == "agent" && tk.Label != store.AnyNode {
				t.Errorf("start %d: an enrolment token for node %q is left (%+v)", i+1, tk.Label, tk)
			}
		}
		if err := stop(); err != nil {
			t.Fatalf("start %d: %v", i+1, err)
		}
	}
}

// TestUpNewStoreBesideOldCredential: a data directory whose store was moved
// away (with admin.token and agent.token, as the refusal of a damaged store
// says to) to start a new cluster still holds DATA/node.credential, the
// credential of up's agent in the old store. up said "gandiva is up", then
// its agent was refused by the new store and up ended: no job ever ran.
// The file is up's own: one this store does not know is replaced.
func TestUpNewStoreBesideOldCredential(t *testing.T) {
	data := filepath.Join(t.TempDir(), "A")
	args := append([]string{"--data-dir", data}, upWorkArgs(t)...)
	url, stop := startUp(t, args...)
	runJobToEnd(t, url, data)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(t.TempDir(), "old")
	if err := os.Mkdir(old, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"gandiva.db", "admin.token", "agent.token"} {
		if err := os.Rename(filepath.Join(data, f), filepath.Join(old, f)); err != nil {
			t.Fatal(err)
		}
	}
	url, stop = startUp(t, args...)
	runJobToEnd(t, url, data)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}
