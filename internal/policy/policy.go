// Package policy defines the interface every scheduling policy implements,
// the configuration they share (Config: placement strategy, free
// preemption, the Tiresias simulator's rules) and the optional Explainer,
// with which a policy says where a waiting job stands in its own order
// (`gandiva explain`, `gandiva sim --explain`). The policies themselves live
// in subpackages (fifo, philly, ...), plan their placements on place.Pool,
// and package registry wires them by name.
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
	"github.com/gandiva-sched/gandiva/internal/place"
)

// Policy decides what to run.
type Policy interface {
	// Name is the policy's registry name.
	Name() string
	// Schedule is called by the engine after it applied a batch of events,
	// and when a requested wake-up time arrives. It returns the actions to
	// take, in order. It must not modify the snapshot nor keep references
	// into it after returning. An action it returns is applied unless the
	// next snapshot lists it in s.Rejected (refused by the engine or by the
	// executor, with a code: retry later, never, stale); state the policy
	// keeps about its own actions must be corrected from that list, as
	// Waiting.Update does.
	Schedule(s *cluster.Snapshot) cluster.Decision
}

// SettingsValidator is implemented by a policy that reads run-time
// settings (cluster.EvSetting, `gandiva set KEY VALUE`). CheckSetting
// reports whether the policy reads key and, if it does, whether value is
// acceptable (err says why not, without repeating the key). It must be a
// pure function of its arguments and the policy's configuration. The live
// server refuses a setting that neither it nor its policy reads, and one
// whose value the policy refuses, before the setting is logged; a policy
// that implements no SettingsValidator reads no settings.
type SettingsValidator interface {
	CheckSetting(key, value string) (reads bool, err error)
}

// Config configures a policy. The zero value is the default: gangs placed
// for locality, preemption that costs what it costs, this scheduler's own
// bookkeeping. TiresiasCompat sets the Tiresias simulator's semantics.
type Config struct {
	// Placement is how gangs are placed: place.Locality (the default) or
	// place.Count (GPUs only counted, the Tiresias simulator's scheme).
	// Policies that place gangs on homes of their own (gandiva,
	// gandiva-fair) ignore it.
	Placement place.Strategy
	// FreePreemption says preemption costs nothing, as in the Tiresias
	// simulator: the preemptive policies (package preempt) suspend every
	// running job their order does not keep, not only those a placement
	// needs, and tiresias-g holds no job by default (hold=0).
	FreePreemption bool
	// TiresiasRules selects the Tiresias simulator's bookkeeping where a
	// policy reproduces it job by job (tiresias-l/g, sjf, srsf, srtf): its
	// tie orders, whole-second run times, service counted only at events,
	// its Python 2 arithmetic and its Gittins table (package tiresias says
	// which); tiresias-g then takes no hold.
	TiresiasRules bool
	// Seed seeds any randomness the policy uses (it must use none other).
	Seed uint64
	// Params are policy-specific settings ("quantum=60"); each policy
	// documents its keys and rejects unknown ones.
	Params map[string]string
}

// TiresiasCompat returns cfg with the Tiresias simulator's semantics, what
// `--compat tiresias` selects: GPUs only counted, free preemption and its
// bookkeeping.
func TiresiasCompat(cfg Config) Config {
	cfg.Placement = place.Count
	cfg.FreePreemption = true
	cfg.TiresiasRules = true
	return cfg
}

// Factory builds a policy.
type Factory func(Config) (Policy, error)

// FactoryOf turns a constructor that returns a concrete policy into a
// Factory (an error gives a nil Policy, not a typed nil).
func FactoryOf[P Policy](build func(Config) (P, error)) Factory {
	return func(cfg Config) (Policy, error) {
		p, err := build(cfg)
		if err != nil {
			return nil, err
		}
		return p, nil
	}
}

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
