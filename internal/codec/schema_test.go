package codec

import (
	"reflect"
	"strings"
	"testing"
)

// Two builds of one type: v1 as an older build wrote it, v2 as this one
// has it (the wire names are set apart by the types' names, so the tests
// alias v1's name to v2's type, as Options.Aliases does for a moved type).
type recV1 struct {
	Name  string
	Count int
	Gone  []string
}

type recV2 struct {
	Title string // Name, renamed
	Count int
	Added float64 // new: its fresh value
}

func v1data(t *testing.T) []byte {
	t.Helper()
	data, err := Marshal(&recV1{Name: "n", Count: 3, Gone: []string{"x"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

var v1name = typeName(reflect.TypeFor[recV1]())

// TestStrictRefusesDroppedFields: decoding strictly, a field the data holds
// and the target has not (renamed, or removed) is an error naming it;
// without Strict it is dropped, as before.
func TestStrictRefusesDroppedFields(t *testing.T) {
	data := v1data(t)
	alias := map[string]reflect.Type{v1name: reflect.TypeFor[recV2]()}
	var lax recV2
	if err := Unmarshal(data, &lax, &Options{Aliases: alias}); err != nil || lax.Count != 3 || lax.Title != "" {
		t.Fatalf("lax decoding: %+v, %v", lax, err)
	}
	var strict recV2
	err := Unmarshal(data, &strict, &Options{Aliases: alias, Strict: true})
	if err == nil || !strings.Contains(err.Error(), ".Name") || !strings.Contains(err.Error(), "Renames") {
		t.Fatalf("strict decoding of a renamed field: %v, want an error naming Name", err)
	}
}

// TestRenames: a field renamed (Name → Title) decodes into its new name,
// one removed on purpose (Gone → "") is dropped, a field the data lacks
// keeps its fresh value, all strictly.
func TestRenames(t *testing.T) {
	v2 := reflect.TypeFor[recV2]()
	got := recV2{Added: 1.5}
	err := Unmarshal(v1data(t), &got, &Options{Strict: true, Aliases: map[string]reflect.Type{v1name: v2},
		Renames: []Rename{{Type: v2, Old: "Name", New: "Title"}, {Type: v2, Old: "Gone"}}})
	if err != nil {
		t.Fatal(err)
	}
	if want := (recV2{Title: "n", Count: 3, Added: 1.5}); got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	// a rename to a field the type does not have is the caller's error
	err = Unmarshal(v1data(t), &got, &Options{Aliases: map[string]reflect.Type{v1name: v2},
		Renames: []Rename{{Type: v2, Old: "Name", New: "Nope"}}})
	if err == nil || !strings.Contains(err.Error(), "Nope") {
		t.Fatalf("a rename to no field: %v", err)
	}
}

// TestRootOfAnotherName: without an alias, data of another type (a type
// that moved or was renamed) is refused, naming both.
func TestRootOfAnotherName(t *testing.T) {
	var got recV2
	err := Unmarshal(v1data(t), &got, nil)
	if err == nil || !strings.Contains(err.Error(), "recV1") {
		t.Fatalf("err = %v", err)
	}
}

// TestSchema: the schema names every field of every type reachable, with
// its kind; it changes with a field's name, kind or type, or a type's
// name, and not otherwise; skipped fields are left out.
func TestSchema(t *testing.T) {
	type a struct {
		X int
		Y []string
		f func()
	}
	type b struct {
		X int
		Y []string
	}
	type c struct {
		X int
		Z []string
	}
	type d struct {
		X uint
		Y []string
	}
	schema := func(opts *Options, t2 reflect.Type) string {
		s, err := Schema(opts, t2)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	sa := schema(nil, reflect.TypeFor[a]())
	for _, w := range []string{"struct", ".a X:1 Y:2", "1 int int", "2 slice []string of 3", "3 string string"} {
		if !strings.Contains(sa, w) {
			t.Errorf("schema %q lacks %q", sa, w)
		}
	}
	if strings.Contains(sa, " f:") {
		t.Errorf("a func field is in the schema: %q", sa)
	}
	if sa != schema(nil, reflect.TypeFor[a]()) {
		t.Error("the schema of one type differs between calls")
	}
	fp := Fingerprint(sa)
	for _, other := range []reflect.Type{reflect.TypeFor[b](), reflect.TypeFor[c](), reflect.TypeFor[d]()} {
		if Fingerprint(schema(nil, other)) == fp {
			t.Errorf("%s has a's fingerprint", other)
		}
	}
	skipped := schema(&Options{Skip: []Field{{Type: reflect.TypeFor[a](), Name: "Y"}}}, reflect.TypeFor[a]())
	if strings.Contains(skipped, "Y:") {
		t.Errorf("a skipped field is in the schema: %q", skipped)
	}
	if _, err := Schema(nil, reflect.TypeFor[struct{ ch chan int }]()); err == nil {
		t.Error("a schema of a type the codec cannot encode")
	}
}
