package kube

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TestQuietRunningETAsNotReread: each round tells the running workloads
// their end ETAs, but one whose pods all show its text already is not
// looked at again (its pods read from the cache, sorted, its object
// described) until its text changes or one of its pods does: at the
// arena's scale (5,000 Jobs) reading every running workload's pods each
// round was half of gandiva's CPU. What it must still do: write back a
// text someone else overwrote, and a write held back by etaRewrite once
// it is due, with no other event to wake the loop.
func TestQuietRunningETAsNotReread(t *testing.T) {
	s, a := newStoreAPI(t, "tiresias-l")
	defer a.start()()
	for i := range 8 {
		a.addNode(fmt.Sprintf("node-%d", i), 8)
	}
	t0 := time.Now().Add(-time.Hour)
	const running = 40
	for i := range running {
		a.addJob("team-a", fmt.Sprintf("j%02d", i), 1, t0.Add(time.Duration(i)*time.Second))
	}
	s.rebuild()
	// settled, with no forecast in flight or untold, and no new one made
	// meanwhile (a forecast moves the texts)
	for deadline := time.Now().Add(2 * time.Minute); ; {
		a.settle(t)
		s.fc.next = time.Now().Add(time.Hour)
		unlock := s.etaLock()
		busy := s.fc.running || s.fc.fresh
		unlock()
		if !busy {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a forecast still in flight after 2 minutes")
		}
		time.Sleep(10 * time.Millisecond)
	}

	// rounds in which nothing changes for the running workloads: a Job
	// arrives at each step
	looks, rounds := s.stats.ETALooks, s.stats.Rounds
	for i := range 10 {
		a.addJob("team-b", fmt.Sprintf("k%02d", i), 1, time.Now())
		s.step()
	}
	if r := s.stats.Rounds - rounds; r < 10 {
		t.Fatalf("%d rounds in 10 steps that each submitted a Job, want 10", r)
	}
	if d := s.stats.ETALooks - looks; d > 20 {
		t.Errorf("10 rounds looked at running workloads' pods %d times, want at most 20 (the new Jobs': the %d running ones show their ETAs already)", d, running)
	}

	// someone else overwrites a pod's ETA: it is written back, at once
	// when Gandiva's last write is etaRewrite old, else once it is
	overwrite := func(name string, lastWrite time.Duration) (string, *corev1.Pod) {
		t.Helper()
		p, ok := a.pod("team-a", name)
		if !ok {
			t.Fatalf("no pod %s", name)
		}
		want := p.Annotations[AnnETA]
		s.ws["job/team-a/"+name[:len(name)-2]].shown.at[p.UID] = time.Now().Add(-lastWrite)
		q := p.DeepCopy()
		q.Annotations[AnnETA] = "mine"
		a.store.Lock()
		a.putPod(p, q)
		a.store.Unlock()
		return want, q
	}
	waitShown := func(name, want string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			s.step()
			if p, _ := a.pod("team-a", name); p.Annotations[AnnETA] == want {
				return
			}
			if time.Now().After(deadline) {
				p, _ := a.pod("team-a", name)
				t.Fatalf("pod %s shows %q 30 s after someone else wrote it, want %q written back", name, p.Annotations[AnnETA], want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	want, _ := overwrite("j03-0", time.Minute)
	waitShown("j03-0", want)
	// written 29.5 s ago: held back half a second, then written with no
	// event but the loop's own wake-up (and rounds in between that skip it)
	want, _ = overwrite("j07-0", etaRewrite-500*time.Millisecond)
	s.step()
	if p, _ := a.pod("team-a", "j07-0"); p.Annotations[AnnETA] != "mine" {
		t.Fatalf("a write held back by etaRewrite was made at once (%q)", p.Annotations[AnnETA])
	}
	a.addJob("team-b", "late", 1, time.Now())
	s.step() // (a round: its sweep skips j07 until its write is due, and wakes the loop then)
	if due := s.ws["job/team-a/j07"].shown.quietDue; due == 0 || s.wakeAt == 0 || s.wakeAt > due {
		t.Errorf("after a round, the loop wakes at %.3f, want by %.3f when the write held back is due", s.wakeAt, due)
	}
	waitShown("j07-0", want)
}

// TestRunningETAWritesBudgeted: the running pods' end ETAs are written at
// most etaPerSecond a wall second in all (here 10): 40 pods told their
// first ETA at once are written over 4 seconds, and all are written.
func TestRunningETAWritesBudgeted(t *testing.T) {
	s, a := newStoreAPI(t, "tiresias-l")
	s.etaWrites.max = 10
	defer a.start()()
	for i := range 8 {
		a.addNode(fmt.Sprintf("node-%d", i), 8)
	}
	t0 := time.Now().Add(-time.Hour)
	for i := range 40 {
		a.addJob("team-a", fmt.Sprintf("j%02d", i), 1, t0.Add(time.Duration(i)*time.Second))
	}
	s.rebuild()
	a.settle(t) // (every running pod shows an ETA)
	var at []time.Time
	for _, ws := range s.ws {
		for _, w := range ws.shown.at {
			at = append(at, w)
		}
	}
	if len(at) != 40 {
		t.Fatalf("%d pods' ETA writes recorded, want 40", len(at))
	}
	slices.SortFunc(at, time.Time.Compare)
	if span := at[39].Sub(at[0]); span < 3*time.Second {
		t.Errorf("40 pods' first ETAs were written within %v, want over at least 3 s (10 a second)", span)
	}
}
