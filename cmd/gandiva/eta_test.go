package main

import (
	"strings"
	"testing"
	"time"

	"github.com/gandiva-sched/gandiva/internal/api"
)

func TestETAText(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.Local)
	at := func(d time.Duration) *time.Time { x := now.Add(d); return &x }
	for _, tc := range []struct {
		e    *api.ETA
		want string
	}{
		{nil, "-"},
		{&api.ETA{}, "-"},
		{&api.ETA{Start: at(3 * time.Minute), Finish: at(78 * time.Minute)}, "starts ~12:03 (in 3m0s), ends ~13:18 (in 1h18m0s)"},
		{&api.ETA{Finish: at(-time.Second)}, "ends ~11:59 (now)"},
		{&api.ETA{Start: at(time.Hour)}, "starts ~13:00 (in 1h0m0s), end not forecast"},
		// a median with its band; one open beyond the forecast's reach
		{&api.ETA{Start: at(3 * time.Minute), StartLow: at(time.Minute), StartHigh: at(2 * time.Hour), Finish: at(78 * time.Minute),
			FinishLow: at(20 * time.Minute), Samples: 20},
			"starts ~12:03 (in 3m0s; 80%: 12:01–14:00), ends ~13:18 (in 1h18m0s; 80%: 12:20–…)"},
		// one forecast (every length declared): no band
		{&api.ETA{Finish: at(time.Hour), FinishLow: at(time.Minute), FinishHigh: at(2 * time.Hour), Samples: 1}, "ends ~13:00 (in 1h0m0s)"},
	} {
		if got := etaText(tc.e, now); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.e, got, tc.want)
		}
	}
}

// TestETAFootnote: a listing with bands says what they are and where the
// assumption is; with --eta-detail it says each job's assumption; a
// listing without bands says nothing more.
func TestETAFootnote(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.Local)
	band := []api.Job{{ID: "j1", ETA: &api.ETA{Finish: &now, Samples: 20, Note: "length unknown, drawn from the Philly trace's run times", Forecast: now}}, {ID: "j2"}}
	if got := etaFootnote(band, false); !strings.Contains(got, "80%") || !strings.Contains(got, "--eta-detail") || strings.Contains(got, "Philly") {
		t.Errorf("footnote %q", got)
	}
	if got := etaFootnote(band, true); got != "ETA of j1: length unknown, drawn from the Philly trace's run times (forecast from the state at 12:00:00)\n" {
		t.Errorf("detail %q", got)
	}
	band[0].ETA.Samples = 1
	if got := etaFootnote(band, false); got != "" {
		t.Errorf("no band, footnote %q", got)
	}
}
