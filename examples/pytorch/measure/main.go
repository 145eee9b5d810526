// Command measure runs examples/pytorch/train.py under the agent's process
// supervisor (internal/agent/jobproc), exactly as the agent does, and
// measures what the Gandiva mechanisms cost for a real PyTorch job:
//
//   - start-up: process start to the client's hello, and to the first
//     mini-batch done;
//   - suspension at a mini-batch boundary (state moved to pinned host
//     memory, GPU freed) and the resume, several times: request to stopped,
//     the hook's part, bytes moved, GPU memory the process keeps;
//   - an unaligned suspension (SIGSTOP) and its resume, and the GPU memory
//     it keeps;
//   - a checkpoint that the job continues after, and a migration: the
//     checkpoint, the exit, the restart with restore on the same GPU, and the
//     first mini-batch after it.
//
// It prints a Markdown table and, with -json, writes the figures as JSON.
//
//	go run ./examples/pytorch/measure -model resnet50 -batch 64       # on a GPU machine
//	go run ./examples/pytorch/measure -model tiny -device cpu -image-size 32 -batch 8
//
// With -mode ddp it runs examples/pytorch/ddp.py instead, as gangs of one
// and two ranks (one jobproc.Proc per rank, RANK, WORLD_SIZE, MASTER_ADDR
// and MASTER_PORT set as the agent sets them for a gang's ranks), and
// measures, with medians over -reps repetitions: the suspension and the
// resumption in place of a 2-rank gang against a single process (request
// to every rank stopped; to every rank resumed; to the first mini-batch
// after), and world-size changes through a checkpoint: the gang of W
// ranks checkpoints once and exits, W' ranks start and restore from it
// (1 -> 2, 2 -> 1, and 1 -> 1, 2 -> 2 for comparison), to the first
// mini-batch after.
//
//	go run ./examples/pytorch/measure -mode ddp -python /usr/bin/python3 -device cpu -reps 7
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gandiva-sched/gandiva/internal/agent/jobproc"
)

type figures struct {
	Model, Device       string
	Batch, ImageSize    int
	IterTimeS           float64 `json:"iter_time_s"`
	StartToHelloS       float64 `json:"start_to_hello_s"`
	StartToFirstBatchS  float64 `json:"start_to_first_minibatch_s"`
	Suspends            []op    `json:"suspends"`
	Unaligned           op      `json:"unaligned"`
	Save                op      `json:"save"`
	Migrate             op      `json:"migrate"`
	RestartToHelloS     float64 `json:"restart_to_hello_s"`
	RestoreLoadS        float64 `json:"restore_load_s"`
	RestartToFirstBatch float64 `json:"restart_to_first_minibatch_s"`
	GPUMemRunningMiB    float64 `json:"gpu_mem_running_mib"`
}

type op struct {
	TookS      float64 `json:"took_s"`
	HookS      float64 `json:"hook_s"`
	ResumeS    float64 `json:"resume_s,omitempty"`
	ResumeHook float64 `json:"resume_hook_s,omitempty"`
	Bytes      int64   `json:"bytes"`
	GPUMemMiB  float64 `json:"gpu_mem_held_mib"` // -1: unknown (no nvidia-smi)
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "measure:", err)
		os.Exit(1)
	}
}

