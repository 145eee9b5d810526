// Package policy defines the interface every scheduling policy implements and
// the configuration they share. The policies themselves live in
// subpackages (fifo, philly, ...); package registry wires them by name.
//
// A policy is a pure function of the snapshot plus its own state: no clock,
// no global randomness, no I/O. Policies import only cluster, place and
// policy; a test fails if one imports the engine, the simulator or any I/O
// package.
package policy

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/gandiva-sched/gandiva/internal/cluster"
)

// Policy decides what to run.
type Policy interface {
	// Name is the policy's registry name.
	Name() string
	// Schedule is called by the engine after it applied a batch of events,
	// and when a requested wake-up time arrives. It returns the actions to
	// take, in order. It must not modify the snapshot nor keep references
	// into it after returning.
	Schedule(s *cluster.Snapshot) cluster.Decision
}

// Config configures a policy.
type Config struct {
	// Compat selects the Tiresias simulator's semantics: GPUs are only
	// counted (no placement constraints), preemption is free.
	Compat bool
	// Seed seeds any randomness the policy uses (it must use none other).
	Seed uint64
	// Params are policy-specific settings ("quantum=60"); each policy
	// documents its keys and rejects unknown ones.
	Params map[string]string
}

// Factory builds a policy.
type Factory func(Config) (Policy, error)

// Params reads a policy's parameters with typed accessors, remembering which
// keys were used so Done can reject unknown ones.
type Params struct {
	m    map[string]string
	used map[string]bool
	err  error
}

// NewParams wraps m.
func NewParams(m map[string]string) *Params { return &Params{m: m, used: map[string]bool{}} }

// Float reads key as a float64, or returns def.
func (p *Params) Float(key string, def float64) float64 {
	p.used[key] = true
	v, ok := p.m[key]
	if !ok {
		return def
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil && p.err == nil {
		p.err = fmt.Errorf("parameter %s: %w", key, err)
	}
	return f
}

// Int reads key as an int, or returns def.
func (p *Params) Int(key string, def int) int {
	p.used[key] = true
	v, ok := p.m[key]
	if !ok {
		return def
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil && p.err == nil {
		p.err = fmt.Errorf("parameter %s: %w", key, err)
	}
	return n
}

// Bool reads key as a bool, or returns def.
func (p *Params) Bool(key string, def bool) bool {
	p.used[key] = true
	v, ok := p.m[key]
	if !ok {
		return def
	}
	b, err := strconv.ParseBool(strings.TrimSpace(v))
	if err != nil && p.err == nil {
		p.err = fmt.Errorf("parameter %s: %w", key, err)
	}
	return b
}

// String reads key, or returns def.
func (p *Params) String(key, def string) string {
	p.used[key] = true
	if v, ok := p.m[key]; ok {
		return v
	}
	return def
}

// Done returns the first parse error, or an error naming unknown keys.
func (p *Params) Done(policy string) error {
	if p.err != nil {
		return fmt.Errorf("policy %s: %w", policy, p.err)
	}
	var unknown []string
	for k := range p.m {
		if !p.used[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		known := make([]string, 0, len(p.used))
		for k := range p.used {
			known = append(known, k)
		}
		sort.Strings(known)
		return fmt.Errorf("policy %s: unknown parameter(s) %s (known: %s)", policy, strings.Join(unknown, ", "), strings.Join(known, ", "))
	}
	return nil
}
