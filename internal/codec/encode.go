package codec

import (
	"bytes"
	"encoding"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strings"
	"unsafe"
)

// magic starts every encoding; the version byte after it changes only if
// the wire format does.
var magic = []byte("GDVC\x01")

// Options say how to encode or decode one graph. The same options must be
// given to Marshal and Unmarshal (Externs in the same order).
type Options struct {
	// Externs are pointer types whose objects are owned outside the graph.
	Externs []Extern
	// Skip lists struct fields that are not encoded: state the decoding
	// side rebuilds itself (configuration it is given, a part encoded
	// separately). Decoding keeps the target's value. Naming a field the
	// type does not have is an error.
	Skip []Field
	// Types are the dynamic types interfaces in the graph may hold, for
	// decoding: an interface is decoded to the type of the value the
	// target holds there, or else to one of these with the same name.
	Types []reflect.Type
	// SizeHint, when positive, is the expected size of the encoding (the
	// previous one's, say): the buffer starts that large.
	SizeHint int
	// Strict, for decoding: a struct field that the data holds and the
	// target's type does not have is an error naming it (without Strict it
	// is dropped), unless Renames says where it went. Data written by
	// another build (a store's snapshots) is decoded strictly, so that a
	// renamed or removed field is never silently lost.
	Strict bool
	// Renames, for decoding: struct fields the data may hold under an
	// older name, and where they went (see Rename).
	Renames []Rename
	// Aliases, for decoding: the older wire names of types that moved to
	// another package or were renamed ("example.com/pkg.T", or
	// "*example.com/pkg.T" for a pointer type), and the types they are
	// now: an interface holding one, or a root of that name, decodes to
	// the type given.
	Aliases map[string]reflect.Type
}

// Rename says that the field Old of the struct type Type (as data written
// by an older build holds it) is now the field New; New "" says that the
// field was removed on purpose, and is dropped even when decoding
// strictly. The field's kind must not have changed.
type Rename struct {
	Type     reflect.Type
	Old, New string
}

// Field names a struct field.
type Field struct {
	Type reflect.Type // a struct type
	Name string
}

// Extern describes a pointer type whose objects the graph does not own:
// Ref gives the number that stands for an object (false: the object is
// not an extern one after all, and is encoded as any other), Deref the
// object a number stands for. Build one with ExternOf.
type Extern struct {
	Type  reflect.Type // a pointer type
	Ref   func(ptr any) (int64, bool)
	Deref func(id int64) (any, error)
}

// ExternOf makes an Extern for *T.
func ExternOf[T any](ref func(*T) (int64, bool), deref func(int64) (*T, error)) Extern {
	return Extern{
		Type: reflect.TypeFor[*T](),
		Ref:  func(p any) (int64, bool) { return ref(p.(*T)) },
		Deref: func(id int64) (any, error) {
			p, err := deref(id)
			if err != nil {
				return nil, err
			}
			if p == nil {
				return nil, fmt.Errorf("%s %d: none", reflect.TypeFor[*T](), id)
			}
			return p, nil
		},
	}
}

// Pointer tags.
const (
	tagNil = iota
	tagNew
	tagRef
	tagExtern
	tagRoot // a field of the root: a path of field names follows
)

type objKey struct {
	p unsafe.Pointer
	t reflect.Type
}

// span is a range of memory the encoded values occupy: an object a pointer
// leads to (obj), the root, or the elements of a slice of structs.
type span struct {
	p    uintptr
	size uintptr
	obj  bool
	t    reflect.Type
}

type encoder struct {
	buf     []byte
	types   map[reflect.Type]*encType
	list    []*encType
	skip    map[reflect.Type]map[string]bool
	externs map[reflect.Type]int
	ext     []Extern
	// objs numbers the objects met, by address; objT is each one's type.
	// Another type at a known address (a struct and its first field) is
	// another object, numbered in objs2.
	objs  map[unsafe.Pointer]uint64
	objT  []reflect.Type
	objs2 map[objKey]uint64
	nobj  uint64
	// strs numbers the short strings met (each is written once)
	strs  map[string]uint64
	spans []span
	root  unsafe.Pointer
	rootT reflect.Type
	err   error
	// peek is set while a map key is encoded only to order the map: no
	// object is registered or followed.
	peek bool
}

