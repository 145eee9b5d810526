package api

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// FuzzDecodeJobRequest: whatever the body, decoding and validation never
// panic, every rejection is an *Error with a 4xx status whose message starts
// with the field it names, and an accepted request survives a JSON round
// trip unchanged and still valid.
func FuzzDecodeJobRequest(f *testing.F) {
	for _, s := range []string{
		`{"command": ["python", "train.py"], "gpus": 2, "env": {"A": "1"}, "workdir": "/w", "min_gpus": 1, "max_gpus": 4}`,
		`{"command": ["x"], "gpus": 1, "user": "eve"}`,
		`{"command": ["x"], "gpus": "1"}`,
		`{"command": ["x"], "gpus": 1, "checkpoint_every": 1e400}`,
		`{"command": ["x"], "gpus": 1, "prerun": false, "iters": 100, "iter_time": 0.5}`,
		`[]`, `null`, `{`, `{"env": {"GANDIVA_X": ""}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Decode[JobRequest](data)
		if err == nil {
			err = r.Validate()
		}
		if err != nil {
			checkError(t, err)
			return
		}
		again, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("accepted request does not encode: %v", err)
		}
		r2, err := Decode[JobRequest](again)
		if err != nil {
			t.Fatalf("accepted request does not decode again: %v\n%s", err, again)
		}
		if err := r2.Validate(); err != nil {
			t.Fatalf("accepted request invalid after a round trip: %v\n%s", err, again)
		}
	})
}

// FuzzDecodeAgent: the agent protocol's decoders have the same guarantees.
func FuzzDecodeAgent(f *testing.F) {
	f.Add([]byte(`{"name": "n1", "gpus": [{"index": 0, "type": "V100", "mem_gib": 16}], "incarnation": "i", "addr": "http://h:1", "running": [{"job": "j1", "attempt": 5, "state": "running", "gpus": [0]}]}`))
	f.Add([]byte(`{"node": "n1", "session": "s", "reports": [{"seq": 1, "job": "j1", "attempt": 2, "kind": "progress", "done": 3, "metric": 0.5}]}`))
	f.Add([]byte(`{"name": "n 1", "gpus": [{"index": 1}]}`))
	f.Add([]byte(`{"name": "n1", "gpus": [{"index": 0, "type": "V100", "mem_gib": 16}], "incarnation": "i", "addr": "http://[::1]:7071/", "log_key": "0123456789abcdef", "rack": "r1", "domain": 3}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if r, err := Decode[Registration](data); err != nil {
			checkError(t, err)
		} else if err := r.Validate(); err != nil {
			checkError(t, err)
		}
		if _, err := Decode[ReportBatch](data); err != nil {
			checkError(t, err)
		}
	})
}

func checkError(t *testing.T, err error) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("rejection is not an *api.Error: %T %v", err, err)
	}
	if e.Status < 400 || e.Status >= 500 {
		t.Fatalf("rejection has status %d: %v", e.Status, e)
	}
	if e.Field != "" && !strings.HasPrefix(e.Message, e.Field+":") {
		t.Fatalf("message %q does not start with its field %q", e.Message, e.Field)
	}
	if e.Field == "" && e.Status == 400 {
		t.Fatalf("a 400 that names no field: %q", e.Message)
	}
}
