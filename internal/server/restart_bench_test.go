package server

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/engine"
)

// The restart benchmark's store: what a busy live server leaves behind.
// Eight agents of 8 V100s each, the default policy (gandiva, default
// parameters) with pre-runs (the default of gandiva server), jobs
// submitted through the Backend and carried out by simulated agents that
// report starts, progress every step and ends, on a clock that advances 5
// s per step. 15,000 jobs run to their end; then 5,000 more are submitted
// and stay queued (the policy time-slices the GPUs among those it homes)
// while the agents report progress until the log holds 100,000 entries.
// The loop takes its snapshots as it would live (default settings).
const (
	restartJobs    = 20000
	restartQueued  = 5000
	restartEntries = 100000
	restartAgents  = 8
)

// benchAgent is a simulated agent for benchmarks.
type benchAgent struct {
	s       *Server
	name    string
	session string
	seq     uint64
	version uint64
	done    map[string]float64
}

func (a *benchAgent) register(ctx context.Context) error {
	reg := &api.Registration{Name: a.name, HostMemGiB: 256, Addr: "http://" + a.name + ":7071", LogKey: "k", Incarnation: "inc-" + a.name}
	for g := 0; g < 8; g++ {
		reg.GPUs = append(reg.GPUs, api.GPU{Index: g, Type: "V100", MemGiB: 16})
	}
	rep, err := a.s.Register(ctx, nodeP(a.name), reg)
	if err != nil {
		return err
	}
	a.session, a.version, a.done = rep.Session, 0, map[string]float64{}
	return nil
}

// step reports what the agent's processes did since the last step: new
// ones started (pre-runs finish at once), running ones progressed (and
// finish after finishAfter mini-batches, unless finish is false),
// suspended, checkpointed and killed ones did so.
func (a *benchAgent) step(ctx context.Context, finish bool) error {
	as, err := a.s.Assignments(ctx, nodeP(a.name), a.name, a.session, a.version, 0)
	if err != nil {
		return err
	}
	a.version = as.Version
	var reps []api.Report
	rep := func(it api.Assignment, r api.Report) {
		a.seq++
		r.Seq, r.Job, r.Attempt, r.Rank = a.seq, it.Job, it.Attempt, it.Rank
		reps = append(reps, r)
	}
	for _, it := range as.Items {
		k := fmt.Sprintf("%s/%d/%d", it.Job, it.Attempt, it.Rank)
		d, seen := a.done[k]
		switch {
		case it.Want == api.WantKill || it.Want == api.WantCheckpoint:
			rep(it, api.Report{Kind: api.RepExited, Outcome: "killed", Done: d})
			delete(a.done, k)
		case it.Want == api.WantSuspend:
			if d >= 0 {
				rep(it, api.Report{Kind: api.RepSuspended, Mode: "memory"})
				a.done[k] = -1 - d
			}
		case it.PreRun:
			rep(it, api.Report{Kind: api.RepStarted})
			rep(it, api.Report{Kind: api.RepProgress, Done: 1, IterTime: 0.5})
			rep(it, api.Report{Kind: api.RepExited, Outcome: "finished", Done: 1})
		case !seen:
			rep(it, api.Report{Kind: api.RepStarted})
			a.done[k] = 0
		case d < 0: // resumed
			rep(it, api.Report{Kind: api.RepResumed})
			a.done[k] = -1 - d
		case it.Rank == 0:
			d += 10
			a.done[k] = d
			if finish && d >= 30 {
				rep(it, api.Report{Kind: api.RepExited, Outcome: "finished", Done: d})
				delete(a.done, k)
			} else {
				rep(it, api.Report{Kind: api.RepProgress, Done: d, IterTime: 0.5})
			}
		}
	}
	if len(reps) == 0 {
		return nil
	}
	return a.s.Report(ctx, nodeP(a.name), &api.ReportBatch{Node: a.name, Session: a.session, Reports: reps})
}

// restartStore is the benchmark's store (built once per process) and
// what building it measured.
type restartStore struct {
	dir     string
	kept    bool // in restartStoreEnv's directory: not removed
	entries uint64
	jobs    int
	queued  int
	took    time.Duration
	// snapshots the loop took while it was built, and their costs
	snapshots int
	encode    []time.Duration
	write     []time.Duration
	bytes     int
	// the slowest answer to a submission (a write) and to a read, measured
	// by a client beside the workload
	mu                sync.Mutex
	maxWrite, maxRead time.Duration
}

