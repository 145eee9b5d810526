package server

import (
	"slices"
	"sort"
)

// Retention of ended jobs (settings retain/*, limits.go).
//
// Contract: an ended job (it and its pre-run terminal) keeps its full record
// until it has been ended for retain/ended-for seconds of engine time, or
// until its user has more than retain/ended-jobs ended jobs kept in full
// (the oldest ended are summarised first). Then summarise replaces the
// record with its summary: everything but the command, env, workdir and
// idempotency key, which are what make a record large (up to
// quota/spec-bytes). The summary keeps the job in every list, view,
// history, timeline, what-if replay and ETA estimate: those read the engine's
// job (times, state, attained service) and the record's labels, GPUs,
// memory and declared work, which stay. The idempotency key is forgotten
// with the record (a retry with it makes a new job).
//
// Retention is part of the state machine: it runs after every entry (apply),
// from the logged settings and the entries' times only, so a replay
// summarises the same jobs at the same entries, and a snapshot taken after
// it holds summaries only. The shell logs a retain entry when a summary is
// due and no other entry came (retainDue), and rewrites the stored records
// of the jobs summarised (takeSummarised).

// ensureLimits builds the counts and queues of retention and of the quotas
// on records from the jobs, once: in a new machine, or one decoded from a
// snapshot of a build that had none of them (its jobs are all kept in
// full; those ended are queued in the order they ended).
func (m *machine) ensureLimits() {
	if m.limitsReady {
		return
	}
	m.limitsReady = true
	m.stored, m.fullJobs, m.endedFull = map[string]int{}, map[string]int{}, map[string]int{}
	m.retained, m.userRetained, m.summarised = nil, map[string][]*job{}, nil
	for _, j := range m.order {
		if j.rec.Summary {
			continue
		}
		m.stored[j.rec.User] += specBytes(&j.rec.Request)
		m.fullJobs[j.rec.User]++
		if j.ended {
			if j.endT == 0 {
				j.endT = m.endedAt(j)
			}
			m.endedFull[j.rec.User]++
			m.retained = append(m.retained, j)
		}
	}
	slices.SortStableFunc(m.retained, func(a, b *job) int {
		switch {
		case a.endT < b.endT:
			return -1
		case a.endT > b.endT:
			return 1
		}
		return int(a.eid - b.eid)
	})
	for _, j := range m.retained {
		m.userRetained[j.rec.User] = append(m.userRetained[j.rec.User], j)
	}
}

// endedAt is when the engine ended j and its pre-run.
func (m *machine) endedAt(j *job) float64 {
	t := m.eng.Job(j.eid).Ended
	if j.probe != nil {
		t = max(t, m.eng.Job(j.probe.eid).Ended)
	}
	return t
}

// retainDue reports whether an ended job's full record is due to be
// summarised at time t (the shell then logs a retain entry).
func (m *machine) retainDue(t float64) bool {
	m.ensureLimits()
	m.popSummarised()
	return len(m.retained) > 0 && t >= m.retained[0].endT+float64(m.retain(RetainEndedFor))
}

// retainJobs summarises the ended jobs that retention no longer keeps in
// full, as of the machine's time: by age, the oldest first, then per user
// by number.
func (m *machine) retainJobs() {
	age := float64(m.retain(RetainEndedFor))
	m.popSummarised()
	for len(m.retained) > 0 && m.now >= m.retained[0].endT+age {
		m.summarise(m.retained[0])
		m.retained = m.retained[1:]
		m.popSummarised()
	}
	if len(m.retained) == 0 {
		m.retained = nil // (let the array go)
	}
	keep := m.retain(RetainEndedJobs)
	var over []string
	for u, n := range m.endedFull {
		if n > keep {
			over = append(over, u)
		}
	}
	sort.Strings(over)
	for _, u := range over {
		q := m.userRetained[u]
		for m.endedFull[u] > keep && len(q) > 0 {
			if !q[0].rec.Summary {
				m.summarise(q[0])
			}
			q = q[1:]
		}
		m.userRetained[u] = q
	}
	for u, q := range m.userRetained {
		for len(q) > 0 && q[0].rec.Summary {
			q = q[1:]
		}
		if len(q) == 0 {
			delete(m.userRetained, u)
		} else {
			m.userRetained[u] = q
		}
	}
}

// popSummarised drops summarised jobs from the head of retained.
func (m *machine) popSummarised() {
	for len(m.retained) > 0 && m.retained[0].rec.Summary {
		m.retained = m.retained[1:]
	}
}

// summarise replaces ended job j's record with its summary and uncounts it
// from its user's records and stored bytes. (A summarised job is terminal:
// the executor never starts a process of it again, and an agent reads an
// assignment's command only to start one, so a process of it still
// leaving is killed or checkpointed as before.)
func (m *machine) summarise(j *job) {
	if j.rec.Summary || !j.ended {
		return
	}
	u := j.rec.User
	m.stored[u] -= specBytes(&j.rec.Request)
	m.fullJobs[u]--
	m.endedFull[u]--
	for _, c := range []map[string]int{m.stored, m.fullJobs, m.endedFull} {
		if c[u] == 0 {
			delete(c, u)
		}
	}
	rq := j.rec.Request
	if k := rq.IdempotencyKey; k != "" && m.idem[idemKey(u, k)] == j {
		delete(m.idem, idemKey(u, k))
	}
	rq.Command, rq.Env, rq.WorkDir, rq.IdempotencyKey = nil, nil, "", ""
	rec := *j.rec
	rec.Request, rec.Summary = rq, true
	j.rec = &rec
	// (and from what its agents are shown of a process still leaving:
	// worker.stale ignores these fields, and an agent reads them only to
	// start a process)
	for _, r := range []*run{j.run, j.probe} {
		if r == nil {
			continue
		}
		for _, w := range slices.Concat(r.workers, r.leaving) {
			if w.pub != nil {
				p := *w.pub
				p.Command, p.Env, p.WorkDir = nil, nil, ""
				w.pub = &p
			}
		}
	}
	m.summarised = append(m.summarised, j)
}

// takeSummarised returns and clears the jobs summarised since the last call.
func (m *machine) takeSummarised() []*job {
	out := m.summarised
	m.summarised = nil
	return out
}
