package server

import (
	"context"
	"strings"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/api"
)

func wantAPIError(t *testing.T, what string, err error, status int, field, contains string) {
	t.Helper()
	ae, ok := err.(*api.Error)
	if !ok || ae.Status != status || ae.Field != field || !strings.Contains(ae.Message, contains) {
		t.Fatalf("%s: %v, want a %d naming %q and saying %q", what, err, status, field, contains)
	}
}

// TestAdmission: a job that can never fit the cluster as registered is
// refused at the door, naming the field (a 4,096-GPU job on a
// 4-GPU cluster was accepted, burnt a GPU on its pre-run and waited
// forever); so is one whose memory per GPU exceeds every GPU's.
func TestAdmission(t *testing.T) {
	s, stop := runServer(t, Config{DataDir: t.TempDir(), Policy: "fifo", PreRun: true})
	defer stop()
	ctx := context.Background()
	alice := api.Principal{User: "alice"}
	submit := func(rq api.JobRequest) error {
		_, _, err := s.Submit(ctx, alice, &rq)
		return err
	}
	err := submit(api.JobRequest{Command: []string{"x"}, GPUs: 1})
	wantAPIError(t, "before any node registered", err, 400, "gpus", "no node has registered")
	addNode(t, s, "n1") // 4 × V100, 16 GiB each
	err = submit(api.JobRequest{Command: []string{"x"}, GPUs: 4096})
	wantAPIError(t, "4096 GPUs on a 4-GPU cluster", err, 400, "gpus", "has 4 GPUs on 1 node (")
	err = submit(api.JobRequest{Command: []string{"x"}, GPUs: 1, MemGiB: 80})
	wantAPIError(t, "80 GiB per GPU", err, 400, "mem_gib", "has 16 GiB")
	if err := submit(api.JobRequest{Command: []string{"x"}, GPUs: 4, MemGiB: 16}); err != nil {
		t.Fatalf("a job that fits: %v", err)
	}
	addNode(t, s, "n2")
	if err := submit(api.JobRequest{Command: []string{"x"}, GPUs: 8}); err != nil {
		t.Fatalf("a gang of both nodes: %v", err)
	}
	// Nothing refused reached the machine: two jobs, j1 and j2.
	jobs, _ := s.List(ctx, alice, api.ListOptions{})
	if len(jobs) != 2 || jobs[0].ID != "j1" || jobs[1].ID != "j2" {
		t.Fatalf("jobs %+v, want j1 and j2 only", jobs)
	}
}

// TestSettingsChecked: a setting is refused unless the server (quotas) or
// its policy (policy.SettingsValidator) reads it, and its value is in range.
func TestSettingsChecked(t *testing.T) {
	admin := api.Principal{User: "admin", Admin: true}
	ctx := context.Background()
	s, stop := runServer(t, Config{DataDir: t.TempDir(), Policy: "fifo"})
	for _, c := range []struct {
		key, value, field string
	}{
		{"tickets/alice", "4", "key"}, // fifo reads no tickets
		{"quantum", "60", "key"},
		{"quota/queued-jobs", "-5", "value"},
		{"quota/queued-jobs", "many", "value"},
		{"quota/queued-jobs/Bad Name", "5", "key"},
		{"quota/env-bytes", "99999999", "value"},
	} {
		err := s.Set(ctx, admin, api.Setting{Key: c.key, Value: c.value})
		wantAPIError(t, c.key+"="+c.value, err, 400, c.field, "")
	}
	if err := s.Set(ctx, admin, api.Setting{Key: "quota/queued-jobs/alice", Value: "7"}); err != nil {
		t.Fatal(err)
	}
	stop()
	s2, stop2 := runServer(t, Config{DataDir: t.TempDir(), Policy: "gandiva-fair"})
	defer stop2()
	err := s2.Set(ctx, admin, api.Setting{Key: "tickets/alice", Value: "-5"})
	wantAPIError(t, "tickets/alice=-5", err, 400, "value", "not negative")
	err = s2.Set(ctx, admin, api.Setting{Key: "tickets/alice/x", Value: "1"})
	wantAPIError(t, "tickets/alice/x", err, 400, "value", "not a user name")
	if err := s2.Set(ctx, admin, api.Setting{Key: "tickets/alice", Value: "4"}); err != nil {
		t.Fatal(err)
	}
}

// TestQuotas: per-user quotas on jobs not yet ended (429) and on env bytes
// (400), set at run time, per user or for everyone, kept across a restart.
func TestQuotas(t *testing.T) {
	cfg := Config{DataDir: t.TempDir(), Policy: "fifo"}
	s, stop := runServer(t, cfg)
	addNode(t, s, "n1")
	ctx := context.Background()
	admin := api.Principal{User: "admin", Admin: true}
	alice, bob := api.Principal{User: "alice"}, api.Principal{User: "bob"}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.Set(ctx, admin, api.Setting{Key: QuotaUnended + "/alice", Value: "2"}))
	must(s.Set(ctx, admin, api.Setting{Key: QuotaEnvBytes, Value: "16"}))
	job := func(env map[string]string) *api.JobRequest {
		return &api.JobRequest{Command: []string{"x"}, GPUs: 4, Env: env}
	}
	var ids []string
	for range 2 {
		j, _, err := s.Submit(ctx, alice, job(nil))
		must(err)
		ids = append(ids, j.ID)
	}
	_, _, err := s.Submit(ctx, alice, job(nil))
	wantAPIError(t, "alice's third job", err, 429, "", "quota")
	if _, _, err := s.Submit(ctx, bob, job(nil)); err != nil {
		t.Fatalf("bob is not bound by alice's quota: %v", err)
	}
	_, _, err = s.Submit(ctx, bob, job(map[string]string{"TOKEN": "0123456789abcdef"}))
	wantAPIError(t, "an env of 23 bytes", err, 400, "env", "quota is 16")
	// A job that ends frees its place.
	_, err = s.Cancel(ctx, alice, ids[0])
	must(err)
	_, _, err = s.Submit(ctx, alice, job(nil))
	must(err)
	_, _, err = s.Submit(ctx, alice, job(nil))
	wantAPIError(t, "alice's job beyond the quota after a cancel", err, 429, "", "quota")
	stop()
	// The settings and the counts are rebuilt by the replay.
	s2, stop2 := runServer(t, cfg)
	defer stop2()
	_, _, err = s2.Submit(ctx, alice, job(nil))
	wantAPIError(t, "after a restart", err, 429, "", "quota")
	_, _, err = s2.Submit(ctx, bob, job(map[string]string{"TOKEN": "0123456789abcdef"}))
	wantAPIError(t, "env after a restart", err, 400, "env", "quota is 16")
}
