// Package demo is what `gandiva up --demo` does once the live scheduler is
// up: it submits a workload of deterministic trainers (examples/trainer;
// more jobs than GPUs), each with a framework-like start-up (StartUp, then
// FirstBatch), narrates what the scheduler does with them (pre-runs,
// starts, warm starts whose start-ups overlap running jobs, time-slicing,
// packing, migrations) as it happens, and checks at the end that every
// trainer finished exactly once with the checksum of an uninterrupted run.
// Its summary table's PACKED WITH column is what its narration said: the
// jobs each job was seen sharing a GPU with.
//
// It talks to the server through the API client only, as a user would; the
// command (cmd/gandiva up) starts the server and the agent and wires flags
// to Config.
package demo

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gandiva-sched/gandiva/examples/trainer/trainer"
	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/plural"
)

// Settings the demo runs the live scheduler with, where the command's flags
// leave them to it.
const (
	// Policy is the demo's policy when the default policy is gandiva: short
	// quanta and cool-downs, so that time-slicing and packing show within
	// the demo's minute.
	Policy = "gandiva:quantum=4;cooldown=20"
	// CheckpointEvery is the jobs' periodic checkpoint interval in seconds.
	CheckpointEvery = 2.0
	// Listen is the API's address: a free port on the loopback interface.
	Listen = "127.0.0.1:0"
	// Timeout is how long Run waits for the workload to end.
	Timeout = 3 * time.Minute
)

// Job is one trainer of the demo workload.
type Job struct {
	Name        string
	GPUs, Steps int
	Seed        uint64
	MemGiB      float64
}

// Workload is the demo's jobs for a node of gpus GPUs: gpus + gpus/2 + 2
// one-GPU trainers (at most 16), the second of them on two GPUs when there
// are two, of 150 to 225 mini-batches.
func Workload(gpus int) []Job {
	var out []Job
	names := "abcdefghijklmnop"
	n := gpus + gpus/2 + 2 // more jobs than GPUs
	for i := 0; i < n && i < len(names); i++ {
		j := Job{Name: "train-" + names[i:i+1], GPUs: 1, Steps: 150 + 25*(i%4), Seed: uint64(i + 1), MemGiB: 3}
		if i == 1 && gpus >= 2 {
			j.GPUs = 2
		}
		out = append(out, j)
	}
	return out
}

// Args are the trainer's arguments for j (without the program): mini-batches
// of stepTime, its result in dir/NAME.json and its ledger in dir/NAME.ledger.
func (j Job) Args(dir string, stepTime time.Duration) []string {
	return []string{"-steps", fmt.Sprint(j.Steps), "-step-time", stepTime.String(), "-dim", "4096", "-seed", fmt.Sprint(j.Seed),
		"-out", filepath.Join(dir, j.Name+".json"), "-ledger", filepath.Join(dir, j.Name+".ledger")}
}

// stepTime is the time one mini-batch of a demo trainer takes.
const stepTime = 100 * time.Millisecond

// A demo trainer's start-up, scaled from PyTorch ResNet-50 on an H100
// (12.8 s to the in-job client's hello, 24 s more for its first mini-batch,
// against about 16 s of work; docs/measurements/h100-2026-11-24.md) to
// the demo's minute: 3 s before the hello and 3 s more for the first
// mini-batch, against 15 to 22 s of work per job.
const (
	StartUp    = 3 * time.Second
	FirstBatch = 3 * time.Second
)

// startUpArgs are the trainer's start-up flags (the live runs only; the
// reference runs start at once).
func startUpArgs(startUp, firstBatch time.Duration) []string {
	return []string{"-startup", startUp.String(), "-first-batch", firstBatch.String()}
}

// Config is one run of the demo.
type Config struct {
	// Client is the API client, with an admin's token.
	Client *api.Client
	// Trainer is the command that runs the trainer, before its arguments
	// (the gandiva binary and its hidden trainer subcommand).
	Trainer []string
	// Dir holds the trainers' results and ledgers (Dir/demo), and the
	// uninterrupted reference runs (Dir/demo/reference).
	Dir string
	// GPUs is how many GPUs the node has; Server, Node and Policy are
	// shown in the first line.
	GPUs                 int
	Server, Node, Policy string
	// Timeout bounds the wait for the workload (0: the package's Timeout).
	Timeout time.Duration
	// StartUp and FirstBatch are the trainers' start-up before the in-job
	// client's hello and the extra time of their first mini-batch (0: the
	// package's StartUp and FirstBatch).
	StartUp, FirstBatch time.Duration
}

