// Package trainer is Gandiva's deterministic example job: a training loop
// whose final checksum is the same whether it runs uninterrupted or is
// suspended, resumed, checkpointed and restored on another node any number
// of times. It uses the Go in-job client (package client); with -no-client
// it runs without it, to show the fall-backs (SIGSTOP, restart). The
// command examples/trainer runs Main; so may any program that embeds it.
//
//	trainer -steps 200 -step-time 20ms -dim 1024 -seed 1 [-out result.json] [-ledger FILE]
//	        [-startup 10s] [-first-batch 5s]
//
// -startup and -first-batch give the trainer the start-up of a real job:
// -startup is slept when the process starts, before the in-job client says
// hello (a framework's import and device initialisation: 12.8 s for
// PyTorch on an H100), -first-batch is added to the first mini-batch of
// every process (cuDNN's autotuning: 24 s more on an H100); see
// docs/measurements. A process's start-up, from its start to its first
// mini-batch boundary, is their sum plus one -step-time.
//
// The last line of its output is "checksum=<16 hex digits> steps=<n>"; -out
// also writes {"checksum", "steps", "start", "restored", "job", "attempt"} as
// JSON (atomically). examples/python/trainer.py prints the same checksum for
// the same -seed, -dim and -steps.
//
// -ledger FILE checks that a job runs exactly once and never twice at the
// same time: the trainer holds locks in FILE.lock while it runs (if another
// process holds one of them, it appends "overlap <pid>" to FILE and exits
// with status 4), appends "spawn <attempt> <unix-seconds>" as soon as its
// process starts (before -startup), "start <attempt> <mini-batch>" once it
// knows where it starts, "ready <unix-seconds>" when the process's first
// mini-batch is done (the end of its start-up), "t100 <unix-seconds>" when
// the job's 100th mini-batch is done, "busy <unix-seconds> <unix-seconds>"
// for each stretch of later mini-batches it ran without being stopped at a
// boundary (written when the stretch ends), and "done <checksum>" when it
// completes. A job whose gang spans several nodes runs one trainer per node
// (the agent sets GANDIVA_RANK and GANDIVA_WORLD_SIZE): the ranks of one
// gang run together, so each rank locks only its own share of FILE.lock
// (see lockLedger), and only rank 0 writes the ledger's lines and -out.
//
// Exit status: 0 when done or stopped as asked (checkpointed for a
// migration, or the end of a pre-run), 143 when checkpointed after SIGTERM
// (standalone: a Kubernetes pod being deleted), 3 for an injected failure
// (-fail-at), 4 for an overlap (-ledger), 2 for bad flags, 1 otherwise.
package trainer

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gandiva-sched/gandiva/client"
	"github.com/gandiva-sched/gandiva/client/protocol"
)

// Result is what -out writes, as JSON; ReadResult reads it back.
type Result struct {
	Checksum string `json:"checksum"`
	Steps    int64  `json:"steps"`
	Start    int64  `json:"start"`
	Restored bool   `json:"restored"`
	Job      string `json:"job,omitempty"`
	Attempt  string `json:"attempt,omitempty"`
	// GPUs is CUDA_VISIBLE_DEVICES as the job saw it after the client's
	// start (attached in a shared pod: the agent's welcome sets it).
	GPUs string `json:"gpus,omitempty"`
}

