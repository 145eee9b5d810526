package kube

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/eta"
)

// AnnETA is the annotation on a running workload's bound pods that says
// when it is expected to end: "end ~Nov 27 18:07 UTC (p10–p90 Nov 27
// 17:12 UTC – Nov 27 21:40 UTC); prior: the Philly trace's run times, 20
// forks" (what `kubectl describe pod` and `gandiva status --kube` show).
// Gandiva writes it and never reads it back for scheduling: a pod's owner
// may write it too, so readers treat it as text of the pod's owner.
const AnnETA = "gandiva.io/eta"

// etaRewrite is how often at most a pod's AnnETA is written.
const etaRewrite = 30 * time.Second

// etaPerSecond is how many pods' AnnETA are written at most a wall second,
// all workloads together: the 20-fork forecasts of jobs of unknown length
// move their ends by more than etaMoved's margin often, so at the scale of
// 5,000 running pods the rewrites alone were 80% of the scheduler's API
// calls (BenchmarkSchedulerStep), each an event for every watcher; a
// write over the budget waits for the next second.
const etaPerSecond = 50

// etaBudget is the AnnETA writes taken in the wall second from at (loop
// goroutine); max is etaPerSecond unless set (tests).
type etaBudget struct {
	at     time.Time
	n, max int
}

// take takes one write at wall, or returns false and when the next second
// starts.
func (b *etaBudget) take(wall time.Time) (bool, time.Time) {
	if b.at.IsZero() || wall.Sub(b.at) >= time.Second {
		b.at, b.n = wall, 0
	}
	if b.n >= cmp.Or(b.max, etaPerSecond) {
		return false, b.at.Add(time.Second)
	}
	b.n++
	return true, time.Time{}
}

// MaxETAShown bounds the AnnETA text a view keeps (a pod's owner writes
// what they like there).
const MaxETAShown = 300

// endETAText is a running job's end for people, in wall-clock minutes,
// with the assumption it rests on in short.
func endETAText(e eta.Estimate) string {
	text := "end ~" + etaAt(e.Finish)
	if e.Samples > 1 {
		text += fmt.Sprintf(" (p10–p90 %s – %s)", etaAt(e.FinishLow), etaUpper(e.FinishHigh))
	}
	if a := etaAssumption(e); a != "" {
		text += "; " + a
	}
	return text
}

func etaAt(x float64) string {
	if math.IsInf(x, 1) {
		return "not within 7 days"
	}
	return time.Unix(int64(math.Round(x/60)*60), 0).UTC().Format("Jan 2 15:04 UTC")
}

func etaUpper(x float64) string {
	if math.IsInf(x, 1) {
		return "later"
	}
	return etaAt(x)
}

// etaAssumption is what an estimate rests on, in short, from its Note
// (package eta writes the job's own length first, up to "; "): "prior:
// the Philly trace's run times, 20 forks", "declared length
// (gandiva.io/iters), 20 forks", "prior: ...; band widened by
// calibration".
func etaAssumption(e eta.Estimate) string {
	own, _, _ := strings.Cut(e.Note, "; ")
	var a string
	switch {
	case strings.HasPrefix(own, "length unknown, drawn from "):
		src := strings.TrimPrefix(strings.TrimPrefix(own, "length unknown, drawn from "), "those of ")
		for _, end := range []string{" (", ":", " that ran", " longer than"} {
			if i := strings.Index(src, end); i > 0 {
				src = src[:i]
			}
		}
		a = "prior: " + src
	case strings.HasPrefix(own, "length unknown"):
		a = "prior: none, assumed to run as long again as it has"
	case strings.Contains(own, " mini-batches left at "):
		a = "declared length (" + AnnIters + ")"
	}
	if e.Samples > 1 {
		a = strings.TrimPrefix(a+fmt.Sprintf(", %d forks", e.Samples), ", ")
	}
	if strings.Contains(e.Note, "the band widened by") {
		a += ", band widened by calibration"
	}
	return a
}

// endsOnly is e without its start (a running job's start is the forecast's
// now, which moves with every forecast).
func endsOnly(e eta.Estimate) eta.Estimate {
	e.Start, e.StartLow, e.StartHigh = 0, 0, 0
	return e
}

// etaWrite decides whether a pod's AnnETA, now shown, is written with
// want, its last write by Gandiva at last (zero: never): only when they
// differ and the last write is etaRewrite old; else, when they differ,
// at is when it may be.
func etaWrite(shown, want string, last, now time.Time) (write bool, at time.Time) {
	if shown == want {
		return false, time.Time{}
	}
	if last.IsZero() || now.Sub(last) >= etaRewrite {
		return true, time.Time{}
	}
	return false, last.Add(etaRewrite)
}

