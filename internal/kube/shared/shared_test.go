package shared

import (
	"strings"
	"testing"
	"time"
)

func TestAssignRoundTrip(t *testing.T) {
	a := Assign{Gen: 3, State: Suspended, GPUs: []int{0, 2}}
	got, err := ParseAssign(a.String())
	if err != nil || got.Gen != 3 || got.State != Suspended || !Equal(got.GPUs, a.GPUs) {
		t.Fatalf("ParseAssign(%s) = %+v, %v", a, got, err)
	}
	s := Status{Gen: 3, State: StatusSuspended, GPUs: []int{0, 2}, Done: 40, IterTime: 0.25, Ready: true, At: time.Unix(5, 0).UTC()}
	gs, err := ParseStatus(s.String())
	if err != nil || gs.Gen != 3 || gs.Done != 40 || !gs.Ready || !gs.At.Equal(s.At) {
		t.Fatalf("ParseStatus(%s) = %+v, %v", s, gs, err)
	}
}

func TestBadAnnotationsNameTheField(t *testing.T) {
	for in, want := range map[string]string{
		`{"gen":0,"state":"running","gpus":[0]}`:       "gen",
		`{"gen":1,"state":"paused","gpus":[0]}`:        "state",
		`{"gen":1,"state":"running","gpus":[]}`:        "gpus",
		`{"gen":1,"state":"running","gpus":[1,0]}`:     "increasing",
		`{"gen":1,"state":"running","gpus":[-1]}`:      "gpus[0]",
		`{"gen":1,"state":"running","gpus":[0],"x":1}`: "unknown field",
		`{"gen":1,"state":"running","gpus":[0]} {}`:    "trailing",
		`not json`: "invalid",
	} {
		_, err := ParseAssign(in)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), AnnAssign) {
			t.Errorf("ParseAssign(%s) = %v, want an error naming %q and the annotation", in, err, want)
		}
	}
	if _, err := ParseStatus(`{"gen":1,"state":"running","done":-1,"at":"2026-01-01T00:00:00Z"}`); err == nil || !strings.Contains(err.Error(), "done") {
		t.Errorf("negative done: %v", err)
	}
	for _, v := range []string{"0", "-1", "x", "", "2000"} {
		if _, err := ParseGPUs(v); err == nil {
			t.Errorf("ParseGPUs(%q) accepted", v)
		}
	}
	if n, err := ParseGPUs(" 2 "); n != 2 || err != nil {
		t.Errorf("ParseGPUs(2) = %d, %v", n, err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(Assign{Gen: 1, State: Running, GPUs: []int{0}}.String())
	f.Add(Status{Gen: 1, State: Starting}.String())
	f.Fuzz(func(t *testing.T, v string) {
		if a, err := ParseAssign(v); err == nil {
			if b, err := ParseAssign(a.String()); err != nil || b.Gen != a.Gen || b.State != a.State || !Equal(a.GPUs, b.GPUs) {
				t.Fatalf("round trip of %q: %+v %v", v, b, err)
			}
		}
		if s, err := ParseStatus(v); err == nil {
			if _, err := ParseStatus(s.String()); err != nil {
				t.Fatalf("round trip of %q: %v", v, err)
			}
		}
	})
}

// ForPod: an assignment is for as many GPUs as the pod asks for.
func TestAssignForPod(t *testing.T) {
	a := Assign{Gen: 1, State: Running, GPUs: []int{0, 3}}
	if err := a.ForPod("2"); err != nil {
		t.Errorf("2 GPUs for a pod of 2: %v", err)
	}
	for _, gpus := range []string{"1", "3", "", "x"} {
		if err := a.ForPod(gpus); err == nil || !strings.Contains(err.Error(), AnnAssign) {
			t.Errorf("ForPod(%q) = %v, want an error naming %s", gpus, err, AnnAssign)
		}
	}
}
