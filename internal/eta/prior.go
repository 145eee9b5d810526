package eta

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/trace"
)

// Prior says how long a job of unknown length will still run.
type Prior interface {
	// Remaining is the distribution of the run time (seconds on reference
	// GPUs) that a job of user that has already run ran seconds has left,
	// and the assumption in words: which distribution, over how many
	// jobs, conditioned on the time it has run.
	Remaining(user string, ran float64) (Remainder, string)
}

// Remainder is a distribution of remaining run time by its quantile
// function: the seconds at probability u in [0, 1]; not decreasing in u,
// never below minRemaining.
type Remainder func(u float64) float64

// point is the distribution of one value.
func point(d float64) Remainder {
	d = math.Max(d, minRemaining)
	return func(float64) float64 { return d }
}

// Quantiles is a run-time distribution as quantiles: {percentile, seconds},
// percentiles ascending from 0 to 100, seconds positive and not
// decreasing. Between neighbours it is log-uniform. Jobs, when positive,
// is the number of jobs it was computed from (said in notes).
type Quantiles struct {
	Name string
	Jobs int
	Q    [][2]float64
}

// PhillyPrior is the distribution of the run times of the 82,247 jobs of
// the Philly trace (trace.PhillyDurations: median 1,144 s, mean 13,136 s).
func PhillyPrior() *Quantiles {
	return &Quantiles{Name: "the Philly trace's run times", Jobs: 82247, Q: trace.PhillyDurations()}
}

// at is the quantile function: the run time at percentile p.
func (q *Quantiles) at(p float64) float64 {
	t := q.Q
	i := sort.Search(len(t), func(i int) bool { return t[i][0] > p })
	i = min(max(i, 1), len(t)-1)
	lo, hi := t[i-1], t[i]
	if hi[0] == lo[0] || lo[1] <= 0 {
		return hi[1]
	}
	f := min(max((p-lo[0])/(hi[0]-lo[0]), 0), 1)
	return lo[1] * math.Pow(hi[1]/lo[1], f)
}

// cdf is the percentile of run time d (the inverse of at).
func (q *Quantiles) cdf(d float64) float64 {
	t := q.Q
	if d <= t[0][1] {
		return t[0][0]
	}
	i := sort.Search(len(t), func(i int) bool { return t[i][1] >= d })
	if i == len(t) {
		return 100
	}
	lo, hi := t[i-1], t[i]
	if hi[1] == lo[1] {
		return hi[0]
	}
	f := math.Log(d/lo[1]) / math.Log(hi[1]/lo[1])
	return lo[0] + f*(hi[0]-lo[0])
}

// Remaining implements Prior: the distribution of D − ran given D > ran,
// for D drawn from q (beyond the longest run time known: as long again as
// it has run). Conditioning moves it smoothly as ran grows: its quantile
// at u is that of q at the percentile cdf(ran) + u·(100 − cdf(ran)).
func (q *Quantiles) Remaining(_ string, ran float64) (Remainder, string) {
	ran = math.Max(ran, 0)
	name := q.Name
	if q.Jobs > 0 {
		name = fmt.Sprintf("%s (%s jobs)", q.Name, thousands(q.Jobs))
	}
	p := q.cdf(ran)
	if p >= 100 {
		return point(ran), fmt.Sprintf("it has run %s, longer than any of %s: assumed to run as long again", human(ran), name)
	}
	r := func(u float64) float64 {
		u = min(max(u, 0), 1)
		return math.Max(q.at(p+u*(100-p))-ran, minRemaining)
	}
	if ran == 0 {
		return r, fmt.Sprintf("drawn from %s: %s", name, band(r, ""))
	}
	return r, fmt.Sprintf("drawn from those of %s longer than the %s it has run: %s", name, human(ran), band(r, " more"))
}

// UserHistory assumes a job runs like its user's jobs that ran longer
// than it has so far, when at least MinJobs of them finished, else as
// Fallback says. The distribution is the Kaplan–Meier estimate of what
// remains of those jobs: the finished ones ended, the ones still running
// (Running) are known only to last at least as long as they have run
// (censored). Left out, the jobs still running would leave a history of
// the short jobs, the long ones not having finished yet. Beyond the
// longest finished job the estimate has nothing to say when jobs still
// run past it: there the tail is Fallback's, conditioned on lasting that
// long (or, with no Fallback, the longest time known).
type UserHistory struct {
	// Finished are the run times of finished jobs by user.
	Finished map[string][]float64
	// Running are the times jobs that have not ended have run so far, by
	// user.
	Running map[string][]float64
	// MinJobs is the least history used (0: 5).
	MinJobs  int
	Fallback Prior
}

