package fair

import "slices"

// Stride is a gang-aware stride scheduler (Gandiva_fair's): each client has a
// size (GPUs, all held at once), tickets and a pass. One quantum visits the
// clients in order of pass, ties by ID, and chooses every client that fits
// in the GPUs still free, advancing a chosen client's pass by
// size × charge / tickets (charge is 1 for a whole quantum):
//
//	def schedule:
//	    freeGPUs = numGPUs
//	    jobs = sort(q, λj: j.pass)
//	    for j in jobs while freeGPUs > 0:
//	        if j.size ≤ freeGPUs:
//	            scheduled ∪= {j}; freeGPUs -= j.size; j.pass += j.size / j.tickets
//
// Over many quanta each client receives GPU-time in proportion to its
// tickets. Stride keeps the clients in a binary min-heap on (pass, ID), so a
// quantum costs O(k log n) for the k clients it visits before the GPUs run
// out, instead of sorting all n; selectPlain is the plain version the tests
// compare it with. The zero value is an empty scheduler. Not safe for
// concurrent use.
type Stride struct {
	h []strideEntry
	// vt is the virtual time: the least pass when the scheduler was last
	// non-empty, so a client joining an empty scheduler starts from it.
	vt float64
	// ran is set once a quantum chose a client since the scheduler was
	// last empty: clients are no longer all at the start line.
	ran bool
	// popped and cand are scratch for Select and SelectFill.
	popped []strideEntry
	cand   []int
}

type strideEntry struct {
	id      int64
	size    int
	tickets float64
	pass    float64
}

func (a *strideEntry) less(b *strideEntry) bool {
	if a.pass != b.pass {
		return a.pass < b.pass
	}
	return a.id < b.id
}

// Len is the number of clients.
func (s *Stride) Len() int { return len(s.h) }

// VT is the scheduler's virtual time: the least pass of its clients, or the
// last such value when it is empty.
func (s *Stride) VT() float64 {
	if len(s.h) > 0 {
		return s.h[0].pass
	}
	return s.vt
}

// Started reports whether a quantum has chosen some client since the
// scheduler was last empty. Before that every client is at the start line;
// after it, the clients' passes spread over [VT, VT + their stride], and a
// newcomer placed at VT would be ahead of all of them (JoinPass).
func (s *Stride) Started() bool { return s.ran }

// JoinPass is where a newcomer of the given size and tickets should start:
// the virtual time before the first quantum, else half its stride past it,
// the average position of a client with that stride, so that arriving
// neither gains nor loses service (clients that come and go often would
// otherwise gain half a stride each time).
func (s *Stride) JoinPass(size int, tickets float64) float64 {
	if !s.ran {
		return s.VT()
	}
	return s.VT() + float64(size)/tickets/2
}

// Add inserts a client with the given pass. A client whose pass is below
// the virtual time starts at the virtual time instead (a newcomer must not
// claim the service it missed before it arrived); Add returns the pass used.
// Adding an ID that is present is a caller error and corrupts nothing but
// that client's fairness.
func (s *Stride) Add(id int64, size int, tickets, pass float64) float64 {
	if vt := s.VT(); pass < vt {
		pass = vt
	}
	s.h = append(s.h, strideEntry{id: id, size: size, tickets: tickets, pass: pass})
	s.up(len(s.h) - 1)
	return pass
}

// Remove deletes a client and returns its pass (ok false when absent). It
// scans the clients: schedulers hold few clients (a server's jobs) or
// change rarely (the central scheduler).
func (s *Stride) Remove(id int64) (pass float64, ok bool) {
	i := s.find(id)
	if i < 0 {
		return 0, false
	}
	pass = s.h[i].pass
	n := len(s.h) - 1
	if n == 0 {
		s.vt = pass
		s.ran = false
	}
	s.h[i] = s.h[n]
	s.h = s.h[:n]
	if i < n {
		s.fix(i)
	}
	return pass, true
}

// Pass returns a client's pass.
func (s *Stride) Pass(id int64) (float64, bool) {
	if i := s.find(id); i >= 0 {
		return s.h[i].pass, true
	}
	return 0, false
}

// SetTickets changes a client's tickets; later quanta charge it at the new
// rate (its pass so far stands).
func (s *Stride) SetTickets(id int64, tickets float64) bool {
	if i := s.find(id); i >= 0 {
		s.h[i].tickets = tickets
		return true
	}
	return false
}

// Charge advances a client's pass as if it had been chosen with the given
// charge (a client the caller had to keep running, say).
func (s *Stride) Charge(id int64, charge float64) bool {
	i := s.find(id)
	if i < 0 {
		return false
	}
	e := &s.h[i]
	e.pass += float64(e.size) * charge / e.tickets
	s.fix(i)
	return true
}

// Cost is what choosing a client with the given charge adds to its pass
// (size × charge / tickets at its current tickets); ok is false when the
// client is absent.
func (s *Stride) Cost(id int64, charge float64) (float64, bool) {
	i := s.find(id)
	if i < 0 {
		return 0, false
	}
	return float64(s.h[i].size) * charge / s.h[i].tickets, true
}

