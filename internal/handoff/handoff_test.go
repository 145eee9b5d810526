package handoff

import (
	"fmt"
	"iter"
	"math/rand/v2"
	"slices"
	"testing"
)

func occs(qs ...*Occupant) iter.Seq[*Occupant] {
	return slices.Values(qs)
}

// others yields the occupants of occ but o.
func others(occ []*Occupant, o *Occupant) iter.Seq[*Occupant] {
	return func(yield func(*Occupant) bool) {
		for _, q := range occ {
			if q != o && !yield(q) {
				return
			}
		}
	}
}

// The cases of both executors: the live server's workers and strays, and
// Kubernetes' shared pods (bound, or being bound).
func TestMayRunCases(t *testing.T) {
	ready := Facts{Ready: true}
	// o: a worker (or pod) to be told to run on GPU 0
	newRun := func() *Occupant { return &Occupant{ID: "o", Want: Run, GPUs: []int{0}} }
	resumed := func() *Occupant {
		return &Occupant{ID: "o", Want: Run, GPUs: []int{0}, Live: true,
			Told: Told{Order: Suspend, GPUs: []int{0}, Gen: 2}, Ack: Ack{Order: Suspend, Gen: 2}}
	}
	for _, c := range []struct {
		name   string
		o      *Occupant
		f      Facts
		others []*Occupant
		want   Cause
	}{
		// the server's
		{"node not registered since the server started", newRun(), Facts{}, nil, Unready},
		{"new process while an earlier attempt of its job is alive", newRun(), Facts{Ready: true, Kin: true}, nil, Kin},
		{"resumption in place: its own process, kin do not matter", resumed(), Facts{Ready: true, Kin: true}, nil, Go},
		{"alone", newRun(), ready, nil, Go},
		{"a worker being killed on its GPU", newRun(), ready, []*Occupant{
			{ID: "q", Want: Kill, GPUs: []int{0}, Live: true, Told: Told{Order: Kill, GPUs: []int{0}}}}, Leaving},
		{"a worker to be killed, not told yet", newRun(), ready, []*Occupant{
			{ID: "q", Want: Kill, GPUs: []int{0}, Live: true, Told: Told{Order: Run, GPUs: []int{0}}}}, Leaving},
		{"a worker being checkpointed on another GPU", newRun(), ready, []*Occupant{
			{ID: "q", Want: Checkpoint, GPUs: []int{1}, Live: true, Told: Told{Order: Checkpoint, GPUs: []int{1}}}}, Go},
		{"a worker suspending, not acknowledged", newRun(), ready, []*Occupant{
			{ID: "q", Want: Suspend, GPUs: []int{0}, Live: true, Told: Told{Order: Suspend, GPUs: []int{0}}}}, Leaving},
		{"a worker suspended (acknowledged)", newRun(), ready, []*Occupant{
			{ID: "q", Want: Suspend, GPUs: []int{0}, Live: true, Told: Told{Order: Suspend, GPUs: []int{0}}, Ack: Ack{Order: Suspend}}}, Go},
		{"a worker never published, never started", newRun(), ready, []*Occupant{
			{ID: "q", Want: Kill, GPUs: []int{0}}}, Go},
		{"a stray on its GPU", newRun(), ready, []*Occupant{
			{ID: "stray", Want: None, GPUs: []int{0, 1}, Live: true}}, Leaving},
		{"a stray on other GPUs", newRun(), ready, []*Occupant{
			{ID: "stray", Want: None, GPUs: []int{1, 2}, Live: true}}, Go},
		{"packed beside a running worker", newRun(), ready, []*Occupant{
			{ID: "q", Want: Run, GPUs: []int{0}, Live: true, Told: Told{Order: Run, GPUs: []int{0}}}}, Go},
		{"warm start beside a worker being killed", &Occupant{ID: "o", Want: Warm, GPUs: []int{0}}, ready, []*Occupant{
			{ID: "q", Want: Kill, GPUs: []int{0}, Live: true, Told: Told{Order: Kill, GPUs: []int{0}}}}, Go},
		{"warm start: kin still hold it", &Occupant{ID: "o", Want: Warm, GPUs: []int{0}}, Facts{Ready: true, Kin: true}, nil, Kin},
		{"a worker resumed in place on other GPUs, still suspending on this one", newRun(), ready, []*Occupant{
			{ID: "q", Want: Run, GPUs: []int{1}, Live: true, Told: Told{Order: Suspend, GPUs: []int{0}}}}, Leaving},
		{"a worker resumed in place on other GPUs, suspended on this one", newRun(), ready, []*Occupant{
			{ID: "q", Want: Run, GPUs: []int{1}, Live: true, Told: Told{Order: Suspend, GPUs: []int{0}}, Ack: Ack{Order: Suspend}}}, Leaving},
		// Kubernetes'
		{"a pod running there as the engine wants (packed)", resumed(), ready, []*Occupant{
			{ID: "q", Want: Run, GPUs: []int{0}, Live: true, Told: Told{Order: Run, GPUs: []int{0}, Gen: 1}}}, Go},
		{"a pod running there the engine suspended (its write pending)", resumed(), ready, []*Occupant{
			{ID: "q", Want: Suspend, GPUs: []int{0}, Live: true, Told: Told{Order: Run, GPUs: []int{0}, Gen: 1}}}, Leaving},
		{"a pod told to suspend, acknowledged at its generation", resumed(), ready, []*Occupant{
			{ID: "q", Want: Suspend, GPUs: []int{0}, Live: true, Told: Told{Order: Suspend, GPUs: []int{0}, Gen: 2},
				Ack: Ack{Order: Suspend, Gen: 2}}}, Go},
		{"a pod told to suspend, its status an older generation's", resumed(), ready, []*Occupant{
			{ID: "q", Want: Suspend, GPUs: []int{0}, Live: true, Told: Told{Order: Suspend, GPUs: []int{0}, Gen: 2},
				Ack: Ack{Order: Run, Gen: 1}}}, Leaving},
		{"a pod suspended again after a resumption, the old suspension acknowledged", resumed(), ready, []*Occupant{
			{ID: "q", Want: Suspend, GPUs: []int{0}, Live: true, Told: Told{Order: Suspend, GPUs: []int{0}, Gen: 4},
				Ack: Ack{Order: Suspend, Gen: 2}}}, Leaving},
		{"a pod being deleted, though suspended", resumed(), ready, []*Occupant{
			{ID: "q", Want: Kill, GPUs: []int{0}, Live: true, Told: Told{Order: Suspend, GPUs: []int{0}, Gen: 2},
				Ack: Ack{Order: Suspend, Gen: 2}}}, Leaving},
		{"a pod whose agent failed", resumed(), ready, []*Occupant{
			{ID: "q", Want: Suspend, GPUs: []int{0}, Live: true, Told: Told{Order: Run, GPUs: []int{0}, Gen: 1},
				Ack: Ack{Order: None, Gen: 1, Failed: true}}}, Go},
		{"a pod whose agent failed, being deleted", resumed(), ready, []*Occupant{
			{ID: "q", Want: Kill, GPUs: []int{0}, Live: true, Told: Told{Order: Run, GPUs: []int{0}, Gen: 1},
				Ack: Ack{Gen: 1, Failed: true}}}, Leaving},
		{"a pod being bound there to run, its GPU given to o since", resumed(), ready, []*Occupant{
			{ID: "q", Want: Suspend, GPUs: []int{0}, Live: true, Told: Told{Order: Run, GPUs: []int{0}, Gen: 1}}}, Leaving},
		{"a pod with no assignment", resumed(), ready, []*Occupant{
			{ID: "q", Want: Suspend, GPUs: nil}}, Go},
	} {
		v := MayRun(c.o, c.f, occs(c.others...))
		if v.Cause != c.want {
			t.Errorf("%s: %s (by %q), want %s", c.name, v.Cause, v.By, c.want)
		}
		if v.Cause == Leaving && v.By == "" {
			t.Errorf("%s: leaving, but by no one", c.name)
		}
	}
}