// Marshal encodes the graph reachable from root, a non-nil pointer.
func Marshal(root any, opts *Options) ([]byte, error) {
	rv := reflect.ValueOf(root)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return nil, fmt.Errorf("codec: Marshal needs a non-nil pointer, got %T", root)
	}
	e := &encoder{types: map[reflect.Type]*encType{}, objs: map[unsafe.Pointer]uint64{}, objs2: map[objKey]uint64{},
		strs: map[string]uint64{}}
	if opts != nil && opts.SizeHint > 0 {
		e.buf = make([]byte, 0, opts.SizeHint+opts.SizeHint/8)
	}
	e.buf = append(e.buf, magic...)
	if err := e.setOptions(opts); err != nil {
		return nil, err
	}
	rt := rv.Type().Elem()
	et, err := e.compile(rt, typeName(rt))
	if err != nil {
		return nil, err
	}
	e.root, e.rootT = rv.UnsafePointer(), rt
	e.objs[e.root] = 0
	e.objT = append(e.objT, rt)
	e.nobj = 1
	e.spans = append(e.spans, span{p: uintptr(e.root), size: rt.Size(), t: rt})
	et.enc(e, e.root)
	if e.err != nil {
		return nil, e.err
	}
	if err := e.checkSpans(); err != nil {
		return nil, err
	}
	off := len(e.buf)
	e.table()
	e.uvarint(uint64(et.id))
	e.buf = binary.LittleEndian.AppendUint64(e.buf, uint64(off))
	return e.buf, nil
}

func (e *encoder) setOptions(opts *Options) error {
	if opts == nil {
		return nil
	}
	e.skip = map[reflect.Type]map[string]bool{}
	for _, f := range opts.Skip {
		if f.Type == nil || f.Type.Kind() != reflect.Struct {
			return fmt.Errorf("codec: Skip %v.%s: not a struct type", f.Type, f.Name)
		}
		if _, ok := f.Type.FieldByName(f.Name); !ok {
			return fmt.Errorf("codec: Skip: %s has no field %s", typeName(f.Type), f.Name)
		}
		if e.skip[f.Type] == nil {
			e.skip[f.Type] = map[string]bool{}
		}
		e.skip[f.Type][f.Name] = true
	}
	e.externs = map[reflect.Type]int{}
	for i, x := range opts.Externs {
		if x.Type == nil || x.Type.Kind() != reflect.Pointer || x.Ref == nil || x.Deref == nil {
			return fmt.Errorf("codec: extern %d: needs a pointer type, Ref and Deref", i)
		}
		e.externs[x.Type] = i
	}
	e.ext = opts.Externs
	return nil
}

func (e *encoder) fail(format string, args ...any) {
	if e.err == nil {
		e.err = fmt.Errorf("codec: "+format, args...)
	}
}

func (e *encoder) uvarint(v uint64) { e.buf = binary.AppendUvarint(e.buf, v) }
func (e *encoder) varint(v int64)   { e.buf = binary.AppendVarint(e.buf, v) }
func (e *encoder) string(s string) {
	e.uvarint(uint64(len(s)))
	e.buf = append(e.buf, s...)
}

func encBool(e *encoder, p unsafe.Pointer) {
	b := byte(0)
	if *(*bool)(p) {
		b = 1
	}
	e.buf = append(e.buf, b)
}

func encInt(k reflect.Kind) func(*encoder, unsafe.Pointer) {
	switch k {
	case reflect.Int8:
		return func(e *encoder, p unsafe.Pointer) { e.varint(int64(*(*int8)(p))) }
	case reflect.Int16:
		return func(e *encoder, p unsafe.Pointer) { e.varint(int64(*(*int16)(p))) }
	case reflect.Int32:
		return func(e *encoder, p unsafe.Pointer) { e.varint(int64(*(*int32)(p))) }
	case reflect.Int64:
		return func(e *encoder, p unsafe.Pointer) { e.varint(*(*int64)(p)) }
	}
	return func(e *encoder, p unsafe.Pointer) { e.varint(int64(*(*int)(p))) }
}