// Refund takes cost back from a client's pass (what Cost said a choice
// added), as if the client had not been chosen: for a caller whose choice
// was not carried out. The pass returns to where it stood before the
// charge, even below the virtual time.
func (s *Stride) Refund(id int64, cost float64) bool {
	i := s.find(id)
	if i < 0 {
		return false
	}
	s.h[i].pass -= cost
	s.fix(i)
	return true
}

func (s *Stride) find(id int64) int {
	for i := range s.h {
		if s.h[i].id == id {
			return i
		}
	}
	return -1
}

// Select runs one quantum over free GPUs: clients in (pass, ID) order, each
// chosen when its size fits what is still free and ok (nil: always) accepts
// it; a chosen client's pass advances by size × charge / tickets. The visit
// stops as soon as no GPU is free. ok is called once per visited client that
// fits, in visiting order, and may record the choice (a central scheduler
// claims servers there). The chosen IDs are appended to dst in choosing order.
func (s *Stride) Select(dst []int64, free int, charge float64, ok func(id int64, size int) bool) []int64 {
	s.popped = s.popped[:0]
	for free > 0 && len(s.h) > 0 {
		e := s.pop()
		if e.size <= free && (ok == nil || ok(e.id, e.size)) {
			free -= e.size
			e.pass += float64(e.size) * charge / e.tickets
			dst = append(dst, e.id)
			s.ran = true
		}
		s.popped = append(s.popped, e)
	}
	for _, e := range s.popped {
		s.h = append(s.h, e)
		s.up(len(s.h) - 1)
	}
	return dst
}

func (s *Stride) pop() strideEntry {
	top := s.h[0]
	n := len(s.h) - 1
	s.h[0] = s.h[n]
	s.h = s.h[:n]
	if n > 0 {
		s.down(0)
	} else {
		s.vt = top.pass
	}
	return top
}

func (s *Stride) fix(i int) {
	if !s.up(i) {
		s.down(i)
	}
}

func (s *Stride) up(i int) bool {
	moved := false
	for i > 0 {
		p := (i - 1) / 2
		if !s.h[i].less(&s.h[p]) {
			break
		}
		s.h[i], s.h[p] = s.h[p], s.h[i]
		i = p
		moved = true
	}
	return moved
}

func (s *Stride) down(i int) {
	n := len(s.h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && s.h[r].less(&s.h[l]) {
			m = r
		}
		if !s.h[m].less(&s.h[i]) {
			return
		}
		s.h[i], s.h[m] = s.h[m], s.h[i]
		i = m
	}
}

// plainClient is a client of selectPlain.
type plainClient struct {
	ID      int64
	Size    int
	Tickets float64
	Pass    float64
}

// selectPlain is the paper's pseudo-code, literally: sort every client by
// pass (ties by ID), walk the list while GPUs are free, choose what fits.
// It is the reference that Stride is tested against.
func selectPlain(cl []plainClient, free int, charge float64, ok func(id int64, size int) bool) []int64 {
	order := make([]int, len(cl))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case cl[a].Pass < cl[b].Pass:
			return -1
		case cl[a].Pass > cl[b].Pass:
			return 1
		case cl[a].ID < cl[b].ID:
			return -1
		case cl[a].ID > cl[b].ID:
			return 1
		}
		return 0
	})
	var out []int64
	for _, i := range order {
		if free <= 0 {
			break
		}
		c := &cl[i]
		if c.Size <= free && (ok == nil || ok(c.ID, c.Size)) {
			free -= c.Size
			c.Pass += float64(c.Size) * charge / c.Tickets
			out = append(out, c.ID)
		}
	}
	return out
}

// SelectPacked is Select with a packing step for gangs: when the paper's
// walk would leave GPUs idle, it chooses instead, among the clients that ok
// accepts, the set that fills the most GPUs, preferring clients in (pass,
// ID) order: the first client is taken whenever some fullest set has it,
// then the second, and so on. With head set, the first acceptable client is
// always taken (so the client furthest behind always runs and nobody
// starves); without it (filling holes between quanta) it need not be. When
// the walk fills every GPU the result is exactly Select's. ok must not
// record anything: it may be called for clients that end up not chosen.
func (s *Stride) SelectPacked(dst []int64, free int, charge float64, head bool, ok func(id int64, size int) bool) []int64 {
	if free <= 0 || len(s.h) == 0 {
		return dst
	}
	// all clients in (pass, ID) order
	s.popped = s.popped[:0]
	for len(s.h) > 0 {
		s.popped = append(s.popped, s.pop())
	}
	var cand []int // indices into popped of acceptable clients
	for i := range s.popped {
		e := &s.popped[i]
		if e.size <= free && (ok == nil || ok(e.id, e.size)) {
			cand = append(cand, i)
		}
	}
	sizes := make([]int, len(cand))
	for k, i := range cand {
		sizes[k] = s.popped[i].size
	}
	take := packChoice(sizes, free, head)
	for k, i := range cand {
		if take[k] {
			e := &s.popped[i]
			e.pass += float64(e.size) * charge / e.tickets
			dst = append(dst, e.id)
			s.ran = true
		}
	}
	for _, e := range s.popped {
		s.h = append(s.h, e)
		s.up(len(s.h) - 1)
	}
	return dst
}

