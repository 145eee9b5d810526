// Package registry maps policy names to their factories. The map is built
// by a function, not by init(), so the wiring is explicit.
package registry

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/fifo"
	"github.com/gandiva-sched/gandiva/internal/policy/philly"
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
		{"fifo", "FIFO with exclusive GPUs and consolidated placement (YARN-CS): head-of-line blocking", fifo.New},
		{"philly", "Philly: locality-aware gang placement that relaxes after a back-off", philly.New},
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