func encUint(k reflect.Kind) func(*encoder, unsafe.Pointer) {
	switch k {
	case reflect.Uint8:
		return func(e *encoder, p unsafe.Pointer) { e.uvarint(uint64(*(*uint8)(p))) }
	case reflect.Uint16:
		return func(e *encoder, p unsafe.Pointer) { e.uvarint(uint64(*(*uint16)(p))) }
	case reflect.Uint32:
		return func(e *encoder, p unsafe.Pointer) { e.uvarint(uint64(*(*uint32)(p))) }
	case reflect.Uint64:
		return func(e *encoder, p unsafe.Pointer) { e.uvarint(*(*uint64)(p)) }
	}
	return func(e *encoder, p unsafe.Pointer) { e.uvarint(uint64(*(*uint)(p))) }
}

func encFloat64(e *encoder, p unsafe.Pointer) {
	e.buf = binary.LittleEndian.AppendUint64(e.buf, math.Float64bits(*(*float64)(p)))
}

func encFloat32(e *encoder, p unsafe.Pointer) {
	e.buf = binary.LittleEndian.AppendUint32(e.buf, math.Float32bits(*(*float32)(p)))
}

func encString(e *encoder, p unsafe.Pointer) { e.value(*(*string)(p)) }

// maxShared is the longest string written once and referred to after.
const maxShared = 64

// value writes a string value: varint 2n and n bytes (a new string), or
// 2i+1 for short string number i met before.
func (e *encoder) value(s string) {
	if len(s) > maxShared || e.peek {
		e.uvarint(uint64(len(s)) << 1)
		e.buf = append(e.buf, s...)
		return
	}
	if id, ok := e.strs[s]; ok {
		e.uvarint(id<<1 | 1)
		return
	}
	e.strs[s] = uint64(len(e.strs))
	e.uvarint(uint64(len(s)) << 1)
	e.buf = append(e.buf, s...)
}

// sliceHeader is the layout of a slice.
type sliceHeader struct {
	data unsafe.Pointer
	len  int
	cap  int
}

func encBytes(e *encoder, p unsafe.Pointer) {
	b := *(*[]byte)(p)
	if b == nil {
		e.uvarint(0)
		return
	}
	e.uvarint(uint64(len(b)) + 1)
	e.buf = append(e.buf, b...)
}

func encSlice(et *encType) func(*encoder, unsafe.Pointer) {
	elem := et.elem
	// float64s, the bulk of most states, are copied as they are
	if elem.k == kFloat64 {
		return func(e *encoder, p unsafe.Pointer) {
			h := (*sliceHeader)(p)
			if h.data == nil {
				e.uvarint(0)
				return
			}
			e.uvarint(uint64(h.len) + 1)
			for _, f := range unsafe.Slice((*float64)(h.data), h.len) {
				e.buf = binary.LittleEndian.AppendUint64(e.buf, math.Float64bits(f))
			}
		}
	}
	return func(e *encoder, p unsafe.Pointer) {
		h := (*sliceHeader)(p)
		if h.data == nil {
			e.uvarint(0)
			return
		}
		e.uvarint(uint64(h.len) + 1)
		if elem.structy && h.len > 0 && !e.peek {
			e.spans = append(e.spans, span{p: uintptr(h.data), size: uintptr(h.len) * elem.size, t: et.t})
		}
		for i := 0; i < h.len; i++ {
			elem.enc(e, unsafe.Add(h.data, uintptr(i)*elem.size))
		}
	}
}

func encArray(et *encType) func(*encoder, unsafe.Pointer) {
	elem, n := et.elem, et.n
	return func(e *encoder, p unsafe.Pointer) {
		for i := 0; i < n; i++ {
			elem.enc(e, unsafe.Add(p, uintptr(i)*elem.size))
		}
	}
}

