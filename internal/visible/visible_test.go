package visible

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// hostile holds every kind of character a terminal obeys or that reorders
// text: ESC sequences (clear the screen, set the title, OSC 52 clipboard),
// CR, BS, DEL, a C1 CSI, bidi overrides and isolates, zero-width ones, a tag
// character, the line separator, and a byte that is not UTF-8.
const hostile = "a\x1b[2J\x1b]0;pwned\x07b\rc\bd\x7fe\u009b31mf\u202eg\u2066h\u200bi\u200fj\u061ck\U000E0041l\u2028m\xffn\tO\no"

func TestStringLeavesNothingHidden(t *testing.T) {
	got := String(hostile)
	for i, r := range got {
		if Hidden(r) || (r == utf8.RuneError && !strings.HasPrefix(got[i:], "\uFFFD")) {
			t.Fatalf("String(%q) = %q keeps %U at byte %d", hostile, got, r, i)
		}
	}
	want := `a\x1b[2J\x1b]0;pwned\ab\rc\bd\x7fe\u009b31mf\u202eg\u2066h\u200bi\u200fj\u061ck\U000e0041l\u2028m\xffn\tO\no`
	if got != want {
		t.Fatalf("String:\n got %s\nwant %s", got, want)
	}
}

func TestStringKeepsText(t *testing.T) {
	for _, s := range []string{"", "resnet-50 lr=0.1", "/home/alice/run 1", "日本語のジョブ", "naïve café", "emoji 🚀", "שלום", "a\\x1b", "\uFFFD"} {
		if got := String(s); got != s {
			t.Errorf("String(%q) = %q, want it unchanged", s, got)
		}
		if err := Check(s); err != nil {
			t.Errorf("Check(%q): %v", s, err)
		}
	}
}

func TestCheck(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"ab\u202ecd", `byte 2 is \u202e (U+202E)`},
		{"x\x1b[31m", `byte 1 is \x1b (U+001B)`},
		{"tab\there", `byte 3 is \t`},
		{"bad\xff", "byte 3 is not UTF-8"},
		{"zw\u200bsp", `\u200b`},
		{"del\x7f", `\x7f`},
	} {
		err := Check(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Check(%q) = %v, want an error with %q", c.in, err, c.want)
		}
	}
}

func TestJSON(t *testing.T) {
	v := map[string]any{"name": hostile[:len(hostile)-12] + "\u00ad", "list": []string{"\U000E0041\u202e"}}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	got := JSON(buf.Bytes())
	for i, r := range string(got) {
		if r != '\n' && Hidden(r) {
			t.Fatalf("JSON keeps %U at byte %d: %s", r, i, got)
		}
	}
	var back, orig any
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatalf("JSON made invalid JSON: %v\n%s", err, got)
	}
	json.Unmarshal(buf.Bytes(), &orig)
	a, _ := json.Marshal(back)
	b, _ := json.Marshal(orig)
	if !bytes.Equal(a, b) {
		t.Fatalf("JSON changed the value:\n%s\n%s", a, b)
	}
	if plain := []byte("{\n  \"a\": \"b\"\n}\n"); !bytes.Equal(JSON(plain), plain) {
		t.Fatalf("JSON changed plain JSON: %s", JSON(plain))
	}
}

// TestWriter: written in pieces of every size, the output is the same:
// lines and tabs kept, the rest escaped, characters split between writes
// whole.
func TestWriter(t *testing.T) {
	want := escape(hostile, "\n\t")
	if strings.ContainsAny(want, "\x1b\r\u202e") || !strings.Contains(want, "\n") || !strings.Contains(want, "\t") {
		t.Fatalf("escape with keep: %q", want)
	}
	for size := 1; size <= len(hostile); size++ {
		var out bytes.Buffer
		w := &Writer{W: &out}
		for i := 0; i < len(hostile); i += size {
			p := []byte(hostile[i:min(i+size, len(hostile))])
			if n, err := w.Write(p); n != len(p) || err != nil {
				t.Fatalf("Write: %d, %v", n, err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if out.String() != want {
			t.Fatalf("in writes of %d bytes:\n got %q\nwant %q", size, out.String(), want)
		}
	}
	// an incomplete character at the end comes out, escaped, on Flush
	var out bytes.Buffer
	w := &Writer{W: &out}
	w.Write([]byte("x\xe2\x80"))
	if out.String() != "x" {
		t.Fatalf("before Flush: %q", out.String())
	}
	w.Flush()
	if out.String() != `x\xe2\x80` {
		t.Fatalf("after Flush: %q", out.String())
	}
}

func FuzzString(f *testing.F) {
	f.Add(hostile)
	f.Fuzz(func(t *testing.T, s string) {
		got := String(s)
		if !utf8.ValidString(got) {
			t.Fatalf("String(%q) = %q is not UTF-8", s, got)
		}
		for _, r := range got {
			if Hidden(r) {
				t.Fatalf("String(%q) = %q keeps %U", s, got, r)
			}
		}
		if (Check(s) == nil) != (got == s) {
			t.Fatalf("Check(%q) = %v but String changes it to %q", s, Check(s), got)
		}
	})
}
