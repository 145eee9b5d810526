package codec

import (
	"encoding"
	"fmt"
	"reflect"
	"unsafe"
)

// kind is a wire kind: what the encoding of a value looks like.
type kind uint8

const (
	kBool    kind = iota + 1
	kInt          // zig-zag varint; any signed integer type
	kUint         // varint; any unsigned integer type
	kFloat64      // 8 bytes, little-endian IEEE 754 bits
	kFloat32      // 4 bytes
	kString       // varint length, bytes
	kSlice        // varint (0: nil, n+1: n elements), elements
	kArray        // the elements (length in the type table)
	kMap          // varint (0: nil, n+1), n (key, value) pairs
	kPtr          // see encoder.ptr
	kStruct       // the fields, in table order
	kIface        // varint (0: nil, type id+1), value
	kBinary       // varint length, a BinaryMarshaler's bytes
	kBytes        // []byte: varint (0: nil, n+1), bytes
	numKinds
)

var kindNames = [...]string{"", "bool", "int", "uint", "float64", "float32", "string", "slice", "array", "map", "pointer",
	"struct", "interface", "binary", "bytes"}

func (k kind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", k)
}

var (
	marshalerType   = reflect.TypeFor[encoding.BinaryMarshaler]()
	unmarshalerType = reflect.TypeFor[encoding.BinaryUnmarshaler]()
	appenderType    = reflect.TypeFor[encoding.BinaryAppender]()
)

// binaryType reports whether t encodes through its own binary form (time.Time,
// rand.PCG): a struct whose pointer has MarshalBinary and UnmarshalBinary.
func binaryType(t reflect.Type) bool {
	if t.Kind() != reflect.Struct {
		return false
	}
	pt := reflect.PointerTo(t)
	return pt.Implements(marshalerType) && pt.Implements(unmarshalerType)
}

// typeName names a type on the wire: its package path and name for named
// types (how decoding finds the dynamic type of an interface), its
// String() otherwise (for messages).
func typeName(t reflect.Type) string {
	if t.Name() != "" && t.PkgPath() != "" {
		return t.PkgPath() + "." + t.Name()
	}
	if t.Kind() == reflect.Pointer && t.Elem().Name() != "" && t.Elem().PkgPath() != "" {
		return "*" + t.Elem().PkgPath() + "." + t.Elem().Name()
	}
	return t.String()
}

// encType is the encoder's compiled description of one Go type.
type encType struct {
	id     int
	t      reflect.Type
	k      kind
	size   uintptr
	elem   *encType // slice, array and map elements, pointee
	key    *encType // map key
	n      int      // array length
	fields []encField
	// structy: a slice of these holds values a pointer may point into
	structy bool
	enc     func(e *encoder, p unsafe.Pointer)
}

type encField struct {
	name string
	off  uintptr
	t    *encType
}

// compile returns the encType of t, building it (and those it refers to)
// on first use.
func (e *encoder) compile(t reflect.Type, where string) (*encType, error) {
	if et := e.types[t]; et != nil {
		return et, nil
	}
	et := &encType{id: len(e.list), t: t, size: t.Size()}
	e.types[t] = et
	e.list = append(e.list, et)
	if err := e.build(et, where); err != nil {
		return nil, err
	}
	return et, nil
}

func (e *encoder) build(et *encType, where string) error {
	t := et.t
	if binaryType(t) {
		et.k, et.enc = kBinary, encBinary(t)
		return nil
	}
	switch t.Kind() {
	case reflect.Bool:
		et.k, et.enc = kBool, encBool
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		et.k, et.enc = kInt, encInt(t.Kind())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		et.k, et.enc = kUint, encUint(t.Kind())
	case reflect.Float64:
		et.k, et.enc = kFloat64, encFloat64
	case reflect.Float32:
		et.k, et.enc = kFloat32, encFloat32
	case reflect.String:
		et.k, et.enc = kString, encString
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 && !binaryType(t.Elem()) {
			et.k, et.enc = kBytes, encBytes
			return nil
		}
		elem, err := e.compile(t.Elem(), where+"[]")
		if err != nil {
			return err
		}
		elem.structy = t.Elem().Kind() == reflect.Struct || t.Elem().Kind() == reflect.Array
		et.k, et.elem = kSlice, elem
		et.enc = encSlice(et)
	case reflect.Array:
		elem, err := e.compile(t.Elem(), where+"[]")
		if err != nil {
			return err
		}
		et.k, et.elem, et.n = kArray, elem, t.Len()
		et.enc = encArray(et)
	case reflect.Map:
		key, err := e.compile(t.Key(), where+"[key]")
		if err != nil {
			return err
		}
		elem, err := e.compile(t.Elem(), where+"[value]")
		if err != nil {
			return err
		}
		et.k, et.key, et.elem = kMap, key, elem
		et.enc = encMap(et)
	case reflect.Pointer:
		elem, err := e.compile(t.Elem(), "*"+where)
		if err != nil {
			return err
		}
		et.k, et.elem, et.enc = kPtr, elem, func(e *encoder, p unsafe.Pointer) { e.ptr(et, *(*unsafe.Pointer)(p)) }
	case reflect.Interface:
		et.k, et.enc = kIface, encIface(t)
	case reflect.Struct:
		et.k = kStruct
		skip := e.skip[t]
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if f.Type.Kind() == reflect.Func || skip[f.Name] {
				continue
			}
			ft, err := e.compile(f.Type, where+"."+f.Name)
			if err != nil {
				return err
			}
			et.fields = append(et.fields, encField{name: f.Name, off: f.Offset, t: ft})
		}
		et.enc = encStruct(et)
	default:
		return fmt.Errorf("codec: %s (in %s): %s values cannot be encoded", where, typeName(t), t.Kind())
	}
	return nil
}