// Run submits the workload, narrates what happens to w and checks the
// result: an error when the demo timed out or some trainer did not finish
// exactly once with the checksum of an uninterrupted run.
func Run(ctx context.Context, w io.Writer, cfg Config) error {
	fmt.Fprintf(w, "gandiva up --demo: server at %s, one agent with %s, policy %s\n", cfg.Server, cfg.Node, cfg.Policy)
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = Timeout
	}
	dir := filepath.Join(cfg.Dir, "demo")
	ref := filepath.Join(dir, "reference")
	if err := os.MkdirAll(ref, 0o755); err != nil {
		return err
	}
	jobs := Workload(cfg.GPUs)
	want, err := references(jobs, ref)
	if err != nil {
		return err
	}
	cl := cfg.Client
	su, fb := cfg.StartUp, cfg.FirstBatch
	if su <= 0 {
		su = StartUp
	}
	if fb <= 0 {
		fb = FirstBatch
	}
	start := time.Now()
	for _, d := range jobs {
		cmd := append(append(append([]string(nil), cfg.Trainer...), d.Args(dir, stepTime)...), startUpArgs(su, fb)...)
		if _, err := cl.Submit(ctx, &api.JobRequest{Name: d.Name, Command: cmd, GPUs: d.GPUs,
			MemGiB: d.MemGiB, Iters: float64(d.Steps), IterTime: stepTime.Seconds(), WorkDir: dir}); err != nil {
			return fmt.Errorf("submitting %s: %w", d.Name, err)
		}
	}
	fmt.Fprintf(w, "submitted %d deterministic trainers (%d to %d mini-batches of 100 ms each, after a start-up of %s + %s for the first mini-batch) to %d GPUs:\n",
		len(jobs), jobs[0].Steps, 225, su, fb, cfg.GPUs)
	busy := newBusyMeter(cfg.GPUs)
	final, packed, err := narrate(ctx, w, cl, start, timeout, busy)
	if err != nil {
		return err
	}
	wall := time.Since(start).Seconds()
	fmt.Fprintf(w, "all %d jobs ended in %.1f s\n", len(final), wall)
	overlapped(w, final, dir)
	busy.report(w)
	worked(w, final, dir, wall, cfg.GPUs)
	fmt.Fprintln(w)
	return check(w, final, dir, want, packed)
}

// references runs every job uninterrupted, in process and without sleeping,
// and returns their checksums by name.
func references(jobs []Job, dir string) (map[string]string, error) {
	want := map[string]string{}
	for _, d := range jobs {
		if code := trainer.Main(d.Args(dir, 0), io.Discard, io.Discard); code != 0 {
			return nil, fmt.Errorf("reference run of %s failed (status %d)", d.Name, code)
		}
		r, err := trainer.ReadResult(filepath.Join(dir, d.Name+".json"))
		if err != nil {
			return nil, err
		}
		want[d.Name] = r.Checksum
	}
	return want, nil
}

// narrate prints a line whenever a job's state changes, until every job has
// ended (it returns them, and by ID the jobs each was said to be packed
// with) or timeout has passed.
func narrate(ctx context.Context, w io.Writer, cl *api.Client, start time.Time, timeout time.Duration, busy *busyMeter) ([]api.Job, map[string][]string, error) {
	deadline := time.After(timeout)
	last := map[string]string{}
	packed := map[string][]string{}
	moves := map[string]int{}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-deadline:
			return nil, nil, fmt.Errorf("demo: not done after %s", timeout)
		case <-tick.C:
		}
		list, err := cl.List(ctx, api.ListOptions{})
		if err != nil {
			return nil, nil, err
		}
		busy.sample(time.Now(), list)
		ended := 0
		for _, j := range list {
			line := describe(j, list, packed)
			if line != last[j.ID] {
				fmt.Fprintf(w, "  %5.1fs  %-3s %-8s %s\n", time.Since(start).Seconds(), j.ID, j.Name, line)
				last[j.ID] = line
			}
			if j.Migrations > moves[j.ID] {
				moves[j.ID] = j.Migrations
				if full, err := cl.Get(ctx, j.ID); err == nil {
					fmt.Fprintf(w, "  %5.1fs  %-3s %-8s %s\n", time.Since(start).Seconds(), j.ID, j.Name, moveReason(full.History))
				}
			}
			if j.State == "finished" || j.State == "failed" || j.State == "cancelled" {
				ended++
			}
		}
		if ended == len(list) {
			return list, packed, nil
		}
	}
}

