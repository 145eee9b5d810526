package kube

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

func TestParseQueue(t *testing.T) {
	for _, tc := range []struct {
		in, err string
		want    Queue
	}{
		{in: `{"metadata":{"name":"org"},"spec":{}}`, want: Queue{Name: "org", Tickets: 1}},
		{in: `{"metadata":{"name":"a"},"spec":{"parent":"org","tickets":3,"quota":{"H100":8},"namespaces":["team-b","team-a"]},"status":{"gpuSeconds":12.5}}`,
			want: Queue{Name: "a", Parent: "org", Tickets: 3, Quota: map[string]int{"H100": 8}, Namespaces: []string{"team-a", "team-b"}, GPUSeconds: 12.5}},
		{in: `{"metadata":{"name":"a"},"spec":{"tickets":0}}`, want: Queue{Name: "a", Tickets: 0}},
		{in: `{"metadata":{},"spec":{}}`, err: "metadata.name: empty"},
		{in: `{"metadata":{"name":"a"},"spec":{"tickets":-1}}`, err: "spec.tickets -1: want a number from 0 to 1e+06"},
		{in: `{"metadata":{"name":"a"},"spec":{"tickets":2e6}}`, err: "spec.tickets"},
		{in: `{"metadata":{"name":"a"},"spec":{"quota":{"H100":-2}}}`, err: "spec.quota.H100: -2 GPUs"},
		{in: `{"metadata":{"name":"a"},"spec":{"quota":{"":2}}}`, err: "spec.quota: GPU type"},
		{in: `{"metadata":{"name":"a"},"spec":{"namespaces":["Team A"]}}`, err: `spec.namespaces[0] "Team A"`},
		{in: `{"metadata":{"name":"a"},"spec":{"namespaces":["x","x"]}}`, err: `spec.namespaces[1]: "x" listed twice`},
		{in: `{"metadata":{"name":"a"},"spec":{"parent":"../x"}}`, err: `spec.parent "../x"`},
		{in: `{"metadata":{"name":"a"},"spec":{"quota":{"H100":"8"}}}`, err: "GandivaQueue: json"},
	} {
		got, err := parseQueue([]byte(tc.in))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want one with %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if got.Name != tc.want.Name || got.Parent != tc.want.Parent || got.Tickets != tc.want.Tickets || !maps.Equal(got.Quota, tc.want.Quota) ||
			!slices.Equal(got.Namespaces, tc.want.Namespaces) || got.GPUSeconds != tc.want.GPUSeconds {
			t.Errorf("%s: got %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

func FuzzParseQueue(f *testing.F) {
	f.Add([]byte(`{"metadata":{"name":"a"},"spec":{"parent":"org","tickets":3,"quota":{"H100":8},"namespaces":["team-b","team-a"]}}`))
	f.Add([]byte(`{"metadata":{"name":"a"},"spec":{"tickets":1e400}}`))
	f.Add([]byte(`{"metadata":{"name":"a"},"status":{"gpuSeconds":-1e400}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		q, err := parseQueue(data)
		if err != nil {
			return
		}
		if q.Name == "" || !(q.Tickets >= 0 && q.Tickets <= maxQueueTickets) || !(q.GPUSeconds >= 0) || math.IsInf(q.GPUSeconds, 0) {
			t.Fatalf("accepted %+v", q)
		}
		for typ, n := range q.Quota {
			if typ == "" || n < 0 || n > maxQueueQuota {
				t.Fatalf("accepted quota %q: %d", typ, n)
			}
		}
		if len(q.Namespaces) > maxQueueNamespaces || !slices.IsSorted(q.Namespaces) || len(slices.Compact(slices.Clone(q.Namespaces))) != len(q.Namespaces) {
			t.Fatalf("accepted namespaces %v", q.Namespaces)
		}
		for _, ns := range q.Namespaces {
			if len(validation.IsDNS1123Label(ns)) > 0 {
				t.Fatalf("accepted namespace %q", ns)
			}
		}
	})
}

// TestQueueTreeValid: unknown parents, cycles, a queue under one that is
// not valid, a namespace claimed by two queues (the first by name keeps
// it), a queue that did not parse; the others are valid.
func TestQueueTreeValid(t *testing.T) {
	qs := []Queue{
		{Name: "org", Tickets: 1},
		{Name: "team-a", Parent: "org", Tickets: 3, Namespaces: []string{"a1", "a2"}},
		{Name: "team-b", Parent: "org", Tickets: 1, Namespaces: []string{"b1"}},
		{Name: "team-c", Parent: "org", Namespaces: []string{"a2", "c1"}}, // a2 is team-a's
		{Name: "under-c", Parent: "team-c", Namespaces: []string{"c2"}},
		{Name: "lost", Parent: "nowhere", Namespaces: []string{"l1"}},
		{Name: "x", Parent: "y"}, {Name: "y", Parent: "z"}, {Name: "z", Parent: "x"},
		{Name: "hangs-on-cycle", Parent: "x", Namespaces: []string{"h1"}},
		{Name: "under-bad", Parent: "bad"},
	}
	tr := buildQueueTree(qs, map[string]string{"bad": "spec.tickets -1: want a number from 0 to 1e+06"})
	want := map[string]string{
		"team-c":         "namespace a2 belongs to queue team-a already",
		"under-c":        "queue team-c above it is not valid",
		"lost":           `parent "nowhere": no GandivaQueue of that name`,
		"x":              "its parents make a cycle: x → y → z → x",
		"y":              "its parents make a cycle: y → z → x → y",
		"z":              "its parents make a cycle: z → x → y → z",
		"hangs-on-cycle": "its parents make a cycle: x → y → z → x",
		"bad":            "spec.tickets -1",
		"under-bad":      "parent bad is not valid: spec.tickets -1",
	}
	for _, name := range tr.names {
		got := tr.invalid[name]
		if w := want[name]; (w == "") != (got == "") || !strings.Contains(got, w) {
			t.Errorf("queue %s: invalid %q, want %q", name, got, w)
		}
	}
	if len(tr.names) != len(qs)+1 {
		t.Errorf("names %v", tr.names)
	}
	for ns, q := range map[string]string{"a1": "team-a", "a2": "team-a", "b1": "team-b", "c1": "", "c2": "", "l1": "", "h1": ""} {
		if tr.ns[ns] != q {
			t.Errorf("namespace %s: queue %q, want %q", ns, tr.ns[ns], q)
		}
	}
	if p := tr.path("a1"); len(p) != 2 || p[0].Name != "team-a" || p[1].Name != "org" {
		t.Errorf("path of a1: %v", p)
	}
	if p := tr.path("c1"); p != nil {
		t.Errorf("path of c1 (no valid queue): %v", p)
	}
}

// Two teams under one organisation beside a namespace of no queue: tickets
// split down the tree among those with work.
func TestQueueSharesSplitDownTheTree(t *testing.T) {
	tr := buildQueueTree([]Queue{
		{Name: "org", Tickets: 3},
		{Name: "team-a", Parent: "org", Tickets: 3, Namespaces: []string{"a1", "a2"}},
		{Name: "team-b", Parent: "org", Tickets: 1, Namespaces: []string{"b1"}},
	}, nil)
	ns, qs := tr.queueShares([]string{"a1", "a2", "b1", "loose"}, map[string]float64{"loose": 1}, 1)
	want := map[string]float64{"a1": 0.75 * 0.75 / 2, "a2": 0.75 * 0.75 / 2, "b1": 0.75 * 0.25, "loose": 0.25}
	for n, w := range want {
		if math.Abs(ns[n]-w) > 1e-12 {
			t.Errorf("namespace %s: share %v, want %v", n, ns[n], w)
		}
	}
	if math.Abs(qs["org"]-0.75) > 1e-12 || math.Abs(qs["team-a"]-0.5625) > 1e-12 || math.Abs(qs["team-b"]-0.1875) > 1e-12 {
		t.Errorf("queues' shares %v", qs)
	}
	// a2 idle: a1 takes team-a's whole share; team-b idle: team-a takes org's
	ns, qs = tr.queueShares([]string{"a1", "loose"}, map[string]float64{"loose": 1}, 1)
	if math.Abs(ns["a1"]-0.75) > 1e-12 || qs["team-b"] != 0 || math.Abs(qs["team-a"]-0.75) > 1e-12 {
		t.Errorf("a1 alone in org: %v %v", ns, qs)
	}
}

// refShares is queueShares the plain way: for each active namespace, the
// product down its path of tickets ÷ the tickets of the siblings with work,
// found by scanning everything at every level.
func refShares(tr *queueTree, active []string, other map[string]float64, def float64) map[string]float64 {
	hasWork := func(q string) bool {
		for _, n := range active {
			for _, p := range tr.path(n) {
				if p.Name == q {
					return true
				}
			}
		}
		return false
	}
	parentOf := func(n string) string { // the node above a namespace ("ns:"+n) or a queue
		if q, ok := strings.CutPrefix(n, "ns:"); ok {
			return tr.ns[q]
		}
		return tr.qs[n].Parent
	}
	weight := func(n string) float64 {
		if q, ok := strings.CutPrefix(n, "ns:"); ok {
			if tr.ns[q] != "" {
				return 1
			}
			if v, ok := other[q]; ok {
				return v
			}
			return def
		}
		return tr.qs[n].Tickets
	}
	var nodes []string
	for _, n := range active {
		nodes = append(nodes, "ns:"+n)
	}
	for q := range tr.qs {
		if hasWork(q) {
			nodes = append(nodes, q)
		}
	}
	out := map[string]float64{}
	for _, n := range active {
		share := 1.0
		for x := "ns:" + n; ; x = parentOf(x) {
			sum := 0.0
			for _, y := range nodes {
				if parentOf(y) == parentOf(x) {
					sum += weight(y)
				}
			}
			if sum == 0 {
				share = 0
			} else {
				share *= weight(x) / sum
			}
			if parentOf(x) == "" {
				break
			}
		}
		out[n] = share
	}
	return out
}

// Random trees, random work: queueShares equals the plain computation, and
// each queue's share is the sum of its namespaces' and its children's.
func TestQueueSharesRandom(t *testing.T) {
	for seed := uint64(1); seed <= 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, 3))
		var qs []Queue
		nq := 1 + rng.IntN(8)
		nsn := 0
		for i := range nq {
			q := Queue{Name: fmt.Sprintf("q%d", i), Tickets: float64(rng.IntN(4))}
			if i > 0 && rng.IntN(4) > 0 {
				q.Parent = fmt.Sprintf("q%d", rng.IntN(i)) // a tree: parents come first
			}
			for range rng.IntN(3) {
				q.Namespaces = append(q.Namespaces, fmt.Sprintf("n%d", nsn))
				nsn++
			}
			qs = append(qs, q)
		}
		other := map[string]float64{}
		var active []string
		for i := range nsn + 2 {
			n := fmt.Sprintf("n%d", i)
			if rng.IntN(2) == 0 {
				active = append(active, n)
			}
			if rng.IntN(3) == 0 {
				other[n] = float64(rng.IntN(3))
			}
		}
		tr := buildQueueTree(qs, nil)
		if len(tr.invalid) != 0 {
			t.Fatalf("seed %d: invalid %v", seed, tr.invalid)
		}
		ns, qsh := tr.queueShares(active, other, 1)
		ref := refShares(tr, active, other, 1)
		for _, n := range active {
			if math.Abs(ns[n]-ref[n]) > 1e-9 {
				t.Fatalf("seed %d: namespace %s: share %v, plain %v (queues %+v, active %v)", seed, n, ns[n], ref[n], qs, active)
			}
		}
		for q := range tr.qs {
			sum, tickets := 0.0, 0.0
			for _, n := range active {
				if tr.ns[n] == q {
					sum += ns[n]
					tickets++
				}
			}
			for _, k := range tr.kids[q] {
				sum += qsh[k]
				if qsh[k] > 0 {
					tickets += tr.qs[k].Tickets
				}
			}
			if tickets > 0 && math.Abs(sum-qsh[q]) > 1e-9 {
				t.Fatalf("seed %d: queue %s: share %v, its members' %v", seed, q, qsh[q], sum)
			}
		}
	}
}

// parseQueuesYAML reads QueuesFromConfigMap's output back.
func parseQueuesYAML(t testing.TB, out []byte) []Queue {
	t.Helper()
	var qs []Queue
	for _, doc := range strings.Split(string(out), "\n---\n")[1:] {
		js, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Fatalf("%v in:\n%s", err, doc)
		}
		q, err := parseQueue(js)
		if err != nil {
			t.Fatalf("%v in:\n%s", err, doc)
		}
		qs = append(qs, q)
	}
	return qs
}

// The queues written from a ConfigMap give every set of namespaces with
// work the shares its tickets gave them (as root queues; under one parent
// too, as long as every namespace with work is in the ConfigMap).
func TestQueuesFromConfigMap(t *testing.T) {
	data := map[string]string{"tickets.team-a": "3", "tickets.team-b": " 1 ", "tickets.idle": "0", "other.x": "1"}
	for _, parent := range []string{"", "org"} {
		out, skipped, err := QueuesFromConfigMap(data, parent)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(skipped, []string{"other.x"}) {
			t.Errorf("skipped %v", skipped)
		}
		qs := parseQueuesYAML(t, out)
		tr := buildQueueTree(qs, nil)
		if len(tr.invalid) > 0 || len(qs) != 3+len(parent)/3 {
			t.Fatalf("queues %+v, invalid %v:\n%s", qs, tr.invalid, out)
		}
		flat := buildQueueTree(nil, nil)
		other := map[string]float64{"team-a": 3, "team-b": 1, "idle": 0}
		for _, active := range [][]string{{"team-a", "team-b"}, {"idle", "team-a"}, {"team-b"}, {"idle", "loose", "team-a", "team-b"}} {
			if parent != "" && slices.Contains(active, "loose") {
				continue // (a namespace of no queue weighs against the parent as a whole)
			}
			got, _ := tr.queueShares(active, nil, 1)
			want, _ := flat.queueShares(active, other, 1)
			for _, n := range active {
				if math.Abs(got[n]-want[n]) > 1e-12 {
					t.Errorf("parent %q, active %v: %s's share %v, the ConfigMap's %v", parent, active, n, got[n], want[n])
				}
			}
		}
	}
	for _, tc := range []struct {
		data   map[string]string
		parent string
		err    string
	}{
		{map[string]string{"tickets.Team A": "1"}, "", `namespace "Team A"`},
		{map[string]string{"tickets.a": "-1"}, "", `tickets "-1"`},
		{map[string]string{"tickets.a": "many"}, "", `tickets "many"`},
		{map[string]string{"tickets.org": "1"}, "org", "the parent queue's name"},
		{nil, "Org!", `parent queue "Org!"`},
	} {
		if _, _, err := QueuesFromConfigMap(tc.data, tc.parent); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%v under %q: error %v, want %q", tc.data, tc.parent, err, tc.err)
		}
	}
}

func FuzzQueuesFromConfigMap(f *testing.F) {
	f.Add("tickets.team-a", "3", "tickets.b", "1", "org")
	f.Add("tickets.x", "1e6", "y", "", "")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2, parent string) {
		out, _, err := QueuesFromConfigMap(map[string]string{k1: v1, k2: v2}, parent)
		if err != nil {
			return
		}
		tr := buildQueueTree(parseQueuesYAML(t, out), nil)
		if len(tr.invalid) > 0 {
			t.Fatalf("invalid %v:\n%s", tr.invalid, out)
		}
	})
}
