package e2e_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gandiva-sched/gandiva/examples/trainer/trainer"
	"github.com/gandiva-sched/gandiva/internal/agent"
	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/server"
)

// bin is the gandiva binary TestMain builds once; the jobs run its built-in
// deterministic trainer (`gandiva trainer`), the kill -9 test runs its server.
var bin string

func TestMain(m *testing.M) {
	agent.GuardMain() // (the in-process agents' job guards run this binary)
	if os.Getenv(floodEnv) != "" {
		flood() // this process is TestConnectionFlood's flooder
	}
	dir, err := os.MkdirTemp("", "gandiva-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Chmod(dir, 0o755) // (the jobs, which run as another account, run it)
	bin = filepath.Join(dir, "gandiva")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/gandiva-sched/gandiva/cmd/gandiva").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building gandiva: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// logger writes to the test log when -v, else nowhere.
func logger(t testing.TB) *slog.Logger {
	if !testing.Verbose() {
		// Kept, and shown only when the test fails: the last lines of the
		// in-process servers' and agents' logs explain most failures.
		tl := &tailLog{}
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("log of the in-process components (last %d KiB):\n%s", tailLogMax>>10, tl.String())
			}
		})
		return slog.New(slog.NewTextHandler(tl, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("test", t.Name())
}

// tailLogMax bounds what a tailLog keeps.
const tailLogMax = 64 << 10

// tailLog keeps the last tailLogMax bytes written to it; safe for
// concurrent use.
type tailLog struct {
	mu  sync.Mutex
	buf []byte
}

func (l *tailLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	if n := len(l.buf); n > 2*tailLogMax {
		l.buf = append(l.buf[:0], l.buf[n-tailLogMax:]...)
	}
	return len(p), nil
}

func (l *tailLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buf
	if len(b) > tailLogMax {
		b = b[len(b)-tailLogMax:]
	}
	return string(b)
}

// inProcServer runs a server in this process and serves its API.
func inProcServer(t *testing.T, cfg server.Config) (*server.Server, string) {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	if cfg.CheckpointRoot == "" {
		cfg.CheckpointRoot = openDir(t) // (not under the data directory, which is the server's alone)
	}
	cfg.Log = logger(t)
	s, err := server.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		hs.Close()
		cancel()
		<-done
		s.Close()
	})
	return s, hs.URL
}

// startAgent runs an agent in this process (its jobs are real processes).
func startAgent(t testing.TB, url, token, name, gpus, work string, tweak func(*agent.Config)) (cancel func()) {
	t.Helper()
	g, err := agent.ParseFakeGPUs(gpus)
	if err != nil {
		t.Fatal(err)
	}
	cfg := agent.Config{Server: url, Token: token, Name: name, GPUs: g, WorkRoot: work, PollWait: 2 * time.Second,
		ReportEvery: 200 * time.Millisecond, RunAs: testRunAs(), Log: logger(t).With("agent", name)}
	if tweak != nil {
		tweak(&cfg)
	}
	a, err := agent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	var once sync.Once
	stopFn := func() { once.Do(func() { stop(); <-done }) }
	t.Cleanup(stopFn)
	return stopFn
}