// Main runs the trainer with command-line arguments args (without the
// program name) and returns its exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("trainer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	steps := fs.Int64("steps", 200, "mini-batches to train")
	stepTime := fs.Duration("step-time", 20*time.Millisecond, "time one mini-batch takes (slept: the stand-in for GPU work)")
	dim := fs.Int("dim", 1024, "weights (8 bytes each): the size of the state to save")
	seed := fs.Uint64("seed", 1, "seed of the weights and the data order")
	out := fs.String("out", "", "write the result as JSON to this file")
	noClient := fs.Bool("no-client", false, "run without the in-job client (suspend falls back to SIGSTOP, migration to restart)")
	failAt := fs.Int64("fail-at", -1, "exit with status 3 just before mini-batch K (0: before the first one)")
	failTimes := fs.Int("fail-times", 0, "inject -fail-at only N times in all, counted in the file trainer-injected-failures of the checkpoint directory (or the working directory) (0: always)")
	ledger := fs.String("ledger", "", "exactly-once ledger file (see the package comment)")
	printEvery := fs.Int64("print-every", 0, "print a progress line every N mini-batches (0: every tenth of the run)")
	startup := fs.Duration("startup", 0, "sleep this long when the process starts, before the in-job client says hello (a framework's start-up)")
	firstBatch := fs.Duration("first-batch", 0, "add this to the first mini-batch of every process (a framework's autotuning)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *steps < 0 || *dim <= 0 || *stepTime < 0 || *startup < 0 || *firstBatch < 0 {
		fmt.Fprintln(stderr, "trainer: -steps, -dim, -step-time, -startup and -first-batch must not be negative")
		return 2
	}
	if *printEvery <= 0 {
		*printEvery = max(*steps/10, 1)
	}
	job, attempt := os.Getenv(protocol.EnvJob), os.Getenv(protocol.EnvAttempt)
	failCount := filepath.Join(os.Getenv(protocol.EnvCheckpointDir), "trainer-injected-failures")
	failing := *failAt >= 0 && (*failTimes == 0 || countLines(failCount) < *failTimes)
	rank, world, err := gang()
	if err != nil {
		fmt.Fprintf(stderr, "trainer: %v\n", err)
		return 2
	}
	var led *os.File
	if *ledger != "" {
		if led, err = openLedger(*ledger, rank, world); err != nil {
			fmt.Fprintf(stderr, "trainer: %v\n", err)
			return 4
		}
		defer led.Close()
		if rank == 0 {
			appendLine(*ledger, fmt.Sprintf("spawn %s %.6f", attempt, unixSeconds(time.Now())))
		}
	}
	time.Sleep(*startup)

	m := newModel(*seed, *dim)
	var (
		c      *client.Client
		loaded int64 = -1 // the step of the last state loaded, to check it
		done   int64
	)
	if !*noClient {
		var err error
		c, err = client.New(client.Hooks{
			Save: func(w io.Writer) error { return m.save(w, c.Done()) },
			Load: func(r io.Reader) error {
				s, err := m.load(r)
				loaded = s
				return err
			},
			// Drop the weights, as a GPU job frees device memory: a resume
			// that did not restore them would crash or change the checksum.
			Release: func() error { m.w = nil; return nil },
		})
		if err != nil {
			fmt.Fprintf(stderr, "trainer: %v\n", err)
			return 1
		}
		done = c.Done()
		if loaded >= 0 && loaded != done {
			fmt.Fprintf(stderr, "trainer: restored state of step %d, but the checkpoint says %d\n", loaded, done)
			return 1
		}
		loaded = -1
	}
	start := done
	if led != nil && rank == 0 {
		appendLine(*ledger, fmt.Sprintf("start %s %d", attempt, start))
	}
	if c != nil && c.Restored() {
		fmt.Fprintf(stdout, "trainer: restored from mini-batch %d\n", start)
	}
	gpus := os.Getenv("CUDA_VISIBLE_DEVICES")
	fmt.Fprintf(stdout, "trainer: job=%q attempt=%q starting at mini-batch %d of %d (restored=%v, client=%v, CUDA_VISIBLE_DEVICES=%q)\n",
		job, attempt, start, *steps, c != nil && c.Restored(), c != nil, gpus)
	rank0Ledger := "" // the ledger rank 0 writes its lines to
	if rank == 0 {
		rank0Ledger = *ledger
	}
	busy := stretches{ledger: rank0Ledger, gap: 2**stepTime + 10*time.Millisecond}
	defer busy.close()
	first := true
	for done < *steps {
		if failing && done == *failAt {
			if *failTimes > 0 {
				appendLine(failCount, attempt)
			}
			fmt.Fprintf(stderr, "trainer: injected failure before mini-batch %d\n", done)
			return 3
		}
		if !first {
			busy.begin()
		}
		m.step(done)
		time.Sleep(*stepTime)
		if first {
			time.Sleep(*firstBatch)
			first = false
			if rank0Ledger != "" {
				appendLine(rank0Ledger, fmt.Sprintf("ready %.6f", unixSeconds(time.Now())))
			}
		}
		done++
		if done == 100 && rank0Ledger != "" {
			appendLine(rank0Ledger, fmt.Sprintf("t100 %.6f", unixSeconds(time.Now())))
		}
		if done%*printEvery == 0 {
			fmt.Fprintf(stdout, "trainer: mini-batch %d loss %.6f\n", done, m.loss())
		}
		if c == nil {
			continue
		}
		c.SetMetric(m.loss())
		err := busy.step(c.Step)
		if err != nil {
			if errors.Is(err, client.ErrStop) {
				fmt.Fprintf(stdout, "trainer: stopping at mini-batch %d as asked (checkpointed to be migrated, or a pre-run)\n", c.Done())
				return 0
			}
			if errors.Is(err, client.ErrTerminated) {
				fmt.Fprintf(stdout, "trainer: SIGTERM: checkpointed at mini-batch %d, exiting with status 143\n", c.Done())
				return 143
			}
			fmt.Fprintf(stderr, "trainer: %v\n", err)
			return 1
		}
		if loaded >= 0 && loaded != c.Done() {
			fmt.Fprintf(stderr, "trainer: resumed with the state of step %d at step %d\n", loaded, c.Done())
			return 1
		}
		loaded = -1
		if c.Done() != done {
			fmt.Fprintf(stderr, "trainer: client counts %d mini-batches, trainer %d\n", c.Done(), done)
			return 1
		}
	}
	if c != nil {
		c.Close()
	}
	sum := fmt.Sprintf("%016x", m.checksum())
	if *out != "" && rank == 0 {
		b, _ := json.Marshal(Result{Checksum: sum, Steps: done, Start: start, Restored: c != nil && c.Restored(), Job: job, Attempt: attempt, GPUs: gpus})
		if err := writeAtomic(*out, append(b, '\n')); err != nil {
			fmt.Fprintf(stderr, "trainer: writing -out: %v\n", err)
			return 1
		}
	}
	if led != nil && rank == 0 {
		appendLine(*ledger, "done "+sum)
	}
	fmt.Fprintf(stdout, "checksum=%s steps=%d\n", sum, done)
	return 0
}

