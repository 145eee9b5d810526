package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gandiva-sched/gandiva/internal/agent/jobproc"
)

// ddpOptions configure the ddp mode: examples/pytorch/ddp.py gangs of one
// and two ranks on this machine, each rank a jobproc.Proc as the agent
// runs it (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set by jobproc).
type ddpOptions struct {
	python, script  string
	device, backend string
	globalBatch     int
	stepTime        float64
	reps            int
	warm            int64
	dir             string
}

// ddpFigures are the ddp mode's measurements, in seconds; each list has
// one entry per repetition.
type ddpFigures struct {
	Device      string  `json:"device"`
	Backend     string  `json:"backend"`
	GlobalBatch int     `json:"global_batch"`
	StepTimeS   float64 `json:"step_time_s"`
	// StartHello and StartBatch map the world size to a fresh start's
	// time from the launch to every rank's client hello, and to every
	// rank's first mini-batch done (one sample each: context for the
	// restarts below).
	StartHello map[string]float64 `json:"start_to_hello_s"`
	StartBatch map[string]float64 `json:"start_to_minibatch_s"`
	// IterTimeS maps the world size to the seconds per mini-batch.
	IterTimeS map[string]float64 `json:"iter_time_s"`
	// Suspend and Resume map the world size to the times of the gang's
	// suspension (request to every rank stopped at a mini-batch boundary,
	// state in host memory) and resumption (request to every rank resumed;
	// ResumeBatch: to the first mini-batch done after it).
	Suspend     map[string][]float64 `json:"suspend_s"`
	Resume      map[string][]float64 `json:"resume_s"`
	ResumeBatch map[string][]float64 `json:"resume_to_minibatch_s"`
	// Changes maps "W->W'" to the world-size changes measured.
	Changes map[string][]change `json:"changes"`
}

// change is one world-size change: the gang of W ranks checkpoints and
// exits, W' ranks start and restore from that checkpoint.
type change struct {
	// Commit: request to every rank reporting the gang's checkpoint
	// committed; Checkpoint: to every rank exited.
	CommitS     float64 `json:"checkpoint_commit_s"`
	CheckpointS float64 `json:"checkpoint_exit_s"`
	// Load: the longest time a new rank's client took to load the
	// checkpoint (part of Hello).
	LoadS float64 `json:"restore_load_s"`
	// Hello: the new ranks' start to every rank's client hello (restored).
	HelloS float64 `json:"restart_to_hello_s"`
	// Batch: the new ranks' start to the first mini-batch done by every
	// rank after the restore.
	BatchS float64 `json:"restart_to_minibatch_s"`
	// Done is the mini-batch of the checkpoint, and the one the new gang
	// started from (they must be equal).
	Done, From int64
}

// gang is the ranks of one attempt of the measured job.
type gang struct {
	procs []*jobproc.Proc
	specs []jobproc.Spec

	mu      sync.Mutex
	savedAt []time.Time // per rank: when its last checkpoint was committed (EvSaved)
}

func (g *gang) kill() {
	for _, p := range g.procs {
		p.Kill()
	}
}