// The type table, written after the values:
//
//	per type: kind, name, then slice/pointer: elem; array: length, elem;
//	map: key, elem; struct: the field count, then (name, type) per field
//	root type id

func (e *encoder) table() {
	e.uvarint(uint64(len(e.list)))
	for _, et := range e.list {
		e.buf = append(e.buf, byte(et.k))
		e.string(typeName(et.t))
		switch et.k {
		case kSlice, kPtr:
			e.uvarint(uint64(et.elem.id))
		case kArray:
			e.uvarint(uint64(et.n))
			e.uvarint(uint64(et.elem.id))
		case kMap:
			e.uvarint(uint64(et.key.id))
			e.uvarint(uint64(et.elem.id))
		case kStruct:
			e.uvarint(uint64(len(et.fields)))
			for _, f := range et.fields {
				e.string(f.name)
				e.uvarint(uint64(f.t.id))
			}
		}
	}
}

// wireType is a type as the encoding's table describes it.
type wireType struct {
	id     int
	k      kind
	name   string
	elem   int
	key    int
	n      int
	fields []wireField
	// min is 1 + the fewest bytes a value takes, once known
	min int
}

type wireField struct {
	name string
	t    int
}

// readTable parses the type table at data[off:].
func readTable(data []byte, off int) ([]*wireType, int, error) {
	r := &decoder{data: data, pos: off}
	n := r.count(1 << 20)
	types := make([]*wireType, 0, min(n, 1024))
	for i := 0; i < n && r.err == nil; i++ {
		wt := &wireType{id: i, k: kind(r.byte()), name: r.readString()}
		switch wt.k {
		case kSlice, kPtr:
			wt.elem = r.count(n)
		case kArray:
			wt.n = r.count(1 << 20)
			wt.elem = r.count(n)
		case kMap:
			wt.key = r.count(n)
			wt.elem = r.count(n)
		case kStruct:
			nf := r.count(1 << 16)
			for j := 0; j < nf && r.err == nil; j++ {
				wt.fields = append(wt.fields, wireField{name: r.readString(), t: r.count(n)})
			}
		case kBool, kInt, kUint, kFloat64, kFloat32, kString, kIface, kBinary, kBytes:
		default:
			r.fail("type %d: unknown kind %d", i, wt.k)
		}
		types = append(types, wt)
	}
	root := r.count(n)
	if r.err == nil && r.pos != len(data) {
		r.fail("%d bytes after the table", len(data)-r.pos)
	}
	if r.err != nil {
		return nil, 0, fmt.Errorf("codec: type table: %w", r.err)
	}
	// every type a type refers to is in the table
	ok := func(id int) bool { return id < len(types) }
	for _, wt := range types {
		bad := false
		switch wt.k {
		case kSlice, kPtr, kArray:
			bad = !ok(wt.elem)
		case kMap:
			bad = !ok(wt.key) || !ok(wt.elem)
		case kStruct:
			for _, f := range wt.fields {
				bad = bad || !ok(f.t)
			}
		}
		if bad {
			return nil, 0, fmt.Errorf("codec: type table: type %d refers to a type not in the table", wt.id)
		}
	}
	if !ok(root) {
		return nil, 0, fmt.Errorf("codec: type table: no root type")
	}
	// and none holds itself by value (only through pointers, slices, maps)
	state := make([]uint8, len(types)) // 0 unseen, 1 on the path, 2 done
	var visit func(id int) bool
	visit = func(id int) bool {
		switch state[id] {
		case 1:
			return false
		case 2:
			return true
		}
		state[id] = 1
		wt := types[id]
		switch wt.k {
		case kArray:
			if !visit(wt.elem) {
				return false
			}
		case kStruct:
			for _, f := range wt.fields {
				if !visit(f.t) {
					return false
				}
			}
		}
		state[id] = 2
		return true
	}
	for id := range types {
		if !visit(id) {
			return nil, 0, fmt.Errorf("codec: type table: type %d holds itself", id)
		}
	}
	return types, root, nil
}
