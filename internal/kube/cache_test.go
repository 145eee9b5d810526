package kube

import (
	"fmt"
	"testing"
	"time"
)

// TestAssumeCacheStates walks the assume cache's state machine: each case
// is a sequence of steps on key "k", and what Get, InFlight and Done show
// after it.
func TestAssumeCacheStates(t *testing.T) {
	t0 := time.Unix(1000, 0)
	type step struct {
		op  string // assume V, finish-ok, finish-ret V, finish-fail, stale-finish, confirm, forget, expire SECONDS
		v   string
		sec int
	}
	cases := []struct {
		name  string
		keep  bool
		steps []step
		// want: Get's value ("" absent), in flight value, done value, shown
		get, flying, done string
		shown             bool
	}{
		{name: "assumed", steps: []step{{op: "assume", v: "a"}}, get: "a", flying: "a"},
		{name: "answered", steps: []step{{op: "assume", v: "a"}, {op: "finish-ok"}}, get: "a", done: "a"},
		{name: "answer returns a newer value", steps: []step{{op: "assume", v: "a"}, {op: "finish-ret", v: "b"}}, get: "b", done: "b"},
		{name: "answered then confirmed", steps: []step{{op: "assume", v: "a"}, {op: "finish-ok"}, {op: "confirm"}}},
		{name: "failed", steps: []step{{op: "assume", v: "a"}, {op: "finish-fail"}}},
		{name: "confirm before the answer, then success", steps: []step{{op: "assume", v: "a"}, {op: "confirm"}, {op: "finish-ok"}}},
		{name: "failure after confirm is ignored", steps: []step{{op: "assume", v: "a"}, {op: "confirm"}, {op: "finish-fail"}}},
		{name: "forget of an unknown key", steps: []step{{op: "forget"}}},
		{name: "confirm of an unknown key", steps: []step{{op: "confirm"}}},
		{name: "finish of an unknown key", steps: []step{{op: "finish-ok"}}},
		{name: "forgotten in flight, answer ignored", steps: []step{{op: "assume", v: "a"}, {op: "forget"}, {op: "finish-ok"}}},
		{name: "an older call's answer after a newer assume is ignored",
			steps: []step{{op: "assume", v: "a"}, {op: "assume", v: "b"}, {op: "stale-finish"}}, get: "b", flying: "b"},
		{name: "a failed second call leaves the first's value",
			steps: []step{{op: "assume", v: "a"}, {op: "finish-ok"}, {op: "assume", v: "b"}, {op: "finish-fail"}}, get: "a", done: "a"},
		{name: "not expired before its time", steps: []step{{op: "assume", v: "a"}, {op: "finish-ok"}, {op: "expire", sec: 59}}, get: "a", done: "a"},
		{name: "expired", steps: []step{{op: "assume", v: "a"}, {op: "finish-ok"}, {op: "expire", sec: 60}}},
		{name: "in flight never expires", steps: []step{{op: "assume", v: "a"}, {op: "expire", sec: 3600}}, get: "a", flying: "a"},
		{name: "keep: confirmed stays, shown", keep: true, steps: []step{{op: "assume", v: "a"}, {op: "finish-ok"}, {op: "confirm"}}, get: "a", done: "a", shown: true},
		{name: "keep: never expires", keep: true, steps: []step{{op: "assume", v: "a"}, {op: "finish-ok"}, {op: "expire", sec: 3600}}, get: "a", done: "a"},
		{name: "keep: a new write is not shown yet", keep: true,
			steps: []step{{op: "assume", v: "a"}, {op: "finish-ok"}, {op: "confirm"}, {op: "assume", v: "b"}, {op: "finish-ok"}}, get: "b", done: "b"},
		{name: "keep: a failed write leaves the last written, shown", keep: true,
			steps: []step{{op: "assume", v: "a"}, {op: "finish-ok"}, {op: "confirm"}, {op: "assume", v: "b"}, {op: "finish-fail"}}, get: "a", done: "a", shown: true},
		{name: "keep: forget", keep: true, steps: []step{{op: "assume", v: "a"}, {op: "finish-ok"}, {op: "forget"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newAssumeCache[string, string](time.Minute, tc.keep)
			var tok, prev uint64
			for _, s := range tc.steps {
				switch s.op {
				case "assume":
					prev, tok = tok, c.Assume("k", s.v)
				case "finish-ok":
					c.Finish("k", tok, true, nil, t0)
				case "finish-ret":
					v := s.v
					c.Finish("k", tok, true, &v, t0)
				case "finish-fail":
					c.Finish("k", tok, false, nil, t0)
				case "stale-finish":
					if c.Finish("k", prev, true, nil, t0) {
						t.Fatal("a stale answer was taken")
					}
				case "confirm":
					c.Confirm("k")
				case "forget":
					c.Forget("k")
				case "expire":
					c.Expire(t0.Add(time.Duration(s.sec) * time.Second))
				default:
					t.Fatalf("unknown step %q", s.op)
				}
			}
			get, _ := c.Get("k")
			flying, _ := c.InFlight("k")
			done, shown, _ := c.Done("k")
			got := fmt.Sprintf("get=%q flying=%q done=%q shown=%v", get, flying, done, shown)
			want := fmt.Sprintf("get=%q flying=%q done=%q shown=%v", tc.get, tc.flying, tc.done, tc.shown)
			if got != want {
				t.Errorf("got %s, want %s", got, want)
			}
			_, present := c.Get("k")
			if present != (tc.get != "") || (c.Len() == 1) != present {
				t.Errorf("present %v, Len %d, want present %v", present, c.Len(), tc.get != "")
			}
		})
	}
}

// TestAssumeCacheExpireOrderAndRange: Expire returns the expired keys in
// order, Range sees in-flight and done values.
func TestAssumeCacheExpireOrderAndRange(t *testing.T) {
	t0 := time.Unix(1000, 0)
	c := newAssumeCache[string, int](time.Second, false)
	for i, k := range []string{"c", "a", "b"} {
		tok := c.Assume(k, i)
		c.Finish(k, tok, true, nil, t0)
	}
	c.Assume("d", 7) // in flight
	sum := 0
	c.Range(func(_ string, v int) bool { sum += v; return true })
	if sum != 0+1+2+7 {
		t.Fatalf("Range summed %d", sum)
	}
	ks, vs := c.Expire(t0.Add(time.Second))
	if got := fmt.Sprint(ks, vs); got != "[a b c] [1 2 0]" {
		t.Fatalf("expired %s, want [a b c] [1 2 0]", got)
	}
	if fmt.Sprint(c.Keys()) != "[d]" {
		t.Fatalf("left %v, want [d]", c.Keys())
	}
}