func encStruct(et *encType) func(*encoder, unsafe.Pointer) {
	return func(e *encoder, p unsafe.Pointer) {
		for i := range et.fields {
			f := &et.fields[i]
			f.t.enc(e, unsafe.Add(p, f.off))
		}
	}
}

func encBinary(t reflect.Type) func(*encoder, unsafe.Pointer) {
	app := reflect.PointerTo(t).Implements(appenderType)
	return func(e *encoder, p unsafe.Pointer) {
		v := reflect.NewAt(t, p).Interface()
		if app {
			// length-prefixed in place: appended, then the prefix made room for
			at := len(e.buf)
			out, err := v.(encoding.BinaryAppender).AppendBinary(e.buf)
			if err != nil {
				e.fail("%s: %v", typeName(t), err)
				return
			}
			n := len(out) - at
			var pre [binary.MaxVarintLen64]byte
			k := binary.PutUvarint(pre[:], uint64(n))
			out = slices.Insert(out, at, pre[:k]...)
			e.buf = out
			return
		}
		b, err := v.(encoding.BinaryMarshaler).MarshalBinary()
		if err != nil {
			e.fail("%s: %v", typeName(t), err)
			return
		}
		e.uvarint(uint64(len(b)))
		e.buf = append(e.buf, b...)
	}
}

func encIface(t reflect.Type) func(*encoder, unsafe.Pointer) {
	return func(e *encoder, p unsafe.Pointer) {
		v := reflect.NewAt(t, p).Elem()
		if v.IsNil() {
			e.uvarint(0)
			return
		}
		dv := v.Elem()
		dt, err := e.compile(dv.Type(), "("+typeName(t)+")")
		if err != nil {
			e.fail("%v", err)
			return
		}
		e.uvarint(uint64(dt.id) + 1)
		if dv.Kind() == reflect.Pointer {
			dt.enc(e, unsafe.Pointer(&[]unsafe.Pointer{dv.UnsafePointer()}[0]))
			return
		}
		tmp := reflect.New(dv.Type())
		tmp.Elem().Set(dv)
		dt.enc(e, tmp.UnsafePointer())
	}
}

// ptr encodes a pointer of type et to q: nil; an object new to the graph
// (its value follows); one met before (its number); an extern one; or a
// field of the root (its path).
func (e *encoder) ptr(et *encType, q unsafe.Pointer) {
	if q == nil {
		e.uvarint(tagNil)
		return
	}
	if i, ok := e.externs[et.t]; ok {
		if id, ok := e.ext[i].Ref(reflect.NewAt(et.t.Elem(), q).Interface()); ok {
			e.uvarint(tagExtern)
			e.uvarint(uint64(i))
			e.varint(id)
			return
		}
	}
	elem := et.elem
	id, ok := e.objs[q]
	if ok && e.objT[id] != elem.t {
		id, ok = e.objs2[objKey{q, elem.t}]
	}
	if ok {
		e.uvarint(tagRef)
		e.uvarint(id)
		return
	}
	if r := uintptr(e.root); uintptr(q) >= r && uintptr(q) < r+e.rootT.Size() {
		path, ok := fieldPath(e.rootT, uintptr(q)-r, elem.t)
		if !ok {
			e.fail("a %s points into the root %s at offset %d, which is no field of that type", typeName(et.t), typeName(e.rootT), uintptr(q)-r)
			return
		}
		e.uvarint(tagRoot)
		e.uvarint(uint64(len(path)))
		for _, s := range path {
			e.string(s)
		}
		return
	}
	if e.peek {
		// ordering map keys: an object not met yet sorts after every
		// other, by address
		e.uvarint(math.MaxUint32)
		e.uvarint(uint64(uintptr(q)))
		return
	}
	if elem.size > 0 {
		if _, taken := e.objs[q]; taken {
			e.objs2[objKey{q, elem.t}] = e.nobj
		} else {
			e.objs[q] = e.nobj
		}
		e.spans = append(e.spans, span{p: uintptr(q), size: elem.size, obj: true, t: elem.t})
	}
	e.objT = append(e.objT, elem.t)
	e.nobj++
	e.uvarint(tagNew)
	elem.enc(e, q)
}

