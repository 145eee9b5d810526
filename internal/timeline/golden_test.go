package timeline_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/harness"
	"github.com/gandiva-sched/gandiva/internal/timeline"
)

// TestGolden runs the scenarios in testdata (rewrite with -rewrite): the
// harness's commands (internal/harness) drive a real engine, a recorder
// observes after each, and these commands print what it recorded:
//
//	timeline [from=T] [to=T] [user=U]   every GPU row and every job lane (user: as that user sees it)
//	shares window=S [tickets=alice:3/bob:1] [user=U]
func TestGolden(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		h := &harness.H{}
		var rec *timeline.Recorder
		var eng any
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			switch d.Cmd {
			case "timeline", "shares":
				if rec == nil {
					return "error: no engine yet\n"
				}
				out, err := golden(rec, d)
				if err != nil {
					return "error: " + err.Error() + "\n"
				}
				return out
			}
			out, err := h.Do(d)
			if err != nil {
				return "error: " + err.Error() + "\n"
			}
			if h.E != nil {
				if eng != any(h.E) { // a new engine (policy command): a new recorder
					eng, rec = h.E, timeline.NewRecorder(timeline.Options{})
				}
				if err := rec.Observe(h.E.Snapshot()); err != nil {
					t.Fatalf("%s: %v", d.Pos, err)
				}
			}
			return out
		})
	})
}

func golden(rec *timeline.Recorder, d *datadriven.TestData) (string, error) {
	args := map[string]string{}
	for _, a := range d.CmdArgs {
		args[a.Key] = strings.Join(a.Vals, ",")
	}
	num := func(k string) float64 {
		f, _ := strconv.ParseFloat(args[k], 64)
		return f
	}
	var visible func(string) bool
	if u := args["user"]; u != "" {
		visible = func(user string) bool { return user == u }
	}
	var b strings.Builder
	if d.Cmd == "shares" {
		q := timeline.ShareQuery{Window: num("window"), Visible: visible}
		if t := args["tickets"]; t != "" {
			q.Tickets = map[string]float64{}
			for _, kv := range strings.Split(t, "/") {
				u, v, _ := strings.Cut(kv, ":")
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					return "", fmt.Errorf("tickets: %w", err)
				}
				q.Tickets[u] = f
			}
		}
		sh := rec.Shares(q)
		fmt.Fprintf(&b, "window %g from %g to %g, %d GPUs\n", sh.Window, sh.From, sh.To, sh.GPUs)
		for _, u := range sh.Users {
			name := u.User
			if name == "" {
				name = "(others)"
			}
			fmt.Fprintf(&b, "%s held %v share %v", name, u.Held, round3(u.Share))
			if u.Entitled != nil {
				fmt.Fprintf(&b, " entitled %v", round3(u.Entitled))
			}
			b.WriteString("\n")
		}
		return b.String(), nil
	}
	data := rec.Data(timeline.Query{From: num("from"), To: num("to"), Visible: visible})
	name := map[cluster.JobID]string{-1: "(other user)"}
	for _, j := range data.Jobs {
		name[j.ID] = j.Name
	}
	for _, sv := range data.Servers {
		for g := sv.FirstGPU; g < sv.FirstGPU+sv.GPUs; g++ {
			fmt.Fprintf(&b, "gpu %d (%s %s):", g, sv.Name, sv.Type)
			for _, s := range data.GPUs[g] {
				fmt.Fprintf(&b, " %s %s %s", name[s.Job], data.Kinds[s.Kind].Kind, span(s.Start, s.End, s.Open))
			}
			b.WriteString("\n")
		}
	}
	for _, j := range data.Jobs {
		fmt.Fprintf(&b, "job %s (%s, %s):", j.Name, j.User, j.State)
		for _, s := range j.Lane {
			fmt.Fprintf(&b, " %s", data.Kinds[s.Kind].Kind)
			if s.GPUs > 0 {
				fmt.Fprintf(&b, "×%d", s.GPUs)
			}
			fmt.Fprintf(&b, " %s", span(s.Start, s.End, s.Open))
		}
		b.WriteString("\n")
	}
	if data.Hidden > 0 {
		fmt.Fprintf(&b, "hidden jobs: %d\n", data.Hidden)
	}
	return b.String(), nil
}

func span(start, end float64, open bool) string {
	s := fmt.Sprintf("%g-%g", start, end)
	if open {
		s += "…"
	}
	return s
}

func round3(v []float64) []float64 {
	out := make([]float64, len(v))
	for i, f := range v {
		out[i] = float64(int(f*1000+0.5)) / 1000
	}
	return out
}
