package engine_test

import (
	"slices"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/codec"
	"github.com/gandiva-sched/gandiva/internal/engine"
)

// echo is a policy for tests: it returns the actions queued in next and
// records the refusals each snapshot shows it.
type echo struct {
	next []cluster.Action
	seen [][]cluster.Rejection
}

func (p *echo) Name() string { return "echo" }

func (p *echo) Schedule(s *cluster.Snapshot) cluster.Decision {
	p.seen = append(p.seen, slices.Clone(s.Rejected))
	d := cluster.Decision{Actions: p.next}
	p.next = nil
	return d
}

// codes lists the codes of rs, in order.
func codes(rs []cluster.Rejection) []cluster.RejectCode {
	var out []cluster.RejectCode
	for _, r := range rs {
		out = append(out, r.Code)
	}
	return out
}

// TestRejectionCodes: every refusal carries the code that says what it
// means (stale: decided on a view that no longer holds; never: asking
// again changes nothing; retry: may succeed later), and the next round's
// snapshot shows the policy the last round's refusals, then those an
// executor reported since, in order.
func TestRejectionCodes(t *testing.T) {
	b := cluster.NewBuilder("r", nil)
	b.Add(cluster.ServerGroup{Type: "V100", Count: 2, GPUs: 4, HostMemGiB: 64})
	c, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	p := &echo{}
	e := engine.New(c, p, nil, engine.Options{})
	id := map[string]cluster.JobID{}
	for _, j := range []struct {
		name string
		gpus int
	}{{"a", 2}, {"b", 1}, {"c", 1}} {
		x, err := e.Submit(0, &cluster.JobSpec{Name: j.name, User: "u", GPUs: j.gpus, Iters: 100, IterTime: 1, MemGiB: 4})
		if err != nil {
			t.Fatal(err)
		}
		id[j.name] = x
	}
	start := func(job string, gpus ...cluster.GPUID) cluster.Action {
		return cluster.Action{Kind: cluster.Start, Job: id[job], GPUs: gpus}
	}
	// Round 1: a starts on GPUs 0 and 1; b's start on GPU 1 comes after
	// it in the same decision (stale); the rest can never be.
	p.next = []cluster.Action{
		start("a", 0, 1),
		start("b", 1),
		start("b", 0, 1),
		start("c", 99),
		{Kind: cluster.Suspend, Job: id["c"]},
		{Kind: cluster.Resize, Job: id["a"], GPUs: []cluster.GPUID{2}},
		start("nobody", 2),
	}
	p.next[len(p.next)-1].Job = 42
	res, err := e.Round(1)
	if err != nil {
		t.Fatal(err)
	}
	want := []cluster.RejectCode{cluster.RejectStale, cluster.RejectNever, cluster.RejectNever, cluster.RejectStale,
		cluster.RejectNever, cluster.RejectStale}
	if got := codes(res.Rejected); !slices.Equal(got, want) {
		t.Fatalf("round 1 codes %v, want %v (%v)", got, want, res.Rejected)
	}
	if len(res.Applied) != 1 || e.Stats().Rejected != len(want) {
		t.Fatalf("round 1 applied %v, Stats.Rejected %d", res.Applied, e.Stats().Rejected)
	}
	if e.Reported() != 0 {
		t.Fatalf("Reported %d after a round, want 0", e.Reported())
	}
	// Round 2 sees round 1's refusals. b on a's GPU is refused again, now
	// that a holds it from before: retry; so is c on a lost server.
	if err := e.Apply(cluster.Event{Time: 2, Kind: cluster.EvNodeDown, Node: 1, Reason: "gone"}); err != nil {
		t.Fatal(err)
	}
	p.next = []cluster.Action{start("b", 0), start("c", 4)}
	res2, err := e.Round(2)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(p.seen[1], res.Rejected, func(a, b cluster.Rejection) bool {
		return a.Code == b.Code && a.Reason == b.Reason && a.Action.Job == b.Action.Job && slices.Equal(a.Action.GPUs, b.Action.GPUs)
	}) {
		t.Fatalf("round 2's snapshot shows %v, want round 1's refusals %v", p.seen[1], res.Rejected)
	}
	if got, want := codes(res2.Rejected), []cluster.RejectCode{cluster.RejectRetry, cluster.RejectRetry}; !slices.Equal(got, want) {
		t.Fatalf("round 2 codes %v, want %v (%v)", got, want, res2.Rejected)
	}
	// An executor's refusal, reported between rounds, comes after them.
	late := cluster.Rejection{Action: start("a", 0, 1), Code: cluster.RejectRetry, Reason: "node refused the pod"}
	e.Refused(late)
	if e.Reported() != 1 {
		t.Fatalf("Reported %d after Refused, want 1", e.Reported())
	}
	if _, err := e.Round(3); err != nil {
		t.Fatal(err)
	}
	if got, want := codes(p.seen[2]), []cluster.RejectCode{cluster.RejectRetry, cluster.RejectRetry, cluster.RejectRetry}; !slices.Equal(got, want) ||
		p.seen[2][2].Reason != late.Reason {
		t.Fatalf("round 3's snapshot shows %v, want round 2's refusals then the executor's", p.seen[2])
	}
	// Nothing refused in round 3: round 4 shows nothing.
	if _, err := e.Round(4); err != nil {
		t.Fatal(err)
	}
	if len(p.seen[3]) != 0 || e.Reported() != 0 {
		t.Fatalf("round 4's snapshot shows %v (Reported %d), want none", p.seen[3], e.Reported())
	}
}

