// Package perturb changes any value in place, for tests that check that
// every field of a state is seen (by a digest, an export, a comparison):
// perturb each field in turn and the check must notice.
package perturb

import (
	"reflect"
	"testing"
	"unsafe"
)

// Settable returns v (addressable), writable even if it is an unexported
// field.
func Settable(v reflect.Value) reflect.Value {
	return reflect.NewAt(v.Type(), unsafe.Pointer(v.UnsafeAddr())).Elem()
}

// Value changes v (addressable) in place, whatever its kind, to a value it
// had not: numbers move, booleans flip, strings grow; slices and pointers
// change their first element (or get one), arrays and structs their first;
// a func becomes nil, or one that returns zero values when it was nil.
// A kind it cannot change (a map, a channel) fails the test.
func Value(t testing.TB, v reflect.Value) {
	t.Helper()
	v = Settable(v)
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(v.Int() + 1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(v.Uint() + 1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(v.Float() + 1.5)
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.String:
		v.SetString(v.String() + "x")
	case reflect.Slice:
		if v.Len() > 0 {
			Value(t, v.Index(0))
		} else {
			v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		}
	case reflect.Array:
		Value(t, v.Index(0))
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		} else {
			Value(t, v.Elem())
		}
	case reflect.Struct:
		Value(t, v.Field(0))
	case reflect.Func:
		if v.IsNil() {
			v.Set(reflect.MakeFunc(v.Type(), func([]reflect.Value) []reflect.Value {
				out := make([]reflect.Value, v.Type().NumOut())
				for i := range out {
					out[i] = reflect.Zero(v.Type().Out(i))
				}
				return out
			}))
		} else {
			v.Set(reflect.Zero(v.Type()))
		}
	default:
		t.Fatalf("perturb: kind %s", v.Kind())
	}
}
