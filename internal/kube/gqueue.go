package kube

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Hierarchical queues: the GandivaQueue CRD (queues.gandiva.io,
// cluster-scoped). This file is the pure part: reading a queue from its
// object, checking the tree (cycles, unknown parents, namespaces claimed
// twice) and splitting shares down it. gqueue_kube.go connects it to the
// scheduler.

// Queue is one GandivaQueue as Gandiva reads it.
type Queue struct {
	// Name is the object's name; Parent another queue's ("": a root).
	Name, Parent string
	// Tickets weigh the queue among its siblings (spec.tickets, 1 if not
	// given).
	Tickets float64
	// Quota is, per GPU type (A100, H100, V100, ... as the nodes' label
	// gandiva.io/gpu-type names them), the most GPUs its workloads and
	// those of the queues under it may hold at once; a type not listed is
	// not capped.
	Quota map[string]int
	// Namespaces are the namespaces whose workloads belong to the queue.
	Namespaces []string
	// GPUSeconds is status.gpuSeconds as last written (carried on by a
	// new leader).
	GPUSeconds float64
}

// Bounds of what a queue may say (the CRD says the same).
const (
	maxQueues          = 10000
	maxQueueNamespaces = 1000
	maxQueueTickets    = 1e6
	maxQueueQuota      = 1 << 20
	maxQueueDepth      = 16
)

// queueJSON is the part of a GandivaQueue object Gandiva reads.
type queueJSON struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Parent     string           `json:"parent"`
		Tickets    *float64         `json:"tickets"`
		Quota      map[string]int64 `json:"quota"`
		Namespaces []string         `json:"namespaces"`
	} `json:"spec"`
	Status struct {
		GPUSeconds float64 `json:"gpuSeconds"`
	} `json:"status"`
}

// parseQueue reads a GandivaQueue from its JSON. An error names the field
// and what is wrong with it; the queue is then not valid.
func parseQueue(data []byte) (Queue, error) {
	var o queueJSON
	if err := json.Unmarshal(data, &o); err != nil {
		return Queue{}, fmt.Errorf("GandivaQueue: %w", err)
	}
	q := Queue{Name: o.Metadata.Name, Parent: o.Spec.Parent, Tickets: 1}
	if q.Name == "" {
		return q, fmt.Errorf("GandivaQueue: metadata.name: empty")
	}
	if o.Status.GPUSeconds > 0 && !math.IsInf(o.Status.GPUSeconds, 0) {
		q.GPUSeconds = o.Status.GPUSeconds
	}
	if q.Parent != "" {
		if errs := validation.IsDNS1123Subdomain(q.Parent); len(errs) > 0 {
			return q, fmt.Errorf("spec.parent %q: %s", q.Parent, errs[0])
		}
	}
	if t := o.Spec.Tickets; t != nil {
		if !(*t >= 0) || *t > maxQueueTickets {
			return q, fmt.Errorf("spec.tickets %v: want a number from 0 to %g", *t, float64(maxQueueTickets))
		}
		q.Tickets = *t
	}
	if len(o.Spec.Quota) > 0 {
		q.Quota = make(map[string]int, len(o.Spec.Quota))
		for typ, n := range o.Spec.Quota {
			if typ == "" || len(typ) > 63 {
				return q, fmt.Errorf("spec.quota: GPU type %q: want 1 to 63 characters", typ)
			}
			if n < 0 || n > maxQueueQuota {
				return q, fmt.Errorf("spec.quota.%s: %d GPUs: want 0 to %d", typ, n, maxQueueQuota)
			}
			q.Quota[typ] = int(n)
		}
	}
	if len(o.Spec.Namespaces) > maxQueueNamespaces {
		return q, fmt.Errorf("spec.namespaces: %d namespaces, at most %d", len(o.Spec.Namespaces), maxQueueNamespaces)
	}
	for i, ns := range o.Spec.Namespaces {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return q, fmt.Errorf("spec.namespaces[%d] %q: %s", i, ns, errs[0])
		}
		if slices.Contains(o.Spec.Namespaces[:i], ns) {
			return q, fmt.Errorf("spec.namespaces[%d]: %q listed twice", i, ns)
		}
	}
	q.Namespaces = slices.Clone(o.Spec.Namespaces)
	slices.Sort(q.Namespaces)
	return q, nil
}

// queueTree is the queues checked: the valid ones, the namespaces each
// claims, and why the others are not valid.
type queueTree struct {
	// qs are the valid queues by name; names all of them (the invalid
	// too), sorted
	qs    map[string]*Queue
	names []string
	// invalid: queue name → why it is not valid (its Valid condition)
	invalid map[string]string
	// ns: namespace → the valid queue it belongs to
	ns map[string]string
	// kids: queue name ("" the root) → its valid child queues, sorted
	kids map[string][]string
}