// safe is the safety property stated GPU by GPU, by brute force: o may be
// told to run when its node is ready, it is not a new process beside a
// live one of its job, and (unless it is a warm start) on each of its GPUs
// every other process that may be there is meant to run there, or has
// acknowledged the suspension it was told and is still meant to be in, or
// failed without being sent away for good.
func safe(o *Occupant, f Facts, others []*Occupant) bool {
	if !f.Ready || (f.Kin && o.Told.Order == None) {
		return false
	}
	if o.Want == Warm {
		return true
	}
	for g := range 8 {
		if !slices.Contains(o.GPUs, g) {
			continue
		}
		for _, q := range others {
			if !q.Live {
				continue
			}
			wants := slices.Contains(q.GPUs, g)
			told := q.Told.Order != None && slices.Contains(q.Told.GPUs, g)
			if !wants && !told {
				continue // not on g
			}
			meantHere := wants && (q.Want == Run || q.Want == Warm)
			leftHere := q.Want == Suspend && q.Told.Order == Suspend && q.Ack.Order == Suspend && q.Ack.Gen >= q.Told.Gen
			failed := q.Ack.Failed && q.Want != Kill && q.Want != Checkpoint
			if !meantHere && !leftHere && !failed {
				return false
			}
		}
	}
	return true
}

