// Package handoff is the hand-off fence of the live executors: the one
// rule, shared by the live server's executor (workers on nodes with agents)
// and the Kubernetes executor (shared pods on shared nodes), that decides
// when a process may be told to run on a node's GPUs while other processes
// are, or were, there.
//
// Each executor describes a node as its occupants: every process of its
// that may be on the node's GPUs (a worker, a stray an agent reported, a
// shared pod bound or being bound there). Of each occupant it says what
// the executor means it to do now (Want, on GPUs: the engine's intent
// rendered), what its agent was last told (Told: an order, its GPUs and a
// generation), what the agent acknowledged (Ack: the order it carried out
// and at which generation, or that it failed), and whether a process of it
// may exist at all (Live). Each executor renders the fence's answers its
// own way (the server as agents' assignments, Kubernetes as pod
// annotations); this package does no I/O, reads no clock and starts no
// goroutine.
//
// Contract (MayRun): an occupant o may be told to run on its GPUs now when
// its node is ready, when, as a new process, no other process of its job is
// alive (Facts.Kin, which the server alone knows), and when every other
// live occupant q whose GPUs (wanted or told) overlap o's leaves them to o:
// q is meant to run on the GPUs they share (packed: the engine wants both
// there), or q acknowledged, at the generation it was told, a suspension
// it is still meant to be in, or q's agent failed to carry out its order
// and q is not leaving for good. Anything else is a process leaving o's
// GPUs that has not yet gone (told to checkpoint or be killed, a
// suspension not acknowledged, a pod being deleted, a stray no order
// wants), and o waits. A warm start (Want Warm) runs its start-up beside
// whatever is on its GPUs: only the node and kin rules hold for it.
// Orders that take GPUs away (suspend, checkpoint, kill) are never fenced.
//
// Hence the safety property, which the package's tests check against a
// brute-force statement of it: never two occupants told to run on one GPU
// unless both are meant to run there; never one told to run on a GPU
// while another that is leaving it has not acknowledged.
//
// Stale and Changed say what changed: which occupants' published order
// differs from what they should see, in a total order (by ID).
package handoff

import (
	"cmp"
	"iter"
	"slices"
	"strconv"
)

// Order is what an occupant's process is told to do.
type Order uint8

// The orders. None is no order: nothing told yet, or (as a Want) a
// process no order wants, such as a stray.
const (
	None Order = iota
	Run
	Warm
	Suspend
	Checkpoint
	Kill
)

var orderNames = [...]string{None: "none", Run: "run", Warm: "warm", Suspend: "suspend", Checkpoint: "checkpoint", Kill: "kill"}

func (o Order) String() string {
	if int(o) < len(orderNames) {
		return orderNames[o]
	}
	return "order(" + strconv.Itoa(int(o)) + ")"
}

// Runs reports whether o has its process run on its GPUs (run, or a warm
// start held at its first boundary).
func (o Order) Runs() bool { return o == Run || o == Warm }

// Final reports whether o ends its process (checkpoint, kill).
func (o Order) Final() bool { return o == Checkpoint || o == Kill }

// Told is an order as published to an occupant's agent.
type Told struct {
	Order Order
	GPUs  []int // node-local devices
	Gen   int64 // its generation (0 where the executor numbers none)
	// Mode is the executor's own detail of the order (such as the way of
	// suspending), compared for equality only.
	Mode uint8
}

// Ack is what an occupant's agent last reported having done.
type Ack struct {
	Order  Order // the order it carried out (None: none)
	Gen    int64 // at that generation
	Failed bool  // it cannot carry out its order
}

// Occupant is one process (or would-be process) on a node's GPUs.
type Occupant struct {
	// ID names it (Verdict.By), unique on its node for Changed to be a
	// total order.
	ID string
	// Want is what the executor means it to do now, on GPUs, with Mode.
	Want Order
	GPUs []int
	Mode uint8
	// Told is what its agent was last told; Ack what the agent reported.
	Told Told
	Ack  Ack
	// Live: a process of it may exist (it was told something, or it
	// started, or its pod is bound or being bound). An occupant that is
	// not live holds no GPU.
	Live bool
}

