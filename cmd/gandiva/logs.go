package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/visible"
)

// logsPoll is how often gandiva logs -f asks the server whether the job
// it follows has a new attempt or has ended.
var logsPoll = 500 * time.Millisecond

// attemptWhere shows where an attempt ran: "n1 GPUs 0,1; n2 GPUs 0,1"
// (rank order).
func attemptWhere(a *api.Attempt) string {
	var parts []string
	for _, r := range a.Ranks {
		p := visible.String(r.Node)
		if len(r.GPUs) > 0 {
			gs := make([]string, len(r.GPUs))
			for i, g := range r.GPUs {
				gs[i] = fmt.Sprint(g)
			}
			word := " GPUs "
			if len(gs) == 1 {
				word = " GPU "
			}
			p += word + strings.Join(gs, ",")
		}
		parts = append(parts, p)
	}
	return orDash(strings.Join(parts, "; "))
}

// attemptOutcome is how an attempt ended, or the job's state while it is
// the current one.
func attemptOutcome(a *api.Attempt, state string) string {
	switch {
	case a.Outcome != "":
		return visible.String(a.Outcome)
	case a.Current:
		return visible.String(state) + " (current)"
	}
	return "ended"
}

// printAttempts lists a job's attempts for status: number, pre-run or
// not, where, when started, and outcome.
func printAttempts(w io.Writer, j *api.Job) {
	if len(j.AttemptList) == 0 {
		return
	}
	fmt.Fprintln(w, "  attempts:  (gandiva logs --attempt N)")
	for i := range j.AttemptList {
		a := &j.AttemptList[i]
		kind := ""
		if a.PreRun {
			kind = " pre-run"
		}
		at := "--:--:--.---"
		if a.Started != nil {
			at = a.Started.Local().Format("15:04:05.000")
		}
		fmt.Fprintf(w, "    %3d  %s%s  on %s: %s\n", a.N, at, kind, attemptWhere(a), attemptOutcome(a, j.State))
	}
}

// terminalState reports whether a job in state st (as the API shows it)
// has ended.
func terminalState(st string) bool {
	return st == "finished" || st == "failed" || st == "cancelled"
}

// followLogs prints job id's output as it comes, across its attempts and
// nodes, until the job ends: from its latest attempt (waiting for its
// first if it has not run yet), a header line on hdr for each attempt,
// each attempt's log followed to its end. Rank o.Rank of each attempt is
// followed (an attempt without it is said so on hdr); o.Tail applies to
// the first attempt only.
func followLogs(ctx context.Context, cl *api.Client, id string, o api.LogOptions, out, hdr io.Writer) error {
	j, err := cl.Get(ctx, id)
	for err == nil && len(j.AttemptList) == 0 {
		if terminalState(j.State) {
			return fmt.Errorf("job %s %s without running: no logs", id, visible.String(j.State))
		}
		if err = sleepCtx(ctx, logsPoll); err == nil {
			j, err = cl.Get(ctx, id)
		}
	}
	if err != nil {
		return err
	}
	n := j.AttemptList[len(j.AttemptList)-1].N
	for {
		a := findAttempt(j, n)
		if a == nil {
			return fmt.Errorf("job %s: attempt %d is no longer listed", id, n)
		}
		kind := ""
		if a.PreRun {
			kind = " (pre-run)"
		}
		fmt.Fprintf(hdr, "==> %s attempt %d%s on %s <==\n", visible.String(id), a.N, kind, attemptWhere(a))
		if o.Rank >= len(a.Ranks) {
			fmt.Fprintf(hdr, "(attempt %d has no rank %d: it had %d)\n", a.N, o.Rank, len(a.Ranks))
		} else if err := followAttempt(ctx, cl, id, api.LogOptions{Attempt: int64(n), Rank: o.Rank, Tail: o.Tail, Follow: true}, out, hdr); err != nil {
			return err
		}
		o.Tail = 0
		// what comes next: a later attempt, or the job's end
		for {
			if j, err = cl.Get(ctx, id); err != nil {
				return err
			}
			if next := nextAttempt(j, n); next > 0 {
				n = next
				break
			}
			if terminalState(j.State) {
				fmt.Fprintf(hdr, "==> %s %s <==\n", visible.String(id), visible.String(j.State))
				return nil
			}
			if err := sleepCtx(ctx, logsPoll); err != nil {
				return err
			}
		}
	}
}

// followAttempt prints one attempt's log to its end. A log the node does
// not have yet (the attempt's process is being started) is asked for
// again while the attempt is the job's current one; one that cannot be
// had (its node is gone) is said so on hdr, and followAttempt returns nil
// so that the next attempt is followed.
func followAttempt(ctx context.Context, cl *api.Client, id string, o api.LogOptions, out, hdr io.Writer) error {
	for {
		rc, err := cl.Logs(ctx, id, o)
		if err == nil {
			_, err = io.Copy(out, rc)
			rc.Close()
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var ae *api.Error
		if !errors.As(err, &ae) || !api.IsStatus(err, 404) {
			return err
		}
		j, gerr := cl.Get(ctx, id)
		if gerr != nil {
			return gerr
		}
		if a := findAttempt(j, int(o.Attempt)); a == nil || !a.Current || terminalState(j.State) {
			fmt.Fprintf(hdr, "(no log of attempt %d: %s)\n", o.Attempt, visible.String(ae.Message))
			return nil
		}
		if err := sleepCtx(ctx, logsPoll); err != nil {
			return err
		}
	}
}

func findAttempt(j *api.Job, n int) *api.Attempt {
	for i := range j.AttemptList {
		if j.AttemptList[i].N == n {
			return &j.AttemptList[i]
		}
	}
	return nil
}

// nextAttempt is the number of the first attempt after n, 0 if none.
func nextAttempt(j *api.Job, n int) int {
	next := 0
	for _, a := range j.AttemptList {
		if a.N > n && (next == 0 || a.N < next) {
			next = a.N
		}
	}
	return next
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
