package codec

import (
	"bytes"
	"fmt"
	"testing"
)

// TestTable checks the chunked table against a plain slice, across its
// first chunk's end and several chunks.
func TestTable(t *testing.T) {
	var tb table[int]
	var want []int
	for i := 0; i < 3*tableChunk+17; i++ {
		v := i*7 + 1
		tb.add(v)
		want = append(want, v)
		if tb.len() != len(want) {
			t.Fatalf("after %d adds: len %d", i+1, tb.len())
		}
		// the element just added and a few earlier ones
		for _, k := range []int{i, i / 2, i / 3, 0} {
			if got := *tb.at(k); got != want[k] {
				t.Fatalf("after %d adds: at(%d) = %d, want %d", i+1, k, got, want[k])
			}
		}
	}
	for k := range want {
		if *tb.at(k) != want[k] {
			t.Fatalf("at(%d) = %d, want %d", k, *tb.at(k), want[k])
		}
	}
}

// TestManyObjectsAndStrings: a graph with more shared objects and short
// strings than one table chunk holds decodes with its sharing and strings
// intact (objects and strings are referred to by number across chunks).
func TestManyObjectsAndStrings(t *testing.T) {
	type item struct {
		name string
		peer *item
	}
	type root struct {
		items []*item
		again []*item // the same objects, referred to by number
		names []string
	}
	n := 3*tableChunk + 5
	r := &root{}
	for i := 0; i < n; i++ {
		r.items = append(r.items, &item{name: fmt.Sprintf("item-%d", i)})
	}
	for i, it := range r.items {
		it.peer = r.items[(i*31+7)%n]
		r.again = append(r.again, r.items[n-1-i])
		r.names = append(r.names, r.items[(i*13)%n].name) // short strings met before
	}
	data, err := Marshal(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got root
	if err := Unmarshal(data, &got, nil); err != nil {
		t.Fatal(err)
	}
	if len(got.items) != n || len(got.again) != n || len(got.names) != n {
		t.Fatalf("lengths %d %d %d, want %d", len(got.items), len(got.again), len(got.names), n)
	}
	for i, it := range got.items {
		if it.name != fmt.Sprintf("item-%d", i) {
			t.Fatalf("item %d named %q", i, it.name)
		}
		if it.peer != got.items[(i*31+7)%n] {
			t.Fatalf("item %d: its peer is not shared with the list", i)
		}
		if got.again[i] != got.items[n-1-i] {
			t.Fatalf("again[%d] is not items[%d]", i, n-1-i)
		}
		if got.names[i] != r.names[i] {
			t.Fatalf("names[%d] = %q, want %q", i, got.names[i], r.names[i])
		}
	}
}

// TestMapEntriesDistinct: each map entry decodes into a value of its own
// (the decoder reuses one key and one value to decode entries into, so a
// pointer left from the entry before would otherwise be decoded into and
// shared).
func TestMapEntriesDistinct(t *testing.T) {
	type val struct {
		n    int
		tags []string
	}
	type root struct {
		m map[string]*val
		v map[int]val
	}
	r := &root{m: map[string]*val{}, v: map[int]val{}}
	for i := 0; i < 50; i++ {
		r.m[fmt.Sprint("k", i)] = &val{n: i, tags: []string{fmt.Sprint(i)}}
		if i%2 == 0 {
			r.v[i] = val{n: i, tags: []string{"even"}}
		} else {
			r.v[i] = val{n: i} // no tags: must not keep the entry before's
		}
	}
	data, err := Marshal(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got root
	if err := Unmarshal(data, &got, nil); err != nil {
		t.Fatal(err)
	}
	seen := map[*val]bool{}
	for i := 0; i < 50; i++ {
		p := got.m[fmt.Sprint("k", i)]
		if p == nil || p.n != i || len(p.tags) != 1 || p.tags[0] != fmt.Sprint(i) || seen[p] {
			t.Fatalf("m[k%d] = %+v (shared: %v)", i, p, seen[p])
		}
		seen[p] = true
		if v := got.v[i]; v.n != i || (i%2 == 0) != (len(v.tags) == 1) {
			t.Fatalf("v[%d] = %+v", i, v)
		}
	}
}

// TestKeepsNothingOfData: a decoded graph shares no memory with the data
// it was decoded from (a restart decodes its snapshot where the store maps
// it, memory that is not the graph's): the data overwritten after the
// decoding changes nothing in the graph.
func TestKeepsNothingOfData(t *testing.T) {
	g := newGraph()
	data, err := Marshal(g, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	var got graph
	if err := Unmarshal(data, &got, testOptions()); err != nil {
		t.Fatal(err)
	}
	want, err := Marshal(&got, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	for i := range data {
		data[i] = 0xa5
	}
	again, err := Marshal(&got, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, want) {
		t.Fatal("overwriting the data changed the decoded graph")
	}
}
