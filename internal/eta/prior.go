package eta

import (
	"fmt"
	"math"
	"sort"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/trace"
)

// Prior says how long a job of unknown length will still run.
type Prior interface {
	// Remaining is the run time (seconds on reference GPUs) a job of user
	// that has already run ran seconds is assumed to have left, and the
	// assumption in words.
	Remaining(user string, ran float64) (float64, string)
}

// Quantiles is a run-time distribution as quantiles: {percentile, seconds},
// percentiles ascending from 0 to 100, seconds positive and not
// decreasing. Between neighbours it is log-uniform.
type Quantiles struct {
	Name string
	Q    [][2]float64
}

// PhillyPrior is the distribution of the run times of the 82,247 jobs of
// the Philly trace (trace.PhillyDurations: median 1,144 s, mean 13,136 s).
func PhillyPrior() *Quantiles {
	return &Quantiles{Name: "the Philly trace's run times", Q: trace.PhillyDurations()}
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

// Remaining implements Prior: the mean of what remains of the run times
// longer than ran, E[D − ran | D > ran] for D drawn from the distribution
// (beyond the longest run time known: as long again as it has run). The
// mean, not the median: a queue's wait is a sum of such remainders, and of
// a heavy-tailed distribution the median is far below what a sum of them
// comes to.
func (q *Quantiles) Remaining(_ string, ran float64) (float64, string) {
	ran = math.Max(ran, 0)
	p := q.cdf(ran)
	if p >= 100 {
		return math.Max(ran, minRemaining), fmt.Sprintf("it has run %.0f s, longer than any of %s: assumed to run as long again", ran, q.Name)
	}
	rest := math.Max(q.meanAbove(p)-ran, minRemaining)
	if ran == 0 {
		return rest, fmt.Sprintf("assumed %.0f s, the mean of %s", rest, q.Name)
	}
	return rest, fmt.Sprintf("it has run %.0f s: assumed %.0f s more, the mean remainder of the longer ones of %s", ran, rest, q.Name)
}

// meanAbove is the mean run time of the distribution above percentile p0
// (exact for the log-uniform pieces: the mean of lo·k^f over f in [a, 1]
// is lo·(k − k^a)/(ln k · (1 − a))).
func (q *Quantiles) meanAbove(p0 float64) float64 {
	t := q.Q
	sum, mass := 0.0, 0.0
	for i := 1; i < len(t); i++ {
		lo, hi := t[i-1], t[i]
		if hi[0] <= p0 || hi[0] == lo[0] {
			continue
		}
		a := max((p0-lo[0])/(hi[0]-lo[0]), 0)
		w := (hi[0] - lo[0]) * (1 - a) // the percentiles of this piece above p0
		k := hi[1] / lo[1]
		m := lo[1] * math.Pow(k, a)
		if k != 1 {
			m = lo[1] * (k - math.Pow(k, a)) / (math.Log(k) * (1 - a))
		}
		if a >= 1 {
			continue
		}
		sum += m * w
		mass += w
	}
	if mass == 0 {
		return t[len(t)-1][1]
	}
	return sum / mass
}

// UserHistory assumes a job runs like its user's finished jobs that ran
// longer than it has so far, when there are at least MinJobs of them (the
// mean of what remains of those), else as Fallback says.
type UserHistory struct {
	// Finished are the run times of finished jobs by user.
	Finished map[string][]float64
	// MinJobs is the least history used (0: 5).
	MinJobs  int
	Fallback Prior
}

// Remaining implements Prior.
func (h UserHistory) Remaining(user string, ran float64) (float64, string) {
	need := h.MinJobs
	if need <= 0 {
		need = 5
	}
	var longer []float64
	for _, d := range h.Finished[user] {
		if d > ran {
			longer = append(longer, d-ran)
		}
	}
	if len(longer) >= need {
		rest := 0.0
		for _, d := range longer {
			rest += d
		}
		rest /= float64(len(longer))
		return rest, fmt.Sprintf("assumed %.0f s more, the mean remainder of %s's %d finished jobs that ran longer than its %.0f s", rest, user, len(longer), ran)
	}
	if h.Fallback == nil {
		return math.Max(ran, minRemaining), "assumed to run as long again as it has"
	}
	return h.Fallback.Remaining(user, ran)
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
