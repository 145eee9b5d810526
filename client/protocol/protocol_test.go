package protocol

import (
	"bytes"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestEncodeDecode(t *testing.T) {
	m := 0.25
	in := Msg{Kind: Progress, Seq: 3, Done: 10, IterTime: 0.5, Metric: &m}
	b := Encode(in)
	if b[len(b)-1] != '\n' || bytes.Count(b, []byte("\n")) != 1 {
		t.Fatalf("not one line: %q", b)
	}
	out, err := Decode(b)
	if err != nil || out.Kind != Progress || out.Seq != 3 || out.Done != 10 || out.IterTime != 0.5 || *out.Metric != 0.25 {
		t.Fatalf("%+v %v", out, err)
	}
	nan := math.NaN()
	out, err = Decode(Encode(Msg{Kind: Progress, Metric: &nan, IterTime: math.Inf(1)}))
	if err != nil || out.Metric != nil || out.IterTime != 0 {
		t.Fatalf("non-finite numbers: %+v %v", out, err)
	}
	for _, bad := range []string{"", "{}", "[1]", `{"kind":"progress","done":-1}`, "not json", strings.Repeat("x", MaxLine+1)} {
		if _, err := Decode([]byte(bad)); err == nil {
			t.Errorf("Decode(%.20q) succeeded", bad)
		}
	}
	// Unknown fields are ignored (newer agents, older clients).
	if m, err := Decode([]byte(`{"kind":"suspend","seq":1,"future":true}`)); err != nil || m.Kind != Suspend {
		t.Fatalf("%+v %v", m, err)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"kind":"hello","version":1,"pid":12,"hooks":true,"done":3}`))
	f.Add([]byte(`{"kind":"saved","seq":2,"done":5,"bytes":100,"path":"/x"}`))
	f.Add([]byte(`{"kind":"progress","metric":1e308,"done":9007199254740993}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		if err != nil {
			return
		}
		// What decodes re-encodes and decodes to the same message.
		m2, err := Decode(Encode(m))
		if err != nil || string(Encode(m2)) != string(Encode(m)) {
			t.Fatalf("round trip: %+v -> %+v (%v)", m, m2, err)
		}
	})
}

func write(t *testing.T, dir string, done int64, payload string) Meta {
	t.Helper()
	m, err := WriteCheckpoint(dir, Meta{Done: done, Job: "j", Attempt: 1}, func(w io.Writer) error {
		_, err := io.WriteString(w, payload)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func read(t *testing.T, dir string) (Meta, string, error) {
	t.Helper()
	m, f, err := ReadCheckpoint(dir)
	if err != nil {
		return m, "", err
	}
	defer f.Close()
	b, _ := io.ReadAll(f)
	return m, string(b), nil
}

func TestCheckpointRoundTripAndAtomicity(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	if _, _, err := read(t, dir); !errors.Is(err, ErrNoCheckpoint) {
		t.Fatalf("empty directory: %v", err)
	}
	write(t, dir, 5, "five")
	m := write(t, dir, 9, "nine!")
	got, payload, err := read(t, dir)
	if err != nil || payload != "nine!" || got.Done != 9 || got.Bytes != 5 || got.File != m.File || got.Format != Format {
		t.Fatalf("%+v %q %v", got, payload, err)
	}
	// Older payloads are removed.
	if old, _ := filepath.Glob(filepath.Join(dir, "ckpt-*.bin")); len(old) != 1 {
		t.Fatalf("payload files %v", old)
	}
	// A failing save leaves the previous checkpoint, and no debris.
	_, err = WriteCheckpoint(dir, Meta{Done: 12}, func(w io.Writer) error {
		io.WriteString(w, "partial")
		return errors.New("disk full")
	})
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("failing save: %v", err)
	}
	if got, payload, err := read(t, dir); err != nil || got.Done != 9 || payload != "nine!" {
		t.Fatalf("after a failed save: %+v %q %v", got, payload, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 && !(len(entries) == 3 && slices.ContainsFunc(entries, func(e os.DirEntry) bool { return e.Name() == LockFile })) {
		t.Fatalf("debris after a failed save: %v", entries)
	}
	// A truncated payload and a forged file name are detected.
	os.WriteFile(filepath.Join(dir, m.File), []byte("nin"), 0o644)
	if _, _, err := read(t, dir); err == nil || !strings.Contains(err.Error(), "has 3 bytes, metadata says 5") {
		t.Fatalf("truncated payload: %v", err)
	}
	os.WriteFile(filepath.Join(dir, MetaFile), []byte(`{"format":"gandiva-checkpoint","version":1,"file":"../x","bytes":1}`), 0o644)
	if _, _, err := read(t, dir); err == nil || !strings.Contains(err.Error(), "bad file name") {
		t.Fatalf("forged file name: %v", err)
	}
	os.WriteFile(filepath.Join(dir, MetaFile), []byte(`{"format":"other"}`), 0o644)
	if _, _, err := read(t, dir); err == nil || errors.Is(err, ErrNoCheckpoint) {
		t.Fatalf("foreign metadata: %v", err)
	}
}

// The attached mode's fields: a hello naming its pod, a welcome with GPUs
// and hold; a negative GPU index is refused.
func TestAttachedFields(t *testing.T) {
	m, err := Decode(Encode(Msg{Kind: Hello, PID: 3, PodUID: "u-1", Pod: "ns/p", Done: 4}))
	if err != nil || m.PodUID != "u-1" || m.Pod != "ns/p" || m.Done != 4 {
		t.Fatalf("%+v %v", m, err)
	}
	m, err = Decode([]byte(`{"kind":"welcome","gpus":[1,3],"hold":true}`))
	if err != nil || m.Kind != Welcome || !slices.Equal(m.GPUs, []int{1, 3}) || !m.Hold {
		t.Fatalf("%+v %v", m, err)
	}
	if _, err := Decode([]byte(`{"kind":"welcome","gpus":[-1]}`)); err == nil {
		t.Fatal("a negative GPU index decoded")
	}
	// an older client's hello has neither field; a spawned job's has none
	if b := string(Encode(Msg{Kind: Hello, PID: 1})); strings.Contains(b, "pod") || strings.Contains(b, "gpus") {
		t.Fatalf("empty attached fields are encoded: %s", b)
	}
}
