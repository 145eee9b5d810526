package main

import (
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
	} {
		if got := etaText(tc.e, now); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.e, got, tc.want)
		}
	}
}
