package codec

import (
	"bytes"
	"encoding"
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"unsafe"
)

// decFn decodes one value into p.
type decFn func(d *decoder, p unsafe.Pointer)

// plan is a decFn being built (types may refer to themselves).
type plan struct{ fn decFn }

type planKey struct {
	w int
	t reflect.Type
}

type decObj struct {
	p unsafe.Pointer // nil: the object was in a field this program dropped
	t reflect.Type
}

type decoder struct {
	data  []byte
	pos   int
	end   int // where the values end (the type table begins)
	types []*wireType
	plans map[planKey]*plan
	skips map[int]*plan
	named map[string]reflect.Type
	skip  map[reflect.Type]map[string]bool
	// strict and renames: Options.Strict and Options.Renames (by type,
	// then the field's old name)
	strict  bool
	renames map[reflect.Type]map[string]string
	ext     []Extern
	objs    table[decObj]
	strs    table[string]   // short strings, by number (encoder.value)
	used    map[objKey]bool // objects of the target decoded into
	root    unsafe.Pointer
	rootT   reflect.Type
	err     error
	// steps bounds the elements decoded (values that take no bytes, arrays
	// of empty structs say, could otherwise make a short input endless)
	steps int
}

// step counts one element of a slice, array or map.
func (d *decoder) step() bool {
	d.steps--
	if d.steps < 0 {
		d.fail("the data describes more values than it can hold")
		return false
	}
	return d.err == nil
}

// Unmarshal decodes data, made by Marshal, into root: a non-nil pointer to
// a value of the type that was encoded (a struct of the same name), usually
// a fresh one. See the package comment for what is kept of root's values.
func Unmarshal(data []byte, root any, opts *Options) error {
	rv := reflect.ValueOf(root)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("codec: Unmarshal needs a non-nil pointer, got %T", root)
	}
	if len(data) < len(magic)+8 || !bytes.Equal(data[:len(magic)], magic) {
		return fmt.Errorf("codec: not an encoding of this package (or another version of it)")
	}
	off := binary.LittleEndian.Uint64(data[len(data)-8:])
	if off < uint64(len(magic)) || off > uint64(len(data)-8) {
		return fmt.Errorf("codec: type table at %d: out of range", off)
	}
	types, rootID, err := readTable(data[:len(data)-8], int(off))
	if err != nil {
		return err
	}
	rt := rv.Type().Elem()
	d := &decoder{data: data, pos: len(magic), end: int(off), types: types, plans: map[planKey]*plan{}, skips: map[int]*plan{},
		named: map[string]reflect.Type{}, used: map[objKey]bool{}, root: rv.UnsafePointer(), rootT: rt, steps: 16*len(data) + 1<<16}
	if opts != nil {
		d.ext = opts.Externs
		d.skip = map[reflect.Type]map[string]bool{}
		for _, f := range opts.Skip {
			if d.skip[f.Type] == nil {
				d.skip[f.Type] = map[string]bool{}
			}
			d.skip[f.Type][f.Name] = true
		}
		for _, t := range opts.Types {
			collect(t, d.named)
		}
		d.strict = opts.Strict
		d.renames = map[reflect.Type]map[string]string{}
		for _, r := range opts.Renames {
			if r.Type == nil || r.Type.Kind() != reflect.Struct {
				return fmt.Errorf("codec: Renames %v.%s: not a struct type", r.Type, r.Old)
			}
			if _, ok := r.Type.FieldByName(r.New); r.New != "" && !ok {
				return fmt.Errorf("codec: Renames: %s has no field %s (the new name of %s)", typeName(r.Type), r.New, r.Old)
			}
			if d.renames[r.Type] == nil {
				d.renames[r.Type] = map[string]string{}
			}
			d.renames[r.Type][r.Old] = r.New
		}
		for old, t := range opts.Aliases {
			d.named[old] = t
		}
	}
	collect(rt, d.named)
	w := types[rootID]
	if w.k == kStruct && w.name != typeName(rt) && d.named[w.name] != rt {
		return fmt.Errorf("codec: the data holds a %s, not a %s", w.name, typeName(rt))
	}
	p, err := d.plan(w, rt, typeName(rt))
	if err != nil {
		return err
	}
	d.objs.add(decObj{d.root, rt})
	p.fn(d, d.root)
	if d.err == nil && d.pos != d.end {
		d.fail("%d bytes left after the values", d.end-d.pos)
	}
	return d.err
}

