package server

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/store"
)

// TestDamagedStoreKeepsTokens: a server whose gandiva.db is empty,
// truncated, garbage or missing (its token files still there) refuses to
// start, with a message naming the file and what to do, and writes
// nothing: the store and both token files stay as they were, so the
// cluster's jobs and every user's and agent's tokens can still be had
// back from a backup.
func TestDamagedStoreKeepsTokens(t *testing.T) {
	// a real data directory: a store with a job in it, and its tokens
	orig := t.TempDir()
	s, stop := runServer(t, Config{DataDir: orig})
	addNode(t, s, "n1")
	if _, _, err := s.Submit(context.Background(), api.Principal{User: "alice"}, &api.JobRequest{Command: []string{"train"}, GPUs: 1}); err != nil {
		t.Fatal(err)
	}
	stop()
	db, err := os.ReadFile(filepath.Join(orig, "gandiva.db"))
	if err != nil {
		t.Fatal(err)
	}
	garbage := bytes.Repeat([]byte("not a store "), len(db)/12)
	for name, data := range map[string][]byte{"empty": {}, "truncated": db[:len(db)/2], "garbage": garbage, "missing": nil} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			tokens := map[string][]byte{}
			for _, f := range []string{"admin.token", "agent.token"} {
				b, err := os.ReadFile(filepath.Join(orig, f))
				if err != nil {
					t.Fatal(err)
				}
				tokens[f] = b
				if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			path := filepath.Join(dir, "gandiva.db")
			if data != nil {
				if err := os.WriteFile(path, data, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			s, err := Open(Config{DataDir: dir})
			if err == nil {
				s.Close()
				t.Fatal("the server started on a damaged data directory")
			}
			want := []string{path, "backup"}
			if data == nil {
				want = []string{dir, "admin.token", "no store"}
			} else if !errors.Is(err, store.ErrDamaged) {
				t.Errorf("err = %v, want one wrapping store.ErrDamaged", err)
			}
			for _, w := range want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error does not say %q: %v", w, err)
				}
			}
			for f, b := range tokens {
				if got, err := os.ReadFile(filepath.Join(dir, f)); err != nil || !bytes.Equal(got, b) {
					t.Errorf("%s was changed (%q, %v)", f, got, err)
				}
			}
			got, err := os.ReadFile(path)
			if data == nil {
				if !errors.Is(err, os.ErrNotExist) {
					t.Errorf("a new store was created: %v", err)
				}
			} else if !bytes.Equal(got, data) {
				t.Errorf("the store file was changed (%d bytes, were %d; %v)", len(got), len(data), err)
			}
		})
	}
}