func (r *restartStore) slowest(at *time.Duration, d time.Duration) {
	r.mu.Lock()
	*at = max(*at, d)
	r.mu.Unlock()
}

var (
	restartOnce sync.Once
	restartData *restartStore
	restartErr  error
)

func buildRestartStore(dir string) (*restartStore, error) {
	var clock atomic.Int64
	clock.Store(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()).UTC() }
	cfg := Config{DataDir: dir, Policy: "gandiva", PreRun: true, NoSync: true, Clock: now, NodeTimeout: time.Hour,
		CheckpointEvery: 60, Failure: ptr(engine.DefaultFailurePolicy())}
	start := time.Now()
	s, err := Open(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	loopDone := make(chan struct{})
	go func() { s.Run(ctx); close(loopDone) }()
	stop := func() { cancel(); <-loopDone; s.Close() }
	r := &restartStore{dir: dir}
	s.snap.observe = func(enc, write time.Duration, size int) {
		r.encode, r.write, r.bytes = append(r.encode, enc), append(r.write, write), size
	}
	var agents []*benchAgent
	for i := 0; i < restartAgents; i++ {
		a := &benchAgent{s: s, name: fmt.Sprintf("gpu%02d", i)}
		if err := a.register(ctx); err != nil {
			stop()
			return nil, err
		}
		agents = append(agents, a)
	}
	users := []string{"alice", "bob", "carol", "dave"}
	submitted := 0
	submit := func(n int) error {
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := 0; i < n; i++ {
			submitted++
			rq := &api.JobRequest{Name: fmt.Sprintf("train-%d", submitted), Command: []string{"python", "train.py", "--seed", fmt.Sprint(submitted)},
				GPUs: []int{1, 1, 1, 2, 4}[submitted%5], MemGiB: float64(2 + submitted%6), Iters: 30, IterTime: 0.5,
				Env: map[string]string{"DATA": "/datasets/x"}}
			p := api.Principal{User: users[submitted%len(users)]}
			wg.Add(1)
			go func() {
				defer wg.Done()
				t0 := time.Now()
				if _, _, err := s.Submit(ctx, p, rq); err != nil {
					errs <- err
				}
				r.slowest(&r.maxWrite, time.Since(t0))
			}()
		}
		wg.Wait()
		close(errs)
		return <-errs
	}
	steps := func(finish bool) error {
		clock.Add(int64(5 * time.Second))
		for _, a := range agents {
			if err := a.step(ctx, finish); err != nil {
				return err
			}
		}
		return nil
	}
	// A reader beside the workload, timing its reads.
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		admin := api.Principal{User: "admin", Admin: true}
		for ctx.Err() == nil {
			t0 := time.Now()
			s.Get(ctx, admin, "j1")
			r.slowest(&r.maxRead, time.Since(t0))
			time.Sleep(2 * time.Millisecond)
		}
	}()
	fail := func(err error) (*restartStore, error) {
		cancel()
		<-readDone
		stop()
		return nil, err
	}
	for submitted < restartJobs-restartQueued {
		if submitted%2000 == 0 {
			fmt.Fprintf(os.Stderr, "building the store: %d jobs submitted, %d entries, %s\n", submitted, s.nextSeqNow()-1, time.Since(start).Round(time.Second))
		}
		if err := submit(16); err != nil {
			return fail(err)
		}
		for k := 0; k < 3; k++ {
			if err := steps(true); err != nil {
				return fail(err)
			}
		}
	}
	// the rest of the running jobs finish
	for k := 0; k < 10; k++ {
		if err := steps(true); err != nil {
			return fail(err)
		}
	}
	for submitted < restartJobs {
		if err := submit(64); err != nil {
			return fail(err)
		}
	}
	for s.nextSeqNow() <= restartEntries {
		if err := steps(false); err != nil {
			return fail(err)
		}
	}
	cancel()
	<-readDone
	r.entries = s.nextSeqNow() - 1
	s.mu.RLock()
	r.jobs = len(s.m.order)
	for _, j := range s.m.order {
		if s.m.eng.Job(j.eid).State.Waiting() {
			r.queued++
		}
	}
	s.mu.RUnlock()
	<-loopDone
	r.snapshots = len(r.encode)
	s.Close()
	r.took = time.Since(start)
	return r, nil
}

