package kube

import (
	"fmt"
	"testing"
	"time"
)

// TestWorkQueueOrderAndDedup: keys come out once, nodes before workloads
// before the settings, by name.
func TestWorkQueueOrderAndDedup(t *testing.T) {
	q := newWorkQueue(time.Second, 8*time.Second)
	t0 := time.Unix(1000, 0)
	q.Add(qkey{keySettings, ""})
	q.Add(qkey{keyWorkload, "job/b/x"})
	q.Add(qkey{keyNode, "n2"})
	q.Add(qkey{keyWorkload, "job/a/x"})
	q.Add(qkey{keyNode, "n1"})
	q.Add(qkey{keyWorkload, "job/b/x"})
	select {
	case <-q.Kick():
	default:
		t.Fatal("no kick after Add")
	}
	got := fmt.Sprint(q.Take(t0))
	want := "[{0 n1} {0 n2} {1 job/a/x} {1 job/b/x} {2 }]"
	if got != want {
		t.Fatalf("Take = %s, want %s", got, want)
	}
	if st := q.Stats(); st.Adds != 6 || st.Depth != 0 {
		t.Fatalf("stats %+v", st)
	}
	if got := q.Take(t0); len(got) != 0 {
		t.Fatalf("second Take = %v", got)
	}
}

// TestWorkQueueBackoff: a key's retries wait base, then twice as long
// each time up to max; Forget resets; an Add while backing off is due now.
func TestWorkQueueBackoff(t *testing.T) {
	q := newWorkQueue(time.Second, 4*time.Second)
	t0 := time.Unix(1000, 0)
	k := qkey{keyWorkload, "job/a/x"}
	now := t0
	var delays []time.Duration
	for range 5 {
		d := q.Retry(k, now)
		delays = append(delays, d)
		if got := q.Take(now.Add(d - time.Millisecond)); len(got) != 0 {
			t.Fatalf("due before its back-off: %v", got)
		}
		if q.NextRetry() != now.Add(d) {
			t.Fatalf("NextRetry %v, want %v", q.NextRetry(), now.Add(d))
		}
		if st := q.Stats(); st.Waiting != 1 {
			t.Fatalf("waiting %d, want 1", st.Waiting)
		}
		now = now.Add(d)
		if got := q.Take(now); len(got) != 1 || got[0] != k {
			t.Fatalf("not due after its back-off: %v", got)
		}
		if !q.NextRetry().IsZero() {
			t.Fatal("NextRetry after the retry was taken")
		}
	}
	if got, want := fmt.Sprint(delays), "[1s 2s 4s 4s 4s]"; got != want {
		t.Fatalf("delays %s, want %s", got, want)
	}
	q.Forget(k)
	if d := q.Retry(k, now); d != time.Second {
		t.Fatalf("after Forget the back-off is %v, want 1s", d)
	}
	q.Add(k)
	if got := q.Take(now); len(got) != 1 {
		t.Fatalf("an Add during back-off is not due now: %v", got)
	}
	if !q.NextRetry().IsZero() {
		t.Fatal("the retry taken with the Add is still waiting")
	}
	if st := q.Stats(); st.Retries != 6 {
		t.Fatalf("retries %d, want 6", st.Retries)
	}
}