func randGPUs(r *rand.Rand) []int {
	var out []int
	for g := range 4 {
		if r.IntN(3) == 0 {
			out = append(out, g)
		}
	}
	return out
}

func randOccupant(r *rand.Rand, id string) *Occupant {
	q := &Occupant{ID: id, Want: Order(r.IntN(6)), GPUs: randGPUs(r), Live: r.IntN(4) != 0}
	if r.IntN(4) != 0 {
		q.Told = Told{Order: Order(1 + r.IntN(5)), GPUs: randGPUs(r), Gen: int64(r.IntN(4))}
		if r.IntN(2) == 0 {
			q.Told.GPUs = slices.Clone(q.GPUs)
		}
	}
	switch r.IntN(4) {
	case 0:
		q.Ack = Ack{Order: Order(r.IntN(6)), Gen: int64(r.IntN(4))}
	case 1:
		q.Ack = Ack{Order: q.Told.Order, Gen: q.Told.Gen}
	case 2:
		q.Ack = Ack{Gen: int64(r.IntN(4)), Failed: r.IntN(3) == 0}
	}
	return q
}

// The fence says yes exactly when the brute-force statement of safety
// holds, on random node states.
func TestMayRunIsSafety(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 1))
	yes := 0
	for i := range 50000 {
		o := randOccupant(r, "o")
		o.Want = []Order{Run, Warm}[r.IntN(2)]
		f := Facts{Ready: r.IntN(8) != 0, Kin: r.IntN(8) == 0}
		var others []*Occupant
		for k := range r.IntN(5) {
			others = append(others, randOccupant(r, fmt.Sprint("q", k)))
		}
		got, want := MayRun(o, f, occs(others...)).OK(), safe(o, f, others)
		if got != want {
			t.Fatalf("case %d: fence says %v, safety %v\no %+v\nfacts %+v\nothers %s", i, got, want, *o, f, show(others))
		}
		if got {
			yes++
		}
	}
	if yes < 5000 || yes > 45000 {
		t.Errorf("the fence said yes %d times in 50000: the cases are not varied enough", yes)
	}
}

func show(qs []*Occupant) string {
	s := ""
	for _, q := range qs {
		s += fmt.Sprintf("\n  %+v", *q)
	}
	return s
}