// fieldPath finds the field of t at offset off whose type is want, as a
// path of field names (and [i] for array elements).
func fieldPath(t reflect.Type, off uintptr, want reflect.Type) ([]string, bool) {
	if off == 0 && t == want {
		return nil, true
	}
	switch t.Kind() {
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if off >= f.Offset && off < f.Offset+max(f.Type.Size(), 1) {
				if rest, ok := fieldPath(f.Type, off-f.Offset, want); ok {
					return append([]string{f.Name}, rest...), true
				}
			}
		}
	case reflect.Array:
		if sz := t.Elem().Size(); sz > 0 {
			i := off / sz
			if rest, ok := fieldPath(t.Elem(), off-i*sz, want); ok {
				return append([]string{fmt.Sprintf("[%d]", i)}, rest...), true
			}
		}
	}
	return nil, false
}

// checkSpans refuses pointers into the middle of other objects, of the
// root or of slices of structs: decoding would make copies of them.
func (e *encoder) checkSpans() error {
	sort.Slice(e.spans, func(a, b int) bool {
		x, y := e.spans[a], e.spans[b]
		if x.p != y.p {
			return x.p < y.p
		}
		return x.size > y.size
	})
	end, at := uintptr(0), -1
	for i, s := range e.spans {
		if at >= 0 && s.p < end && (s.obj || e.spans[at].obj) {
			o := e.spans[at]
			if s.p == o.p && s.size == o.size && s.t == o.t {
				continue // the same memory seen twice (a slice shared by two fields)
			}
			return fmt.Errorf("codec: a pointer to a %s leads into a %s that is encoded elsewhere; decoding would split them (pointers into the middle of objects or slices are not supported)",
				typeName(s.t), typeName(o.t))
		}
		if s.p+s.size > end {
			end, at = s.p+s.size, i
		}
	}
	return nil
}

// mapEntry is one entry of a map being encoded, with its key's bytes for
// ordering.
type mapEntry struct {
	k, v reflect.Value
	sort []byte
	str  string // a string key's value (ordered as strings)
}

func encMap(et *encType) func(*encoder, unsafe.Pointer) {
	key, elem := et.key, et.elem
	return func(e *encoder, p unsafe.Pointer) {
		m := reflect.NewAt(et.t, p).Elem()
		if m.IsNil() {
			e.uvarint(0)
			return
		}
		n := m.Len()
		e.uvarint(uint64(n) + 1)
		if n == 0 {
			return
		}
		// Entries in the order of their keys' encodings (pointers by the
		// number of the object), so that a graph always encodes the same.
		entries := make([]mapEntry, 0, n)
		it := m.MapRange()
		kt, vt := et.t.Key(), et.t.Elem()
		saved, peek := e.buf, e.peek
		strKey := kt.Kind() == reflect.String
		for it.Next() {
			k := reflect.New(kt).Elem()
			k.SetIterKey(it)
			v := reflect.New(vt).Elem()
			v.SetIterValue(it)
			if strKey {
				entries = append(entries, mapEntry{k: k, v: v, str: k.String()})
				continue
			}
			e.buf, e.peek = nil, true
			key.enc(e, k.Addr().UnsafePointer())
			entries = append(entries, mapEntry{k: k, v: v, sort: e.buf})
		}
		e.buf, e.peek = saved, peek
		if strKey {
			slices.SortFunc(entries, func(a, b mapEntry) int { return strings.Compare(a.str, b.str) })
		} else {
			slices.SortFunc(entries, func(a, b mapEntry) int { return bytes.Compare(a.sort, b.sort) })
		}
		for i := range entries {
			key.enc(e, entries[i].k.Addr().UnsafePointer())
			elem.enc(e, entries[i].v.Addr().UnsafePointer())
		}
	}
}

// errTruncated is wrapped by decoding errors of data that ends early.
var errTruncated = errors.New("data ends early")