// Remaining implements Prior.
func (h UserHistory) Remaining(user string, ran float64) (Remainder, string) {
	need := h.MinJobs
	if need <= 0 {
		need = 5
	}
	type obs struct {
		t     float64
		ended bool
	}
	var all []obs
	events := 0
	for _, d := range h.Finished[user] {
		if d > ran {
			all = append(all, obs{d - ran, true})
			events++
		}
	}
	if events < need {
		if h.Fallback == nil {
			return point(ran), "assumed to run as long again as it has"
		}
		return h.Fallback.Remaining(user, ran)
	}
	censored := 0
	for _, d := range h.Running[user] {
		if d > ran {
			all = append(all, obs{d - ran, false})
			censored++
		}
	}
	// ties: the ended first (a job censored at t was at risk at t)
	slices.SortFunc(all, func(a, b obs) int {
		if c := cmp.Compare(a.t, b.t); c != 0 {
			return c
		}
		switch {
		case a.ended && !b.ended:
			return -1
		case b.ended && !a.ended:
			return 1
		}
		return 0
	})
	// the estimate's steps: at each time some ended, the probability of
	// having ended by then (F) before and after
	var ts, lo, hi []float64
	surv, atRisk := 1.0, len(all)
	last := 0.0
	for k := 0; k < len(all); {
		t, d, c := all[k].t, 0, 0
		for ; k < len(all) && all[k].t == t; k++ {
			if all[k].ended {
				d++
			} else {
				c++
			}
		}
		if d > 0 {
			before := 1 - surv
			surv *= 1 - float64(d)/float64(atRisk)
			ts, lo, hi = append(ts, t), append(lo, before), append(hi, 1-surv)
		}
		atRisk -= d + c
		last = t
	}
	top := hi[len(hi)-1] // < 1 when jobs still run past the longest finished one
	var tail Remainder
	if top < 1 && h.Fallback != nil {
		tail, _ = h.Fallback.Remaining(user, ran+last)
	}
	r := func(u float64) float64 {
		u = min(max(u, 0), 1)
		if u > top {
			if tail == nil {
				return math.Max(last, minRemaining)
			}
			return math.Max(last+tail((u-top)/(1-top)), minRemaining)
		}
		// linear between the middles of the steps (one step: its time)
		mid := func(i int) float64 { return (lo[i] + hi[i]) / 2 }
		i := sort.Search(len(ts), func(i int) bool { return mid(i) >= u })
		switch {
		case i == 0:
			return math.Max(ts[0], minRemaining)
		case i == len(ts):
			return math.Max(ts[len(ts)-1], minRemaining)
		}
		f := (u - mid(i-1)) / (mid(i) - mid(i-1))
		return math.Max(ts[i-1]+f*(ts[i]-ts[i-1]), minRemaining)
	}
	what := fmt.Sprintf("drawn from %s's %d finished jobs", user, events)
	if censored > 0 {
		what += fmt.Sprintf(" and %d still running", censored)
	}
	what += fmt.Sprintf(" that ran longer than the %s it has run", human(ran))
	if tail != nil {
		what += fmt.Sprintf(" (beyond %s, the tail of the fall-back prior)", human(ran+last))
	}
	return r, fmt.Sprintf("%s: %s", what, band(r, " more"))
}

// band describes a distribution: "19 min<more> at the median (p10–p90
// 1 min–3.1 h)".
func band(r Remainder, more string) string {
	return fmt.Sprintf("%s%s at the median (p10–p90 %s–%s)", human(r(0.5)), more, human(r(0.1)), human(r(0.9)))
}

// human is a length of time in seconds for people: "45 s", "19 min",
// "3.1 h", "2.5 days".
func human(s float64) string {
	switch {
	case math.IsInf(s, 1):
		return "for ever"
	case s < 90:
		return fmt.Sprintf("%.0f s", s)
	case s < 90*60:
		return fmt.Sprintf("%.0f min", s/60)
	case s < 48*3600:
		return fmt.Sprintf("%.1f h", s/3600)
	}
	return fmt.Sprintf("%.1f days", s/86400)
}

// thousands writes n with commas: 82,247.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// RefIterTime is the seconds per mini-batch on reference GPUs that a job's
// measurements give: its last sample's, or, when that one shared a GPU
// with another job, its best solo time on the same GPU type; scaled from
// the type it ran on to the reference type by the type's speed. 0 when it
// was never measured.
func RefIterTime(c *cluster.Cluster, p *cluster.Profile) float64 {
	s := p.Last()
	if s == nil || s.IterTime <= 0 {
		return 0
	}
	it := s.IterTime
	if solo := p.SoloIterTime(s.Type); s.Shared && solo > 0 {
		it = solo
	}
	if c != nil && s.Type >= 0 && s.Type < len(c.Types) && c.Types[s.Type].Speed > 0 {
		it *= c.Types[s.Type].Speed
	}
	return it
}