// collect records the named types reachable from t by name, for
// interfaces' dynamic types.
func collect(t reflect.Type, into map[string]reflect.Type) {
	if t.Name() != "" || t.Kind() == reflect.Pointer {
		n := typeName(t)
		if _, ok := into[n]; ok {
			return
		}
		into[n] = t
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array:
		collect(t.Elem(), into)
	case reflect.Map:
		collect(t.Key(), into)
		collect(t.Elem(), into)
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			collect(t.Field(i).Type, into)
		}
	}
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("codec: at byte %d: "+format, append([]any{d.pos}, args...)...)
	}
}

func (d *decoder) byte() byte {
	if d.pos >= len(d.data) {
		d.fail("%w", errTruncated)
		return 0
	}
	b := d.data[d.pos]
	d.pos++
	return b
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.data[min(d.pos, len(d.data)):])
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.pos += n
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.data[min(d.pos, len(d.data)):])
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.pos += n
	return v
}

// count reads a varint that must be at most limit.
func (d *decoder) count(limit int) int {
	v := d.uvarint()
	if v > uint64(limit) {
		d.fail("count %d over its limit %d", v, limit)
		return 0
	}
	return int(v)
}

func (d *decoder) bytes(n int) []byte {
	if n < 0 || n > len(d.data)-d.pos {
		d.fail("%w", errTruncated)
		return nil
	}
	b := d.data[d.pos : d.pos+n]
	d.pos += n
	return b
}

func (d *decoder) readString() string { return string(d.bytes(d.count(len(d.data)))) }

// value reads a string value (encoder.value).
func (d *decoder) value() string {
	x := d.uvarint()
	if x&1 == 1 {
		if id := x >> 1; id < uint64(d.strs.len()) {
			return *d.strs.at(int(id))
		}
		d.fail("no string %d", x>>1)
		return ""
	}
	n := x >> 1
	if n > uint64(len(d.data)-d.pos) {
		d.fail("%w", errTruncated)
		return ""
	}
	s := string(d.bytes(int(n)))
	if n <= maxShared {
		d.strs.add(s)
	}
	return s
}

// length reads a slice's or map's length prefix (0: nil), bounded by what
// the remaining data can hold.
func (d *decoder) length(minSize int) (int, bool) {
	v := d.uvarint()
	if v == 0 || d.err != nil {
		return 0, false
	}
	n := v - 1
	limit := uint64(1 << 12)
	if minSize > 0 {
		limit = uint64(len(d.data)-d.pos) / uint64(minSize)
	}
	if n > limit {
		d.fail("length %d: more than the data holds", n)
		return 0, false
	}
	return int(n), true
}

// minSize is the fewest bytes a value of wire type w takes (the table
// has no type that holds itself by value: readTable checks).
func (d *decoder) minSize(w *wireType, depth int) int {
	if w.min > 0 {
		return w.min - 1
	}
	n := d.minSize1(w, depth)
	w.min = n + 1
	return n
}

func (d *decoder) minSize1(w *wireType, depth int) int {
	switch w.k {
	case kFloat64:
		return 8
	case kFloat32:
		return 4
	case kArray:
		return min(w.n*d.minSize(d.types[w.elem], depth+1), 1<<30)
	case kStruct:
		n := 0
		for _, f := range w.fields {
			n = min(n+d.minSize(d.types[f.t], depth+1), 1<<30)
		}
		return n
	}
	return 1
}

func (d *decoder) wire(id int) *wireType { return d.types[id] }