func ptr[T any](v T) *T { return &v }

// nextSeqNow reads the loop's next sequence number (for the benchmark's
// driver, beside the loop).
func (s *Server) nextSeqNow() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.nextSeq
}

// restartStoreEnv names a directory for the benchmark's store, kept
// between runs: built there if it holds no store yet, else reused (the
// figures of building it are then not shown). To profile starts without
// building the store each time:
//
//	GANDIVA_RESTART_STORE=/tmp/restart-store go test ./internal/server -run '^$' -bench Restart/in-process -benchtime 1x -cpuprofile cpu.out
const restartStoreEnv = "GANDIVA_RESTART_STORE"

func restartSetup(b *testing.B) *restartStore {
	restartOnce.Do(func() {
		if dir := os.Getenv(restartStoreEnv); dir != "" {
			if _, err := os.Stat(filepath.Join(dir, "gandiva.db")); err == nil {
				restartData = &restartStore{dir: dir, kept: true}
				return
			}
			if err := os.MkdirAll(dir, 0o700); err != nil {
				restartErr = err
				return
			}
			restartData, restartErr = buildRestartStore(dir)
			if restartData != nil {
				restartData.kept = true
			}
			return
		}
		dir, err := os.MkdirTemp("", "gandiva-restart-bench-")
		if err != nil {
			restartErr = err
			return
		}
		restartData, restartErr = buildRestartStore(dir)
	})
	if restartErr != nil {
		b.Fatal(restartErr)
	}
	r := restartData
	if r.took == 0 {
		fmt.Fprintf(os.Stderr, "store: reused from %s (%s)\n", r.dir, restartStoreEnv)
		return r
	}
	fmt.Fprintf(os.Stderr, "store: %d entries, %d jobs (%d waiting), built in %s; %d snapshots taken meanwhile, the last %d bytes; encode %s, write %s; slowest submission %s, slowest read %s",
		r.entries, r.jobs, r.queued, r.took.Round(time.Second), r.snapshots, r.bytes, durations(r.encode), durations(r.write),
		r.maxWrite.Round(time.Millisecond), r.maxRead.Round(time.Millisecond))
	fmt.Fprintln(os.Stderr)
	return r
}

func durations(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	lo, hi := ds[0], ds[0]
	for _, d := range ds {
		lo, hi = min(lo, d), max(hi, d)
	}
	return fmt.Sprintf("%s..%s", lo.Round(time.Millisecond), hi.Round(time.Millisecond))
}

// copyStore copies the benchmark's store into a fresh directory (each
// start appends a boot count and may take snapshots).
func copyStore(b *testing.B, from string) string {
	b.Helper()
	dir := b.TempDir()
	data, err := os.ReadFile(filepath.Join(from, "gandiva.db"))
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "gandiva.db"), data, 0o600); err != nil {
		b.Fatal(err)
	}
	for _, f := range []string{"admin.token", "agent.token"} {
		if data, err := os.ReadFile(filepath.Join(from, f)); err == nil {
			os.WriteFile(filepath.Join(dir, f), data, 0o600)
		}
	}
	return dir
}