// gang returns this process's rank and its gang's world size, from
// GANDIVA_RANK and GANDIVA_WORLD_SIZE (set by the agent when a job spans
// several nodes); a single process is rank 0 of 1.
func gang() (rank, world int, err error) {
	r, w := os.Getenv("GANDIVA_RANK"), os.Getenv("GANDIVA_WORLD_SIZE")
	if r == "" && w == "" {
		return 0, 1, nil
	}
	rank, rerr := strconv.Atoi(r)
	world, werr := strconv.Atoi(w)
	if rerr != nil || werr != nil || world < 1 || rank < 0 || rank >= world {
		return 0, 0, fmt.Errorf("bad gang: GANDIVA_RANK=%q GANDIVA_WORLD_SIZE=%q (want 0 <= rank < world size)", r, w)
	}
	return rank, world, nil
}

// openLedger takes lockLedger's locks in ledger.lock for rank of a gang of
// world processes; a failure to take them is an overlap, recorded in the
// ledger. The locks are released when the returned file is closed or the
// process ends.
func openLedger(ledger string, rank, world int) (*os.File, error) {
	f, err := os.OpenFile(ledger+".lock", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("ledger lock: %w", err)
	}
	if err := lockLedger(f, rank, world); err != nil {
		f.Close()
		appendLine(ledger, fmt.Sprintf("overlap %d", os.Getpid()))
		return nil, fmt.Errorf("another copy of this job holds %s.lock (this process: rank %d of %d): %w", ledger, rank, world, err)
	}
	return f, nil
}

// lockLedger takes, without waiting, exclusive record locks (fcntl, held
// by this process until it ends) on bytes of f: byte rank, and for rank 0
// also every byte from world on. So a process conflicts with any other
// process of the job of the same rank (a second copy of a single process,
// or of a rank of a gang), and rank 0 of a gang of world processes (a
// single process: the whole file) with any process of a rank >= world (a
// rank of an earlier, wider gang still running); the ranks of one gang
// (distinct ranks below its world) never conflict. Not caught: processes
// of two gangs with distinct ranks that are each below the other's world,
// alive at the same time while neither gang's rank 0 meets the other's
// (rank 0 of one gang beside rank 1 of another of two, the other ranks
// gone).
func lockLedger(f *os.File, rank, world int) error {
	ranges := []syscall.Flock_t{{Start: int64(rank), Len: 1}}
	if rank == 0 {
		ranges = append(ranges, syscall.Flock_t{Start: int64(world), Len: 0}) // (0: to the end, however far)
	}
	for _, lk := range ranges {
		lk.Type, lk.Whence = syscall.F_WRLCK, 0
		if err := syscall.FcntlFlock(f.Fd(), syscall.F_SETLK, &lk); err != nil {
			return err
		}
	}
	return nil
}

// appendLine appends one line with a single write (O_APPEND keeps lines of
// concurrent writers whole) and syncs it.
func appendLine(path, line string) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return
	}
	f.WriteString(line + "\n")
	f.Sync()
	f.Close()
}

// stretches records the stretches of mini-batches a trainer runs without
// being stopped, as "busy" lines of its ledger: a call of the client's Step
// that takes longer than gap (a suspension, held at a boundary) ends one.
type stretches struct {
	ledger     string
	gap        time.Duration
	start, end time.Time
	open       bool
}

// begin marks the start of a mini-batch.
func (s *stretches) begin() {
	if !s.open {
		s.start, s.open = time.Now(), true
	}
}

// step calls the client's Step, closing the stretch before it when it blocked.
func (s *stretches) step(f func() error) error {
	t0 := time.Now()
	err := f()
	if time.Since(t0) > s.gap || err != nil {
		s.end = t0
		s.flush()
	}
	return err
}

// close ends the stretch at the end of the run.
func (s *stretches) close() {
	if s.open {
		s.end = time.Now()
		s.flush()
	}
}

func (s *stretches) flush() {
	if s.open && s.ledger != "" {
		appendLine(s.ledger, fmt.Sprintf("busy %.6f %.6f", unixSeconds(s.start), unixSeconds(s.end)))
	}
	s.open = false
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

func countLines(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return strings.Count(string(b), "\n")
}

func writeAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
