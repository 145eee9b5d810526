package agent

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/gandiva-sched/gandiva/internal/agent/jobproc"
	"github.com/gandiva-sched/gandiva/internal/api"
)

// proc drives one jobproc.Proc towards what the server wants of it, and
// turns its events into reports.
type proc struct {
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
}

func newProc(a *Agent, k key, p *jobproc.Proc, it api.Assignment) *proc {
	return &proc{a: a, k: k, p: p, want: it, kick: make(chan struct{}, 1), prerun: it.PreRun}
}

// set records what the server now wants.
func (pr *proc) set(it api.Assignment) {
	pr.mu.Lock()
	changed := pr.want.Want != it.Want || !slices.Equal(pr.want.GPUs, it.GPUs) || pr.want.ToDisk != it.ToDisk || pr.want.Unaligned != it.Unaligned
	pr.want = it
	pr.mu.Unlock()
	if it.Want == api.WantKill {
		pr.p.Kill() // at once, even while another request is in progress
	}
	if changed {
		select {
		case pr.kick <- struct{}{}:
		default:
		}
	}
}

func (pr *proc) rep(kind api.ReportKind) api.Report {
	return api.Report{Job: pr.k.job, Attempt: pr.k.attempt, Rank: pr.k.rank, Kind: kind}
}

// run handles events and requests until the process has ended.
func (pr *proc) run() {
	defer pr.a.gone(pr.k)
	events := pr.p.Events()
	var window <-chan time.Time
	if pr.prerun {
		t := time.NewTimer(pr.a.cfg.PreRunWindow)
		defer t.Stop()
		window = t.C
	}
	retry := time.NewTicker(time.Second)
	defer retry.Stop()
	flush := time.NewTicker(pr.a.cfg.ReportEvery)
	defer flush.Stop()
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return
			}
			if pr.event(ev) {
				pr.flushProgress(true)
				return
			}
		case <-pr.kick:
			pr.act()
		case <-retry.C:
			pr.act()
		case <-flush.C:
			pr.flushProgress(false)
		case <-window:
			// A pre-run without the in-job client cannot show a mini-batch:
			// having run this long without failing is taken as a pass.
			if info := pr.p.Info(); !info.Client && info.State != jobproc.Exited {
				pr.pass("no in-job client; ran " + pr.a.cfg.PreRunWindow.String() + " without failing")
			}
		}
	}
}

// pass ends a pre-run as passed.
func (pr *proc) pass(why string) {
	pr.mu.Lock()
	if pr.passed == "" {
		pr.passed = why
	}
	pr.mu.Unlock()
	pr.p.Kill()
}

// event turns a jobproc event into reports; true when it was the last.
func (pr *proc) event(ev jobproc.Event) bool {
	switch ev.Kind {
	case jobproc.EvStarted:
		if ev.PID != 0 {
			r := pr.rep(api.RepStarted)
			r.Done = float64(ev.Done)
			pr.a.report(r)
		}
	case jobproc.EvProgress:
		if pr.prerun {
			if ev.Done > 0 {
				// The client stops the job by itself; kill it if it does not.
				pr.mu.Lock()
				if pr.passed == "" {
					pr.passed = "its first mini-batch ran"
					time.AfterFunc(2*time.Second, pr.p.Kill)
				}
				pr.mu.Unlock()
			}
			return false
		}
		r := pr.rep(api.RepProgress)
		r.Done, r.IterTime = float64(ev.Done), ev.IterTime
		if ev.HasMetric {
			m := ev.Metric
			r.Metric = &m
		}
		pr.mu.Lock()
		pr.progress = &r
		pr.mu.Unlock()
		pr.flushProgress(false)
	case jobproc.EvSuspended:
		pr.flushProgress(true)
		r := pr.rep(api.RepSuspended)
		if s := ev.Suspension; s != nil {
			r.Mode, r.Took, r.Done, r.Message = s.Mode.String(), s.Took.Seconds(), float64(s.Done), s.Reason
		}
		pr.a.report(r)
	case jobproc.EvResumed:
		r := pr.rep(api.RepResumed)
		if s := ev.Resumption; s != nil {
			r.Took, r.Done = s.Took.Seconds(), float64(s.Done)
			if s.Restarted && s.FromScratch {
				r.Message = "restarted from scratch (no in-job client)"
			}
		}
		pr.a.report(r)
	case jobproc.EvSaved:
		r := pr.rep(api.RepSaved)
		if c := ev.Checkpoint; c != nil {
			r.Done, r.Took = float64(c.Done), c.Save.Seconds()
		}
		pr.a.report(r)
	case jobproc.EvExited:
		pr.exited(ev.Exit)
		return true
	}
	return false
}