// BenchmarkRestart measures a start on the store a busy server left (see
// restartStore): the time from OpenAsync to the first answer of the API
// (GET /v1/whoami over HTTP, ms-to-whoami) and to the first answer that
// needs the recovered state (GET /v1/jobs/j1, ms-to-job), in this process;
// and the same two from the start of a gandiva server process (what an
// operator waits for after kill -9). Building the store takes a few
// minutes, once per run.
//
//	go test ./internal/server -run '^$' -bench Restart -benchtime 5x -timeout 30m
func BenchmarkRestart(b *testing.B) {
	r := restartSetup(b)
	b.Cleanup(func() { // (the store is 100+ MB; -count builds it again)
		if !r.kept {
			os.RemoveAll(r.dir)
		}
		restartOnce, restartData = sync.Once{}, nil
	})
	b.Run("in-process", func(b *testing.B) {
		var took, state, cpu time.Duration
		var info ReplayInfo
		for b.Loop() {
			b.StopTimer()
			dir := copyStore(b, r.dir)
			runtime.GC()
			b.StartTimer()
			cpu0 := cpuTime()
			t0 := time.Now()
			s, err := OpenAsync(Config{DataDir: dir, Policy: "gandiva", PreRun: true, NodeTimeout: time.Hour})
			if err != nil {
				b.Fatal(err)
			}
			srv := newHTTPTest(s)
			cl := api.NewClient(srv.URL, strings.TrimSpace(readFile(b, filepath.Join(dir, "admin.token"))))
			if _, err := cl.WhoAmI(context.Background()); err != nil {
				b.Fatal(err)
			}
			took += time.Since(t0)
			if _, err := cl.Get(context.Background(), "j1"); err != nil {
				b.Fatal(err)
			}
			state += time.Since(t0)
			cpu += cpuTime() - cpu0
			b.StopTimer()
			if err := s.Recovered(context.Background()); err != nil {
				b.Fatal(err)
			}
			info = s.Replay
			if info.Diverged != 0 {
				b.Fatalf("replay diverged: %+v", info)
			}
			srv.Close()
			s.Close()
			b.StartTimer()
		}
		n := float64(b.N)
		b.ReportMetric(took.Seconds()/n*1000, "ms-to-whoami")
		b.ReportMetric(state.Seconds()/n*1000, "ms-to-job")
		b.ReportMetric(cpu.Seconds()/n*1000, "cpu-ms-to-job")
		b.ReportMetric(info.SnapshotTook.Seconds()*1000, "ms-snapshot-read")
		b.ReportMetric(float64(info.Entries), "entries-replayed")
		b.ReportMetric(float64(info.SnapshotBytes), "snapshot-bytes")
		b.Logf("last start: %+v", info)
	})
	b.Run("process", func(b *testing.B) {
		bin := filepath.Join(b.TempDir(), "gandiva")
		if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/gandiva").CombinedOutput(); err != nil {
			b.Fatalf("go build: %v\n%s", err, out)
		}
		var took, state, cpu time.Duration
		for b.Loop() {
			b.StopTimer()
			dir := copyStore(b, r.dir)
			addr := freeAddr(b)
			tok := strings.TrimSpace(readFile(b, filepath.Join(dir, "admin.token")))
			b.StartTimer()
			t0 := time.Now()
			cmd := exec.Command(bin, "server", "--data-dir", dir, "--listen", addr, "--policy", "gandiva", "--node-timeout", "1h")
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			// (polled every 2 ms: connection refused until it listens)
			get := func(path string) {
				for {
					rq, _ := http.NewRequest("GET", "http://"+addr+path, nil)
					rq.Header.Set("Authorization", "Bearer "+tok)
					resp, err := http.DefaultClient.Do(rq)
					if err == nil {
						resp.Body.Close()
						if resp.StatusCode == 200 {
							return
						}
					}
					if time.Since(t0) > time.Minute {
						b.Fatalf("no answer to %s in a minute", path)
					}
					time.Sleep(2 * time.Millisecond)
				}
			}
			get("/v1/whoami")
			took += time.Since(t0)
			get("/v1/jobs/j1")
			state += time.Since(t0)
			b.StopTimer()
			cpu += procCPU(b, cmd.Process.Pid)
			cmd.Process.Kill()
			cmd.Wait()
			b.StartTimer()
		}
		b.ReportMetric(took.Seconds()/float64(b.N)*1000, "ms-to-whoami")
		b.ReportMetric(state.Seconds()/float64(b.N)*1000, "ms-to-job")
		b.ReportMetric(cpu.Seconds()/float64(b.N)*1000, "cpu-ms-to-job")
	})
}

// cpuTime is the CPU time (user and system) this process has used: what
// a start costs whatever else the machine runs.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU is the CPU time (user and system) process pid has used so far,
// from /proc (Linux).
func procCPU(b *testing.B, pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// fields after the command's ")": state is field 3, utime 14, stime 15
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ
}

func readFile(b *testing.B, path string) string {
	b.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	return string(data)
}

func freeAddr(b *testing.B) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
