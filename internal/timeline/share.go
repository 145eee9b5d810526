package timeline

import (
	"math"
	"slices"
	"sort"

	"github.com/gandiva-sched/gandiva/internal/cluster"
)

// ShareQuery selects what Shares computes.
type ShareQuery struct {
	// From and To bound the time (To == 0: up to Now); Window is the
	// length of one window in seconds (0 or too small: (To-From)/MaxWindows).
	From, To, Window float64
	// MaxWindows bounds the number of windows (default 240).
	MaxWindows int
	// Tickets are the users' weights (Gandiva_fair's tickets); users not
	// listed have DefaultTickets (default 1). Nil: no entitlement.
	Tickets        map[string]float64
	DefaultTickets float64
	// Visible reports whether the viewer may see user's share by name;
	// nil: all. The others are summed in one series with User "".
	Visible func(user string) bool
}

// Shares is each user's share of the cluster over time: Gandiva_fair's
// picture of who got what against what their tickets entitle them to.
type Shares struct {
	From   float64 `json:"from"`
	To     float64 `json:"to"`
	Window float64 `json:"window"`
	// Times are the windows' starts: window k is [Times[k], Times[k]+Window),
	// the last one cut at To.
	Times []float64 `json:"times"`
	// GPUs is the cluster's size at the latest observation, the capacity
	// against which shares are measured.
	GPUs  int         `json:"gpus"`
	Users []UserShare `json:"users"`
}

// UserShare is one user's series, one value per window.
type UserShare struct {
	// User is "" for the users the viewer may not see, summed.
	User string `json:"user"`
	// Held is the GPU-seconds the user's jobs held (the time of the kinds
	// that hold GPUs × the GPUs held; a GPU that several jobs hold at once,
	// packed, is split evenly among them, so that the users' shares of a
	// window add up to at most 1).
	Held []float64 `json:"held"`
	// Share is Held ÷ (GPUs × the window's length): the fraction of the
	// cluster the user held.
	Share []float64 `json:"share"`
	// Entitled is the fraction of the cluster the user's tickets entitle
	// it to: its tickets ÷ the tickets of the users that had a job waiting
	// or holding GPUs in the window (0 while it had none), as Gandiva_fair
	// divides the cluster among active users. Absent without tickets. It
	// ignores demand: a user with one small job cannot use a large
	// entitlement, and the chart shows that.
	Entitled []float64 `json:"entitled,omitempty"`
	Tickets  float64   `json:"tickets,omitempty"`
}