// waitNodes waits until the server lists n nodes that are up.
func waitNodes(t *testing.T, cl *api.Client, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		ns, err := cl.Nodes(context.Background())
		up := 0
		for _, x := range ns {
			if x.Up {
				up++
			}
		}
		if err == nil && up >= n {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%d nodes did not come up within %s", n, within)
}

// trainerJob is one deterministic trainer.
type trainerJob struct {
	name      string
	steps     int
	stepTime  time.Duration
	seed      uint64
	gpus      int
	extra     []string
	checksum  string // of an uninterrupted run
	dir       string
	noPreRun  bool
	ckptEvery float64
}

func (j *trainerJob) args() []string {
	a := []string{bin, "trainer", "-steps", fmt.Sprint(j.steps), "-step-time", j.stepTime.String(), "-dim", "512",
		"-seed", fmt.Sprint(j.seed), "-out", filepath.Join(j.dir, j.name+".json"), "-ledger", filepath.Join(j.dir, j.name+".ledger")}
	return append(a, j.extra...)
}

// reference computes the checksum of an uninterrupted run, in process.
func (j *trainerJob) reference(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	out := filepath.Join(dir, "ref.json")
	code := trainer.Main([]string{"-steps", fmt.Sprint(j.steps), "-step-time", "0s", "-dim", "512", "-seed", fmt.Sprint(j.seed), "-out", out}, io.Discard, io.Discard)
	if code != 0 {
		t.Fatalf("reference run of %s: status %d", j.name, code)
	}
	r, err := trainer.ReadResult(out)
	if err != nil {
		t.Fatal(err)
	}
	j.checksum = r.Checksum
}

func (j *trainerJob) request() *api.JobRequest {
	r := &api.JobRequest{Name: j.name, Command: j.args(), GPUs: j.gpus, MemGiB: 2, WorkDir: j.dir}
	if j.gpus == 0 {
		r.GPUs = 1
	}
	if j.noPreRun {
		no := false
		r.PreRun = &no
	}
	if j.ckptEvery > 0 {
		c := j.ckptEvery
		r.CheckpointEvery = &c
	}
	return r
}

// readLedger reads a trainer's ledger (trainer.ReadLedger), failing the
// test if it cannot.
func readLedger(t *testing.T, path string) trainer.Ledger {
	t.Helper()
	l, err := trainer.ReadLedger(path)
	if err != nil {
		t.Fatalf("ledger: %v", err)
	}
	return l
}

// checkExactlyOnce: the job finished once, with the checksum of an
// uninterrupted run, and no two copies of it ever ran at the same time.
func checkExactlyOnce(t *testing.T, j *trainerJob) trainer.Ledger {
	t.Helper()
	l := readLedger(t, filepath.Join(j.dir, j.name+".ledger"))
	if len(l.Overlaps) != 0 {
		t.Errorf("%s: %d overlaps: two copies ran at the same time", j.name, len(l.Overlaps))
	}
	if len(l.Done) != 1 || l.Done[0] != j.checksum {
		t.Errorf("%s: completions %v, want exactly one with checksum %s", j.name, l.Done, j.checksum)
	}
	if r, err := trainer.ReadResult(filepath.Join(j.dir, j.name+".json")); err != nil || r.Checksum != j.checksum {
		t.Errorf("%s: result checksum %q (%v), want %s", j.name, r.Checksum, err, j.checksum)
	}
	return l
}

// waitJobs waits until every job is terminal and returns them by name.
func waitJobs(t *testing.T, cl *api.Client, n int, within time.Duration) map[string]api.Job {
	t.Helper()
	deadline := time.Now().Add(within)
	var last []api.Job
	for time.Now().Before(deadline) {
		jobs, err := cl.List(context.Background(), api.ListOptions{All: true})
		if err == nil {
			last = jobs
			ended := 0
			for _, j := range jobs {
				switch j.State {
				case "finished", "failed", "cancelled":
					ended++
				}
			}
			if len(jobs) >= n && ended == len(jobs) {
				out := map[string]api.Job{}
				for _, j := range jobs {
					out[j.Name] = j
				}
				return out
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	var b strings.Builder
	for _, j := range last {
		fmt.Fprintf(&b, "\n  %s %s %s %s done=%.0f workers=%v", j.ID, j.Name, j.State, j.Reason, j.Done, j.Workers)
	}
	t.Fatalf("jobs not done within %s:%s", within, b.String())
	return nil
}

// freePort returns a TCP port nothing listens on now.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// waitHealthy waits until a server answers /healthz.
func waitHealthy(t *testing.T, url string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		resp, err := http.Get(url + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("server at %s not healthy within %s", url, within)
}

func newTestHTTP(s *server.Server) *httptest.Server { return httptest.NewServer(s.Handler()) }

// An agent never runs a job as root: as root, these tests' agents run
// their jobs as nobody; not root, as the test's own account (for every
// user). The isolation test (isolation_test.go) maps users to accounts of
// their own.
func testRunAs() agent.RunAs {
	if os.Geteuid() == 0 {
		return agent.RunAs{Pattern: "nobody"}
	}
	return agent.RunAs{Self: true, SelfUsers: []string{"*"}}
}

// agentArgs are the run-as flags of an agent process (testRunAs).
func agentArgs(t *testing.T) []string {
	if os.Geteuid() == 0 {
		return []string{"--run-as", "nobody"}
	}
	return []string{"--run-as", "self", "--self-users", "*"}
}

// openDir is a directory that the accounts jobs run as can reach (t.TempDir
// is under a directory of mode 0700): for agents' work directories and
// checkpoint roots.
func openDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "gandiva-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(d, 0o755)
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// jobDir is a directory for a job's files (working directory, results,
// ledgers), the job's account's.
func jobDir(t testing.TB) string {
	t.Helper()
	d := openDir(t)
	if os.Geteuid() == 0 {
		u, err := user.Lookup("nobody")
		if err != nil {
			t.Fatal(err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(d, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// agentProc starts a gandiva agent process (one the test can signal or
// kill -9) named name with fake GPUs gpus, working under work, with the
// extra flags; it is killed when the test ends, and its log shown if the
// test failed.
func agentProc(t *testing.T, url, token, name, gpus, work string, extra ...string) *exec.Cmd {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"agent", "--server", url, "--token", token, "--name", name, "--fake-gpus", gpus, "--work-dir", work}, extra...)
	a := exec.Command(bin, append(args, agentArgs(t)...)...)
	a.Stdout, a.Stderr = logf, logf
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		a.Process.Kill()
		a.Wait()
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("%s's log:\n%s", name, b)
		}
	})
	return a
}
