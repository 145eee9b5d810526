package store

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestEnrolTokenLimits: an agent token enrols at most its uses, only its
// label's node, only until it expires, and not after its revocation (issue
// 22: the bootstrap agent token enrolled any number of nodes, for ever).
func TestEnrolTokenLimits(t *testing.T) {
	db := open(t, filepath.Join(t.TempDir(), "g.db"))
	defer db.Close()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	if _, _, err := db.CreateToken("", KindAgent, false, AnyNode, now); err == nil {
		t.Fatal("CreateToken made an agent token without limits")
	}
	for _, bad := range []EnrolOptions{{Label: AnyNode, Uses: 0, TTL: time.Hour}, {Label: AnyNode, Uses: 1, TTL: 0},
		{Label: AnyNode, Uses: MaxEnrolUses + 1, TTL: time.Hour}, {Label: AnyNode, Uses: 1, TTL: MaxEnrolTTL + time.Second},
		{Label: "n\x1b[2J", Uses: 1, TTL: time.Hour}} {
		if _, _, err := db.CreateEnrolToken(bad, now); err == nil {
			t.Errorf("CreateEnrolToken(%+v) accepted", bad)
		}
	}

	// Single use: the second enrolment is refused, and the token is gone.
	one, t1, err := db.CreateEnrolToken(EnrolOptions{Label: AnyNode, Uses: 1, TTL: time.Hour}, now)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := db.AuthenticateAt(one, now); err != nil || !p.Agent || p.Node != "" {
		t.Fatalf("a new agent token: %+v %v", p, err)
	}
	if _, _, err := db.EnrolNode("n1", t1.ID, now); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.EnrolNode("n2", t1.ID, now); !errors.Is(err, ErrEnrolToken) {
		t.Fatalf("a single-use token's second enrolment: %v, want ErrEnrolToken", err)
	}
	if _, err := db.AuthenticateAt(one, now); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("a used-up agent token still authenticates: %v", err)
	}

	// Bound to a name: another name is refused and spends nothing.
	_, tb, err := db.CreateEnrolToken(EnrolOptions{Label: "n3", Uses: 1, TTL: time.Hour}, now)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.EnrolNode("n4", tb.ID, now); !errors.Is(err, ErrEnrolToken) {
		t.Fatalf("a token for n3 enrolling n4: %v, want ErrEnrolToken", err)
	}
	if _, _, err := db.EnrolNode("n3", tb.ID, now); err != nil {
		t.Fatalf("a token for n3 enrolling n3: %v", err)
	}

	// Expiry: from its expiry on it neither authenticates nor enrols, and
	// the next token made deletes it.
	exp, te, err := db.CreateEnrolToken(EnrolOptions{Label: AnyNode, Uses: 5, TTL: time.Hour}, now)
	if err != nil {
		t.Fatal(err)
	}
	later := now.Add(time.Hour)
	if _, err := db.AuthenticateAt(exp, later.Add(-time.Second)); err != nil {
		t.Fatalf("a token a second before its expiry: %v", err)
	}
	if _, err := db.AuthenticateAt(exp, later); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("an expired agent token authenticates: %v", err)
	}
	if _, _, err := db.EnrolNode("n5", te.ID, later); !errors.Is(err, ErrEnrolToken) {
		t.Fatalf("an expired agent token enrols: %v", err)
	}
	if _, _, err := db.CreateEnrolToken(EnrolOptions{Label: AnyNode, Uses: 1, TTL: time.Hour}, later); err != nil {
		t.Fatal(err)
	}
	ts, _ := db.Tokens("")
	for _, tk := range ts {
		if tk.ID == te.ID {
			t.Fatalf("the expired token %s was kept: %+v", te.ID, tk)
		}
	}

	// Revocation.
	rv, tr, err := db.CreateEnrolToken(EnrolOptions{Label: AnyNode, Uses: 5, TTL: time.Hour}, now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.RevokeToken(tr.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.AuthenticateAt(rv, now); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("a revoked agent token authenticates: %v", err)
	}
	if _, _, err := db.EnrolNode("n6", tr.ID, now); !errors.Is(err, ErrEnrolToken) {
		t.Fatalf("a revoked agent token enrols: %v", err)
	}

	// Uses are spent in the enrolment's transaction: 3 uses, 16 nodes
	// enrolling at once, 3 credentials.
	_, tc, err := db.CreateEnrolToken(EnrolOptions{Label: AnyNode, Uses: 3, TTL: time.Hour}, now)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, _, err := db.EnrolNode(fmt.Sprintf("c%d", i), tc.ID, now); err == nil {
				mu.Lock()
				ok++
				mu.Unlock()
			} else if !errors.Is(err, ErrEnrolToken) {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if ok != 3 {
		t.Fatalf("a 3-use token enrolled %d nodes at once", ok)
	}
}

// TestOldTokenRecords: token records as the previous release wrote them
// (no uses, no expiry) still authenticate after an upgrade; its agent
// token enrols as it did (any number of nodes), and says it is one of those.
func TestOldTokenRecords(t *testing.T) {
	db := open(t, filepath.Join(t.TempDir(), "g.db"))
	defer db.Close()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	if err := db.CreateUser("admin", true, now); err != nil {
		t.Fatal(err)
	}
	const admin, agent = "gdv_old-admin-token-of-the-previous-release", "gdv_old-agent-token-of-the-previous-release"
	// The records, byte for byte as the previous release's CreateToken wrote them.
	records := map[string]string{
		admin: `{"id":"%s","user":"admin","kind":"user","label":"bootstrap","created":"2026-02-01T10:00:00Z"}`,
		agent: `{"id":"%s","user":"agent:agents","kind":"agent","label":"agents","created":"2026-02-01T10:00:00Z"}`,
	}
	ids := map[string]string{}
	err := db.b.Update(func(tx *bolt.Tx) error {
		for sec, rec := range records {
			h := hashToken(sec)
			ids[sec] = string(h[:12])
			if err := tx.Bucket(bTokens).Put(h, fmt.Appendf(nil, rec, h[:12])); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if p, err := db.AuthenticateAt(admin, now); err != nil || p.User != "admin" || !p.Admin {
		t.Fatalf("an old admin token: %+v %v", p, err)
	}
	p, err := db.AuthenticateAt(agent, now.Add(1000*24*time.Hour))
	if err != nil || !p.Agent || p.User != "agent:agents" {
		t.Fatalf("an old agent token: %+v %v", p, err)
	}
	for i := range 3 {
		if _, _, err := db.EnrolNode(fmt.Sprintf("n%d", i), p.TokenID, now); err != nil {
			t.Fatalf("an old agent token enrolling node %d: %v", i, err)
		}
	}
	ts, _ := db.Tokens("")
	legacy := 0
	for _, tk := range ts {
		if tk.Legacy() {
			legacy++
			if tk.ID != ids[agent] {
				t.Fatalf("token %+v is taken for an old agent token", tk)
			}
		}
	}
	if legacy != 1 {
		t.Fatalf("%d old agent tokens listed, want 1: %+v", legacy, ts)
	}
}
