package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/gandiva-sched/gandiva/internal/agent/jobproc"
	"github.com/gandiva-sched/gandiva/internal/api"
)

// worker is one assignment of this node (a rank of a job attempt): it
// drives its jobproc.Proc towards what the server wants of it, and
// turns its events into reports.
type worker struct {
	a *Agent
	k key
	p *jobproc.Proc

	mu       sync.Mutex
	want     api.Assignment
	kick     chan struct{}
	prerun   bool
	passed   string // why a pre-run passed ("" until it has)
	lost     string // why the agent killed it for lack of contact with the server
	lastProg time.Time
	progress *api.Report // the latest progress not yet reported
	guard    *guard      // the current process's guard (guard.go); nil: none
	noGuard  bool        // said once that there is none
}

func newWorker(a *Agent, k key, p *jobproc.Proc, it api.Assignment) *worker {
	return &worker{a: a, k: k, p: p, want: it, kick: make(chan struct{}, 1), prerun: it.PreRun}
}

// set records what the server now wants.
func (wk *worker) set(it api.Assignment) {
	wk.mu.Lock()
	changed := wk.want.Want != it.Want || !slices.Equal(wk.want.GPUs, it.GPUs) || wk.want.ToDisk != it.ToDisk || wk.want.Unaligned != it.Unaligned
	wk.want = it
	wk.mu.Unlock()
	if it.Want == api.WantKill {
		wk.p.Kill() // at once, even while another request is in progress
	}
	if changed {
		wk.poke()
	}
}

// poke makes the worker act on what the server wants.
func (wk *worker) poke() {
	select {
	case wk.kick <- struct{}{}:
	default:
	}
}

func (wk *worker) rep(kind api.ReportKind) api.Report {
	return api.Report{Job: wk.k.job, Attempt: wk.k.attempt, Rank: wk.k.rank, Kind: kind}
}

// renew passes the lease on to the job's client and guard.
func (wk *worker) renew(left time.Duration) {
	wk.p.Renew(left)
	wk.mu.Lock()
	g := wk.guard
	wk.mu.Unlock()
	if g != nil {
		g.renew(left)
	}
}

// guardProcess gives the job's new process pid a guard (ending the
// previous process's): it kills the process group if the lease runs out
// while the agent cannot act.
func (wk *worker) guardProcess(pid int) {
	wk.a.mu.Lock()
	left := wk.a.leaseLeft()
	wk.a.mu.Unlock()
	g, err := startGuard(pid, left)
	wk.mu.Lock()
	old := wk.guard
	wk.guard = g
	warn := err != nil && !wk.noGuard
	wk.noGuard = wk.noGuard || err != nil
	wk.mu.Unlock()
	if old != nil {
		old.stop()
	}
	if warn {
		wk.a.log.Warn("job runs without a guard: a stopped agent cannot end it when its lease lapses", "job", wk.k.job, "err", err)
	}
}

// run handles events and requests until the process has ended.
func (wk *worker) run() {
	defer wk.a.workerWG.Done()
	defer wk.a.gone(wk.k)
	defer func() {
		wk.mu.Lock()
		g := wk.guard
		wk.guard = nil
		wk.mu.Unlock()
		if g != nil {
			g.stop()
		}
	}()
	events := wk.p.Events()
	var window <-chan time.Time
	if wk.prerun {
		t := time.NewTimer(wk.a.cfg.PreRunWindow)
		defer t.Stop()
		window = t.C
	}
	retry := time.NewTicker(time.Second)
	defer retry.Stop()
	flush := time.NewTicker(wk.a.cfg.ReportEvery)
	defer flush.Stop()
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return
			}
			if wk.event(ev) {
				wk.flushProgress(true)
				return
			}
		case <-wk.kick:
			wk.act()
		case <-retry.C:
			wk.act()
		case <-flush.C:
			wk.flushProgress(false)
		case <-window:
			// A pre-run without the in-job client cannot show a mini-batch:
			// having run this long (the client deadline, by default) without
			// failing or saying hello is taken as a pass.
			if info := wk.p.Info(); !info.Client && info.State != jobproc.Exited {
				wk.pass("no in-job client; ran " + wk.a.cfg.PreRunWindow.String() + " without failing")
			}
		}
	}
}