func (pr *proc) exited(e *jobproc.Exit) {
	pr.flushProgress(true)
	r := pr.rep(api.RepExited)
	if e == nil {
		r.Outcome, r.Message = "failed", "no exit status"
		pr.a.report(r)
		return
	}
	r.Code, r.UserError, r.Message, r.Done = e.Code, e.UserError, e.Reason, float64(e.Done)
	r.Outcome = e.Outcome.String()
	pr.mu.Lock()
	passed, lost := pr.passed, pr.lost
	pr.mu.Unlock()
	switch {
	case lost != "" && e.Outcome == jobproc.Killed:
		r.Outcome, r.Message = "lost", "stopped by its agent: "+lost
	case pr.prerun && passed != "" && e.Outcome != jobproc.Failed:
		r.Outcome, r.Code, r.Message = "finished", 0, "pre-run passed: "+passed
	case pr.prerun && passed != "" && e.Outcome == jobproc.Failed && !e.UserError:
		r.Outcome, r.Code, r.Message = "finished", 0, "pre-run passed: "+passed
	case e.Outcome == jobproc.Checkpointed:
		r.Kind, r.Restart = api.RepCheckpointed, e.Restart
		if e.Checkpoint != nil {
			r.Done = float64(e.Checkpoint.Done)
		}
	}
	pr.a.report(r)
	pr.a.log.Info("exited", "job", pr.k.job, "attempt", pr.k.attempt, "rank", pr.k.rank, "outcome", r.Outcome, "code", r.Code, "reason", r.Message)
}

// flushProgress reports the latest progress if ReportEvery has passed
// since the last (or at once when force).
func (pr *proc) flushProgress(force bool) {
	pr.mu.Lock()
	r := pr.progress
	if r == nil || (!force && time.Since(pr.lastProg) < pr.a.cfg.ReportEvery) {
		pr.mu.Unlock()
		return
	}
	pr.progress = nil
	pr.lastProg = time.Now()
	pr.mu.Unlock()
	pr.a.report(*r)
}

// act makes the process match what the server wants. Requests block until
// carried out (or time out, to be retried); their outcomes come back as
// events.
func (pr *proc) act() {
	pr.mu.Lock()
	w := pr.want
	pr.mu.Unlock()
	info := pr.p.Info()
	if info.State == jobproc.Exited {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var err error
	switch w.Want {
	case api.WantKill:
		pr.p.Kill()
	case api.WantCheckpoint:
		_, err = pr.p.Checkpoint(ctx)
	case api.WantSuspend:
		if info.State == jobproc.Running {
			_, err = pr.p.Suspend(ctx, jobproc.SuspendOptions{ToDisk: w.ToDisk, Unaligned: w.Unaligned})
		}
	case api.WantRun:
		if info.State == jobproc.Suspended || !slices.Equal(info.GPUs, w.GPUs) && info.State == jobproc.Running {
			_, err = pr.p.Resume(ctx, w.GPUs)
		}
	}
	if err != nil && !errors.Is(err, jobproc.ErrExited) {
		pr.a.log.Warn("request not carried out; will retry", "job", pr.k.job, "want", w.Want, "err", err)
	}
}
