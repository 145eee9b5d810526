package server

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/policy"
)

// heard wraps a policy and keeps the refusals each of its snapshots shows.
type heard struct {
	policy.Policy
	rejected [][]cluster.Rejection
}

func (h *heard) Schedule(s *cluster.Snapshot) cluster.Decision {
	h.rejected = append(h.rejected, slices.Clone(s.Rejected))
	return h.Policy.Schedule(s)
}

// TestLostActionRefused: a run that its agent lost (it stopped the process
// for lack of contact with the server) is reported to the policy as a
// refusal of the job's placement with RejectRetry, in the snapshot of the
// round that follows; a round is owed at once. A replay of the same
// entries, and a machine restored from a snapshot taken between the report
// and the round, show the same refusal.
func TestLostActionRefused(t *testing.T) {
	sc := scenario{policy: "fifo", seed: 1, nodes: 1}
	base := sc.newMachine(t)
	h := &heard{Policy: base.cfg.Policy}
	cfg := base.cfg
	cfg.Policy = h
	m := newMachine(cfg)

	var entries []*entry
	apply := func(m *machine, e *entry) {
		t.Helper()
		if err := m.apply(uint64(len(entries)), e); err != nil {
			t.Fatalf("entry %d (%s): %v", len(entries), e.Kind, err)
		}
	}
	add := func(e *entry) {
		t.Helper()
		data, err := json.Marshal(e) // entries go through the log as JSON
		if err != nil {
			t.Fatal(err)
		}
		var back entry
		if err := json.Unmarshal(data, &back); err != nil {
			t.Fatal(err)
		}
		entries = append(entries, &back)
		apply(m, &back)
	}
	reg := &api.Registration{Name: "n1", HostMemGiB: 32, Addr: "http://n1:7071", LogKey: "k", Incarnation: "n1.0"}
	for g := range 4 {
		reg.GPUs = append(reg.GPUs, api.GPU{Index: g, Type: "V100", MemGiB: 16})
	}
	add(&entry{Kind: entRegister, T: 1, Reg: reg})
	add(&entry{Kind: entSubmit, T: 2, Job: &Record{ID: "j1", User: "alice",
		Request: api.JobRequest{Command: []string{"train"}, GPUs: 2, Iters: 100, IterTime: 0.5}, Submitted: m.wall(2), CkptEvery: 10}})
	add(&entry{Kind: entRound, T: 2})
	j := m.jobs["j1"]
	held := slices.Clone(m.eng.Job(j.eid).GPUs)
	if m.eng.Job(j.eid).State != cluster.Running || len(held) != 2 {
		t.Fatalf("j1 after the first round: %s on %v, want running on 2 GPUs", m.eng.Job(j.eid).State, held)
	}
	items := m.x.assignments(m.x.nodes["n1"]).Items
	if len(items) != 1 {
		t.Fatalf("assignments of n1: %+v", items)
	}
	att := items[0].Attempt
	add(&entry{Kind: entReport, T: 3, Node: "n1", Reports: []api.Report{{Seq: 1, Job: "j1", Attempt: att, Kind: api.RepStarted}}})
	add(&entry{Kind: entReport, T: 5, Node: "n1", Reports: []api.Report{{Seq: 2, Job: "j1", Attempt: att, Kind: api.RepExited,
		Outcome: "lost", Message: "stopped by its agent: no contact with the server"}}})

	want := []cluster.Rejection{{Action: cluster.Action{Kind: cluster.Start, Job: j.eid, GPUs: held}, Code: cluster.RejectRetry,
		Reason: "stopped by its agent: no contact with the server"}}
	check := func(what string, m *machine) {
		t.Helper()
		if st := m.eng.Job(j.eid).State; st != cluster.Queued {
			t.Fatalf("%s: j1 is %s after its run was lost, want queued", what, st)
		}
		if got := m.eng.Snapshot().Rejected; !rejectionsEqual(got, want) {
			t.Fatalf("%s: the next snapshot's refusals are %+v, want %+v", what, got, want)
		}
		if m.eng.Reported() != 1 || !m.roundDue(5) {
			t.Fatalf("%s: reported %d, round due %v: want a round owed for the refusal", what, m.eng.Reported(), m.roundDue(5))
		}
	}
	check("live", m)

	// A replay of the same entries into a fresh machine.
	r := sc.newMachine(t)
	for i, e := range entries {
		if err := r.apply(uint64(i+1), e); err != nil {
			t.Fatalf("replay of entry %d: %v", i, err)
		}
	}
	check("replay", r)
	// Restored from a snapshot taken before the round.
	r = sc.snapshotRestore(t, r)
	check("restored", r)

	// The round that follows shows it to the policy, once.
	add(&entry{Kind: entRound, T: 5})
	if len(h.rejected) != 2 || len(h.rejected[0]) != 0 || !rejectionsEqual(h.rejected[1], want) {
		t.Fatalf("the policy heard %+v, want nothing, then %+v", h.rejected, want)
	}
	if m.eng.Reported() != 0 || len(m.eng.Snapshot().Rejected) != 0 {
		t.Fatalf("after the round: reported %d, refusals %+v; want none", m.eng.Reported(), m.eng.Snapshot().Rejected)
	}
	if err := r.apply(uint64(len(entries)), entries[len(entries)-1]); err != nil {
		t.Fatal(err)
	}
	if r.eng.Reported() != 0 || len(r.eng.Snapshot().Rejected) != 0 {
		t.Fatalf("restored, after the round: reported %d, refusals %+v; want none", r.eng.Reported(), r.eng.Snapshot().Rejected)
	}
}

func rejectionsEqual(a, b []cluster.Rejection) bool {
	return slices.EqualFunc(a, b, func(x, y cluster.Rejection) bool {
		return x.Code == y.Code && x.Reason == y.Reason && x.Action.Kind == y.Action.Kind && x.Action.Job == y.Action.Job &&
			slices.Equal(x.Action.GPUs, y.Action.GPUs)
	})
}
