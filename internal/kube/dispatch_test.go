package kube

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
)

// waitAnswers takes answers until n have come.
func waitAnswers(t *testing.T, d *dispatcher, kick chan struct{}, n int) []opResult {
	t.Helper()
	var out []opResult
	deadline := time.After(time.Minute)
	for len(out) < n {
		out = append(out, d.Take()...)
		if len(out) >= n {
			break
		}
		select {
		case <-kick:
		case <-deadline:
			t.Fatalf("%d answers of %d after a minute", len(out), n)
		}
	}
	return out
}

func notifier() (chan struct{}, func()) {
	kick := make(chan struct{}, 1)
	return kick, func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
}

// TestDispatcherBounded: with its workers held, a full queue refuses the
// next call at once (Add never blocks), and takes calls again once room
// is made.
func TestDispatcherBounded(t *testing.T) {
	kick, notify := notifier()
	d := newDispatcher(2, time.Minute, notify)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hold := make(chan struct{})
	started := make(chan string, 10)
	d.started = func(k string) { started <- k }
	call := func(k string) op {
		return op{key: k, do: func(context.Context) opResult { <-hold; return opResult{} }}
	}
	done := make(chan struct{})
	go func() { d.run(ctx, 1); close(done) }()
	if !d.Add(call("a")) {
		t.Fatal("a refused")
	}
	<-started // a in flight: the one worker is held
	if !d.Add(call("b")) || !d.Add(call("c")) {
		t.Fatal("b or c refused below the bound")
	}
	if d.Add(call("d")) {
		t.Fatal("d accepted above the bound")
	}
	if st := d.Stats(); st.Refused != 1 {
		t.Fatalf("refused %d, want 1", st.Refused)
	}
	if d.Busy("d") || !d.Busy("a") || !d.Busy("b") {
		t.Fatal("Busy wrong")
	}
	close(hold)
	got := waitAnswers(t, d, kick, 3)
	if got[0].key != "a" || got[1].key != "b" || got[2].key != "c" {
		t.Fatalf("answers in order %q %q %q, want a b c", got[0].key, got[1].key, got[2].key)
	}
	if d.Busy("a") {
		t.Fatal("a busy after its answer was taken")
	}
	if !d.Add(call("d")) {
		t.Fatal("d refused with room")
	}
	waitAnswers(t, d, kick, 1)
	cancel()
	<-done
}

// TestDispatcherOnePerKey: a call whose key is in flight waits until the
// answer is taken; a newer call replaces a queued one, whose fail result
// is reported.
func TestDispatcherOnePerKey(t *testing.T) {
	kick, notify := notifier()
	d := newDispatcher(10, time.Minute, notify)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hold := make(chan struct{})
	started := make(chan string, 10)
	d.started = func(k string) { started <- k }
	var ran []string
	mk := func(name string, wait bool) op {
		return op{key: "k", wl: name, do: func(context.Context) opResult {
			if wait {
				<-hold
			}
			ran = append(ran, name) // (one call per key at a time: no race)
			return opResult{}
		}, fail: opResult{asg: "pod-" + "x"}}
	}
	done := make(chan struct{})
	go func() { d.run(ctx, 4); close(done) }()
	d.Add(mk("first", true))
	<-started
	d.Add(mk("second", false))
	d.Add(mk("third", false)) // replaces second
	if st := d.Stats(); st.Replaced != 1 {
		t.Fatalf("replaced %d, want 1", st.Replaced)
	}
	rs := d.Take()
	if len(rs) != 1 || rs[0].wl != "second" || !errors.Is(rs[0].err, errReplaced) || rs[0].asg != "pod-x" {
		t.Fatalf("replaced call's answer %+v", rs)
	}
	close(hold)
	got := waitAnswers(t, d, kick, 1)
	if got[0].wl != "first" {
		t.Fatalf("answer %q, want first", got[0].wl)
	}
	select {
	case k := <-started:
		_ = k // third may start only now that first's answer was taken
	case <-time.After(time.Minute):
		t.Fatal("third never started")
	}
	got = waitAnswers(t, d, kick, 1)
	if got[0].wl != "third" || len(ran) != 2 || ran[0] != "first" || ran[1] != "third" {
		t.Fatalf("ran %v, answer %q", ran, got[0].wl)
	}
	cancel()
	<-done
}

