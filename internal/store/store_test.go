package store

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func open(t *testing.T, path string) *DB {
	t.Helper()
	db, err := Open(path, Options{LockTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// TestLogSurvivesReopen: committed entries come back in order, with
// sequences 1..n and no gaps, after the database is closed and reopened.
func TestLogSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "g.db")
	db := open(t, path)
	for i := 0; i < 3; i++ {
		b := &Batch{Jobs: map[string][]byte{fmt.Sprint("j", i): []byte(`{}`)}, Changes: [][]byte{[]byte(fmt.Sprint(i))}}
		for k := 0; k <= i; k++ {
			b.Entries = append(b.Entries, []byte(fmt.Sprintf("e%d.%d", i, k)))
		}
		first, err := db.Commit(b)
		if err != nil {
			t.Fatal(err)
		}
		if want := uint64(1 + i*(i+1)/2); first != want {
			t.Fatalf("batch %d: first seq %d, want %d", i, first, want)
		}
	}
	db.Close()
	db = open(t, path)
	defer db.Close()
	var got []string
	var seqs []uint64
	if err := db.Log(1, func(seq uint64, e []byte) error {
		seqs = append(seqs, seq)
		got = append(got, string(e))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := []string{"e0.0", "e1.0", "e1.1", "e2.0", "e2.1", "e2.2"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("log = %v, want %v", got, want)
	}
	for i, s := range seqs {
		if s != uint64(i+1) {
			t.Fatalf("seqs = %v", seqs)
		}
	}
	var tail []string
	db.Log(5, func(_ uint64, e []byte) error { tail = append(tail, string(e)); return nil })
	if fmt.Sprint(tail) != "[e2.1 e2.2]" {
		t.Fatalf("log from 5 = %v", tail)
	}
	if n, _ := db.NextSeq(); n != 7 {
		t.Fatalf("NextSeq = %d, want 7", n)
	}
	var ch []string
	db.Changes(func(_ uint64, c []byte) error { ch = append(ch, string(c)); return nil })
	if fmt.Sprint(ch) != "[0 1 2]" {
		t.Fatalf("changes = %v", ch)
	}
	if _, ok, _ := db.Job("j2"); !ok {
		t.Fatal("job j2 missing")
	}
	// A failing callback stops the walk and its error comes back.
	stop := errors.New("stop")
	n := 0
	if err := db.Log(1, func(uint64, []byte) error { n++; return stop }); !errors.Is(err, stop) || n != 1 {
		t.Fatalf("Log with failing fn: err=%v after %d entries", err, n)
	}
}

func TestEpochAndBoot(t *testing.T) {
	path := filepath.Join(t.TempDir(), "g.db")
	db := open(t, path)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC)
	e, created, err := db.Epoch(t0)
	if err != nil || !created || !e.Equal(t0) {
		t.Fatalf("first Epoch = %v %v %v", e, created, err)
	}
	if b, _ := db.Boot(); b != 1 {
		t.Fatalf("boot = %d", b)
	}
	db.Close()
	db = open(t, path)
	defer db.Close()
	e, created, err = db.Epoch(t0.Add(time.Hour))
	if err != nil || created || !e.Equal(t0) {
		t.Fatalf("Epoch after reopen = %v %v %v, want the first epoch kept", e, created, err)
	}
	if b, _ := db.Boot(); b != 2 {
		t.Fatalf("boot = %d, want 2", b)
	}
	if err := db.SetMeta("policy", []byte("fifo")); err != nil {
		t.Fatal(err)
	}
	if v, ok, _ := db.Meta("policy"); !ok || string(v) != "fifo" {
		t.Fatalf("meta = %q %v", v, ok)
	}
	if _, ok, _ := db.Meta("nope"); ok {
		t.Fatal("absent meta reported present")
	}
}

// TestSecondOpenFails: the file lock keeps a second server off the same store.
func TestSecondOpenFails(t *testing.T) {
	path := filepath.Join(t.TempDir(), "g.db")
	db := open(t, path)
	defer db.Close()
	if _, err := Open(path, Options{LockTimeout: 100 * time.Millisecond}); err == nil {
		t.Fatal("second Open of the same file succeeded")
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("store file mode %v, want 0600", st.Mode().Perm())
	}
}

func TestTokens(t *testing.T) {
	path := filepath.Join(t.TempDir(), "g.db")
	db := open(t, path)
	now := time.Now()
	if has, _ := db.HasUsers(); has {
		t.Fatal("new store has users")
	}
	admin, _, err := db.CreateToken("root", KindUser, true, "bootstrap", now)
	if err != nil {
		t.Fatal(err)
	}
	alice, at, err := db.CreateToken("alice", KindUser, false, "", now)
	if err != nil {
		t.Fatal(err)
	}
	agent, at1, err := db.CreateEnrolToken(EnrolOptions{Label: AnyNode, Uses: 3, TTL: time.Hour}, now)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		tok  string
		want Principal
	}{
		{admin, Principal{User: "root", Admin: true}},
		{alice, Principal{User: "alice"}},
		{agent, Principal{User: "agent:agents", Agent: true}},
	} {
		p, err := db.Authenticate(c.tok)
		if err != nil {
			t.Fatalf("Authenticate(%s…): %v", c.tok[:8], err)
		}
		p.TokenID = ""
		if p != c.want {
			t.Errorf("principal %+v, want %+v", p, c.want)
		}
	}
	for _, bad := range []string{"", "gdv_", "gdv_nope", alice + "x", "Bearer " + alice, alice[:len(alice)-1]} {
		if _, err := db.Authenticate(bad); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("Authenticate(%q) = %v, want ErrUnauthenticated", bad, err)
		}
	}
	if _, _, err := db.CreateToken("Bad Name", KindUser, false, "", now); err == nil {
		t.Error("bad user name accepted")
	}
	// Revoking by ID prefix stops the token from working.
	if _, err := db.RevokeToken(at.ID[:8]); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Authenticate(alice); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("revoked token still works: %v", err)
	}
	toks, _ := db.Tokens("")
	if len(toks) != 2 {
		t.Fatalf("tokens = %+v", toks)
	}
	// A node credential is bound to its name; the name is enrolled once,
	// until its credentials are revoked.
	n1, _, err := db.EnrolNode("n1", at1.ID, now)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := db.Authenticate(n1); err != nil || p.Node != "n1" || !p.Agent || p.Admin {
		t.Fatalf("node credential: %+v %v", p, err)
	}
	if _, _, err := db.EnrolNode("n1", at1.ID, now); !errors.Is(err, ErrNodeEnrolled) {
		t.Fatalf("a second enrolment of n1: %v, want ErrNodeEnrolled", err)
	}
	if _, _, err := db.EnrolNode("n2", at1.ID, now); err != nil {
		t.Fatal(err)
	}
	if gone, err := db.RevokeNode("n1"); err != nil || len(gone) != 1 || gone[0].Label != "n1" {
		t.Fatalf("RevokeNode: %+v %v", gone, err)
	}
	if _, err := db.Authenticate(n1); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("a revoked node credential still works: %v", err)
	}
	n1b, _, err := db.EnrolNode("n1", at1.ID, now)
	if err != nil {
		t.Fatalf("enrolling n1 again after its revocation: %v", err)
	}
	db.Close()
	// Secrets are never on disk, only their hashes.
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{admin, agent, alice, n1, n1b} {
		if bytes.Contains(raw, []byte(s[len(TokenPrefix):])) {
			t.Fatal("a token secret is stored in clear")
		}
	}
}