// A node over time: the executor changes what it wants of its occupants
// at random (the engine's actions), publishes orders that take GPUs away
// at once and runs through the fence, and the agents carry orders out
// later, in any order, their acknowledgements arriving later still.
// Whenever an occupant is told to
// run, no process the agents actually have on its GPUs is one that is not
// meant to run there and has not stopped: the executor's view (told,
// acknowledged, generations) never lets a run through too early. (A
// process keeps its GPUs here: a change of GPUs is a new process.)
func TestFenceOverTime(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 2))
	type proc struct {
		state Order // what the agent has its process do: None (no process), Run, Suspend
		gpus  []int
	}
	for trial := range 300 {
		occ := make([]*Occupant, 4)
		real := make([]proc, 4)
		sent := make([]Ack, 4) // what each agent last acknowledged, on its way
		for i := range occ {
			occ[i] = &Occupant{ID: fmt.Sprint("w", i)}
		}
		for step := range 200 {
			i := r.IntN(len(occ))
			o := occ[i]
			switch r.IntN(5) {
			case 0: // the engine changes its mind
				switch r.IntN(4) {
				case 0:
					if o.Live {
						break // a process keeps its GPUs: a new one starts elsewhere
					}
					o.Want, o.GPUs = Run, randGPUs(r)
					if len(o.GPUs) == 0 {
						o.GPUs = []int{r.IntN(4)}
					}
				case 1:
					if o.Want != None {
						o.Want = Suspend
					}
				case 2:
					if o.Want != None {
						o.Want = Kill
					}
				case 3:
					if o.Want == Suspend {
						o.Want = Run // resumed in place
					}
				}
			case 1, 2: // the executor publishes what changed
				for _, id := range Changed(occ) {
					q := occ[id[1]-'0']
					if q.Want == Run && !MayRun(q, Facts{Ready: true}, others(occ, q)).OK() {
						continue
					}
					if q.Want == Run {
						// check the agents' reality before telling it
						for k, p := range real {
							if occ[k] == q || p.state != Run {
								continue
							}
							for _, g := range q.GPUs {
								if slices.Contains(p.gpus, g) && !(occ[k].Want == Run && slices.Contains(occ[k].GPUs, g)) {
									t.Fatalf("trial %d step %d: %s told to run on GPU %d while %s runs there, not meant to (%+v)", trial, step, q.ID, g, occ[k].ID, *occ[k])
								}
							}
						}
					}
					q.Told = Told{Order: q.Want, GPUs: slices.Clone(q.GPUs), Gen: q.Told.Gen + 1}
					q.Live = true
				}
			case 3: // its agent carries out what it was told
				if o.Told.Order == None || sent[i].Gen >= o.Told.Gen {
					break
				}
				switch o.Told.Order {
				case Run:
					real[i] = proc{Run, slices.Clone(o.Told.GPUs)}
				case Suspend:
					real[i].state = Suspend
				case Kill:
					real[i] = proc{}
				}
				sent[i] = Ack{Order: o.Told.Order, Gen: o.Told.Gen}
			case 4: // its acknowledgement arrives (the last the agent sent)
				if sent[i].Gen <= o.Ack.Gen {
					break
				}
				o.Ack = sent[i]
				if o.Ack.Order == Kill && o.Told.Gen == o.Ack.Gen {
					*o = Occupant{ID: o.ID} // gone: the executor forgets it
					sent[i] = Ack{}
				}
			}
		}
	}
}

// Changed lists the occupants whose published order is not what they
// should see (no order yet, another order, GPUs or mode), by ID; never
// one no order wants.
func TestChanged(t *testing.T) {
	occ := []*Occupant{
		{ID: "d", Want: Run, GPUs: []int{0}},                                                                   // nothing told yet
		{ID: "a", Want: Suspend, GPUs: []int{0}, Told: Told{Order: Run, GPUs: []int{0}}},                       // another order
		{ID: "c", Want: Run, GPUs: []int{1}, Told: Told{Order: Run, GPUs: []int{0}}},                           // other GPUs
		{ID: "b", Want: Suspend, GPUs: []int{0}, Mode: 1, Told: Told{Order: Suspend, GPUs: []int{0}}},          // another mode
		{ID: "e", Want: Suspend, GPUs: []int{0}, Mode: 1, Told: Told{Order: Suspend, GPUs: []int{0}, Mode: 1}}, // as told
		{ID: "f", Want: None, GPUs: []int{0}, Live: true},                                                      // a stray
	}
	if got, want := Changed(occ), []string{"a", "b", "c", "d"}; !slices.Equal(got, want) {
		t.Errorf("Changed = %v, want %v", got, want)
	}
}
