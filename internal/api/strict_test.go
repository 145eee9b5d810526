package api

import (
	"strings"
	"testing"
)

// TestDecodeStrict: what encoding/json lets through is refused, naming
// the field: bytes that are not UTF-8 (json would turn them into U+FFFD),
// lone surrogate escapes, duplicate keys, fields of the wrong case.
func TestDecodeStrict(t *testing.T) {
	for _, c := range []struct{ body, field, msg string }{
		{"{\"command\": [\"echo\", \"caf\xe9\"], \"gpus\": 1}", "command[1]", "not valid UTF-8"},
		{"{\"command\": [\"x\"], \"gpus\": 1, \"env\": {\"A\": \"\xff\xfe\"}}", "env.A", "not valid UTF-8"},
		{"{\"command\": [\"x\"], \"gpus\": 1, \"workdir\": \"/tmp/\xc3\"}", "workdir", "not valid UTF-8"},
		{"{\"command\": [\"x\"], \"gpus\": 1, \"env\": {\"\xe9\": \"a\"}}", "env", "a key is not valid UTF-8"},
		{`{"command": ["x\ud800"], "gpus": 1}`, "command[0]", "lone surrogate"},
		{`{"command": ["x\udc00y"], "gpus": 1}`, "command[0]", "lone surrogate"},
		{`{"command": ["x"], "gpus": 1, "gpus": 4096}`, "gpus", "duplicate key"},
		{`{"command": ["x"], "gpus": 1, "env": {"A": "1", "A": "2"}}`, "env.A", "duplicate key"},
		{`{"command": ["x"], "GPUS": 2}`, "GPUS", "case-sensitive"},
	} {
		_, err := Decode[JobRequest]([]byte(c.body))
		ae, ok := err.(*Error)
		if !ok || ae.Status != 400 || ae.Field != c.field || !strings.HasPrefix(ae.Message, c.field+":") || !strings.Contains(ae.Message, c.msg) {
			t.Errorf("%q: %v, want a 400 naming %s (%q)", c.body, err, c.field, c.msg)
		}
	}
	// Nested: the path names the report.
	_, err := Decode[ReportBatch]([]byte(`{"node": "n", "session": "s", "reports": [{"job": "j1", "kind": "progress"}, {"job": "j2", "job": "j3", "kind": "exited"}]}`))
	if ae, ok := err.(*Error); !ok || ae.Field != "reports[1].job" {
		t.Errorf("a duplicate key in the second report: %v, want reports[1].job", err)
	}
	// What is fine stays fine: pairs, escapes, keys that differ only by case in a map.
	r, err := Decode[JobRequest]([]byte(`{"command": ["\ud83d\ude00", "a\"b\\\\c\u00e9"], "gpus": 1, "env": {"a": "1", "A": "2"}}`))
	if err != nil || r.Command[0] != "😀" || r.Command[1] != `a"b\\cé` || r.Env["a"] != "1" || r.Env["A"] != "2" {
		t.Fatalf("a valid body: %+v %v", r, err)
	}
}