// packChoice picks items (in priority order) to fill capacity: the paper's
// greedy walk when it fills everything, else the lexicographically first
// set among those of the largest total (with item 0 forced in when head).
func packChoice(sizes []int, capacity int, head bool) []bool {
	n := len(sizes)
	take := make([]bool, n)
	left := capacity
	for k, sz := range sizes {
		if sz <= left {
			take[k] = true
			left -= sz
		}
	}
	if left == 0 || n == 0 {
		return take
	}
	// reach[k][c]: items k..n-1 can sum to exactly c
	reach := make([][]bool, n+1)
	for k := range reach {
		reach[k] = make([]bool, capacity+1)
	}
	reach[n][0] = true
	for k := n - 1; k >= 0; k-- {
		for c := 0; c <= capacity; c++ {
			reach[k][c] = reach[k+1][c] || c >= sizes[k] && reach[k+1][c-sizes[k]]
		}
	}
	first := 0
	target := -1
	if head {
		// item 0 forced in: best total of the rest within capacity - sizes[0]
		for c := capacity - sizes[0]; c >= 0; c-- {
			if reach[1][c] {
				target = c
				break
			}
		}
		for k := range take {
			take[k] = false
		}
		take[0] = true
		first = 1
	} else {
		for c := capacity; c >= 0; c-- {
			if reach[0][c] {
				target = c
				break
			}
		}
		for k := range take {
			take[k] = false
		}
	}
	for k := first; k < n && target > 0; k++ {
		if sizes[k] <= target && reach[k+1][target-sizes[k]] {
			take[k] = true
			target -= sizes[k]
		}
	}
	return take
}

// SelectFill is Select with the holes filled at the user level. The walk
// goes in (pass, ID) order, as the paper's, until it meets a client that ok
// accepts but whose gang does not fit the GPUs still free: a hole. The
// paper's walk would hand the hole to whichever smaller clients come next in
// pass order; SelectFill instead chooses, among the clients not yet visited
// that fit what is still free and that ok accepts, the one of least rank
// (ties in (pass, ID) order), charges it as Select does, calls took, and
// repeats until no such client fits. rank is called again before every
// choice, so a caller whose rank reads what took records spreads a hole over
// several users. With a constant rank the result is exactly Select's, and so
// it is whenever the walk meets no hole. ok must not record anything: it may
// be called more than once for a client, and for clients not chosen. The
// chosen IDs are appended to dst in choosing order.
func (s *Stride) SelectFill(dst []int64, free int, charge float64, ok func(id int64, size int) bool,
	rank func(id int64) float64, took func(id int64, size int)) []int64 {
	s.popped = s.popped[:0]
	hole := false
	for free > 0 && len(s.h) > 0 {
		s.popped = append(s.popped, s.pop())
		e := &s.popped[len(s.popped)-1]
		if ok != nil && !ok(e.id, e.size) {
			continue
		}
		if e.size > free {
			hole = true
			break
		}
		free -= e.size
		e.pass += float64(e.size) * charge / e.tickets
		dst = append(dst, e.id)
		s.ran = true
	}
	if hole {
		dst = s.fillHole(dst, free, charge, ok, rank, took)
	}
	for _, e := range s.popped {
		s.h = append(s.h, e)
		s.up(len(s.h) - 1)
	}
	return dst
}

// fillHole is SelectFill's second part: the rest of the clients are popped
// too, and the free GPUs go one client at a time to the fitting, accepted
// client of least rank (ties in (pass, ID) order).
func (s *Stride) fillHole(dst []int64, free int, charge float64, ok func(id int64, size int) bool,
	rank func(id int64) float64, took func(id int64, size int)) []int64 {
	first := len(s.popped)
	for len(s.h) > 0 {
		s.popped = append(s.popped, s.pop())
	}
	cand := s.cand[:0] // indices into popped: fit now, accepted
	for i := first; i < len(s.popped); i++ {
		if e := &s.popped[i]; e.size <= free && (ok == nil || ok(e.id, e.size)) {
			cand = append(cand, i)
		}
	}
	for free > 0 {
		best, bestRank := -1, 0.0
		for k, i := range cand {
			if i < 0 || s.popped[i].size > free {
				continue
			}
			if r := rank(s.popped[i].id); best < 0 || r < bestRank {
				best, bestRank = k, r
			}
		}
		if best < 0 {
			break
		}
		e := &s.popped[cand[best]]
		cand[best] = -1
		free -= e.size
		e.pass += float64(e.size) * charge / e.tickets
		dst = append(dst, e.id)
		s.ran = true
		if took != nil {
			took(e.id, e.size)
		}
	}
	s.cand = cand
	return dst
}
