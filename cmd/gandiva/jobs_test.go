package main

import (
	"strings"
	"testing"
)

func TestReadJobSpec(t *testing.T) {
	r, err := readJobSpec([]byte("name: a\ngpus: 2\ncommand: [python, train.py]\nenv: {A: b}\ncheckpoint_every: 30\nprerun: false\nidempotency_key: sweep-7\nrank_per_gpu: true\n"), "a.yaml")
	if err != nil || r.GPUs != 2 || len(r.Command) != 2 || r.Env["A"] != "b" || *r.CheckpointEvery != 30 || *r.PreRun || r.IdempotencyKey != "sweep-7" || !r.RankPerGPU {
		t.Fatalf("%+v %v", r, err)
	}
	for _, bad := range []string{"gpu: 2\n", "user: bob\ncommand: [x]\n", "gpus: two\n", "", "command: x: y\n"} {
		if _, err := readJobSpec([]byte(bad), "bad.yaml"); err == nil {
			t.Errorf("accepted %q", bad)
		} else if !strings.Contains(err.Error(), "bad.yaml") {
			t.Errorf("error %q does not name the file", err)
		}
	}
}

// FuzzReadJobSpec: any file is read or rejected with an error naming it,
// and what is read validates (or not) without panicking.
func FuzzReadJobSpec(f *testing.F) {
	f.Add([]byte("name: a\ngpus: 2\ncommand: [python, train.py]\n"))
	f.Add([]byte("gpus: !!float 1e400\n"))
	f.Add([]byte("env: {GANDIVA_FD: 3}\ncommand: [x]\ngpus: 1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := readJobSpec(data, "f.yaml")
		if err != nil {
			if !strings.Contains(err.Error(), "f.yaml") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		_ = r.Validate()
	})
}