// pass ends a pre-run as passed.
func (wk *worker) pass(why string) {
	wk.mu.Lock()
	if wk.passed == "" {
		wk.passed = why
	}
	wk.mu.Unlock()
	wk.p.Kill()
}

// event turns a jobproc event into reports; true when it was the last.
func (wk *worker) event(ev jobproc.Event) bool {
	switch ev.Kind {
	case jobproc.EvStarted:
		if ev.PID != 0 {
			wk.guardProcess(ev.PID)
			r := wk.rep(api.RepStarted)
			r.Done = float64(ev.Done)
			wk.a.report(r)
		}
	case jobproc.EvReady:
		r := wk.rep(api.RepReady)
		r.Done, r.Took = float64(ev.Done), ev.StartUp.Seconds()
		if ev.NoClient {
			r.NoClient, r.Message = true, "no in-job client after "+wk.a.cfg.ClientDeadline.String()
		}
		wk.a.report(r)
	case jobproc.EvProgress:
		if wk.prerun {
			if ev.Done > 0 {
				// The client stops the job by itself; kill it if it does not.
				wk.mu.Lock()
				if wk.passed == "" {
					wk.passed = "its first mini-batch ran"
					time.AfterFunc(2*time.Second, wk.p.Kill)
				}
				wk.mu.Unlock()
			}
			return false
		}
		r := wk.rep(api.RepProgress)
		r.Done, r.IterTime = float64(ev.Done), ev.IterTime
		if ev.HasMetric {
			m := ev.Metric
			r.Metric = &m
		}
		wk.mu.Lock()
		wk.progress = &r
		wk.mu.Unlock()
		wk.flushProgress(false)
	case jobproc.EvSuspended:
		wk.flushProgress(true)
		r := wk.rep(api.RepSuspended)
		if s := ev.Suspension; s != nil {
			r.Mode, r.Took, r.Done, r.Message = s.Mode.String(), s.Took.Seconds(), float64(s.Done), s.Reason
		}
		wk.a.report(r)
		wk.mu.Lock()
		run := wk.want.Want == api.WantRun
		wk.mu.Unlock()
		if run {
			wk.poke() // a warm start that held itself after its turn came: resume it now
		}
	case jobproc.EvResumed:
		r := wk.rep(api.RepResumed)
		if s := ev.Resumption; s != nil {
			r.Took, r.Done = s.Took.Seconds(), float64(s.Done)
			if s.Restarted && s.FromScratch {
				r.Message = "restarted from scratch (no in-job client)"
			}
		}
		wk.a.report(r)
	case jobproc.EvSaved:
		r := wk.rep(api.RepSaved)
		if c := ev.Checkpoint; c != nil {
			r.Done, r.Took = float64(c.Done), c.Save.Seconds()
		}
		wk.a.report(r)
	case jobproc.EvExited:
		wk.exited(ev.Exit)
		return true
	}
	return false
}