// each runs f for every rank at once and returns the first error.
func (g *gang) each(f func(r int, p *jobproc.Proc) error) error {
	errs := make([]error, len(g.procs))
	var wg sync.WaitGroup
	for r, p := range g.procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(r, p); err != nil {
				errs[r] = fmt.Errorf("rank %d: %w", r, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// done returns the fewest mini-batches any rank has reported.
func (g *gang) done() int64 {
	n := int64(-1)
	for _, p := range g.procs {
		if d := p.Info().Done; n < 0 || d < n {
			n = d
		}
	}
	return n
}

// waitDone waits until every rank has reported n mini-batches.
func (g *gang) waitDone(ctx context.Context, n int64) error {
	for g.done() < n {
		for r, p := range g.procs {
			select {
			case <-p.Done():
				return fmt.Errorf("rank %d ended: %s\n%s", r, p.Exit().Reason, tail(g.specs[r].LogPath))
			default:
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
	return nil
}

// startGang starts world ranks of attempt, restoring from the checkpoint
// when restore is set; it returns when every process is launched.
func startGang(ctx context.Context, o ddpOptions, world, attempt int, restore bool) (*gang, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	g := &gang{}
	for r := range world {
		work := filepath.Join(o.dir, fmt.Sprintf("attempt%d-rank%d", attempt, r))
		if err := os.MkdirAll(work, 0o755); err != nil {
			return nil, err
		}
		spec := jobproc.Spec{
			Job: "measure-ddp", Attempt: attempt,
			Command: []string{o.python, o.script, "--steps", "100000000", "--global-batch", strconv.Itoa(o.globalBatch),
				"--seed", "1", "--step-time", strconv.FormatFloat(o.stepTime, 'g', -1, 64),
				"--device", o.device, "--backend", o.backend},
			Env:           map[string]string{"PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1"},
			WorkDir:       work,
			CheckpointDir: filepath.Join(o.dir, "shared-ckpt"),
			LogPath:       filepath.Join(work, "job.log"),
			Restore:       restore,
			// a report at every mini-batch boundary: the figures' resolution
			ReportEvery: time.Millisecond,
			StopGrace:   60 * time.Second,
		}
		if o.device == "cuda" {
			spec.GPUs = []int{r}
		}
		if world > 1 {
			spec.Rank, spec.WorldSize, spec.MasterAddr, spec.MasterPort = r, world, "127.0.0.1", port
		}
		p, err := jobproc.Start(ctx, spec)
		if err != nil {
			g.kill()
			return nil, fmt.Errorf("rank %d: %w", r, err)
		}
		g.procs, g.specs = append(g.procs, p), append(g.specs, spec)
	}
	return g, nil
}

// waitRestarted waits for every rank's hello and first mini-batch after t0
// (the start of the gang) and returns both times, and the mini-batch the
// gang restored.
func (g *gang) waitRestarted(ctx context.Context, t0 time.Time) (hello, batch, load time.Duration, from int64, err error) {
	var mu sync.Mutex
	from = -1
	err = g.each(func(r int, p *jobproc.Proc) error {
		var h time.Duration
		var restored int64
		for {
			select {
			case e, ok := <-p.Events():
				if !ok {
					return errors.New("ended during start-up")
				}
				switch e.Kind {
				case jobproc.EvConnected:
					h, restored = time.Since(t0), e.Done
					mu.Lock()
					hello, load = max(hello, h), max(load, e.Load)
					if r == 0 {
						from = e.Done
					}
					mu.Unlock()
				case jobproc.EvProgress:
					if h == 0 || e.Done <= restored {
						continue
					}
					mu.Lock()
					batch = max(batch, time.Since(t0))
					mu.Unlock()
					return nil
				case jobproc.EvExited:
					return fmt.Errorf("exited during start-up: %s\n%s", e.Exit.Reason, e.Exit.LogTail)
				}
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	})
	return hello, batch, load, from, err
}

// watch reads the gang's events from now on (a Proc's events queue up
// until read), noting when each rank reports a committed checkpoint.
func (g *gang) watch() {
	g.savedAt = make([]time.Time, len(g.procs))
	for r, p := range g.procs {
		go func() {
			for e := range p.Events() {
				if e.Kind == jobproc.EvSaved {
					g.mu.Lock()
					g.savedAt[r] = e.At
					g.mu.Unlock()
				}
			}
		}()
	}
}

// saved returns when the last rank reported the checkpoint committed.
func (g *gang) saved() time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	var t time.Time
	for _, s := range g.savedAt {
		if s.After(t) {
			t = s
		}
	}
	return t
}

func runDDP(ctx context.Context, o ddpOptions, jsonOut string) error {
	f := ddpFigures{Device: o.device, Backend: o.backend, GlobalBatch: o.globalBatch, StepTimeS: o.stepTime,
		IterTimeS: map[string]float64{}, StartHello: map[string]float64{}, StartBatch: map[string]float64{},
		Suspend: map[string][]float64{}, Resume: map[string][]float64{}, ResumeBatch: map[string][]float64{},
		Changes: map[string][]change{}}
	attempt := 0
	// suspension and resumption in place, a single process against a 2-rank gang
	for _, world := range []int{1, 2} {
		attempt++
		w := strconv.Itoa(world)
		ts := time.Now()
		g, err := startGang(ctx, o, world, attempt, false)
		if err != nil {
			return err
		}
		hello, batch, _, _, err := g.waitRestarted(ctx, ts)
		if err != nil {
			g.kill()
			return fmt.Errorf("starting %d ranks: %w", world, err)
		}
		f.StartHello[w], f.StartBatch[w] = hello.Seconds(), batch.Seconds()
		g.watch()
		if err := g.waitDone(ctx, o.warm); err != nil {
			g.kill()
			return err
		}
		d0, t0 := g.done(), time.Now()
		if err := g.waitDone(ctx, d0+20); err != nil {
			g.kill()
			return err
		}
		f.IterTimeS[w] = time.Since(t0).Seconds() / float64(g.done()-d0)
		for range o.reps {
			t0 := time.Now()
			at := make([]int64, world)
			err := g.each(func(r int, p *jobproc.Proc) error {
				s, err := p.Suspend(ctx, jobproc.SuspendOptions{})
				if err == nil && s.Mode != jobproc.Memory {
					err = fmt.Errorf("suspended by %v (%s), not at a boundary in memory", s.Mode, s.Reason)
				}
				at[r] = s.Done
				return err
			})
			if err == nil && slices.Min(at) != slices.Max(at) {
				err = fmt.Errorf("the ranks stopped at different mini-batches %v", at)
			}
			if err != nil {
				g.kill()
				return fmt.Errorf("suspending %d ranks: %w", world, err)
			}
			stopped := at[0]
			f.Suspend[w] = append(f.Suspend[w], time.Since(t0).Seconds())
			time.Sleep(300 * time.Millisecond)
			t1 := time.Now()
			if err := g.each(func(_ int, p *jobproc.Proc) error { _, err := p.Resume(ctx, p.Info().GPUs); return err }); err != nil {
				g.kill()
				return fmt.Errorf("resuming %d ranks: %w", world, err)
			}
			f.Resume[w] = append(f.Resume[w], time.Since(t1).Seconds())
			if err := g.waitDone(ctx, stopped+1); err != nil {
				g.kill()
				return err
			}
			f.ResumeBatch[w] = append(f.ResumeBatch[w], time.Since(t1).Seconds())
			if err := g.waitDone(ctx, g.done()+5); err != nil {
				g.kill()
				return err
			}
		}
		g.kill()
		for _, p := range g.procs {
			<-p.Done()
		}
	}
	// world-size changes through a checkpoint: 1 -> 2 -> 1 -> 2 ..., then
	// the same world size for comparison (a migration: 1 -> 1, 2 -> 2;
	// the 1 -> 2 between them is not counted)
	plan := []int{1}
	for range o.reps {
		plan = append(plan, 2, 1)
	}
	for range o.reps {
		plan = append(plan, 1)
	}
	for range o.reps + 1 {
		plan = append(plan, 2)
	}
	os.RemoveAll(filepath.Join(o.dir, "shared-ckpt"))
	attempt++
	g, err := startGang(ctx, o, plan[0], attempt, false)
	if err != nil {
		return err
	}
	g.watch()
	for i := 1; i < len(plan); i++ {
		if err := g.waitDone(ctx, g.done()+max(o.warm/2, 5)); err != nil {
			g.kill()
			return err
		}
		t0 := time.Now()
		at := make([]int64, len(g.procs))
		err := g.each(func(r int, p *jobproc.Proc) error {
			e, err := p.Checkpoint(ctx)
			if err != nil {
				return err
			}
			if e.Checkpoint == nil {
				return fmt.Errorf("no checkpoint: %s", e.Reason)
			}
			at[r] = e.Checkpoint.Done
			return nil
		})
		if err == nil && slices.Min(at) != slices.Max(at) {
			err = fmt.Errorf("the ranks checkpointed at different mini-batches %v", at)
		}
		done := at[0]
		if err != nil {
			g.kill()
			return fmt.Errorf("checkpointing %d ranks: %w", plan[i-1], err)
		}
		c := change{CheckpointS: time.Since(t0).Seconds(), Done: done}
		if sv := g.saved(); sv.After(t0) {
			c.CommitS = sv.Sub(t0).Seconds()
		}
		attempt++
		t1 := time.Now()
		g, err = startGang(ctx, o, plan[i], attempt, true)
		if err != nil {
			return err
		}
		hello, batch, load, from, err := g.waitRestarted(ctx, t1)
		if err != nil {
			g.kill()
			return fmt.Errorf("%d ranks restoring from %d: %w", plan[i], plan[i-1], err)
		}
		g.watch()
		c.HelloS, c.BatchS, c.LoadS, c.From = hello.Seconds(), batch.Seconds(), load.Seconds(), from
		if c.From != c.Done {
			g.kill()
			return fmt.Errorf("%d ranks restored at mini-batch %d from a checkpoint at %d", plan[i], c.From, c.Done)
		}
		if k := fmt.Sprintf("%d->%d", plan[i-1], plan[i]); len(f.Changes[k]) < o.reps {
			f.Changes[k] = append(f.Changes[k], c)
		}
	}
	g.kill()
	for _, p := range g.procs {
		<-p.Done()
	}
	reportDDP(os.Stdout, f)
	if jsonOut != "" {
		b, _ := json.MarshalIndent(f, "", "  ")
		if err := os.WriteFile(jsonOut, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func reportDDP(w io.Writer, f ddpFigures) {
	ms := func(s float64) string { return fmt.Sprintf("%.0f ms", s*1000) }
	fmt.Fprintf(w, "examples/pytorch/ddp.py, device %s, backend %s, global batch %d, --step-time %g: %s per mini-batch with 1 rank, %s with 2\n\n",
		f.Device, f.Backend, f.GlobalBatch, f.StepTimeS, ms(f.IterTimeS["1"]), ms(f.IterTimeS["2"]))
	fmt.Fprintln(w, "| what (median of n) | 1 process | 2-rank gang |")
	fmt.Fprintln(w, "|---|---|---|")
	row := func(what string, m map[string][]float64) {
		fmt.Fprintf(w, "| %s (n=%d) | %s | %s |\n", what, len(m["2"]), ms(median(m["1"])), ms(median(m["2"])))
	}
	row("suspend: request → every rank stopped at a boundary, state in host memory", f.Suspend)
	row("resume: request → every rank resumed", f.Resume)
	row("resume: request → first mini-batch done after it", f.ResumeBatch)
	fmt.Fprintln(w)
	fmt.Fprintf(w, "\nfresh start (launch → every rank's hello; → first mini-batch): 1 process %s; %s, 2 ranks %s; %s\n\n",
		ms(f.StartHello["1"]), ms(f.StartBatch["1"]), ms(f.StartHello["2"]), ms(f.StartBatch["2"]))
	fmt.Fprintln(w, "| world-size change (median of n) | checkpoint committed | + exit | restart → hello (restored) | of which restore | restart → first mini-batch | total |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for _, k := range []string{"1->2", "2->1", "1->1", "2->2"} {
		cs := f.Changes[k]
		if len(cs) == 0 {
			continue
		}
		var cm, ck, he, lo, ba, to []float64
		for _, c := range cs {
			cm, ck, he, lo = append(cm, c.CommitS), append(ck, c.CheckpointS), append(he, c.HelloS), append(lo, c.LoadS)
			ba, to = append(ba, c.BatchS), append(to, c.CheckpointS+c.BatchS)
		}
		fmt.Fprintf(w, "| %s ranks (n=%d) | %s | %s | %s | %s | %s | %s |\n", strings.Replace(k, "->", " → ", 1), len(cs),
			ms(median(cm)), ms(median(ck)), ms(median(he)), ms(median(lo)), ms(median(ba)), ms(median(to)))
	}
}