// plan returns the decoder of wire type w into Go type t.
func (d *decoder) plan(w *wireType, t reflect.Type, where string) (*plan, error) {
	key := planKey{w.id, t}
	if p := d.plans[key]; p != nil {
		return p, nil
	}
	p := &plan{}
	d.plans[key] = p
	fn, err := d.build(w, t, where)
	if err != nil {
		return nil, err
	}
	p.fn = fn
	return p, nil
}

func mismatch(where string, w *wireType, t reflect.Type) error {
	return fmt.Errorf("codec: %s: the data holds a %s (%s), this program has a %s", where, w.k, w.name, typeName(t))
}

func (d *decoder) build(w *wireType, t reflect.Type, where string) (decFn, error) {
	if binaryType(t) {
		if w.k != kBinary {
			return nil, mismatch(where, w, t)
		}
		return decBinary(t), nil
	}
	k := t.Kind()
	switch w.k {
	case kBool:
		if k == reflect.Bool {
			return func(d *decoder, p unsafe.Pointer) { *(*bool)(p) = d.byte() != 0 }, nil
		}
	case kInt:
		if fn := decInt(k); fn != nil {
			return fn, nil
		}
	case kUint:
		if fn := decUint(k); fn != nil {
			return fn, nil
		}
	case kFloat64, kFloat32:
		if k == reflect.Float64 || k == reflect.Float32 {
			return decFloat(w.k, k), nil
		}
	case kString:
		if k == reflect.String {
			return func(d *decoder, p unsafe.Pointer) { *(*string)(p) = d.value() }, nil
		}
	case kBytes:
		if k == reflect.Slice && t.Elem().Kind() == reflect.Uint8 {
			return decBytes(t), nil
		}
	case kSlice:
		if k == reflect.Slice {
			return d.decSlice(w, t, where)
		}
	case kArray:
		if k == reflect.Array && t.Len() == w.n {
			return d.decArray(w, t, where)
		}
	case kMap:
		if k == reflect.Map {
			return d.decMap(w, t, where)
		}
	case kPtr:
		if k == reflect.Pointer {
			return d.decPtr(w, t, where)
		}
	case kStruct:
		if k == reflect.Struct {
			return d.decStruct(w, t, where)
		}
	case kIface:
		if k == reflect.Interface {
			return d.decIface(t, where), nil
		}
	}
	return nil, mismatch(where, w, t)
}

func decInt(k reflect.Kind) decFn {
	switch k {
	case reflect.Int8:
		return decSigned[int8]("an int8")
	case reflect.Int16:
		return decSigned[int16]("an int16")
	case reflect.Int32:
		return decSigned[int32]("an int32")
	case reflect.Int64:
		return func(d *decoder, p unsafe.Pointer) { *(*int64)(p) = d.varint() }
	case reflect.Int:
		return decSigned[int]("an int")
	}
	return nil
}

// decSigned decodes a varint into a T, failing on a value T cannot hold
// (named by what, "an int8").
func decSigned[T int8 | int16 | int32 | int](what string) decFn {
	return func(d *decoder, p unsafe.Pointer) {
		v := d.varint()
		if v != int64(T(v)) {
			d.fail("%d overflows %s", v, what)
		}
		*(*T)(p) = T(v)
	}
}

func decUint(k reflect.Kind) decFn {
	switch k {
	case reflect.Uint8:
		return decUnsigned[uint8]("a uint8")
	case reflect.Uint16:
		return decUnsigned[uint16]("a uint16")
	case reflect.Uint32:
		return decUnsigned[uint32]("a uint32")
	case reflect.Uint64:
		return func(d *decoder, p unsafe.Pointer) { *(*uint64)(p) = d.uvarint() }
	case reflect.Uint:
		return decUnsigned[uint]("a uint")
	}
	return nil
}

// decUnsigned decodes a uvarint into a T, failing on a value T cannot hold.
func decUnsigned[T uint8 | uint16 | uint32 | uint](what string) decFn {
	return func(d *decoder, p unsafe.Pointer) {
		v := d.uvarint()
		if v != uint64(T(v)) {
			d.fail("%d overflows %s", v, what)
		}
		*(*T)(p) = T(v)
	}
}

