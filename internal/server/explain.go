package server

import (
	"fmt"
	"math"
	"strings"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/place"
)

// explain says why a job is where it is: its place among the waiting jobs,
// its back-off or pre-run, and per node why its gang does or does not fit
// there now (place.Explain). It needs the core's write lock (Snapshot).
func explain(c *core, j *job, policy string) *api.Explanation {
	ej := c.eng.Job(j.eid)
	snap := c.eng.Snapshot()
	e := &api.Explanation{Job: j.rec.ID, State: ej.State.String(), Reason: ej.Reason, Policy: policy,
		PreRun: c.eng.PreRunStatus(ej), FreeGPUs: snap.FreeGPUs, TotalGPUs: c.c.NumGPUs()}
	pos := 0
	for _, o := range c.order {
		oj := c.eng.Job(o.eid)
		if !oj.State.Waiting() {
			continue
		}
		e.Waiting++
		if o == j {
			pos = e.Waiting
		} else if pos == 0 {
			e.AheadGPUs += oj.Spec.GPUs
		}
	}
	if ej.State.Waiting() {
		e.Position = pos
	}
	held := ej.State == cluster.Queued && math.IsInf(ej.NotBefore, 1)
	if ej.State == cluster.Queued && ej.NotBefore > c.now && !held {
		t := c.wall(ej.NotBefore)
		e.BackoffUntil = &t
	}
	need, _ := ej.Spec.WidthRange()
	if len(snap.Servers) > 0 && ej.State.Waiting() {
		for _, r := range place.Explain(snap, need) {
			e.Servers = append(e.Servers, api.ServerReason{Node: r.Name, Fits: r.Fits, Why: r.Why})
		}
	}
	fits := 0
	for _, r := range e.Servers {
		if r.Fits {
			fits++
		}
	}
	switch {
	case ej.State.Terminal():
		e.Summary = fmt.Sprintf("%s: %s", ej.State, ej.Reason)
	case ej.State.Holding():
		var nodes []string
		for _, w := range j.run.workers {
			nodes = append(nodes, fmt.Sprintf("%s GPUs %v", w.n.name, w.gpus))
		}
		e.Summary = fmt.Sprintf("%s on %s", ej.State, strings.Join(nodes, ", "))
	case held:
		e.Summary = "waiting for its pre-run (its first mini-batch on one GPU, to catch errors cheaply) to pass: the pre-run is " + e.PreRun
	case e.BackoffUntil != nil:
		e.Summary = fmt.Sprintf("backing off after a failure (%s); may start again at %s", ej.Reason, e.BackoffUntil.Format("15:04:05"))
	case len(snap.Servers) == 0:
		e.Summary = "no node has registered yet: start an agent (gandiva agent)"
	case need > c.c.NumGPUs():
		e.Summary = fmt.Sprintf("needs %d GPUs; the cluster has only %d", need, c.c.NumGPUs())
	case fits == 0 && need > snap.FreeGPUs:
		e.Summary = fmt.Sprintf("%s: %d of %d GPUs are free, it needs %d; %d waiting jobs ahead of it ask for %d GPUs",
			ej.State, snap.FreeGPUs, c.c.NumGPUs(), need, e.Position-1, e.AheadGPUs)
	case fits == 0:
		e.Summary = fmt.Sprintf("%s: %d GPUs are free but no node has %d free at once; policy %s places gangs by locality (see per node)",
			ej.State, snap.FreeGPUs, need, policy)
	default:
		e.Summary = fmt.Sprintf("%s: %d node(s) have room now; policy %s decides the order (place %d of %d waiting)",
			ej.State, fits, policy, e.Position, e.Waiting)
	}
	return e
}