func (wk *worker) exited(e *jobproc.Exit) {
	wk.flushProgress(true)
	r := wk.rep(api.RepExited)
	if e == nil {
		r.Outcome, r.Message = "failed", "no exit status"
		wk.a.report(r)
		return
	}
	r.Code, r.UserError, r.Message, r.Done = e.Code, e.UserError, e.Reason, float64(e.Done)
	r.Outcome = e.Outcome.String()
	wk.mu.Lock()
	passed, lost := wk.passed, wk.lost
	wk.mu.Unlock()
	// Its guard, or its client, ended it once the lease lapsed: while this
	// agent was stopped, or could not reach the server (also while it was
	// shutting down: it keeps polling then, but an unreachable server cuts
	// the grace short): as lost as if the agent had killed it, never the
	// job's own failure.
	lapsed := e.Outcome != jobproc.Finished && wk.a.leaseLapsed()
	if lapsed && lost == "" {
		wk.a.mu.Lock()
		lease := wk.a.lease
		wk.a.mu.Unlock()
		lost = fmt.Sprintf("no contact with the server for %s (the lease; its guard or in-job client ended it)", lease)
	}
	switch {
	case lost != "" && (e.Outcome == jobproc.Killed || e.Outcome == jobproc.Checkpointed || lapsed):
		// Stopped by its agent (the lease, or a shutdown): requeued, no
		// attempt used up. After a checkpoint, it resumes from it.
		r.Outcome, r.Message = "lost", "stopped by its agent: "+lost
		if e.Outcome == jobproc.Checkpointed && e.Checkpoint != nil {
			r.Done = float64(e.Checkpoint.Done)
			r.Message += fmt.Sprintf(" (checkpointed at mini-batch %d)", e.Checkpoint.Done)
		}
	case wk.prerun && passed != "" && e.Outcome != jobproc.Failed:
		r.Outcome, r.Code, r.Message = "finished", 0, "pre-run passed: "+passed
	case wk.prerun && passed != "" && e.Outcome == jobproc.Failed && !e.UserError:
		r.Outcome, r.Code, r.Message = "finished", 0, "pre-run passed: "+passed
	case e.Outcome == jobproc.Checkpointed:
		r.Kind, r.Restart = api.RepCheckpointed, e.Restart
		if e.Checkpoint != nil {
			r.Done = float64(e.Checkpoint.Done)
		}
	}
	wk.a.report(r)
	wk.a.log.Info("exited", "job", wk.k.job, "attempt", wk.k.attempt, "rank", wk.k.rank, "outcome", r.Outcome, "code", r.Code, "reason", r.Message)
}

// flushProgress reports the latest progress if ReportEvery has passed
// since the last (or at once when force).
func (wk *worker) flushProgress(force bool) {
	wk.mu.Lock()
	r := wk.progress
	if r == nil || (!force && time.Since(wk.lastProg) < wk.a.cfg.ReportEvery) {
		wk.mu.Unlock()
		return
	}
	wk.progress = nil
	wk.lastProg = time.Now()
	wk.mu.Unlock()
	wk.a.report(*r)
}

// act makes the process match what the server wants. Requests block until
// carried out (or time out, to be retried); their outcomes come back as
// events.
func (wk *worker) act() {
	wk.a.mu.Lock()
	stopping := wk.a.stopping
	wk.a.mu.Unlock()
	if stopping {
		return // the agent is leaving: it checkpoints the job itself
	}
	wk.mu.Lock()
	w := wk.want
	wk.mu.Unlock()
	info := wk.p.Info()
	if info.State == jobproc.Exited {
		return
	}
	if info.Busy != "" && w.Want != api.WantKill {
		return // a request in progress (a suspension waiting for a slow start-up): it stands
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var err error
	switch w.Want {
	case api.WantKill:
		wk.p.Kill()
	case api.WantCheckpoint:
		_, err = wk.p.Checkpoint(ctx)
	case api.WantSuspend, api.WantWarm:
		if info.State == jobproc.Running {
			_, err = wk.p.Suspend(ctx, jobproc.SuspendOptions{ToDisk: w.ToDisk, Unaligned: w.Unaligned})
		}
	case api.WantRun:
		if info.State == jobproc.Suspended || !slices.Equal(info.GPUs, w.GPUs) && info.State == jobproc.Running {
			_, err = wk.p.Resume(ctx, w.GPUs)
		}
	}
	if err != nil && !errors.Is(err, jobproc.ErrExited) {
		wk.a.log.Warn("request not carried out; will retry", "job", wk.k.job, "want", w.Want, "err", err)
	}
}