func (d *decoder) float(wk kind) float64 {
	if wk == kFloat32 {
		b := d.bytes(4)
		if b == nil {
			return 0
		}
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b)))
	}
	b := d.bytes(8)
	if b == nil {
		return 0
	}
	return math.Float64frombits(binary.LittleEndian.Uint64(b))
}

func decFloat(wk kind, k reflect.Kind) decFn {
	if k == reflect.Float32 {
		return func(d *decoder, p unsafe.Pointer) { *(*float32)(p) = float32(d.float(wk)) }
	}
	return func(d *decoder, p unsafe.Pointer) { *(*float64)(p) = d.float(wk) }
}

func decBytes(t reflect.Type) decFn {
	return func(d *decoder, p unsafe.Pointer) {
		n, ok := d.length(1)
		v := reflect.NewAt(t, p).Elem()
		if !ok {
			v.SetZero()
			return
		}
		s := reflect.MakeSlice(t, n, n)
		copy(s.Bytes(), d.bytes(n))
		v.Set(s)
	}
}

func decBinary(t reflect.Type) decFn {
	return func(d *decoder, p unsafe.Pointer) {
		b := d.bytes(d.count(len(d.data)))
		if d.err != nil {
			return
		}
		if err := reflect.NewAt(t, p).Interface().(encoding.BinaryUnmarshaler).UnmarshalBinary(b); err != nil {
			d.fail("%s: %v", typeName(t), err)
		}
	}
}

