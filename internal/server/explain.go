package server

import (
	"fmt"
	"math"
	"strings"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/place"
	"github.com/gandiva-sched/gandiva/internal/plural"
	"github.com/gandiva-sched/gandiva/internal/policy"
)

// maxAhead bounds the jobs an explanation names as ahead of a job.
const maxAhead = 20

// explain says why a job is where it is: its place in the policy's order
// of waiting jobs, its back-off or pre-run, and per node why its gang does
// or does not fit there now. A policy that implements policy.Explainer
// (every registered one) gives its own order and reasons; for another,
// the order is by submission and the reasons are place.Explain's. It needs
// the machine's write lock (Snapshot).
func explain(c *machine, j *job, policyName string) *api.Explanation {
	ej := c.eng.Job(j.eid)
	snap := c.eng.Snapshot()
	total, _, _ := c.capacity() // (not the GPUs of removed nodes)
	e := &api.Explanation{Job: j.rec.ID, State: ej.State.String(), Reason: ej.Reason, Policy: policyName,
		PreRun: c.eng.PreRunStatus(ej), FreeGPUs: snap.FreeGPUs, TotalGPUs: total}
	held := ej.State == cluster.Queued && math.IsInf(ej.NotBefore, 1)
	if ej.State == cluster.Queued && ej.NotBefore > c.now && !held {
		t := c.wall(ej.NotBefore)
		e.BackoffUntil = &t
	}
	need, _ := ej.Spec.WidthRange()
	if why := c.unfit(need); why != "" && ej.State == cluster.Queued {
		e.Reason = why
	}
	if ej.State.Waiting() {
		rank(c, snap, ej, need, e)
	}
	e.Summary = summary(c, j, ej, e, snap, need, held)
	return e
}

// rank fills in the job's place in the policy's order and the reasons per
// node.
func rank(c *machine, snap *cluster.Snapshot, ej *cluster.Job, need int, e *api.Explanation) {
	var pe policy.Explanation
	if ex, ok := c.eng.Policy().(policy.Explainer); ok {
		pe = ex.Explain(snap, ej.ID)
	} else {
		pe.Queue = "submission order"
		pe.Rank(policy.WaitingByID(snap), ej.ID)
		pe.Servers = place.Explain(snap, need, place.Locality, place.Packed)
	}
	e.Queue, e.Position, e.Waiting = pe.Queue, pe.Position, pe.Waiting
	for _, id := range pe.Ahead {
		a := c.eng.Job(id)
		e.AheadGPUs += a.Spec.GPUs
		if len(e.Ahead) < maxAhead {
			e.Ahead = append(e.Ahead, a.Spec.Name)
		}
	}
	if len(snap.Servers) == 0 {
		return
	}
	for _, r := range pe.Servers {
		e.Servers = append(e.Servers, api.ServerReason{Node: r.Name, Fits: r.Fits, Why: r.Why})
	}
}

// summary is the explanation's one sentence for people.
func summary(c *machine, j *job, ej *cluster.Job, e *api.Explanation, snap *cluster.Snapshot, need int, held bool) string {
	fits := 0
	for _, r := range e.Servers {
		if r.Fits {
			fits++
		}
	}
	switch {
	case ej.State.Terminal():
		return fmt.Sprintf("%s: %s", ej.State, ej.Reason)
	case ej.State.Holding() || ej.State == cluster.Warming:
		var nodes []string
		for _, w := range j.run.workers {
			nodes = append(nodes, fmt.Sprintf("%s GPUs %v", w.n.name, w.gpus))
		}
		s := fmt.Sprintf("%s on %s", ej.State, strings.Join(nodes, ", "))
		if ej.State == cluster.Warming {
			s = "warm start on " + strings.Join(nodes, ", ") + ", beside the jobs running there: held at its first mini-batch boundary once its start-up is over, its turn then costs a resume"
		}
		if st := engine.StartUpText(ej, c.now); st != "" {
			s += "; " + st
		}
		return s
	case held:
		return "waiting for its pre-run (its first mini-batch on one GPU, to catch errors cheaply) to pass: the pre-run is " + e.PreRun
	case e.BackoffUntil != nil:
		return fmt.Sprintf("backing off after a failure (%s); may start again at %s", ej.Reason, e.BackoffUntil.Format("15:04:05"))
	case len(snap.Servers) == 0:
		return "no node has registered yet: start an agent (gandiva agent)"
	case need > c.c.NumGPUs():
		return fmt.Sprintf("needs %d GPUs; the cluster has only %d", need, c.c.NumGPUs())
	case fits == 0 && need > snap.FreeGPUs:
		ahead := max(e.Position-1, 0)
		return fmt.Sprintf("%s: %d of %s are free, it needs %d; %s ahead of it %s for %s",
			waitLabel(ej), snap.FreeGPUs, plural.Of(c.c.NumGPUs(), "GPU"), need, plural.Of(ahead, "waiting job"), plural.Noun(ahead, "asks|ask"),
			plural.Of(e.AheadGPUs, "GPU")) + warmText(ej)
	case fits == 0:
		return fmt.Sprintf("%s: %d GPUs are free but none where policy %s would place the gang (see per node)",
			waitLabel(ej), snap.FreeGPUs, e.Policy) + warmText(ej)
	}
	return fmt.Sprintf("%s: %s %s room now; policy %s decides the order (place %d of %d waiting)",
		waitLabel(ej), plural.Of(fits, "node"), plural.Noun(fits, "has|have"), e.Policy, e.Position, e.Waiting) + warmText(ej)
}

// waitLabel names a waiting job's state: "warm" for one whose process was
// warmed and waits at its first boundary, else its state.
func waitLabel(ej *cluster.Job) string {
	if ej.Warmed && ej.State == cluster.Suspended {
		return "warm"
	}
	return ej.State.String()
}

// warmText notes that a waiting job's process is warm.
func warmText(ej *cluster.Job) string {
	if !ej.Warmed || ej.State != cluster.Suspended {
		return ""
	}
	return fmt.Sprintf("; its process was started ahead of its turn (a %.1f s start-up, done) and is held at its first mini-batch boundary: its turn will cost a resume", ej.StartUp)
}