// buildQueueTree checks queues (bad: the queues that did not parse, name →
// error) and builds the tree of the valid ones. A queue is not valid when
// it did not parse, when its parent does not exist or is not valid (its
// subtree goes with it), when it is on a cycle of parents, when it is
// deeper than maxQueueDepth, or when it claims a namespace that a queue
// earlier in name order claims (that one keeps it). Namespaces of queues
// that are not valid belong to no queue.
func buildQueueTree(queues []Queue, bad map[string]string) *queueTree {
	t := &queueTree{qs: map[string]*Queue{}, invalid: map[string]string{}, ns: map[string]string{}, kids: map[string][]string{}}
	all := map[string]*Queue{}
	for i := range queues {
		q := &queues[i]
		if _, dup := all[q.Name]; dup {
			continue
		}
		all[q.Name] = q
		t.names = append(t.names, q.Name)
	}
	for name, why := range bad {
		if _, ok := all[name]; !ok {
			t.names = append(t.names, name)
		}
		t.invalid[name] = why
	}
	slices.Sort(t.names)
	t.names = slices.Compact(t.names)
	// parents: unknown, cycles, depth
	for _, name := range t.names {
		q := all[name]
		if q == nil || t.invalid[name] != "" || q.Parent == "" {
			continue
		}
		if all[q.Parent] == nil {
			if why, isBad := bad[q.Parent]; isBad {
				t.invalid[name] = fmt.Sprintf("parent %s is not valid: %s", q.Parent, why)
			} else {
				t.invalid[name] = fmt.Sprintf("parent %q: no GandivaQueue of that name", q.Parent)
			}
			continue
		}
		seen := []string{name}
		for p := q.Parent; p != "" && all[p] != nil; p = all[p].Parent {
			if i := slices.Index(seen, p); i >= 0 {
				t.invalid[name] = fmt.Sprintf("its parents make a cycle: %s → %s", strings.Join(seen[i:], " → "), p)
				break
			}
			if seen = append(seen, p); len(seen) > maxQueueDepth {
				t.invalid[name] = fmt.Sprintf("more than %d queues deep", maxQueueDepth)
				break
			}
		}
	}
	// a namespace claimed twice stays with the first valid queue in name
	// order; a queue under one that is not valid is not valid; until
	// nothing changes (queues only become invalid)
	for {
		for changed := true; changed; {
			changed = false
			for _, name := range t.names {
				if q := all[name]; q != nil && t.invalid[name] == "" && q.Parent != "" && t.invalid[q.Parent] != "" {
					t.invalid[name] = fmt.Sprintf("queue %s above it is not valid", q.Parent)
					changed = true
				}
			}
		}
		clear(t.ns)
		lost := false
		for _, name := range t.names {
			q := all[name]
			if q == nil || t.invalid[name] != "" {
				continue
			}
			for _, ns := range q.Namespaces {
				if other, ok := t.ns[ns]; ok {
					t.invalid[name] = fmt.Sprintf("namespace %s belongs to queue %s already", ns, other)
					lost = true
					break
				}
			}
			if t.invalid[name] == "" {
				for _, ns := range q.Namespaces {
					t.ns[ns] = name
				}
			}
		}
		if !lost {
			break
		}
	}
	for _, name := range t.names {
		if q := all[name]; q != nil && t.invalid[name] == "" {
			t.qs[name] = q
			t.kids[q.Parent] = append(t.kids[q.Parent], name)
		}
	}
	return t
}

// path is the valid queues namespace ns belongs to, its own first, then
// the ones above it; nil when it belongs to none.
func (t *queueTree) path(ns string) []*Queue {
	var out []*Queue
	for name := t.ns[ns]; name != ""; name = t.qs[name].Parent {
		out = append(out, t.qs[name])
	}
	return out
}

