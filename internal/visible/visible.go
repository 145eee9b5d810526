package visible

import (
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Hidden reports whether r acts on a terminal or on the layout of the
// text around it instead of showing as a glyph: the C0 and C1 controls and
// DEL (category Cc, tab and line feed included), the format characters
// (Cf: bidirectional controls, zero-width space and joiners, soft hyphen,
// byte-order mark, tag characters, ...) and the line and paragraph
// separators U+2028 and U+2029.
func Hidden(r rune) bool {
	if r < 0x80 {
		return r < 0x20 || r == 0x7f
	}
	return unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)
}

// String returns s with every hidden rune (Hidden) shown as an escape, and
// every byte that is not UTF-8 as \xNN: \t, \n, \r, \a, \b, \f and \v as
// such, other ASCII controls and DEL as \x1b, the others as \u202e or
// \U000e0041. s itself is returned when it has none.
func String(s string) string {
	return escape(s, "")
}

// Check returns an error naming the first hidden rune of s (by its byte
// offset and code point), or a byte that is not UTF-8; nil when s has
// neither. It is for names people choose and others read.
func Check(s string) error {
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			return fmt.Errorf("byte %d is not UTF-8", i)
		case Hidden(r):
			return fmt.Errorf("byte %d is %s (%U), a control or invisible format character: these can rewrite a terminal or reorder text, so they are not allowed", i, String(string(r)), r)
		}
	}
	return nil
}

// escape is String, except that the runes in keep pass unchanged.
func escape(s, keep string) string {
	clean := true
	for i, r := range s {
		if (Hidden(r) && !strings.ContainsRune(keep, r)) || (r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD")) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case !Hidden(r) || strings.ContainsRune(keep, r):
			b.WriteRune(r)
		default:
			writeEscape(&b, r)
		}
	}
	return b.String()
}

func writeEscape(b *strings.Builder, r rune) {
	switch r {
	case '\a':
		b.WriteString(`\a`)
	case '\b':
		b.WriteString(`\b`)
	case '\f':
		b.WriteString(`\f`)
	case '\n':
		b.WriteString(`\n`)
	case '\r':
		b.WriteString(`\r`)
	case '\t':
		b.WriteString(`\t`)
	case '\v':
		b.WriteString(`\v`)
	default:
		switch {
		case r < 0x80:
			fmt.Fprintf(b, `\x%02x`, r)
		case r < 0x10000:
			fmt.Fprintf(b, `\u%04x`, r)
		default:
			fmt.Fprintf(b, `\U%08x`, r)
		}
	}
}

// JSON returns encoded JSON (as encoding/json writes it: valid UTF-8, with
// only spaces and line feeds between tokens) with every hidden rune inside
// its strings written as a JSON escape (\u202e; a surrogate pair above
// U+FFFF): the same JSON value, that a terminal shows inertly.
// (encoding/json escapes the C0 controls itself, but not DEL, the C1
// controls or the bidirectional and other format characters.)
func JSON(data []byte) []byte {
	s := string(data)
	if escape(s, "\n") == s {
		return data
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			b.WriteString(`\ufffd`)
		case r == '\n' || !Hidden(r):
			b.WriteRune(r)
		case r >= 0x10000:
			r1, r2 := utf16.EncodeRune(r)
			fmt.Fprintf(&b, `\u%04x\u%04x`, r1, r2)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return []byte(b.String())
}

// Writer passes what is written to it on to W with every hidden rune
// escaped as String does, except line feeds and tabs, which it keeps so
// that lines stay lines: for streams of text that are shown as they come,
// such as a job's log on a terminal. A character split between two writes
// is held until its rest comes; Flush writes out a held incomplete tail.
type Writer struct {
	W    io.Writer
	held []byte
}

// Write escapes p and writes it to W; it reports len(p) written when W
// took all of it.
func (w *Writer) Write(p []byte) (int, error) {
	data := append(w.held, p...)
	cut := len(data)
	for i := len(data) - 1; i >= 0 && i >= len(data)-utf8.UTFMax; i-- {
		if utf8.RuneStart(data[i]) {
			if !utf8.FullRune(data[i:]) {
				cut = i
			}
			break
		}
	}
	out := escape(string(data[:cut]), "\n\t")
	w.held = append([]byte(nil), data[cut:]...)
	if _, err := io.WriteString(w.W, out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes out, escaped, an incomplete character held back by Write.
func (w *Writer) Flush() error {
	if len(w.held) == 0 {
		return nil
	}
	out := escape(string(w.held), "\n\t")
	w.held = nil
	_, err := io.WriteString(w.W, out)
	return err
}