// check prints the final table and fails unless every job finished exactly
// once with the checksum of its uninterrupted run (want, by name). packed
// is, by job ID, the jobs the narration said it was packed with.
func check(w io.Writer, final []api.Job, dir string, want map[string]string, packed map[string][]string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tNAME\tGPUS\tSTATE\tPRE-RUN\tSUSPENDS\tPACKED WITH\tMIGRATIONS\tCHECKSUM\tUNINTERRUPTED RUN")
	var bad []string
	sort.Slice(final, func(a, b int) bool { return final[a].ID < final[b].ID })
	for _, j := range final {
		got := "none"
		if r, err := trainer.ReadResult(filepath.Join(dir, j.Name+".json")); err == nil {
			got = r.Checksum
		}
		ok := "✓ equal"
		if got != want[j.Name] || j.State != "finished" {
			ok = "✗ " + want[j.Name]
			bad = append(bad, j.ID)
		}
		if l, err := trainer.ReadLedger(filepath.Join(dir, j.Name+".ledger")); err != nil || len(l.Done) != 1 || len(l.Overlaps) > 0 {
			ok += fmt.Sprintf(" (completed %d times", len(l.Done))
			if len(l.Overlaps) > 0 {
				ok += fmt.Sprintf(", %d overlapping copies", len(l.Overlaps))
			}
			ok += ")"
			bad = append(bad, j.ID)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%d\t%s\t%d\t%s\t%s\n", j.ID, j.Name, j.GPUs, j.State, orDash(j.PreRun), j.Suspends,
			orDash(strings.Join(packed[j.ID], ",")), j.Migrations, got, ok)
	}
	tw.Flush()
	if len(bad) > 0 {
		return fmt.Errorf("demo: jobs %s did not finish exactly once with the checksum of an uninterrupted run", strings.Join(bad, ", "))
	}
	fmt.Fprintln(w, "\nevery trainer finished once, with the checksum of an uninterrupted run.")
	return nil
}

// describe is one line about a job's state for the narration. The jobs a
// running job shares a GPU with are added to packed[j.ID] (and it to
// theirs), in the order seen: the summary's PACKED WITH column.
func describe(j api.Job, all []api.Job, packed map[string][]string) string {
	switch j.State {
	case "queued":
		switch j.PreRun {
		case "pending":
			return "queued: waiting for its pre-run (first mini-batch on one GPU)"
		case "running":
			return "pre-running its first mini-batch on one GPU"
		}
		if j.BackoffUntil != nil {
			return "queued: backing off after a failure"
		}
		return "queued"
	case "warming":
		s := "warm start on " + api.WorkersText(j.Workers) + ": its process starts up while it waits"
		if with := holders(j, all); len(with) > 0 {
			s += ", beside " + strings.Join(with, ",") + " (running)"
		}
		return s + ", to be held at its first mini-batch boundary"
	case "running", "migrating":
		s := j.State + " on " + api.WorkersText(j.Workers)
		if j.Starting != "" {
			s += ", starting up"
		}
		with := holders(j, all)
		for _, o := range with {
			packed[j.ID] = addOnce(packed[j.ID], o)
			packed[o] = addOnce(packed[o], j.ID)
		}
		if len(with) > 0 {
			s += " (packed with " + strings.Join(with, ",") + ")"
		}
		return s
	case "suspended":
		if j.Warm {
			return fmt.Sprintf("warm: its start-up took %.1f s, done while it waited; held at its first mini-batch boundary, its turn costs a resume", j.StartUp)
		}
		return "suspended (time-sliced out; its state waits in host memory)"
	case "finished":
		return fmt.Sprintf("finished: %.0f mini-batches, %s, packed with %s, %s", j.Done, plural.Of(j.Suspends, "suspension"),
			orNone(strings.Join(packed[j.ID], ",")), plural.Of(j.Migrations, "migration"))
	}
	return j.State + ": " + j.Reason
}

