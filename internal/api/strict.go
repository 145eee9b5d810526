package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// checkJSON enforces what encoding/json lets through, before a body is
// decoded into a T, naming the field at fault:
//   - every string (keys and values) is valid UTF-8 and has no lone
//     surrogate escape (\ud800): the standard decoder would replace them
//     with U+FFFD, silently changing a command or a path;
//   - no object has the same key twice (the decoder keeps the last);
//   - a key of a struct matches its field's name exactly (the decoder
//     matches case-insensitively, so "GPUS" would set gpus).
//
// Malformed JSON is left to the decoder, which reports it.
func checkJSON(data []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	w := walker{}
	w.push(nil, t) // the body itself: one value
	prev := int64(0)
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil // the end, or malformed: the decoder will say where
		}
		cur := dec.InputOffset()
		raw := data[prev:cur]
		prev = cur
		if err := w.token(tok, raw); err != nil {
			return err
		}
	}
}

// frame is one container being read (or, at the bottom, the body).
type frame struct {
	typ     reflect.Type // the Go type the container decodes into (nil: unknown)
	obj     bool
	arr     bool
	wantKey bool
	key     string
	idx     int
	keys    map[string]bool
	parent  *frame
}

type walker struct{ top *frame }

func (w *walker) push(parent *frame, t reflect.Type) *frame {
	f := &frame{typ: deref(t), parent: parent}
	w.top = f
	return f
}

func deref(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// path names where the current value is: "command[1]", "env.FOO",
// "reports[0].kind"; "body" for the body itself.
func (f *frame) path() string {
	var parts []string
	for g := f; g != nil && g.parent != nil; g = g.parent {
		switch {
		case g.obj:
			parts = append(parts, "."+g.key)
		case g.arr:
			parts = append(parts, "["+strconv.Itoa(g.idx)+"]")
		}
	}
	var b strings.Builder
	for i := len(parts) - 1; i >= 0; i-- {
		b.WriteString(parts[i])
	}
	s := strings.TrimPrefix(b.String(), ".")
	if s == "" {
		return "body"
	}
	return s
}

// containerPath names the container f itself (for a bad key).
func (f *frame) containerPath() string {
	if f.parent == nil {
		return "body"
	}
	return f.parent.path()
}

// elem is the type of the value at the current position of f.
func (f *frame) elem() reflect.Type {
	t := f.typ
	switch {
	case t == nil:
		return nil
	case f.parent == nil && !f.obj && !f.arr:
		return t // the body
	case f.arr && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array):
		return t.Elem()
	case f.obj && t.Kind() == reflect.Map:
		return t.Elem()
	case f.obj && t.Kind() == reflect.Struct:
		if sf, ok := fieldByTag(t, f.key); ok {
			return sf.Type
		}
	}
	return nil
}

func fieldByTag(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		tag, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if tag == "-" {
			continue
		}
		if tag == "" {
			tag = sf.Name
		}
		if tag == name {
			return sf, true
		}
	}
	return reflect.StructField{}, false
}

func caseFold(t reflect.Type, name string) string {
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		tag, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if tag == "" {
			tag = sf.Name
		}
		if sf.IsExported() && tag != "-" && strings.EqualFold(tag, name) {
			return tag
		}
	}
	return ""
}

// token handles one token; raw is the input since the previous one.
func (w *walker) token(tok json.Token, raw []byte) error {
	f := w.top
	if f.obj && f.wantKey {
		if d, ok := tok.(json.Delim); ok && d == '}' {
			return w.close()
		}
		key, _ := tok.(string)
		if err := checkString(raw); err != nil {
			return Invalid(f.containerPath(), "a key %s", err)
		}
		f.key, f.wantKey = key, false
		if f.keys[key] {
			return Invalid(f.path(), "duplicate key: given twice in one object")
		}
		f.keys[key] = true
		if t := f.typ; t != nil && t.Kind() == reflect.Struct {
			if _, ok := fieldByTag(t, key); !ok {
				if want := caseFold(t, key); want != "" {
					return Invalid(f.path(), "unknown field (names are case-sensitive: %q)", want)
				}
			}
		}
		return nil
	}
	if d, ok := tok.(json.Delim); ok {
		switch d {
		case '{', '[':
			g := w.push(f, f.elem())
			g.obj, g.arr = d == '{', d == '['
			g.wantKey = g.obj
			if g.obj {
				g.keys = map[string]bool{}
			}
			return nil
		default: // ']' (a '}' is handled above)
			return w.close()
		}
	}
	if _, ok := tok.(string); ok {
		if err := checkString(raw); err != nil {
			return Invalid(f.path(), "%s", err)
		}
	}
	f.valueDone()
	return nil
}

// close ends the top container, which completes a value of its parent.
func (w *walker) close() error {
	if w.top.parent == nil {
		return nil
	}
	w.top = w.top.parent
	w.top.valueDone()
	return nil
}

func (f *frame) valueDone() {
	switch {
	case f.obj:
		f.wantKey = true
	case f.arr:
		f.idx++
	}
}

// checkString checks the string literal in raw (which may start with
// white space, ':' or ','): valid UTF-8, and every \u escape of a surrogate
// part of a pair.
func checkString(raw []byte) error {
	i := bytes.IndexByte(raw, '"')
	if i < 0 {
		return nil
	}
	s := raw[i+1:]
	if !utf8.Valid(s) {
		off := 0
		for off < len(s) {
			r, n := utf8.DecodeRune(s[off:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			off += n
		}
		return fmt.Errorf("is not valid UTF-8 (byte 0x%02x at offset %d of the string)", s[off], off)
	}
	for j := 0; j < len(s); j++ {
		if s[j] != '\\' || j+1 >= len(s) {
			continue
		}
		if s[j+1] != 'u' {
			j++ // \" \\ \n ...
			continue
		}
		r1, ok := hex4(s[j+2:])
		if !ok {
			return nil // malformed: the decoder says so
		}
		j += 5
		switch {
		case utf16.IsSurrogate(r1) && r1 < 0xdc00:
			if j+6 < len(s)+0 && s[j+1] == '\\' && s[j+2] == 'u' {
				if r2, ok := hex4(s[j+3:]); ok && r2 >= 0xdc00 && r2 <= 0xdfff {
					j += 6
					continue
				}
			}
			return fmt.Errorf("has a lone surrogate escape \\u%04x (not a character)", r1)
		case utf16.IsSurrogate(r1):
			return fmt.Errorf("has a lone surrogate escape \\u%04x (not a character)", r1)
		}
	}
	return nil
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	v, err := strconv.ParseUint(string(b[:4]), 16, 32)
	return rune(v), err == nil
}
