package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/registry"
	"github.com/gandiva-sched/gandiva/internal/ui"
)

// bigServer is a server whose machine has run a large cluster's history:
// nodes×8 GPUs, jobs jobs of 1 to 8 GPUs (log-uniform run times of 1 min to
// 6 h) arriving faster than they finish, so that thousands wait at the
// end, driven by simulated agents that start and finish what they are
// assigned. It has no store (the dashboard reads only the machine).
func bigServer(tb testing.TB, pol string, nodes, jobs int) *Server {
	tb.Helper()
	p, err := registry.New(pol, policy.Config{Seed: 1})
	if err != nil {
		tb.Fatal(err)
	}
	m := newMachine(machineConfig{Policy: p, Epoch: machineEpoch})
	seq := uint64(0)
	apply := func(e *entry) {
		seq++
		if err := m.apply(seq, e); err != nil {
			tb.Fatalf("entry %d (%s): %v", seq, e.Kind, err)
		}
	}
	for n := range nodes {
		reg := &api.Registration{Name: fmt.Sprintf("n%03d", n), HostMemGiB: 256, Addr: "http://n:1", Incarnation: "1"}
		for g := range 8 {
			reg.GPUs = append(reg.GPUs, api.GPU{Index: g, Type: "V100", MemGiB: 32})
		}
		apply(&entry{Kind: entRegister, Reg: reg})
	}
	rng := rand.New(rand.NewPCG(1, 2))
	type run struct {
		end     float64
		attempt int64
	}
	running := map[string]map[string]run{} // node → job → its process
	repSeq := map[string]uint64{}
	submitted, now := 0, 0.0
	users := []string{"alice", "bob", "carol", "dave"}
	for submitted < jobs {
		now += 10
		// about twice the work the GPUs can do arrives: a queue builds
		for k := rng.IntN(5); k > 0 && submitted < jobs; k-- {
			submitted++
			dur := 60 * math.Exp(rng.Float64()*math.Log(360))
			rq := api.JobRequest{Name: fmt.Sprintf("job-%d", submitted), Command: []string{"train"}, GPUs: []int{1, 1, 1, 2, 2, 4, 8}[rng.IntN(7)],
				Iters: math.Round(dur), IterTime: 1, MemGiB: 8}
			apply(&entry{Kind: entSubmit, T: now, Job: &Record{ID: fmt.Sprintf("j%d", submitted), User: users[rng.IntN(len(users))], Request: rq}})
		}
		if m.roundDue(now) {
			apply(&entry{Kind: entRound, T: now})
		}
		for _, n := range m.x.byID {
			var reps []api.Report
			procs := running[n.name]
			if procs == nil {
				procs = map[string]run{}
				running[n.name] = procs
			}
			for _, it := range m.x.assignments(n).Items {
				if it.Want != api.WantRun || it.Rank != 0 {
					continue
				}
				p, ok := procs[it.Job]
				switch {
				case !ok || p.attempt != it.Attempt:
					j := m.jobs[it.Job]
					procs[it.Job] = run{end: now + j.rec.Request.Iters*j.rec.Request.IterTime, attempt: it.Attempt}
					reps = append(reps, api.Report{Job: it.Job, Attempt: it.Attempt, Kind: api.RepStarted})
				case now >= p.end:
					delete(procs, it.Job)
					reps = append(reps, api.Report{Job: it.Job, Attempt: it.Attempt, Kind: api.RepExited, Outcome: "finished", Done: m.jobs[it.Job].rec.Request.Iters})
				}
			}
			for i := range reps {
				repSeq[n.name]++
				reps[i].Seq = repSeq[n.name]
			}
			if len(reps) > 0 {
				apply(&entry{Kind: entReport, T: now, Node: n.name, Reports: reps})
			}
		}
		if m.roundDue(now) {
			apply(&entry{Kind: entRound, T: now})
		}
	}
	s := &Server{cfg: Config{Policy: pol}, epoch: machineEpoch, m: m, seen: map[string]time.Time{}}
	s.met = newMetrics(s)
	return s
}

var (
	bigOnce sync.Once
	big     *Server
)

// BenchmarkDashboard is the dashboard's data source over a server that has
// run 10,000 jobs on 1,000 GPUs (FIFO; thousands wait at the end): the
// time each answer takes (built under the server's lock) and, for the
// largest, the JSON encoding the handler does after it.
//
//	go test ./internal/server -run '^$' -bench Dashboard -benchtime 20x
func BenchmarkDashboard(b *testing.B) {
	bigOnce.Do(func() { big = bigServer(b, "fifo", 125, 10000) })
	s := big
	d := s.Dashboard().(*dashboard)
	ctx := context.Background()
	admin, alice := api.Principal{User: "admin", Admin: true}, api.Principal{User: "alice"}
	sum, _ := d.Summary(ctx, admin)
	tl, _ := d.Timeline(ctx, admin, "", ui.Window{})
	q, _ := d.Queue(ctx, admin)
	segs := 0
	for _, row := range tl.GPUs {
		segs += len(row)
	}
	b.Logf("%d GPUs, %d jobs (%v), %d GPU segments, %d waiting; engine time %.0f s", sum.GPUs, len(tl.Jobs), sum.Jobs, segs, len(q.Jobs), sum.Now)
	for _, v := range []api.Principal{admin, alice} {
		b.Run("summary/"+v.User, func(b *testing.B) {
			for b.Loop() {
				d.Summary(ctx, v)
			}
		})
		b.Run("timeline/"+v.User, func(b *testing.B) {
			for b.Loop() {
				d.Timeline(ctx, v, "", ui.Window{})
			}
		})
		b.Run("timeline-last-hour/"+v.User, func(b *testing.B) {
			for b.Loop() {
				d.Timeline(ctx, v, "", ui.Window{From: sum.Now - 3600})
			}
		})
		b.Run("shares/"+v.User, func(b *testing.B) {
			for b.Loop() {
				d.Shares(ctx, v, "", ui.Window{})
			}
		})
		b.Run("queue/"+v.User, func(b *testing.B) {
			for b.Loop() {
				d.Queue(ctx, v)
			}
		})
	}
	b.Run("queue-uncached", func(b *testing.B) {
		for b.Loop() {
			d.qmu.Lock()
			d.q = nil
			d.qmu.Unlock()
			d.Queue(ctx, admin)
		}
	})
	b.Run("nodes", func(b *testing.B) {
		for b.Loop() {
			d.Nodes(ctx, admin)
		}
	})
	b.Run("timeline-encode", func(b *testing.B) {
		for b.Loop() {
			json.NewEncoder(io.Discard).Encode(tl)
		}
	})
}