// moveReason says why a job was last moved, from its history: the reason of
// its last change to migrating (the policy's, with the gain and the cost it
// weighed).
func moveReason(h []api.Change) string {
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].To == "migrating" {
			return "moved: " + h[i].Reason
		}
	}
	return "moved"
}

// holders are the running or migrating jobs other than j on a GPU of j's.
func holders(j api.Job, all []api.Job) []string {
	var with []string
	for _, o := range all {
		if o.ID == j.ID || (o.State != "running" && o.State != "migrating") {
			continue
		}
		if sharesGPU(j.Workers, o.Workers) {
			with = append(with, o.ID)
		}
	}
	return with
}

func addOnce(list []string, id string) []string {
	for _, x := range list {
		if x == id {
			return list
		}
	}
	return append(list, id)
}

// overlapped prints how much of the jobs' start-ups (from their ledgers:
// each process's spawn to the end of its first mini-batch) overlapped
// other jobs' mini-batches: the start-ups that warm starts hid.
func overlapped(w io.Writer, final []api.Job, dir string) {
	var ls []trainer.Ledger
	for _, j := range final {
		if l, err := trainer.ReadLedger(filepath.Join(dir, j.Name+".ledger")); err == nil {
			ls = append(ls, l)
		}
	}
	total, hidden := 0.0, 0.0
	for i, l := range ls {
		var others [][2]float64
		for k := range ls {
			if k != i {
				others = append(others, ls[k].Busy...)
			}
		}
		for k := 0; k < len(l.SpawnAt) && k < len(l.Ready); k++ {
			su := [2]float64{l.SpawnAt[k], l.Ready[k]}
			total += su[1] - su[0]
			hidden += within(su, others)
		}
	}
	if total > 0 {
		fmt.Fprintf(w, "start-ups: %.1f s in all, %.1f s of it (%.0f%%) while other jobs ran mini-batches\n", total, hidden, 100*hidden/total)
	}
}

// worked prints the GPU-seconds of mini-batches the jobs ran (from their
// ledgers' busy stretches, times their GPUs) as a share of the node's GPU
// time over wall seconds. Unlike the GPU-busy fraction it counts each job
// of a packed pair: on fake GPUs a pair runs each at full speed.
func worked(w io.Writer, final []api.Job, dir string, wall float64, gpus int) {
	total := 0.0
	for _, j := range final {
		l, err := trainer.ReadLedger(filepath.Join(dir, j.Name+".ledger"))
		if err != nil {
			continue
		}
		for _, b := range l.Busy {
			total += float64(j.GPUs) * (b[1] - b[0])
		}
	}
	if wall > 0 && gpus > 0 {
		fmt.Fprintf(w, "mini-batches: %.1f GPU-seconds, %.0f%% of the GPUs' %.0f s (each job of a packed pair counted)\n",
			total, 100*total/(wall*float64(gpus)), wall*float64(gpus))
	}
}

// within is how much of span the union of iv covers.
func within(span [2]float64, iv [][2]float64) float64 {
	var cut [][2]float64
	for _, x := range iv {
		a, b := max(x[0], span[0]), min(x[1], span[1])
		if b > a {
			cut = append(cut, [2]float64{a, b})
		}
	}
	sort.Slice(cut, func(i, j int) bool { return cut[i][0] < cut[j][0] })
	total, end := 0.0, span[0]
	for _, x := range cut {
		if x[1] <= end {
			continue
		}
		total += x[1] - max(x[0], end)
		end = x[1]
	}
	return total
}

func sharesGPU(a, b []api.Worker) bool {
	for _, x := range a {
		for _, y := range b {
			if x.Node != y.Node {
				continue
			}
			for _, g := range x.GPUs {
				for _, h := range y.GPUs {
					if g == h {
						return true
					}
				}
			}
		}
	}
	return false
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