// tellRunning writes the running workloads' end ETAs on their bound pods
// (AnnETA) and returns the engine time at which a write held back by
// etaRewrite is due (0: none).
//
// A workload with nothing to write at its last look (each pod showed its
// text, or its write was held back by etaRewrite until later than now),
// whose text has not changed since, is skipped: what could make it write
// sooner (a pod bound, gone, or its annotation changed by someone else)
// is a pod event, after which the loop looks at that workload again (step
// calls tellRunningOne for each workload it synced). The sweep then costs
// O(running workloads) map lookups, not a read of every running
// workload's pods each round.
func (s *Scheduler) tellRunning(now float64) float64 {
	due := 0.0
	wall := time.Now()
	for _, j := range s.eng.Snapshot().Active() {
		if ws := s.wsOf(j.ID); ws != nil {
			if msg, ok := s.runText(ws, j, now); ok && ws.shown.quiet(msg, wall) {
				if t := ws.shown.quietDue; t > 0 && (due == 0 || t < due) {
					due = t
				}
				continue
			}
			if t := s.tellRunningOne(ws, j, now); t > 0 && (due == 0 || t < due) {
				due = t
			}
		}
	}
	return due
}

// tellRunningOne writes one running workload's end ETA on its bound pods:
// the text changes only when the forecast's end moved materially
// (etaMoved), a pod is written only when its annotation differs, at most
// once per etaRewrite and etaPerSecond pods a second in all, through the
// low-priority dispatcher.
func (s *Scheduler) tellRunningOne(ws *wstate, j *cluster.Job, now float64) float64 {
	msg, ok := s.runText(ws, j, now)
	ws.shown.quietMsg = ""
	if !ok {
		return 0
	}
	s.stats.ETALooks++
	wall := time.Now()
	due := 0.0
	_, _, pods := s.observe(ws.w.key)
	live := map[types.UID]bool{}
	quiet := true // every live pod shows msg or its write is held back
	var until time.Time
	for _, p := range pods {
		if p.Spec.NodeName == "" || p.DeletionTimestamp != nil || terminal(p) {
			continue
		}
		live[p.UID] = true
		key := "eta:" + string(p.UID)
		if s.busy(key) {
			quiet = false
			continue
		}
		write, at := etaWrite(p.Annotations[AnnETA], msg, ws.shown.at[p.UID], wall)
		if write {
			write, at = s.etaWrites.take(wall)
		}
		if write {
			quiet = false
		} else if !at.IsZero() && (until.IsZero() || at.Before(until)) {
			until = at
		}
		if !write {
			if !at.IsZero() {
				if t := now + s.clk.engineSecs(at.Sub(wall)); due == 0 || t < due {
					due = t
				}
			}
			continue
		}
		if ws.shown.at == nil {
			ws.shown.at = map[types.UID]time.Time{}
		}
		ws.shown.at[p.UID] = wall
		ns, name := p.Namespace, p.Name
		body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{AnnETA: msg}}})
		s.submitLow(op{key: key, do: func(ctx context.Context) opResult {
			_, err := s.low.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return opResult{err: fmt.Errorf("writing pod %s/%s's %s: %w", ns, name, AnnETA, err)}
			}
			return opResult{}
		}})
	}
	for uid := range ws.shown.at {
		if !live[uid] {
			delete(ws.shown.at, uid) // (bounded by its live pods)
		}
	}
	if quiet {
		ws.shown.quietMsg, ws.shown.quietUntil, ws.shown.quietDue = msg, until, due
	}
	return due
}

// quiet reports whether the last look at the workload's pods found
// nothing to write for text msg until after wall.
func (e *etaShown) quiet(msg string, wall time.Time) bool {
	return e.quietMsg != "" && msg == e.quietMsg && (e.quietUntil.IsZero() || wall.Before(e.quietUntil))
}

// runText is the end ETA text a running workload's pods are to show, and
// false when there is none (it does not hold GPUs, or has no forecast
// yet): the text changes only when the forecast's end moved materially
// (etaMoved).
func (s *Scheduler) runText(ws *wstate, j *cluster.Job, now float64) (string, bool) {
	if j == nil || !j.State.Holding() {
		ws.shown.runMsg, ws.shown.at, ws.shown.quietMsg = "", nil, ""
		return "", false
	}
	e, ok := s.estimateOf(j.Spec.Name)
	if !ok {
		return "", false
	}
	if ws.shown.runMsg == "" || etaMoved(endsOnly(ws.shown.run), endsOnly(e), now) {
		ws.shown.run, ws.shown.runMsg = e, endETAText(s.clk.shown(e))
	}
	return ws.shown.runMsg, true
}
