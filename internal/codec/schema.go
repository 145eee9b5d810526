package codec

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"reflect"
	"strings"
)

// Schema describes the types that an encoding of values of the root types
// holds, as Marshal compiles them with opts (its Skip; func fields left
// out): one line per type, in the order Marshal first meets them from the
// roots in turn, with its wire kind and name and, by kind, its element
// types (by line number), its length, or its fields (name and type). An
// interface is described by its name only: the dynamic types it may hold
// are not known from the types alone, so pass them as roots too.
//
// Two builds whose Schema of the same roots is equal encode those types
// alike: their data is exchangeable field for field. A change of a field's
// name, kind, type or order, of a type's name or package, changes it.
// Fingerprint hashes it, for a header.
func Schema(opts *Options, roots ...reflect.Type) (string, error) {
	e := &encoder{types: map[reflect.Type]*encType{}}
	if err := e.setOptions(opts); err != nil {
		return "", err
	}
	for _, t := range roots {
		if _, err := e.compile(t, typeName(t)); err != nil {
			return "", err
		}
	}
	var b strings.Builder
	for _, et := range e.list {
		fmt.Fprintf(&b, "%d %s %s", et.id, et.k, typeName(et.t))
		switch et.k {
		case kSlice, kPtr:
			fmt.Fprintf(&b, " of %d", et.elem.id)
		case kArray:
			fmt.Fprintf(&b, " [%d] of %d", et.n, et.elem.id)
		case kMap:
			fmt.Fprintf(&b, " of %d to %d", et.key.id, et.elem.id)
		case kStruct:
			for _, f := range et.fields {
				fmt.Fprintf(&b, " %s:%d", f.name, f.t.id)
			}
		}
		b.WriteByte('\n')
	}
	return b.String(), nil
}

// Fingerprint is a short hash of a Schema: 16 hex digits of its SHA-256.
func Fingerprint(schema string) string {
	sum := sha256.Sum256([]byte(schema))
	return hex.EncodeToString(sum[:8])
}
