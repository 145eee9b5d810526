package fair

import (
	"math"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/policy"
)

// stealer wraps the policy: the first time it starts job victim, job by is
// started on the same GPUs first, so that the engine refuses the victim's
// start as stale (cluster.RejectStale). The policy hears it only from the
// next snapshot's Rejected.
type stealer struct {
	*Policy
	victim, by cluster.JobID
	done       bool
}

func (t *stealer) Schedule(s *cluster.Snapshot) cluster.Decision {
	d := t.Policy.Schedule(s)
	if t.done {
		return d
	}
	for _, a := range d.Actions {
		if a.Kind == cluster.Start && a.Job == t.victim {
			t.done = true
			d.Actions = append([]cluster.Action{{Kind: cluster.Start, Job: t.by, GPUs: a.GPUs, Reason: "stealer"}}, d.Actions...)
			break
		}
	}
	return d
}

// TestRefusedStartKeepsShare: two users with equal tickets share one GPU;
// the first start of user a's job is refused, once, by the executor
// (reported with Engine.Refused after EvActionFailed) or by the engine
// itself (its GPU taken by an action before it: stale). gandiva-fair must
// refund what choosing the job cost it (its stride pass): the job's pass
// after the refusal is what it was before it was chosen, and after ten
// quanta both users have received the same service (within 2 s: the job
// the executor gave up on ran for the second it took to report). With the
// feedback off (gain=0), a lost charge is not made up: a would fall a
// whole quantum behind.
func TestRefusedStartKeepsShare(t *testing.T) {
	b := cluster.NewBuilder("one", nil)
	b.Add(cluster.ServerGroup{Type: "V100", Count: 1, GPUs: 1, HostMemGiB: 64})
	c, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	for _, how := range []string{"executor", "engine"} {
		t.Run(how, func(t *testing.T) {
			// the paper's stride alone: no feedback to hide a lost quantum
			p, err := New(policy.Config{Params: map[string]string{"gain": "0"}})
			if err != nil {
				t.Fatal(err)
			}
			var pol policy.Policy = p
			st := &stealer{Policy: p}
			if how == "engine" {
				pol = st
			}
			e := engine.New(c, pol, nil, engine.Options{CheckSnapshot: true})
			var ids []cluster.JobID
			for _, u := range []string{"a", "b"} {
				id, err := e.Submit(0, &cluster.JobSpec{Name: u, User: u, GPUs: 1, Iters: 1e6, IterTime: 1, MemGiB: 4, Model: "resnet50"})
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, id)
			}
			st.victim, st.by = ids[0], ids[1]
			res, err := e.Round(0)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Applied) == 0 {
				t.Fatalf("set-up: nothing started at 0")
			}
			before, ok := p.servers[0].local.Pass(int64(ids[0]))
			if !ok {
				t.Fatal("set-up: job a has no pass on the server")
			}
			cost, _ := p.servers[0].local.Cost(int64(ids[0]), 1)
			if !(cost > 0) {
				t.Fatalf("set-up: a's stride charges it %v for a quantum", cost)
			}
			before -= cost // a's pass before it was chosen at 0
			now := 0.0
			switch how {
			case "executor":
				if res.Applied[0].Job != ids[0] {
					t.Fatalf("set-up: want a started at 0, applied %v", res.Applied)
				}
				now = 1
				if err := e.Apply(cluster.Event{Time: now, Kind: cluster.EvActionFailed, Job: ids[0], Node: cluster.NoServer, Reason: "refused"}); err != nil {
					t.Fatal(err)
				}
				e.Refused(cluster.Rejection{Action: res.Applied[0].Action, Code: cluster.RejectRetry, Reason: "refused"})
			case "engine":
				if len(res.Rejected) != 1 || res.Rejected[0].Action.Job != ids[0] || res.Rejected[0].Code != cluster.RejectStale {
					t.Fatalf("set-up: a's start was not refused as stale: applied %v, rejected %v", res.Applied, res.Rejected)
				}
			}
			res, err = e.Round(now)
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := p.servers[0].local.Pass(int64(ids[0])); got != before && e.Job(ids[0]).State.Waiting() {
				t.Errorf("a's pass after its refused start is %v, want %v (as before it was chosen)", got, before)
			}
			for now < 600 {
				next := res.WakeAt
				if !(next > now) {
					next = now + 60
				}
				now = math.Min(next, 600)
				if res, err = e.Round(now); err != nil {
					t.Fatal(err)
				}
			}
			a, b := e.Job(ids[0]).Attained(now), e.Job(ids[1]).Attained(now)
			if math.Abs(a-b) > 2+1e-9 {
				t.Errorf("after %v s users a and b received %v and %v GPU·s, want equal within 2 s (a's refused start cost it its share)", now, a, b)
			}
		})
	}
}

