package sim

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/place"
	"github.com/gandiva-sched/gandiva/internal/policy"
)

// JobTrace follows one job through a run (`gandiva sim --explain NAME`):
// it writes the job's state changes and, while the job waits, the
// policy's own account of where it stands (policy.Explainer: its queue,
// its place in the policy's order, the reasons per server) each time that
// account changes (jobs joining behind it do not count as a change). Pass its Observe as Config.Observe; it reads the engine
// and the policy and changes neither.
type JobTrace struct {
	// Name is the job's name in the trace.
	Name string
	// Out receives the lines.
	Out io.Writer
	// MaxServers bounds the servers listed per explanation (those that
	// fit come first); 0 means 8.
	MaxServers int

	found   bool
	state   cluster.JobState
	gpus    []cluster.GPUID
	account string
}

// Found reports whether the job was submitted during the run.
func (t *JobTrace) Found() bool { return t.found }

// Observe is a Config.Observe hook: it looks at the job after a round.
func (t *JobTrace) Observe(now float64, e *engine.Engine) {
	j, ok := e.Lookup(t.Name)
	if !ok {
		return
	}
	if !t.found || j.State != t.state || !slices.Equal(j.GPUs, t.gpus) {
		t.change(now, j, !t.found)
	}
	if !j.State.Waiting() {
		t.account = ""
		return
	}
	ex, ok := e.Policy().(policy.Explainer)
	if !ok {
		return
	}
	s := e.Snapshot()
	x := ex.Explain(s, j.ID)
	if key := t.render(s, x, false); key != t.account {
		t.account = key
		fmt.Fprintf(t.Out, "t=%.3f   %s", now, t.render(s, x, true))
	}
}

// change writes a state change.
func (t *JobTrace) change(now float64, j *cluster.Job, first bool) {
	t.found, t.state, t.gpus = true, j.State, slices.Clone(j.GPUs)
	line := fmt.Sprintf("t=%.3f %s %s", now, t.Name, j.State)
	if first {
		line += fmt.Sprintf(" (submitted at %.3f, %d GPUs)", j.Submitted, j.Spec.GPUs)
	}
	if len(j.GPUs) > 0 {
		line += fmt.Sprintf(" on GPUs %v", j.GPUs)
	}
	if j.Reason != "" && (j.State.Terminal() || j.State == cluster.Queued) {
		line += ": " + j.Reason
	}
	fmt.Fprintln(t.Out, line)
}

// render writes an explanation as lines, the first after the time, the
// others indented under it; without count, it leaves out the number of
// jobs waiting (for comparing explanations).
func (t *JobTrace) render(s *cluster.Snapshot, e policy.Explanation, count bool) string {
	const indent = "              "
	var b strings.Builder
	fmt.Fprintf(&b, "waits: %s\n", e.Queue)
	if e.Position > 0 {
		fmt.Fprintf(&b, "%splace %d", indent, e.Position)
		if count {
			fmt.Fprintf(&b, " of %d waiting", e.Waiting)
		}
		if len(e.Ahead) > 0 {
			names := make([]string, 0, 5)
			for _, id := range e.Ahead[:min(len(e.Ahead), 5)] {
				names = append(names, s.Jobs[id].Spec.Name)
			}
			fmt.Fprintf(&b, "; ahead: %s", strings.Join(names, " "))
			if len(e.Ahead) > 5 {
				fmt.Fprintf(&b, " and %d more", len(e.Ahead)-5)
			}
		}
		b.WriteString("\n")
	}
	limit := t.MaxServers
	if limit <= 0 {
		limit = 8
	}
	rs := slices.Clone(e.Servers)
	slices.SortStableFunc(rs, func(x, y place.Reason) int { return boolOrder(y.Fits) - boolOrder(x.Fits) })
	for i, r := range rs {
		if i == limit {
			fmt.Fprintf(&b, "%s(%d more servers)\n", indent, len(rs)-limit)
			break
		}
		mark := "✗"
		if r.Fits {
			mark = "✓"
		}
		fmt.Fprintf(&b, "%s%s %s: %s\n", indent, mark, r.Name, r.Why)
	}
	return b.String()
}

func boolOrder(b bool) int {
	if b {
		return 1
	}
	return 0
}
