// Package registry maps policy names to their factories. The map is built
// by a function, not by init(), so the wiring is explicit. Each policy
// package's constructor returns its concrete type; the registry adapts it
// to policy.Factory (policy.FactoryOf).
package registry

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/fair"
	"github.com/gandiva-sched/gandiva/internal/policy/fifo"
	"github.com/gandiva-sched/gandiva/internal/policy/gandiva"
	"github.com/gandiva-sched/gandiva/internal/policy/optimus"
	"github.com/gandiva-sched/gandiva/internal/policy/philly"
	"github.com/gandiva-sched/gandiva/internal/policy/shortest"
	"github.com/gandiva-sched/gandiva/internal/policy/tiresias"
)

// Entry documents one policy.
type Entry struct {
	Name    string
	Doc     string
	Factory policy.Factory
}

// All returns every policy, in the order `gandiva sim` runs them by default.
func All() []Entry {
	return []Entry{
		{"fifo", "FIFO with exclusive GPUs and consolidated placement (YARN-CS): head-of-line blocking", policy.FactoryOf(fifo.New)},
		{"philly", "Philly: locality-aware gang placement that relaxes after a back-off", policy.FactoryOf(philly.New)},
		{"gandiva", "Gandiva: time-slicing, packing with introspection, migration, grow-shrink, early feedback", policy.FactoryOf(gandiva.New)},
		{fair.Name, "Gandiva_fair: ticket-proportional share of GPU throughput per user, split-stride gang scheduling, heterogeneity and trading", policy.FactoryOf(fair.New)},
		{"tiresias-l", "Tiresias 2D-LAS: queues by attained GPU-time, preemption, profile-based placement", policy.FactoryOf(tiresias.NewL)},
		{"tiresias-g", "Tiresias 2D-Gittins: as tiresias-l, ordered by the Gittins index of a GPU-time distribution", policy.FactoryOf(tiresiasG)},
		{"fjf", "first job that fits: FIFO that skips jobs that do not fit, no preemption (Tiresias simulator)", policy.FactoryOf(fifo.NewFJF)},
		{"sjf", "preemptive fewest-GPUs-first (Tiresias simulator's sjf)", policy.FactoryOf(shortest.NewSJF)},
		{"srsf", "preemptive shortest remaining GPU-time first; oracle run times (a reference bound)", policy.FactoryOf(shortest.NewSRSF)},
		{"srtf", "preemptive shortest remaining time first; oracle run times (a reference bound)", policy.FactoryOf(shortest.NewSRTF)},
		{"optimus", "Optimus-style: shortest estimated remaining time first, estimated from measured progress", policy.FactoryOf(optimus.New)},
	}
}

// Names lists the policy names.
func Names() []string {
	var out []string
	for _, e := range All() {
		out = append(out, e.Name)
	}
	return out
}

// New builds the named policy.
func New(name string, cfg policy.Config) (policy.Policy, error) {
	for _, e := range All() {
		if e.Name == name {
			return e.Factory(cfg)
		}
	}
	known := Names()
	sort.Strings(known)
	return nil, fmt.Errorf("unknown policy %q (known: %s)", name, strings.Join(known, ", "))
}

// Parse splits "fifo,philly:relax=300" style lists: policies separated by
// commas, each optionally followed by ":key=value;key=value" parameters.
func Parse(list string) ([]string, []map[string]string, error) {
	var names []string
	var params []map[string]string
	for _, part := range strings.Split(list, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, rest, _ := strings.Cut(part, ":")
		m := map[string]string{}
		if rest != "" {
			for _, kv := range strings.Split(rest, ";") {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || strings.TrimSpace(k) == "" {
					return nil, nil, fmt.Errorf("policy %s: parameter %q is not key=value", name, kv)
				}
				m[strings.TrimSpace(k)] = strings.TrimSpace(v)
			}
		}
		names = append(names, name)
		params = append(params, m)
	}
	if len(names) == 0 {
		return nil, nil, fmt.Errorf("no policy named")
	}
	return names, params, nil
}