// Facts are what the fence needs to know of an occupant beyond its node's
// other occupants.
type Facts struct {
	// Ready: the executor knows the node's agent now (registered with this
	// server process; for Kubernetes, the node alive and reserved).
	// Nothing is told to run on a node that is not ready.
	Ready bool
	// Kin: another process of the occupant's job is alive anywhere (an
	// earlier attempt, its pre-run, a stray). It holds back a new process
	// only (Told.Order None): a job never runs twice at once.
	Kin bool
}

// Cause says why an occupant may not be told to run now.
type Cause uint8

// The causes. Go means it may run.
const (
	Go Cause = iota
	Unready
	Kin
	Leaving
)

var causeNames = [...]string{Go: "may run", Unready: "its node is not ready",
	Kin: "another process of its job is alive", Leaving: "a process leaving its GPUs has not gone"}

func (c Cause) String() string {
	if int(c) < len(causeNames) {
		return causeNames[c]
	}
	return "cause(" + strconv.Itoa(int(c)) + ")"
}

// Verdict is the fence's answer for one occupant: Cause Go, or why not
// and, for Leaving, the ID of the first occupant (in the order given) that
// stands in its way.
type Verdict struct {
	Cause Cause
	By    string
}

// OK reports whether the occupant may be told to run now.
func (v Verdict) OK() bool { return v.Cause == Go }

// MayRun is the fence: whether o may be told to run (or warm) on its GPUs
// now, given its facts and the other occupants of its node (others must
// not yield o itself; MayRun keeps none of them, nor o, beyond the call,
// and stops at the first that stands in o's way). See the package comment
// for the rule.
func MayRun(o *Occupant, f Facts, others iter.Seq[*Occupant]) Verdict {
	if !f.Ready {
		return Verdict{Cause: Unready}
	}
	if f.Kin && o.Told.Order == None {
		return Verdict{Cause: Kin}
	}
	if o.Want == Warm {
		return Verdict{}
	}
	for q := range others {
		if !Yields(q, o.GPUs) {
			return Verdict{Cause: Leaving, By: q.ID}
		}
	}
	return Verdict{}
}

// Yields reports whether occupant q leaves GPUs gpus to a process told to
// run there: it holds none of them, or it is meant to run on every one of
// them it holds (packed), or it acknowledged the suspension it was told
// and is still meant to be in, or its agent failed and it is not leaving
// for good.
func Yields(q *Occupant, gpus []int) bool {
	if !q.Live {
		return true
	}
	shared, meant := false, q.Want.Runs()
	for _, g := range gpus {
		wanted := slices.Contains(q.GPUs, g)
		if !wanted && (q.Told.Order == None || !slices.Contains(q.Told.GPUs, g)) {
			continue // q is not on g
		}
		shared, meant = true, meant && wanted
	}
	switch {
	case !shared, meant:
		return true
	case q.Want.Final():
		return false
	case q.Ack.Failed:
		return true
	}
	return q.Want == Suspend && q.Told.Order == Suspend && q.Ack.Order == Suspend && q.Ack.Gen >= q.Told.Gen
}

// Stale reports whether what o's agent was told is not what it should see
// now: no order yet, or another order, GPUs or mode. An occupant no order
// wants (Want None) is never stale: nothing is published for it.
func Stale(o *Occupant) bool {
	if o.Want == None {
		return false
	}
	return o.Told.Order != o.Want || !slices.Equal(o.Told.GPUs, o.GPUs) || o.Told.Mode != o.Mode
}

// Changed returns the IDs of the stale occupants of occs, sorted.
func Changed(occs []*Occupant) []string {
	var out []string
	for _, o := range occs {
		if Stale(o) {
			out = append(out, o.ID)
		}
	}
	slices.SortFunc(out, cmp.Compare[string])
	return out
}