func (d *decoder) decSlice(w *wireType, t reflect.Type, where string) (decFn, error) {
	ew := d.wire(w.elem)
	ep, err := d.plan(ew, t.Elem(), where+"[]")
	if err != nil {
		return nil, err
	}
	size := t.Elem().Size()
	minSize := d.minSize(ew, 0)
	fast := ew.k == kFloat64 && t.Elem().Kind() == reflect.Float64
	return func(d *decoder, p unsafe.Pointer) {
		n, ok := d.length(minSize)
		v := reflect.NewAt(t, p).Elem()
		if !ok {
			v.SetZero()
			return
		}
		s := reflect.MakeSlice(t, n, n)
		data := s.UnsafePointer()
		if fast {
			b := d.bytes(8 * n)
			if b == nil {
				return
			}
			fs := unsafe.Slice((*float64)(data), n)
			for i := range fs {
				fs[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
			}
		} else {
			for i := 0; i < n && d.step(); i++ {
				ep.fn(d, unsafe.Add(data, uintptr(i)*size))
			}
		}
		v.Set(s)
	}, nil
}

func (d *decoder) decArray(w *wireType, t reflect.Type, where string) (decFn, error) {
	ep, err := d.plan(d.wire(w.elem), t.Elem(), where+"[]")
	if err != nil {
		return nil, err
	}
	size, n := t.Elem().Size(), w.n
	return func(d *decoder, p unsafe.Pointer) {
		for i := 0; i < n && d.step(); i++ {
			ep.fn(d, unsafe.Add(p, uintptr(i)*size))
		}
	}, nil
}

func (d *decoder) decMap(w *wireType, t reflect.Type, where string) (decFn, error) {
	kw, vw := d.wire(w.key), d.wire(w.elem)
	kp, err := d.plan(kw, t.Key(), where+"[key]")
	if err != nil {
		return nil, err
	}
	vp, err := d.plan(vw, t.Elem(), where+"[value]")
	if err != nil {
		return nil, err
	}
	minSize := d.minSize(kw, 0) + d.minSize(vw, 0)
	return func(d *decoder, p unsafe.Pointer) {
		n, ok := d.length(minSize)
		v := reflect.NewAt(t, p).Elem()
		if !ok {
			v.SetZero()
			return
		}
		m := reflect.MakeMapWithSize(t, n)
		// one key and one value decoded into, zeroed for each entry
		// (SetMapIndex copies them; decoding expects a zero target)
		k, e := reflect.New(t.Key()).Elem(), reflect.New(t.Elem()).Elem()
		for i := 0; i < n && d.step(); i++ {
			if i > 0 {
				k.SetZero()
				e.SetZero()
			}
			kp.fn(d, k.Addr().UnsafePointer())
			vp.fn(d, e.Addr().UnsafePointer())
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	}, nil
}

type decField struct {
	off  uintptr
	keep bool // false: the field is dropped here (skip)
	p    *plan
}

func (d *decoder) decStruct(w *wireType, t reflect.Type, where string) (decFn, error) {
	fields := make([]decField, len(w.fields))
	skip := d.skip[t]
	renames := d.renames[t]
	for i, wf := range w.fields {
		name, renamed := renames[wf.name]
		if !renamed {
			name = wf.name
		} else if _, has := t.FieldByName(wf.name); has && name != wf.name {
			return nil, fmt.Errorf("codec: %s.%s: renamed to %s, but %s still has a field %s", where, wf.name, name, typeName(t), wf.name)
		}
		f, ok := t.FieldByName(name)
		if d.strict && !(renamed && name == "") && !skip[wf.name] && (!ok || len(f.Index) != 1) {
			return nil, fmt.Errorf("codec: %s.%s: the data holds this field and %s has none (renamed or removed? codec.Options.Renames says where it went)",
				where, wf.name, typeName(t))
		}
		if !ok || len(f.Index) != 1 || f.Type.Kind() == reflect.Func || skip[wf.name] {
			sp, err := d.skipper(wf.t)
			if err != nil {
				return nil, err
			}
			fields[i] = decField{p: sp}
			continue
		}
		fp, err := d.plan(d.wire(wf.t), f.Type, where+"."+name)
		if err != nil {
			return nil, err
		}
		fields[i] = decField{off: f.Offset, keep: true, p: fp}
	}
	return func(d *decoder, p unsafe.Pointer) {
		for i := range fields {
			if d.err != nil {
				return
			}
			f := &fields[i]
			if f.keep {
				f.p.fn(d, unsafe.Add(p, f.off))
			} else {
				f.p.fn(d, nil)
			}
		}
	}, nil
}

func (d *decoder) decPtr(w *wireType, t reflect.Type, where string) (decFn, error) {
	et := t.Elem()
	ep, err := d.plan(d.wire(w.elem), et, "*"+where)
	if err != nil {
		return nil, err
	}
	return func(d *decoder, p unsafe.Pointer) {
		slot := (*unsafe.Pointer)(p)
		switch d.uvarint() {
		case tagNil:
			*slot = nil
		case tagNew:
			// an object the target points to here is decoded into (its
			// skipped and func fields kept), once; the root is decoded
			// into already
			obj := *slot
			if obj != nil && et.Size() > 0 && obj != d.root && !d.used[objKey{obj, et}] {
				d.used[objKey{obj, et}] = true
			} else {
				obj = reflect.New(et).UnsafePointer()
			}
			d.objs.add(decObj{obj, et})
			*slot = obj
			ep.fn(d, obj)
		case tagRef:
			id := d.uvarint()
			if id >= uint64(d.objs.len()) {
				d.fail("%s: reference to object %d of %d", where, id, d.objs.len())
				return
			}
			o := *d.objs.at(int(id))
			switch {
			case o.p == nil:
				d.fail("%s: refers to an object held by a field this program does not have", where)
			case o.t != et:
				d.fail("%s: refers to a %s, not a %s", where, typeName(o.t), typeName(et))
			default:
				*slot = o.p
			}
		case tagExtern:
			d.extern(t, slot, where)
		case tagRoot:
			d.rootPath(et, slot, where)
		default:
			d.fail("%s: bad pointer tag", where)
		}
	}, nil
}

func (d *decoder) extern(t reflect.Type, slot *unsafe.Pointer, where string) {
	i := d.uvarint()
	id := d.varint()
	if d.err != nil {
		return
	}
	if i >= uint64(len(d.ext)) || d.ext[i].Type != t {
		d.fail("%s: extern %d is not a %s here", where, i, typeName(t))
		return
	}
	v, err := d.ext[i].Deref(id)
	if err != nil {
		d.fail("%s: %v", where, err)
		return
	}
	rv := reflect.ValueOf(v)
	if rv.Type() != t {
		d.fail("%s: extern %d gave a %s, not a %s", where, id, rv.Type(), typeName(t))
		return
	}
	*slot = rv.UnsafePointer()
}

func (d *decoder) rootPath(et reflect.Type, slot *unsafe.Pointer, where string) {
	n := d.count(64)
	p, t := d.root, d.rootT
	for i := 0; i < n && d.err == nil; i++ {
		name := d.readString()
		switch {
		case t.Kind() == reflect.Struct:
			f, ok := t.FieldByName(name)
			if !ok || len(f.Index) != 1 {
				d.fail("%s: points to field %s, which %s does not have", where, name, typeName(t))
				return
			}
			p, t = unsafe.Add(p, f.Offset), f.Type
		case t.Kind() == reflect.Array:
			var k int
			if _, err := fmt.Sscanf(name, "[%d]", &k); err != nil || k < 0 || k >= t.Len() {
				d.fail("%s: bad index %q into %s", where, name, typeName(t))
				return
			}
			p, t = unsafe.Add(p, uintptr(k)*t.Elem().Size()), t.Elem()
		default:
			d.fail("%s: path into a %s", where, typeName(t))
			return
		}
	}
	if d.err == nil && t != et {
		d.fail("%s: points to a %s, not a %s", where, typeName(t), typeName(et))
		return
	}
	*slot = p
}

func (d *decoder) decIface(t reflect.Type, where string) decFn {
	return func(d *decoder, p unsafe.Pointer) {
		id := d.uvarint()
		v := reflect.NewAt(t, p).Elem()
		if id == 0 || d.err != nil {
			v.SetZero()
			return
		}
		if id > uint64(len(d.types)) {
			d.fail("%s: no type %d", where, id-1)
			return
		}
		w := d.types[id-1]
		var dt reflect.Type
		if !v.IsNil() && typeName(v.Elem().Type()) == w.name {
			dt = v.Elem().Type()
		} else if dt = d.named[w.name]; dt == nil {
			d.fail("%s: holds a %s, a type this program does not know here (codec.Options.Types)", where, w.name)
			return
		}
		if !dt.AssignableTo(t) {
			d.fail("%s: a %s is not a %s", where, typeName(dt), typeName(t))
			return
		}
		pl, err := d.plan(w, dt, where+"("+w.name+")")
		if err != nil {
			d.fail("%v", err)
			return
		}
		tmp := reflect.New(dt)
		if !v.IsNil() && v.Elem().Type() == dt {
			tmp.Elem().Set(v.Elem()) // an object it holds may be decoded into
		}
		pl.fn(d, tmp.UnsafePointer())
		if d.err == nil {
			v.Set(tmp.Elem())
		}
	}
}

// skipper returns a decoder that reads a value of wire type id and drops
// it. Objects in it are numbered all the same (a later reference to one
// is an error).
func (d *decoder) skipper(id int) (*plan, error) {
	if p := d.skips[id]; p != nil {
		return p, nil
	}
	p := &plan{}
	d.skips[id] = p
	w := d.wire(id)
	switch w.k {
	case kBool:
		p.fn = func(d *decoder, _ unsafe.Pointer) { d.byte() }
	case kInt:
		p.fn = func(d *decoder, _ unsafe.Pointer) { d.varint() }
	case kUint:
		p.fn = func(d *decoder, _ unsafe.Pointer) { d.uvarint() }
	case kFloat64:
		p.fn = func(d *decoder, _ unsafe.Pointer) { d.bytes(8) }
	case kFloat32:
		p.fn = func(d *decoder, _ unsafe.Pointer) { d.bytes(4) }
	case kString:
		p.fn = func(d *decoder, _ unsafe.Pointer) { d.value() }
	case kBinary:
		p.fn = func(d *decoder, _ unsafe.Pointer) { d.bytes(d.count(len(d.data))) }
	case kBytes:
		p.fn = func(d *decoder, _ unsafe.Pointer) {
			if n, ok := d.length(1); ok {
				d.bytes(n)
			}
		}
	case kSlice, kArray:
		ep, err := d.skipper(w.elem)
		if err != nil {
			return nil, err
		}
		minSize := d.minSize(d.wire(w.elem), 0)
		isArray := w.k == kArray
		p.fn = func(d *decoder, _ unsafe.Pointer) {
			n := w.n
			if !isArray {
				n, _ = d.length(minSize)
			}
			for i := 0; i < n && d.step(); i++ {
				ep.fn(d, nil)
			}
		}
	case kMap:
		kp, err := d.skipper(w.key)
		if err != nil {
			return nil, err
		}
		vp, err := d.skipper(w.elem)
		if err != nil {
			return nil, err
		}
		minSize := d.minSize(d.wire(w.key), 0) + d.minSize(d.wire(w.elem), 0)
		p.fn = func(d *decoder, _ unsafe.Pointer) {
			n, _ := d.length(minSize)
			for i := 0; i < n && d.step(); i++ {
				kp.fn(d, nil)
				vp.fn(d, nil)
			}
		}
	case kStruct:
		var fs []*plan
		for _, f := range w.fields {
			fp, err := d.skipper(f.t)
			if err != nil {
				return nil, err
			}
			fs = append(fs, fp)
		}
		p.fn = func(d *decoder, _ unsafe.Pointer) {
			for _, f := range fs {
				if d.err != nil {
					return
				}
				f.fn(d, nil)
			}
		}
	case kPtr:
		ep, err := d.skipper(w.elem)
		if err != nil {
			return nil, err
		}
		p.fn = func(d *decoder, _ unsafe.Pointer) {
			switch d.uvarint() {
			case tagNil:
			case tagNew:
				d.objs.add(decObj{})
				ep.fn(d, nil)
			case tagRef:
				d.uvarint()
			case tagExtern:
				d.uvarint()
				d.varint()
			case tagRoot:
				n := d.count(64)
				for i := 0; i < n && d.err == nil; i++ {
					d.readString()
				}
			default:
				d.fail("bad pointer tag")
			}
		}
	case kIface:
		p.fn = func(d *decoder, _ unsafe.Pointer) {
			id := d.uvarint()
			if id == 0 || d.err != nil {
				return
			}
			if id > uint64(len(d.types)) {
				d.fail("no type %d", id-1)
				return
			}
			sp, err := d.skipper(int(id - 1))
			if err != nil {
				d.fail("%v", err)
				return
			}
			sp.fn(d, nil)
		}
	default:
		return nil, fmt.Errorf("codec: cannot skip a %s", w.k)
	}
	return p, nil
}

// tableChunk is the size of a table's chunks after its first.
const tableChunk = 4096

// table is an append-only list numbered from 0 (the decoder's objects and
// strings). It grows in chunks, so a large decoding does not copy (and
// leave behind as garbage) the whole list each time it doubles: the first
// chunk grows by append up to tableChunk elements, the later ones are
// allocated whole.
type table[T any] struct {
	first  []T
	chunks [][]T // after first: each of tableChunk elements, the last partly used
	n      int
}

func (t *table[T]) len() int { return t.n }

func (t *table[T]) add(v T) {
	switch {
	case t.n < tableChunk:
		t.first = append(t.first, v)
	case (t.n-tableChunk)%tableChunk == 0:
		c := make([]T, 1, tableChunk)
		c[0] = v
		t.chunks = append(t.chunks, c)
	default:
		last := &t.chunks[len(t.chunks)-1]
		*last = append(*last, v)
	}
	t.n++
}

// at returns element i (0 <= i < len()).
func (t *table[T]) at(i int) *T {
	if i < tableChunk {
		return &t.first[i]
	}
	i -= tableChunk
	return &t.chunks[i/tableChunk][i%tableChunk]
}
