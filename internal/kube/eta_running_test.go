package kube

import (
	"context"
	"encoding/json"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/gandiva-sched/gandiva/internal/eta"
	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
	"github.com/gandiva-sched/gandiva/internal/kube/kubetest"
)

// TestEndETAText: a running job's end is shown as a median with its band,
// open when beyond the horizon, and the assumption in short, read from
// the estimate's note as package eta writes it.
func TestEndETAText(t *testing.T) {
	at := float64(time.Date(2026, 11, 27, 17, 0, 0, 0, time.UTC).Unix())
	e := eta.Estimate{Start: at, StartLow: at, StartHigh: at, Finish: at + 4000, FinishLow: at + 700, FinishHigh: math.Inf(1), Samples: 20,
		Note: "length unknown, drawn from those of the Philly trace's run times (82,247 jobs) longer than the 5 min it has run: 19 min more at the median (p10–p90 1 min–3.1 h); no other job arrives; median and p10–p90 of 20 forecasts that draw the unknown lengths (of 2 jobs) from their priors; the band widened by the policy's calibration on the Philly trace (for jobs arriving later and the fork's errors)"}
	want := "end ~Nov 27 18:07 UTC (p10–p90 Nov 27 17:12 UTC – later); prior: the Philly trace's run times, 20 forks, band widened by calibration"
	if got := endETAText(e); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	for _, c := range []struct{ note, want string }{
		{"length unknown, drawn from the Philly trace's run times (82,247 jobs): 19 min at the median (p10–p90 1 min–3.1 h); no other job arrives", "prior: the Philly trace's run times"},
		{"length unknown, drawn from alice's 7 finished jobs and 2 still running that ran longer than the 5 s it has run: 3 min more at the median (p10–p90 1 min–9 min); no other job arrives", "prior: alice's 7 finished jobs and 2 still running"},
		{"length unknown, assumed to run as long again as it has; no other job arrives", "prior: none, assumed to run as long again as it has"},
		{"120 of 500 mini-batches left at 0.5 s each (measured); no other job arrives", "declared length (gandiva.io/iters)"},
	} {
		e := eta.Estimate{Finish: at + 600, Samples: 1, Note: c.note}
		if got := etaAssumption(e); got != c.want {
			t.Errorf("%q: %q, want %q", c.note, got, c.want)
		}
		if got := endETAText(e); strings.Contains(got, "p10") || !strings.HasPrefix(got, "end ~Nov 27 17:10 UTC; "+c.want) {
			t.Errorf("one forecast: %q", got)
		}
	}
}

// TestRunningETAWrites: a running job's shown end changes only when an end
// edge moved materially (its start, the forecast's now, does not count),
// and a pod's annotation is written only when it differs, at most once per
// etaRewrite.
func TestRunningETAWrites(t *testing.T) {
	const now = 1000.0
	a := eta.Estimate{Start: now, StartLow: now, StartHigh: now, Finish: now + 3600, FinishLow: now + 1800, FinishHigh: now + 7200, Samples: 20}
	later := a
	later.Start, later.StartLow, later.StartHigh = now+600, now+600, now+600
	if etaMoved(endsOnly(a), endsOnly(later), now+600) {
		t.Error("a running job's end counts as moved when only the forecast's now moved")
	}
	far := a
	far.Finish += 1800
	if !etaMoved(endsOnly(a), endsOnly(far), now) {
		t.Error("an end that moved by half an hour of an hour does not count")
	}
	t0 := time.Date(2026, 11, 27, 17, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name        string
		shown, want string
		last, now   time.Time
		write       bool
		at          time.Time
	}{
		{"same text", "end ~x", "end ~x", time.Time{}, t0, false, time.Time{}},
		{"never written", "", "end ~x", time.Time{}, t0, true, time.Time{}},
		{"a user's text, never written", "mine", "end ~x", time.Time{}, t0, true, time.Time{}},
		{"written 10 s ago", "mine", "end ~x", t0.Add(-10 * time.Second), t0, false, t0.Add(20 * time.Second)},
		{"written 30 s ago", "end ~y", "end ~x", t0.Add(-30 * time.Second), t0, true, time.Time{}},
	} {
		w, at := etaWrite(c.shown, c.want, c.last, c.now)
		if w != c.write || !at.Equal(c.at) {
			t.Errorf("%s: write %v at %v, want %v at %v", c.name, w, at, c.write, c.at)
		}
	}
}

// TestRunningShowsETA: a running Job's bound pod carries its end ETA
// (gandiva.io/eta: median, p10–p90 band, the prior in short), which the
// view the CLI reads shows; a pod owner's own text in that annotation is
// replaced (within etaRewrite), and does not change where the job runs.
func TestRunningShowsETA(t *testing.T) {
	t.Parallel() // a control plane of its own; it mostly waits
	p := kubetest.Start(t, cplane.Options{Kwok: true, Controllers: true})
	cs := kubetest.Client(t, p)
	kubetest.AddNodes(t, cs, kubetest.Nodes{Count: 1, GPUs: 2})
	kubetest.Namespace(t, cs, "team-a")
	runGandiva(t, p, Options{Policy: "fifo"})
	createJob(t, cs, jobSpec{ns: "team-a", name: "a", pods: 1, gpus: 2})
	kubetest.Eventually(t, 60*time.Second, "job a bound", func() (bool, error) {
		return boundCount(t, cs, "team-a", "a") == 1, nil
	})
	end := regexp.MustCompile(`^end ~[A-Z][a-z]{2} \d+ \d\d:\d\d UTC \(p10–p90 [^)]*\); prior: the Philly trace's run times, \d+ forks`)
	var shown string
	kubetest.Eventually(t, 90*time.Second, "a's bound pod carries its end ETA", func() (bool, error) {
		a, err := boundETA(cs, "team-a", "a")
		shown = a
		return end.MatchString(a), err
	})
	t.Logf("a runs: %s=%s", AnnETA, shown)
	kubetest.Eventually(t, 60*time.Second, "the view shows a's ETA", func() (bool, error) {
		v, err := Describe(t.Context(), cs, "team-a", "a")
		return err == nil && v.State == StateRunning && v.ETA == shown, err
	})
	// the pod's owner writes the annotation: Gandiva writes its own again
	b, _, err := jobPods(cs, "team-a", "a")
	if err != nil || len(b) != 1 {
		t.Fatalf("a's bound pods: %v, %v", b, err)
	}
	node, uid := b[0].Spec.NodeName, b[0].UID
	body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{AnnETA: "end ~never\x1b[2J"}}})
	if _, err := cs.CoreV1().Pods("team-a").Patch(context.Background(), b[0].Name, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 90*time.Second, "Gandiva's ETA written again over the owner's", func() (bool, error) {
		a, err := boundETA(cs, "team-a", "a")
		return end.MatchString(a), err
	})
	if b, _, err := jobPods(cs, "team-a", "a"); err != nil || len(b) != 1 || b[0].UID != uid || b[0].Spec.NodeName != node || b[0].DeletionTimestamp != nil {
		t.Errorf("a's pod moved or went after its owner wrote %s: %v, %v", AnnETA, b, err)
	}
}

// boundETA is the AnnETA of a Job's bound pod ("" when none is bound).
func boundETA(cs kubernetes.Interface, ns, job string) (string, error) {
	b, _, err := jobPods(cs, ns, job)
	if err != nil || len(b) == 0 {
		return "", err
	}
	return b[0].Annotations[AnnETA], nil
}