// Shares computes per-user shares over time from the jobs' lanes.
func (r *Recorder) Shares(q ShareQuery) *Shares {
	to := q.To
	if to == 0 || to > r.now {
		to = r.now
	}
	from := q.From
	if from < r.start {
		from = r.start
	}
	maxW := q.MaxWindows
	if maxW <= 0 {
		maxW = 240
	}
	span := to - from
	w := q.Window
	if span > 0 && (w <= 0 || span/w > float64(maxW)) {
		w = span / float64(maxW)
	}
	n := 0
	if span > 0 && w > 0 {
		n = int(math.Ceil(span/w - 1e-9))
	}
	out := &Shares{From: from, To: to, Window: w, GPUs: len(r.rows), Times: make([]float64, n)}
	for k := range n {
		out.Times[k] = from + float64(k)*w
	}
	type acc struct {
		held   []float64
		active []bool
	}
	users := map[string]*acc{}
	get := func(u string) *acc {
		a := users[u]
		if a == nil {
			a = &acc{held: make([]float64, n), active: make([]bool, n)}
			users[u] = a
		}
		return a
	}
	for id := range r.njobs {
		rec := r.job(cluster.JobID(id))
		if len(rec.lane) == 0 {
			continue
		}
		a := get(rec.user)
		for _, s := range rec.lane {
			if s.kind == dead {
				continue
			}
			st, en := max(s.start, from), min(s.end, to)
			if en < st || n == 0 {
				continue
			}
			// the windows [k0, k1] that [st, en) touches (an instant: its own)
			k0 := min(int((st-from)/w), n-1)
			k1 := k0
			if en > st {
				k1 = min(int(math.Ceil((en-from)/w))-1, n-1)
			}
			for k := k0; k <= k1; k++ {
				a.active[k] = true
			}
		}
	}
	if n > 0 {
		r.heldByGPU(from, to, w, out.Times, func(id cluster.JobID) []float64 { return get(r.job(id).user).held })
	}
	names := make([]string, 0, len(users))
	for u := range users {
		names = append(names, u)
	}
	sort.Strings(names)
	tickets := func(u string) float64 {
		if t, ok := q.Tickets[u]; ok {
			return t
		}
		if q.DefaultTickets > 0 {
			return q.DefaultTickets
		}
		return 1
	}
	activeT := make([]float64, n)
	if q.Tickets != nil {
		for _, u := range names {
			for k, on := range users[u].active {
				if on {
					activeT[k] += tickets(u)
				}
			}
		}
	}
	var other *UserShare
	for _, u := range names {
		a := users[u]
		us := UserShare{User: u, Held: a.held, Share: make([]float64, n)}
		if q.Tickets != nil {
			us.Tickets = tickets(u)
			us.Entitled = make([]float64, n)
			for k, on := range a.active {
				if on && activeT[k] > 0 {
					us.Entitled[k] = us.Tickets / activeT[k]
				}
			}
		}
		if q.Visible != nil && !q.Visible(u) {
			if other == nil {
				other = &UserShare{User: "", Held: make([]float64, n), Share: make([]float64, n)}
				if q.Tickets != nil {
					other.Entitled = make([]float64, n)
				}
			}
			for k := range n {
				other.Held[k] += us.Held[k]
				if us.Entitled != nil {
					other.Entitled[k] += us.Entitled[k]
				}
			}
			other.Tickets += us.Tickets
			continue
		}
		out.Users = append(out.Users, us)
	}
	if other != nil {
		out.Users = append(out.Users, *other)
	}
	for i := range out.Users {
		us := &out.Users[i]
		for k := range n {
			length := min(out.Times[k]+w, to) - out.Times[k]
			if cap := float64(out.GPUs) * length; cap > 0 {
				us.Share[k] = us.Held[k] / cap
			}
		}
	}
	return out
}

// heldByGPU adds, per window, the GPU-seconds each job held on each GPU to
// held(job): the time of its segments of kinds that hold GPUs, within
// [from, to), a stretch in which k jobs hold the GPU counting 1/k for each.
func (r *Recorder) heldByGPU(from, to, w float64, times []float64, held func(cluster.JobID) []float64) {
	type event struct {
		t   float64
		job cluster.JobID
		on  bool
	}
	var evs []event
	var holders []cluster.JobID
	for g := range r.rows {
		evs = evs[:0]
		for _, s := range r.rows[g].segs {
			if s.kind == dead || !r.kinds[s.kind].Holds || s.ref < 0 {
				continue
			}
			st, en := max(s.start, from), min(s.end, to)
			if en > st {
				evs = append(evs, event{st, cluster.JobID(s.ref), true}, event{en, cluster.JobID(s.ref), false})
			}
		}
		// in time order, ends before starts at the same time, then by job
		sort.Slice(evs, func(i, j int) bool {
			a, b := evs[i], evs[j]
			if a.t != b.t {
				return a.t < b.t
			}
			if a.on != b.on {
				return !a.on
			}
			return a.job < b.job
		})
		holders = holders[:0]
		for i, e := range evs {
			if i > 0 && e.t > evs[i-1].t && len(holders) > 0 {
				part := 1 / float64(len(holders))
				for _, j := range holders {
					addWindows(held(j), times, w, evs[i-1].t, e.t, part)
				}
			}
			if e.on {
				holders = append(holders, e.job)
			} else if k := slices.Index(holders, e.job); k >= 0 {
				holders = slices.Delete(holders, k, k+1)
			}
		}
	}
}

// addWindows adds part × the overlap of [lo, hi) with each window to acc.
func addWindows(acc, times []float64, w, lo, hi, part float64) {
	n := len(times)
	k0 := min(int((lo-times[0])/w), n-1)
	for k := max(k0, 0); k < n && times[k] < hi; k++ {
		if a, b := max(lo, times[k]), min(hi, times[k]+w); b > a {
			acc[k] += part * (b - a)
		}
	}
}
