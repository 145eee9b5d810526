package codec

import (
	"bytes"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

type shape interface{ area() float64 }

type square struct{ side float64 }

func (s square) area() float64 { return s.side * s.side }

type circle struct{ r float64 }

func (c *circle) area() float64 { return math.Pi * c.r * c.r }

type node struct {
	name  string
	next  *node // a cycle
	peers []*node
	w     weights
}

type weights struct {
	a [3]int16
	b []float64
}

type key struct {
	x int
	y string
}

type outside struct{ id int }

// graph has one field of every kind the codec encodes.
type graph struct {
	b      bool
	i      int
	i8     int8
	i64    int64
	u      uint
	u8     uint8
	u32    uint32
	f32    float32
	f64    float64
	s      string
	bs     []byte
	nilBs  []byte
	ints   []int32
	empty  []int
	nilSl  []int
	fs     []float64
	arr    [2]string
	m      map[string]int
	mk     map[key][]string
	nilMap map[string]int
	a, b2  *node          // shared below
	mp     map[*node]bool // after a and b2: keys met before sort by their number
	self   *weights
	selfN  *[3]int16
	sh     []shape
	any    any
	t      time.Time
	rng    *rand.PCG
	ext    *outside
	extNil *outside
	fn     func() int // not encoded: the target's is kept
	cfg    string     // skipped in the tests that say so
	w      weights
	words  []string // repeated: short ones are written once
}

func newGraph() *graph {
	a := &node{name: "a", w: weights{a: [3]int16{1, -2, 3}, b: []float64{0.5, math.Inf(1), math.Copysign(0, -1)}}}
	b := &node{name: "b", next: a}
	a.next = b
	a.peers = []*node{b, a, nil}
	g := &graph{b: true, i: -7, i8: -128, i64: math.MinInt64, u: 7, u8: 255, u32: math.MaxUint32, f32: 1.5, f64: -0.0,
		s: "héllo\x00", bs: []byte{1, 2, 3}, ints: []int32{-1, 0, 1 << 30}, empty: []int{}, fs: []float64{1, 2},
		arr: [2]string{"x", ""}, m: map[string]int{"z": 1, "a": 2, "m": 3},
		mk: map[key][]string{{1, "b"}: {"p"}, {1, "a"}: nil, {0, "z"}: {}},
		a:  a, b2: b, sh: []shape{square{2}, &circle{1}, nil}, any: a,
		t:   time.Date(2025, 3, 4, 5, 6, 7, 8, time.UTC),
		rng: rand.NewPCG(1, 2), ext: &outside{id: 42}, cfg: "config", w: weights{b: []float64{}},
		words: []string{"queued", "running", "queued", "", strings.Repeat("long", 20), strings.Repeat("long", 20), "héllo\x00"}}
	g.mp = map[*node]bool{a: true, b: false}
	g.self = &g.w
	g.selfN = &g.w.a
	g.rng.Uint64()
	return g
}

var externs = []*outside{{id: 0}, {id: 1}, {id: 42}}

func testOptions() *Options {
	return &Options{
		Externs: []Extern{ExternOf(func(o *outside) (int64, bool) { return 2, externs[2] == o },
			func(id int64) (*outside, error) { return externs[id], nil })},
		Types: []reflect.Type{reflect.TypeFor[square](), reflect.TypeFor[*circle](), reflect.TypeFor[*node]()},
	}
}

// TestRoundTrip: a graph decoded into a fresh value is the same graph:
// every field, shared pointers shared, cycles, nil kept apart from empty,
// interfaces, binary forms, pointers into the root, externs by identity;
// func fields keep the target's; and it encodes to the same bytes again.
func TestRoundTrip(t *testing.T) {
	g := newGraph()
	g.ext = externs[2]
	data, err := Marshal(g, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	again, _ := Marshal(g, testOptions())
	if !bytes.Equal(data, again) {
		t.Fatal("two encodings of one graph differ")
	}
	var got graph
	got.fn = func() int { return 5 }
	if err := Unmarshal(data, &got, testOptions()); err != nil {
		t.Fatal(err)
	}
	if got.fn == nil || got.fn() != 5 {
		t.Error("the target's func field was not kept")
	}
	if _, ok := got.mp[got.a]; !ok || len(got.mp) != 2 || !got.mp[got.a] || got.mp[got.b2] {
		t.Error("a map keyed by pointers does not find the decoded objects")
	}
	redo, err := Marshal(&got, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(redo, data) {
		t.Error("the decoded graph encodes to other bytes")
	}
	got.fn, g.fn = nil, nil
	got.mp, g.mp = nil, nil // (DeepEqual compares pointer keys by address)
	if !reflect.DeepEqual(&got, g) {
		t.Errorf("decoded graph differs:\n%#v\nwant\n%#v", got, *g)
	}
	// identities
	switch {
	case got.a.next != got.b2 || got.b2.next != got.a || got.a.peers[1] != got.a:
		t.Error("shared pointers or cycles were not kept")
	case got.any.(*node) != got.a:
		t.Error("a pointer in an interface is not the same object")
	case got.self != &got.w || got.selfN != &got.w.a:
		t.Error("pointers into the root do not point into the decoded root")
	case got.ext != externs[2]:
		t.Error("the extern was not resolved to its object")
	case got.nilBs != nil || got.nilSl != nil || got.nilMap != nil || got.empty == nil || got.w.b == nil:
		t.Error("nil and empty were not kept apart")
	case !math.Signbit(got.a.w.b[2]):
		t.Error("-0 lost its sign")
	}
	if got.rng.Uint64() != g.rng.Uint64() {
		t.Error("the generator's state was not kept")
	}
	// NaNs keep their bits
	nan := &struct{ f []float64 }{[]float64{math.Float64frombits(0x7ff8000000000123)}}
	data, _ = Marshal(nan, nil)
	var back struct{ f []float64 }
	if err := Unmarshal(data, &back, nil); err != nil || math.Float64bits(back.f[0]) != 0x7ff8000000000123 {
		t.Errorf("NaN: %v %v", back.f, err)
	}
}

// TestSkip: skipped fields are left out and keep the target's value; a
// field name that does not exist is an error.
func TestSkip(t *testing.T) {
	g := newGraph()
	opts := testOptions()
	opts.Skip = []Field{{reflect.TypeFor[graph](), "cfg"}, {reflect.TypeFor[node](), "peers"}}
	data, err := Marshal(g, opts)
	if err != nil {
		t.Fatal(err)
	}
	got := graph{cfg: "fresh"}
	if err := Unmarshal(data, &got, opts); err != nil {
		t.Fatal(err)
	}
	if got.cfg != "fresh" || got.a.peers != nil || got.a.name != "a" {
		t.Errorf("cfg %q, peers %v: want the target's", got.cfg, got.a.peers)
	}
	opts.Skip = []Field{{reflect.TypeFor[graph](), "nosuch"}}
	if _, err := Marshal(g, opts); err == nil || !strings.Contains(err.Error(), "nosuch") {
		t.Errorf("Skip of a missing field: %v", err)
	}
}

// TestDecodeIntoExisting: an object the target already points to is decoded
// into (its func fields survive), unless the target shares it between two
// fields that the data does not share.
func TestDecodeIntoExisting(t *testing.T) {
	type inner struct {
		n  int
		fn func() int
	}
	type outer struct{ x, y *inner }
	src := &outer{x: &inner{n: 1}, y: &inner{n: 2}}
	data, err := Marshal(src, nil)
	if err != nil {
		t.Fatal(err)
	}
	keep := &inner{fn: func() int { return 9 }}
	dst := &outer{x: keep, y: keep}
	if err := Unmarshal(data, dst, nil); err != nil {
		t.Fatal(err)
	}
	if dst.x != keep || dst.x.n != 1 || dst.x.fn() != 9 {
		t.Error("the target's object was not decoded into")
	}
	if dst.y == keep || dst.y.n != 2 {
		t.Error("one target object was decoded into twice")
	}
}

type v1 struct {
	A     int
	Gone  []string
	Keep  string
	Inner struct{ X, Y float64 }
}

type v2 struct {
	Keep  string
	A     int64
	Added float64
	Inner struct{ Y float64 }
}

// TestEvolution: decoding matches fields by name; a field this program
// lacks is skipped, one the data lacks keeps the target's value, and a
// change of kind is an error naming the field.
func TestEvolution(t *testing.T) {
	src := &v1{A: 3, Gone: []string{"x"}, Keep: "k", Inner: struct{ X, Y float64 }{1, 2}}
	data, err := Marshal(src, nil)
	if err != nil {
		t.Fatal(err)
	}
	// the names differ (another type), so decode through a renaming wrapper
	data = bytes.Replace(data, []byte(typeName(reflect.TypeFor[v1]())), []byte(typeName(reflect.TypeFor[v2]())), 1)
	got := v2{Added: 7}
	if err := Unmarshal(data, &got, nil); err != nil {
		t.Fatal(err)
	}
	if got.Keep != "k" || got.A != 3 || got.Added != 7 || got.Inner.Y != 2 {
		t.Errorf("got %+v", got)
	}
	type v3 struct{ Inner struct{ Y string } }
	data, _ = Marshal(src, nil)
	data = bytes.Replace(data, []byte(typeName(reflect.TypeFor[v1]())), []byte(typeName(reflect.TypeFor[v3]())), 1)
	var bad v3
	if err := Unmarshal(data, &bad, nil); err == nil || !strings.Contains(err.Error(), "Inner.Y") {
		t.Errorf("a kind change: %v", err)
	}
	var other graph
	data, _ = Marshal(src, nil)
	if err := Unmarshal(data, &other, nil); err == nil || !strings.Contains(err.Error(), "v1") {
		t.Errorf("decoding into another type: %v", err)
	}
}

// TestRefused: what cannot be encoded exactly is an error naming it.
func TestRefused(t *testing.T) {
	type withChan struct {
		ok int
		ch chan int
	}
	if _, err := Marshal(&withChan{}, nil); err == nil || !strings.Contains(err.Error(), ".ch") {
		t.Errorf("chan: %v", err)
	}
	type into struct {
		arr []weights
		p   *weights
		q   *float64
		obj *weights
	}
	x := &into{arr: []weights{{}, {}}}
	x.p = &x.arr[1]
	if _, err := Marshal(x, nil); err == nil || !strings.Contains(err.Error(), "into the middle") {
		t.Errorf("a pointer into a slice of structs: %v", err)
	}
	y := &into{obj: &weights{}}
	y.p = y.obj
	if _, err := Marshal(y, nil); err != nil {
		t.Errorf("the same object twice: %v", err)
	}
}

// TestCorrupt: every truncation and every single-byte change of an
// encoding decodes to an error or a value, never a panic.
func TestCorrupt(t *testing.T) {
	data, err := Marshal(newGraph(), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < len(data); n++ {
		var g graph
		if Unmarshal(data[:n], &g, testOptions()) == nil {
			t.Fatalf("a truncation to %d of %d bytes decoded", n, len(data))
		}
	}
	for i := range data {
		c := bytes.Clone(data)
		c[i] ^= 0x55
		var g graph
		_ = Unmarshal(c, &g, testOptions())
	}
}

func FuzzUnmarshal(f *testing.F) {
	data, err := Marshal(newGraph(), testOptions())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	small, _ := Marshal(&v1{A: 1, Gone: []string{"a"}}, nil)
	f.Add(small)
	if old, err := Marshal(&recV1{Name: "n", Count: 1, Gone: []string{"g"}}, nil); err == nil {
		f.Add(old)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var g graph
		_ = Unmarshal(data, &g, testOptions())
		var v v1
		_ = Unmarshal(data, &v, nil)
		var r recV2 // strictly, with renames and aliases (schema_test.go)
		_ = Unmarshal(data, &r, &Options{Strict: true, Aliases: map[string]reflect.Type{v1name: reflect.TypeFor[recV2]()},
			Renames: []Rename{{Type: reflect.TypeFor[recV2](), Old: "Name", New: "Title"}, {Type: reflect.TypeFor[recV2](), Old: "Gone"}}})
	})
}