// TestRefusedFillRefundsItsCharge: a start chosen between quanta (a GPU
// freed up: fill) is charged the rest of the quantum only; when the
// executor refuses it, exactly that is refunded: the job's pass is what it
// was before it was chosen.
func TestRefusedFillRefundsItsCharge(t *testing.T) {
	b := cluster.NewBuilder("one", nil)
	b.Add(cluster.ServerGroup{Type: "V100", Count: 1, GPUs: 1, HostMemGiB: 64})
	c, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(policy.Config{})
	if err != nil {
		t.Fatal(err)
	}
	e := engine.New(c, p, nil, engine.Options{CheckSnapshot: true})
	spec := func(u string) *cluster.JobSpec {
		return &cluster.JobSpec{Name: u, User: u, GPUs: 1, Iters: 1e6, IterTime: 1, MemGiB: 4, Model: "resnet50"}
	}
	x, err := e.Submit(0, spec("x"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Round(0); err != nil {
		t.Fatal(err)
	}
	a, err := e.Submit(10, spec("a"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Round(10); err != nil {
		t.Fatal(err)
	}
	if err := e.Apply(cluster.Event{Time: 30, Kind: cluster.EvFinish, Job: x, Node: cluster.NoServer, Done: 1e6}); err != nil {
		t.Fatal(err)
	}
	res, err := e.Round(30)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Applied) != 1 || res.Applied[0].Job != a || res.Applied[0].Kind != cluster.Start {
		t.Fatalf("set-up: want a started at 30 (fill), applied %v", res.Applied)
	}
	after, _ := p.servers[0].local.Pass(int64(a))
	full, _ := p.servers[0].local.Cost(int64(a), 1)
	before := after - full/2 // charged half a quantum: the boundary is at 60
	if err := e.Apply(cluster.Event{Time: 31, Kind: cluster.EvActionFailed, Job: a, Node: cluster.NoServer, Reason: "refused"}); err != nil {
		t.Fatal(err)
	}
	e.Refused(cluster.Rejection{Action: res.Applied[0].Action, Code: cluster.RejectRetry, Reason: "refused"})
	if _, err := e.Round(31); err != nil {
		t.Fatal(err)
	}
	if got, _ := p.servers[0].local.Pass(int64(a)); math.Abs(got-before) > 1e-9 {
		t.Errorf("a's pass after its refused fill start is %v, want %v (charged %v, half a quantum's %v)", got, before, after-before, full)
	}
}

// TestRefusedOldStartKeepsItsCharge: a process that ran for a while and
// that the executor then gives up on (EvActionFailed and a refusal of the
// start that launched it, rounds later) received the service its charge
// paid for: nothing is refunded.
func TestRefusedOldStartKeepsItsCharge(t *testing.T) {
	b := cluster.NewBuilder("one", nil)
	b.Add(cluster.ServerGroup{Type: "V100", Count: 1, GPUs: 1, HostMemGiB: 64})
	c, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(policy.Config{})
	if err != nil {
		t.Fatal(err)
	}
	e := engine.New(c, p, nil, engine.Options{CheckSnapshot: true})
	a, err := e.Submit(0, &cluster.JobSpec{Name: "a", User: "a", GPUs: 1, Iters: 1e6, IterTime: 1, MemGiB: 4, Model: "resnet50"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Round(0)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Applied) != 1 || res.Applied[0].Job != a {
		t.Fatalf("set-up: want a started at 0, applied %v", res.Applied)
	}
	want, _ := p.servers[0].local.Pass(int64(a))
	if _, err := e.Round(30); err != nil {
		t.Fatal(err)
	}
	if err := e.Apply(cluster.Event{Time: 50, Kind: cluster.EvActionFailed, Job: a, Node: cluster.NoServer, Reason: "lost"}); err != nil {
		t.Fatal(err)
	}
	e.Refused(cluster.Rejection{Action: res.Applied[0].Action, Code: cluster.RejectRetry, Reason: "lost"})
	if _, err := e.Round(50); err != nil {
		t.Fatal(err)
	}
	if got, _ := p.servers[0].local.Pass(int64(a)); got != want {
		t.Errorf("a's pass after the refusal of its start of 50 s ago is %v, want %v (it ran: nothing to refund)", got, want)
	}
}