// TestDispatcherOnePerKeyWaitsForTake: a second call of a key in flight
// does not start before the first's answer is taken.
func TestDispatcherOnePerKeyWaitsForTake(t *testing.T) {
	kick, notify := notifier()
	d := newDispatcher(10, time.Minute, notify)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan string, 10)
	d.started = func(k string) { started <- k }
	done := make(chan struct{})
	go func() { d.run(ctx, 4); close(done) }()
	d.Add(op{key: "k", wl: "1", do: func(context.Context) opResult { return opResult{} }})
	<-started
	<-kick // answered, not taken
	d.Add(op{key: "k", wl: "2", do: func(context.Context) opResult { return opResult{} }})
	d.Add(op{key: "other", do: func(context.Context) opResult { return opResult{} }})
	if k := <-started; k != "other" {
		t.Fatalf("%q started while the first k's answer was not taken", k)
	}
	if rs := d.Take(); len(rs) < 1 || rs[0].wl != "1" {
		t.Fatalf("answers %+v", rs)
	}
	if k := <-started; k != "k" {
		t.Fatalf("started %q, want k", k)
	}
	cancel()
	<-done
}

// TestDispatcherCancel: cancelling run's context cancels the calls in
// flight, drops the queued ones, refuses new ones, and run returns.
func TestDispatcherCancel(t *testing.T) {
	_, notify := notifier()
	d := newDispatcher(10, time.Hour, notify)
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan string, 10)
	d.started = func(k string) { started <- k }
	errc := make(chan error, 1)
	done := make(chan struct{})
	go func() { d.run(ctx, 1); close(done) }()
	d.Add(op{key: "a", do: func(c context.Context) opResult { <-c.Done(); errc <- c.Err(); return opResult{err: c.Err()} }})
	<-started
	d.Add(op{key: "b", do: func(context.Context) opResult { t.Error("b ran after the cancel"); return opResult{} }})
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("call's context ended with %v", err)
	}
	<-done
	if d.Add(op{key: "c", do: func(context.Context) opResult { return opResult{} }}) {
		t.Fatal("a call accepted after the end")
	}
	if d.Len() != 0 {
		t.Fatalf("%d calls left queued", d.Len())
	}
}

// TestDispatcherCallTimeout: each call has a deadline of its own.
func TestDispatcherCallTimeout(t *testing.T) {
	kick, notify := notifier()
	d := newDispatcher(10, time.Millisecond, notify)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { d.run(ctx, 1); close(done) }()
	d.Add(op{key: "a", do: func(c context.Context) opResult { <-c.Done(); return opResult{err: c.Err()} }})
	got := waitAnswers(t, d, kick, 1)
	if !errors.Is(got[0].err, context.DeadlineExceeded) {
		t.Fatalf("answer %v, want the deadline", got[0].err)
	}
	cancel()
	<-done
}

// TestRefusedCallIsRetried: a binding that a full dispatcher queue
// refuses neither blocks the loop nor stays assumed: the next step
// reports it as a failed call, forgets the binding (the node's GPUs are
// free again) and retries the workload after a back-off.
func TestRefusedCallIsRetried(t *testing.T) {
	o := Options{Policy: "gandiva"}
	o.defaults()
	cs := fake.NewClientset()
	s, err := newScheduler(cs, cs, o, record.NewFakeRecorder(16))
	if err != nil {
		t.Fatal(err)
	}
	s.disp = newDispatcher(0, time.Second, s.q.poke) // full: refuses every call
	ws := &wstate{w: &workload{key: "pods/team-a/p", podGPUs: 1}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "p", UID: "uid-p"}}
	s.bind(ws, pod, "n", 1)
	if _, ok := s.binds.Get(pod.UID); !ok {
		t.Fatal("binding not assumed")
	}
	s.step()
	if _, ok := s.binds.Get(pod.UID); ok {
		t.Fatal("a refused binding is still assumed")
	}
	if s.busy("pod:" + string(pod.UID)) {
		t.Fatal("a refused call's key is busy")
	}
	if st := s.Stats(); st.Errors != 1 || st.Refused != 1 || st.Queue.Retries != 1 {
		t.Fatalf("errors %d, refused %d, retries %d; want 1 each", st.Errors, st.Refused, st.Queue.Retries)
	}
	if s.q.NextRetry().IsZero() {
		t.Fatal("the workload is not retried")
	}
}