func run() error {
	python := flag.String("python", "python3", "Python interpreter with torch")
	script := flag.String("script", "examples/pytorch/train.py", "the training script")
	model := flag.String("model", "resnet50", "model (resnet50, resnet101, tiny)")
	batch := flag.Int("batch", 64, "mini-batch size")
	image := flag.Int("image-size", 224, "image side")
	device := flag.String("device", "auto", "auto, cuda or cpu")
	suspends := flag.Int("suspends", 5, "aligned suspend/resume cycles")
	warm := flag.Int64("warm", 20, "mini-batches before the first measurement")
	dir := flag.String("dir", "", "work directory (default: a temporary one)")
	jsonOut := flag.String("json", "", "write the figures as JSON to this file")
	timeout := flag.Duration("timeout", 8*time.Minute, "give up after this long")
	mode := flag.String("mode", "train", "train: train.py in one process; ddp: ddp.py gangs of 1 and 2 ranks")
	ddpScript := flag.String("ddp-script", "examples/pytorch/ddp.py", "the DDP script (ddp mode)")
	backend := flag.String("backend", "gloo", "torch.distributed backend (ddp mode: gloo or nccl)")
	globalBatch := flag.Int("global-batch", 8, "global mini-batch, split by rank (ddp mode)")
	stepTime := flag.Float64("step-time", 0, "ddp.py's --step-time, seconds (ddp mode)")
	reps := flag.Int("reps", 5, "repetitions of each measurement (ddp mode)")
	flag.Parse()

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if *dir == "" {
		d, err := os.MkdirTemp("", "gandiva-measure-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		*dir = d
	}
	if *mode == "ddp" {
		abs, err := filepath.Abs(*ddpScript)
		if err != nil {
			return err
		}
		dev := *device
		if dev == "auto" {
			dev = "cpu"
			if visible() != nil {
				dev = "cuda"
			}
		}
		return runDDP(ctx, ddpOptions{python: *python, script: abs, device: dev, backend: *backend,
			globalBatch: *globalBatch, stepTime: *stepTime, reps: *reps, warm: *warm, dir: *dir}, *jsonOut)
	} else if *mode != "train" {
		return fmt.Errorf("-mode %q: want train or ddp", *mode)
	}
	abs, err := filepath.Abs(*script)
	if err != nil {
		return err
	}
	spec := jobproc.Spec{
		Job: "measure", Attempt: 1,
		Command: []string{*python, abs, "--model", *model, "--batch", strconv.Itoa(*batch),
			"--image-size", strconv.Itoa(*image), "--device", *device, "--steps", "1000000", "--print-every", "50"},
		Env:           map[string]string{"PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1"},
		WorkDir:       filepath.Join(*dir, "node1"),
		CheckpointDir: filepath.Join(*dir, "shared-ckpt"),
		LogPath:       filepath.Join(*dir, "node1", "job.log"),
		GPUs:          visible(),
		ReportEvery:   200 * time.Millisecond,
		StopGrace:     60 * time.Second,
	}
	f := figures{Model: *model, Device: *device, Batch: *batch, ImageSize: *image}

	t0 := time.Now()
	p, err := jobproc.Start(ctx, spec)
	if err != nil {
		return err
	}
	defer p.Kill()
	ev := p.Events()
	hello, first, err := startup(ctx, ev, t0)
	if err != nil {
		return fmt.Errorf("%w\n%s", err, tail(spec.LogPath))
	}
	f.StartToHelloS, f.StartToFirstBatchS = hello.Seconds(), first.Seconds()
	if err := waitFor(ctx, p, *warm); err != nil {
		return err
	}
	f.IterTimeS = iterTime(ctx, p)
	f.GPUMemRunningMiB = gpuMem(p.Info().PID)

	for i := 0; i < *suspends; i++ {
		s, err := p.Suspend(ctx, jobproc.SuspendOptions{})
		if err != nil {
			return err
		}
		if s.Mode != jobproc.Memory {
			return fmt.Errorf("suspension %d: mode %v (%s)", i, s.Mode, s.Reason)
		}
		time.Sleep(500 * time.Millisecond)
		o := op{TookS: s.Took.Seconds(), HookS: s.Save.Seconds(), Bytes: s.Bytes, GPUMemMiB: gpuMem(p.Info().PID)}
		r, err := p.Resume(ctx, spec.GPUs)
		if err != nil {
			return err
		}
		o.ResumeS, o.ResumeHook = r.Took.Seconds(), r.Load.Seconds()
		f.Suspends = append(f.Suspends, o)
		if err := waitFor(ctx, p, p.Info().Done+5); err != nil {
			return err
		}
	}

	s, err := p.Suspend(ctx, jobproc.SuspendOptions{Unaligned: true})
	if err != nil {
		return err
	}
	time.Sleep(500 * time.Millisecond)
	f.Unaligned = op{TookS: s.Took.Seconds(), GPUMemMiB: gpuMem(p.Info().PID)}
	r, err := p.Resume(ctx, spec.GPUs)
	if err != nil {
		return err
	}
	f.Unaligned.ResumeS = r.Took.Seconds()
	if err := waitFor(ctx, p, p.Info().Done+5); err != nil {
		return err
	}

	c, err := p.Save(ctx)
	if err != nil {
		return err
	}
	f.Save = op{HookS: c.Save.Seconds(), Bytes: c.Bytes}
	if err := waitFor(ctx, p, p.Info().Done+3); err != nil {
		return err
	}

	tm := time.Now()
	e, err := p.Checkpoint(ctx)
	if err != nil {
		return err
	}
	if e.Checkpoint == nil {
		return fmt.Errorf("migration fell back to a restart: %s", e.Reason)
	}
	f.Migrate = op{TookS: time.Since(tm).Seconds(), HookS: e.Checkpoint.Save.Seconds(), Bytes: e.Checkpoint.Bytes}
	spec2 := spec
	spec2.Attempt, spec2.Restore = 2, true
	spec2.WorkDir, spec2.LogPath = filepath.Join(*dir, "node2"), filepath.Join(*dir, "node2", "job.log")
	t1 := time.Now()
	p2, err := jobproc.Start(ctx, spec2)
	if err != nil {
		return err
	}
	defer p2.Kill()
	ev2 := p2.Events()
	var load time.Duration
	for e := range ev2 {
		if e.Kind == jobproc.EvConnected {
			f.RestartToHelloS, load = time.Since(t1).Seconds(), e.Load
		}
		if e.Kind == jobproc.EvProgress && f.RestartToHelloS > 0 {
			f.RestartToFirstBatch = time.Since(t1).Seconds()
			break
		}
		if e.Kind == jobproc.EvExited {
			return fmt.Errorf("restored job exited: %s\n%s", e.Exit.Reason, e.Exit.LogTail)
		}
	}
	f.RestoreLoadS = load.Seconds()
	p2.Kill()

	report(os.Stdout, f)
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(f, "", "  ")
		if err := os.WriteFile(*jsonOut, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	fmt.Println("\nlog of the first process (tail):")
	fmt.Println(tail(spec.LogPath))
	return nil
}

// visible returns the GPUs to give the job: the first of
// CUDA_VISIBLE_DEVICES, else 0 when nvidia-smi exists, else none.
func visible() []int {
	if v := os.Getenv("CUDA_VISIBLE_DEVICES"); v != "" {
		if g, err := strconv.Atoi(strings.Split(v, ",")[0]); err == nil {
			return []int{g}
		}
	}
	if _, err := exec.LookPath("nvidia-smi"); err == nil {
		return []int{0}
	}
	return nil
}

func startup(ctx context.Context, ev <-chan jobproc.Event, t0 time.Time) (hello, first time.Duration, err error) {
	for {
		select {
		case e, ok := <-ev:
			if !ok {
				return 0, 0, errors.New("job ended during start-up")
			}
			switch e.Kind {
			case jobproc.EvConnected:
				hello = time.Since(t0)
			case jobproc.EvProgress:
				return hello, time.Since(t0), nil
			case jobproc.EvExited:
				return 0, 0, fmt.Errorf("job exited during start-up: %s", e.Exit.Reason)
			}
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		}
	}
}

func waitFor(ctx context.Context, p *jobproc.Proc, n int64) error {
	for p.Info().Done < n {
		select {
		case <-p.Done():
			return fmt.Errorf("job ended: %s", p.Exit().Reason)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// iterTime measures seconds per mini-batch over the next few seconds.
func iterTime(ctx context.Context, p *jobproc.Proc) float64 {
	d0, t0 := p.Info().Done, time.Now()
	select {
	case <-time.After(3 * time.Second):
	case <-ctx.Done():
	}
	d := p.Info().Done - d0
	if d <= 0 {
		return 0
	}
	return time.Since(t0).Seconds() / float64(d)
}

// gpuMem returns the GPU memory (MiB) nvidia-smi reports for pid, -1 when
// it cannot tell.
func gpuMem(pid int) float64 {
	out, err := exec.Command("nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits").Output()
	if err != nil {
		return -1
	}
	total, found := 0.0, false
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Split(line, ",")
		if len(f) != 2 {
			continue
		}
		if p, _ := strconv.Atoi(strings.TrimSpace(f[0])); p == pid {
			m, _ := strconv.ParseFloat(strings.TrimSpace(f[1]), 64)
			total, found = total+m, true
		}
	}
	if !found {
		return 0
	}
	return total
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

func report(w io.Writer, f figures) {
	ms := func(s float64) string { return fmt.Sprintf("%.1f ms", s*1000) }
	mem := func(m float64) string {
		if m < 0 {
			return "n/a"
		}
		return fmt.Sprintf("%.0f MiB", m)
	}
	fmt.Fprintf(w, "model %s, batch %d×3×%d², device %s: %s per mini-batch; GPU memory while running %s\n\n",
		f.Model, f.Batch, f.ImageSize, f.Device, ms(f.IterTimeS), mem(f.GPUMemRunningMiB))
	fmt.Fprintln(w, "| what | request → done | hooks' part | state | GPU memory kept |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	fmt.Fprintf(w, "| start-up: process → client hello | %s | | | |\n", ms(f.StartToHelloS))
	fmt.Fprintf(w, "| start-up: process → first mini-batch done | %s | | | |\n", ms(f.StartToFirstBatchS))
	var sus, res, sh, rh []float64
	for _, s := range f.Suspends {
		sus, res, sh, rh = append(sus, s.TookS), append(res, s.ResumeS), append(sh, s.HookS), append(rh, s.ResumeHook)
	}
	if len(f.Suspends) > 0 {
		s := f.Suspends[len(f.Suspends)-1]
		fmt.Fprintf(w, "| suspend at a boundary (median of %d; includes waiting for the boundary) | %s | %s (offload) | %.1f MiB | %s |\n",
			len(sus), ms(median(sus)), ms(median(sh)), float64(s.Bytes)/(1<<20), mem(s.GPUMemMiB))
		fmt.Fprintf(w, "| resume (median of %d) | %s | %s (reload) | | |\n", len(res), ms(median(res)), ms(median(rh)))
	}
	fmt.Fprintf(w, "| unaligned suspend (SIGSTOP) | %s | | | %s |\n", ms(f.Unaligned.TookS), mem(f.Unaligned.GPUMemMiB))
	fmt.Fprintf(w, "| resume after SIGSTOP (SIGCONT) | %s | | | |\n", ms(f.Unaligned.ResumeS))
	fmt.Fprintf(w, "| checkpoint, job continues | | %s (torch.save) | %.1f MiB | |\n", ms(f.Save.HookS), float64(f.Save.Bytes)/(1<<20))
	fmt.Fprintf(w, "| migrate: checkpoint + exit | %s | %s (torch.save) | %.1f MiB | |\n", ms(f.Migrate.TookS), ms(f.Migrate.HookS), float64(f.Migrate.Bytes)/(1<<20))
	fmt.Fprintf(w, "| migrate: restart → client hello (restored) | %s | %s (torch.load) | | |\n", ms(f.RestartToHelloS), ms(f.RestoreLoadS))
	fmt.Fprintf(w, "| migrate: restart → first mini-batch done | %s | | | |\n", ms(f.RestartToFirstBatch))
}

func median(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	x = append([]float64(nil), x...)
	sort.Float64s(x)
	return x[len(x)/2]
}
