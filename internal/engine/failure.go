package engine

import (
	"fmt"
	"math"

	"github.com/gandiva-sched/gandiva/internal/cluster"
)

// FailurePolicy is Philly's failure handling (the Philly paper, ATC'19): retry
// failed jobs with back-off up to a limit, stop retrying an error that
// repeats in the job's own code or input, and blacklist a node whose jobs
// keep failing.
type FailurePolicy struct {
	// MaxAttempts bounds how many times a job is started; 0 means unlimited.
	MaxAttempts int
	// Backoff is the wait before the first retry; it doubles on each retry
	// up to MaxBackoff.
	Backoff, MaxBackoff float64
	// UserErrorLimit stops retries once a job has failed this many times
	// with a user error (bad code, bad input): retrying will not fix it.
	UserErrorLimit int
	// NodeFailureLimit infrastructure failures on one node within
	// NodeWindow seconds blacklist (drain) the node; 0 disables.
	NodeFailureLimit int
	NodeWindow       float64
}

// DefaultFailurePolicy: 3 attempts, 60 s back-off doubling to 1 h, stop after
// 2 user errors, drain a node after 5 infrastructure failures in 1 h.
func DefaultFailurePolicy() FailurePolicy {
	return FailurePolicy{MaxAttempts: 3, Backoff: 60, MaxBackoff: 3600, UserErrorLimit: 2, NodeFailureLimit: 5, NodeWindow: 3600}
}

func (e *Engine) onFailure(j *cluster.Job, ev cluster.Event, now float64) {
	prev := j.GPUs
	e.release(j, now)
	j.Home = cluster.NoServer
	reason := ev.Reason
	if reason == "" {
		reason = "failed"
	}
	inPreRun := j.PreRunHere && j.StartUp == 0 && j.ReadyAt < 0
	if inPreRun {
		reason = "pre-run failed (before its first mini-batch boundary): " + reason
	}
	defer func() {
		if inPreRun && j.State == cluster.Failed {
			e.stats.PreRunFailures++
		}
	}()
	if ev.UserError {
		j.UserErrors++
	} else {
		node := ev.Node
		if (node < 0 || int(node) >= len(e.servers)) && len(prev) > 0 {
			node = e.c.ServerOf(prev[0])
		}
		if node >= 0 && int(node) < len(e.servers) {
			e.noteNodeFailure(node, now)
		}
	}
	p := e.fail
	switch {
	case ev.UserError && p.UserErrorLimit > 0 && j.UserErrors >= p.UserErrorLimit:
		e.setState(j, cluster.Failed, now, fmt.Sprintf("%s (user error repeated %d times; not retried)", reason, j.UserErrors))
	case p.MaxAttempts > 0 && j.Attempts >= p.MaxAttempts:
		e.setState(j, cluster.Failed, now, fmt.Sprintf("%s (attempt %d of %d)", reason, j.Attempts, p.MaxAttempts))
	default:
		back := p.Backoff * math.Pow(2, float64(max(j.Attempts-1, 0)))
		if p.MaxBackoff > 0 && back > p.MaxBackoff {
			back = p.MaxBackoff
		}
		e.stats.Retries++
		e.requeue(j, now, back, fmt.Sprintf("%s; retry %d after %.0f s", reason, j.Attempts, back))
	}
}

func (e *Engine) noteNodeFailure(s cluster.ServerID, now float64) {
	p := e.fail
	if p.NodeFailureLimit <= 0 {
		return
	}
	ts := e.nodeErr[s]
	keep := ts[:0]
	for _, t := range ts {
		if now-t < p.NodeWindow {
			keep = append(keep, t)
		}
	}
	keep = append(keep, now)
	e.nodeErr[s] = keep
	if len(keep) >= p.NodeFailureLimit && !e.servers[s].Drained {
		e.servers[s].Drained = true
		e.servers[s].Reason = fmt.Sprintf("blacklisted: %d job failures within %.0f s", len(keep), p.NodeWindow)
		e.stats.Blocked++
		e.touch(s)
		e.log.Warn("node blacklisted", "node", e.c.Servers[s].Name, "failures", len(keep))
	}
}

// Drain takes a node out of service (an operator's decision, for
// maintenance): no new work is placed there; what runs there keeps
// running. Undrain returns it.
func (e *Engine) Drain(s cluster.ServerID, reason string) error {
	if s < 0 || int(s) >= len(e.servers) {
		return fmt.Errorf("no server %d", s)
	}
	e.servers[s].Drained = true
	e.servers[s].Reason = reason
	e.touch(s)
	return nil
}

// Undrain returns a blacklisted node to service (an operator's decision).
func (e *Engine) Undrain(s cluster.ServerID) error {
	if s < 0 || int(s) >= len(e.servers) {
		return fmt.Errorf("no server %d", s)
	}
	e.servers[s].Drained = false
	e.servers[s].Reason = ""
	e.nodeErr[s] = nil
	e.touch(s)
	return nil
}
