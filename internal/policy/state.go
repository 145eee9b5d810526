package policy

import (
	"fmt"
	"reflect"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/codec"
)

// A policy's own state (Gandiva's quanta, packing trials and what they
// measured, Gandiva_fair's passes and trades, Tiresias' queues, Optimus'
// learned speeds, ...) is whatever its value holds between calls to
// Schedule. MarshalState and UnmarshalState store and restore it without a
// method per policy: they encode every field of the policy's value and of
// everything it points to (package codec), so a field a policy gains is
// stored with no further change and cannot be forgotten. Func fields are
// the exception: the fresh policy a state is restored into keeps its own
// (they are bound at construction).
//
// Policies are not otherwise concerned: they need no method and import
// nothing for it. The contract they keep is the one Policy states: state
// lives in the policy's value and what it points to, never in globals.
//
// A policy that is not a pointer (a value type) has no state of its own
// between calls; its state is nil.

// Refs are the engine's objects a policy's state may point to: the
// cluster, the snapshot the engine hands to Schedule (one, reused), and
// its job records. A policy that kept a pointer to one of them (a
// placement pool keeps the snapshot it was last reset from) gets, after
// UnmarshalState, a pointer to the object of the same place in the Refs it
// is given: the restoring engine's.
type Refs struct {
	Cluster  *cluster.Cluster
	Snapshot *cluster.Snapshot
	Jobs     []*cluster.Job
	// SizeHint, when positive, is the expected size of the encoding (the
	// last one's): MarshalState's buffer starts that large.
	SizeHint int
}

// (Strict: a state another build wrote, a store's snapshot, is read whole
// or refused, never with a field dropped in silence; see codec.Options.)
func (r Refs) options() *codec.Options {
	return &codec.Options{SizeHint: r.SizeHint, Strict: true, Externs: []codec.Extern{
		codec.ExternOf(func(c *cluster.Cluster) (int64, bool) { return 0, c == r.Cluster },
			func(int64) (*cluster.Cluster, error) { return r.Cluster, nil }),
		codec.ExternOf(func(s *cluster.Snapshot) (int64, bool) { return 0, s == r.Snapshot },
			func(int64) (*cluster.Snapshot, error) { return r.Snapshot, nil }),
		codec.ExternOf(func(j *cluster.Job) (int64, bool) {
			return int64(j.ID), j.ID >= 0 && int(j.ID) < len(r.Jobs) && r.Jobs[j.ID] == j
		}, func(id int64) (*cluster.Job, error) {
			if id < 0 || id >= int64(len(r.Jobs)) {
				return nil, fmt.Errorf("job %d: the engine has %d", id, len(r.Jobs))
			}
			return r.Jobs[id], nil
		}),
	}}
}

// MarshalState encodes p's state, with pointers to the objects of refs
// (p's engine's) encoded as references to them. It is nil for a policy
// that is not a pointer. It fails, naming the field, if the state holds
// what cannot be stored exactly (a channel, a pointer into the middle of
// another object).
func MarshalState(p Policy, refs Refs) ([]byte, error) {
	if p == nil || reflect.ValueOf(p).Kind() != reflect.Pointer {
		return nil, nil
	}
	data, err := codec.Marshal(p, refs.options())
	if err != nil {
		return nil, fmt.Errorf("policy %s: state: %w", p.Name(), err)
	}
	return data, nil
}

// UnmarshalState restores into p the state MarshalState encoded. p must be
// a policy of the same type built with the same Config, and should be
// fresh (never called); afterwards it behaves exactly as the policy whose
// state it was would have from the moment it was encoded, given the same
// calls. Pointers to the engine's objects point to those of refs (the
// restored engine's). A nil state leaves p as it is.
func UnmarshalState(p Policy, data []byte, refs Refs) error {
	if data == nil {
		return nil
	}
	if p == nil || reflect.ValueOf(p).Kind() != reflect.Pointer {
		return fmt.Errorf("policy %T: a state for a policy that keeps none", p)
	}
	if err := codec.Unmarshal(data, p, refs.options()); err != nil {
		return fmt.Errorf("policy %s: restoring its state: %w", p.Name(), err)
	}
	return nil
}