// queueShares splits the cluster down the tree among the namespaces with
// work (active): at each level, the members with work share their
// parent's share in proportion to their tickets. The members of a queue
// are its child queues and its namespaces (1 ticket each); those of the
// root are the root queues and the namespaces that belong to no queue
// (their tickets from other (the settings ConfigMap), else def). A queue
// has work when one of its namespaces or child queues has. It returns each
// active namespace's share and each valid queue's (0 without work); the
// namespaces' shares add up to 1 unless every member's tickets at some
// level are 0.
func (t *queueTree) queueShares(active []string, other map[string]float64, def float64) (ns, qs map[string]float64) {
	ns, qs = map[string]float64{}, map[string]float64{}
	busy := map[string]bool{} // queues with work
	var loose []string        // active namespaces of no queue
	members := map[string][]string{}
	for _, n := range active {
		q, ok := t.ns[n]
		if !ok {
			loose = append(loose, n)
			continue
		}
		members[q] = append(members[q], n)
		for ; q != "" && !busy[q]; q = t.qs[q].Parent {
			busy[q] = true
		}
	}
	slices.Sort(loose)
	var split func(share float64, ms []qmember)
	split = func(share float64, ms []qmember) {
		sum := 0.0
		for _, m := range ms {
			sum += m.tickets
		}
		for _, m := range ms {
			s := 0.0
			if sum > 0 {
				s = share * m.tickets / sum
			}
			if m.ns != "" {
				ns[m.ns] = s
				continue
			}
			qs[m.queue] = s
			split(s, t.membersOf(m.queue, busy, members[m.queue]))
		}
	}
	var root []qmember
	for _, q := range t.kids[""] {
		if busy[q] {
			root = append(root, qmember{queue: q, tickets: t.qs[q].Tickets})
		}
	}
	for _, n := range loose {
		tk, ok := other[n]
		if !ok {
			tk = def
		}
		root = append(root, qmember{ns: n, tickets: tk})
	}
	split(1, root)
	for name := range t.qs {
		if _, ok := qs[name]; !ok {
			qs[name] = 0
		}
	}
	return ns, qs
}

// qmember is a member of a queue or of the root: a child queue or a
// namespace, with its tickets.
type qmember struct {
	queue, ns string
	tickets   float64
}

// membersOf is queue q's members with work: its busy child queues, then
// its active namespaces (nss, any order), in name order each.
func (t *queueTree) membersOf(q string, busy map[string]bool, nss []string) []qmember {
	var out []qmember
	for _, k := range t.kids[q] {
		if busy[k] {
			out = append(out, qmember{queue: k, tickets: t.qs[k].Tickets})
		}
	}
	nss = slices.Clone(nss)
	slices.Sort(nss)
	for _, n := range nss {
		out = append(out, qmember{ns: n, tickets: 1})
	}
	return out
}

// QueuesFromConfigMap writes the GandivaQueues that give the namespaces
// the shares the settings ConfigMap's tickets (its data: "tickets.NS":
// "N") give them today: one queue per namespace, named after it, holding
// it, with its tickets, under parent (a queue it writes too; "" for none:
// root queues). Namespaces and tickets are checked as the scheduler
// checks them; other keys are left out, named in skipped.
func QueuesFromConfigMap(data map[string]string, parent string) (out []byte, skipped []string, err error) {
	if parent != "" {
		if errs := validation.IsDNS1123Label(parent); len(errs) > 0 {
			return nil, nil, fmt.Errorf("parent queue %q: %s", parent, errs[0])
		}
	}
	type entry struct {
		ns      string
		tickets float64
	}
	var es []entry
	for k, v := range data {
		ns, ok := strings.CutPrefix(k, "tickets.")
		if !ok {
			skipped = append(skipped, k)
			continue
		}
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return nil, nil, fmt.Errorf("key %q: namespace %q: %s", k, ns, errs[0])
		}
		n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || !(n >= 0) || n > maxQueueTickets {
			return nil, nil, fmt.Errorf("key %q: tickets %q: want a number from 0 to %g", k, v, float64(maxQueueTickets))
		}
		if ns == parent {
			return nil, nil, fmt.Errorf("key %q: the namespace has the parent queue's name %q: choose another parent", k, parent)
		}
		es = append(es, entry{ns, n})
	}
	slices.SortFunc(es, func(a, b entry) int { return strings.Compare(a.ns, b.ns) })
	slices.Sort(skipped)
	var b strings.Builder
	b.WriteString("# GandivaQueues from the settings ConfigMap's tickets (gandiva kube queues --from-configmap)\n")
	if parent != "" {
		fmt.Fprintf(&b, "---\napiVersion: gandiva.io/v1alpha1\nkind: GandivaQueue\nmetadata:\n  name: %s\nspec:\n  tickets: 1\n", parent)
	}
	for _, e := range es {
		fmt.Fprintf(&b, "---\napiVersion: gandiva.io/v1alpha1\nkind: GandivaQueue\nmetadata:\n  name: %s\nspec:\n", e.ns)
		if parent != "" {
			fmt.Fprintf(&b, "  parent: %s\n", parent)
		}
		fmt.Fprintf(&b, "  tickets: %s\n  namespaces: [%s]\n", strconv.FormatFloat(e.tickets, 'g', -1, 64), e.ns)
	}
	return []byte(b.String()), skipped, nil
}
