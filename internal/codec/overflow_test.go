package codec

import (
	"strings"
	"testing"
)

// TestNarrowerIntegerOverflows: a field decoded into a narrower integer
// type than it was written from (a type and its fields are matched by name
// across builds) is refused when its value does not fit, kept when it does.
func TestNarrowerIntegerOverflows(t *testing.T) {
	signed := func(a int64) []byte { // as one build wrote it
		type rec struct{ A int64 }
		b, err := Marshal(&rec{A: a}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	unsigned := func(a uint64) []byte {
		type rec struct{ A uint64 }
		b, err := Marshal(&rec{A: a}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	asInt8 := func(b []byte) (int64, error) { // as another reads it
		type rec struct{ A int8 }
		var r rec
		err := Unmarshal(b, &r, nil)
		return int64(r.A), err
	}
	asUint8 := func(b []byte) (int64, error) {
		type rec struct{ A uint8 }
		var r rec
		err := Unmarshal(b, &r, nil)
		return int64(r.A), err
	}
	for _, c := range []struct {
		name  string
		data  []byte
		read  func([]byte) (int64, error)
		fails string
		want  int64
	}{
		{"int8 fits", signed(-128), asInt8, "", -128},
		{"int8 overflows", signed(300), asInt8, "overflows an int8", 0},
		{"uint8 fits", unsigned(255), asUint8, "", 255},
		{"uint8 overflows", unsigned(256), asUint8, "overflows a uint8", 0},
	} {
		got, err := c.read(c.data)
		switch {
		case c.fails != "" && (err == nil || !strings.Contains(err.Error(), c.fails)):
			t.Errorf("%s: err %v, want one saying %q", c.name, err, c.fails)
		case c.fails == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.fails == "" && got != c.want:
			t.Errorf("%s: decoded %d, want %d", c.name, got, c.want)
		}
	}
}