// TestRefusalsSurviveExport: the refusals not yet shown to the policy (a
// round's own and one an executor reported since) are part of the
// exported state: an engine restored, adopted or forked from it owes the
// policy a round (Reported) and shows them to its policy in that round,
// as the original does.
func TestRefusalsSurviveExport(t *testing.T) {
	b := cluster.NewBuilder("r", nil)
	b.Add(cluster.ServerGroup{Type: "V100", Count: 1, GPUs: 4, HostMemGiB: 64})
	c, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	p := &echo{}
	e := engine.New(c, p, nil, engine.Options{})
	a, err := e.Submit(0, &cluster.JobSpec{Name: "a", User: "u", GPUs: 1, Iters: 100, IterTime: 1, MemGiB: 4})
	if err != nil {
		t.Fatal(err)
	}
	p.next = []cluster.Action{{Kind: cluster.Start, Job: a, GPUs: []cluster.GPUID{99}}}
	if _, err := e.Round(1); err != nil {
		t.Fatal(err)
	}
	e.Refused(cluster.Rejection{Action: cluster.Action{Kind: cluster.Start, Job: a, GPUs: []cluster.GPUID{0}},
		Code: cluster.RejectRetry, Reason: "node refused the pod"})
	st, err := e.Export()
	if err != nil {
		t.Fatal(err)
	}
	data, err := codec.Marshal(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	restorers := map[string]func() (*engine.Engine, *echo, error){
		"Restore": func() (*engine.Engine, *echo, error) {
			q := &echo{}
			r, err := engine.Restore(c, q, nil, engine.Options{}, st)
			return r, q, err
		},
		"Adopt": func() (*engine.Engine, *echo, error) {
			var back engine.State
			if err := codec.Unmarshal(data, &back, nil); err != nil {
				return nil, nil, err
			}
			q := &echo{}
			r, err := engine.Adopt(c, q, nil, engine.Options{}, &back)
			return r, q, err
		},
		"Fork": func() (*engine.Engine, *echo, error) {
			q := &echo{}
			r, err := e.Fork(q, nil)
			return r, q, err
		},
	}
	want := []cluster.RejectCode{cluster.RejectNever, cluster.RejectRetry}
	for _, how := range []string{"Restore", "Adopt", "Fork"} {
		r, q, err := restorers[how]()
		if err != nil {
			t.Fatalf("%s: %v", how, err)
		}
		if r.Reported() != 1 {
			t.Errorf("%s: Reported %d, want 1 (the executor's refusal)", how, r.Reported())
		}
		if _, err := r.Round(2); err != nil {
			t.Fatal(err)
		}
		// (echo's own state, what it saw before, is restored with it)
		last := q.seen[len(q.seen)-1]
		if len(q.seen) != 2 || !slices.Equal(codes(last), want) || last[1].Reason != "node refused the pod" ||
			!slices.Equal(last[1].Action.GPUs, []cluster.GPUID{0}) {
			t.Errorf("%s: the policy's next snapshot shows %v, want the round's refusal then the executor's (%v)", how, q.seen, want)
		}
	}
	if _, err := e.Round(2); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(codes(p.seen[1]), want) {
		t.Errorf("the original's next snapshot shows %v, want %v", p.seen[1], want)
	}
}
