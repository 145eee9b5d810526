package trainer

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gandiva-sched/gandiva/client/protocol"
)

func checksumOf(seed uint64, dim int, steps int64) uint64 {
	m := newModel(seed, dim)
	for k := int64(0); k < steps; k++ {
		m.step(k)
	}
	return m.checksum()
}

// Saving at any step and continuing from the loaded copy gives the checksum
// of the uninterrupted run; skipping, repeating or losing state does not.
func TestSaveLoadPreservesChecksum(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 50; trial++ {
		seed, dim, steps := r.Uint64(), 1+r.IntN(64), int64(1+r.IntN(100))
		want := checksumOf(seed, dim, steps)
		m := newModel(seed, dim)
		at := r.Int64N(steps + 1)
		for k := int64(0); k < at; k++ {
			m.step(k)
		}
		var buf bytes.Buffer
		if err := m.save(&buf, at); err != nil {
			t.Fatal(err)
		}
		m2 := newModel(^seed, dim+1) // different state, overwritten by load
		step, err := m2.load(&buf)
		if err != nil || step != at {
			t.Fatalf("load: step %d err %v, want step %d", step, err, at)
		}
		for k := at; k < steps; k++ {
			m2.step(k)
		}
		if got := m2.checksum(); got != want {
			t.Fatalf("seed %d dim %d steps %d saved at %d: checksum %x, want %x", seed, dim, steps, at, got, want)
		}
		// A repeated mini-batch must change the checksum: the test can fail.
		if at < steps {
			m3 := newModel(seed, dim)
			for k := int64(0); k < steps; k++ {
				m3.step(k)
				if k == at {
					m3.step(k)
				}
			}
			if m3.checksum() == want {
				t.Fatalf("a repeated mini-batch %d left the checksum unchanged", at)
			}
		}
	}
}

func TestLoadRejectsGarbage(t *testing.T) {
	m := newModel(1, 4)
	for _, in := range []string{"", "short", strings.Repeat("x", 40)} {
		if _, err := m.load(strings.NewReader(in)); err == nil {
			t.Errorf("load(%q) succeeded", in)
		}
	}
	m.w = nil
	if err := m.save(&bytes.Buffer{}, 0); err == nil {
		t.Error("save of a released model succeeded")
	}
}

func runTrainer(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(args, &out, &errb)
	return out.String(), errb.String(), code
}

// Standalone (no agent), the client still takes periodic checkpoints and
// restores them: the second run starts from the last checkpoint of the
// first and ends with the uninterrupted checksum.
func TestStandaloneCheckpointRestore(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(protocol.EnvFD, "")
	t.Setenv(protocol.EnvCheckpointDir, dir)
	t.Setenv(protocol.EnvCheckpointEvery, "0.000001")
	t.Setenv(protocol.EnvRestore, "0")
	res := filepath.Join(dir, "r1.json")
	if _, e, code := runTrainer(t, "-steps", "40", "-step-time", "0", "-dim", "32", "-seed", "7", "-out", res); code != 0 {
		t.Fatalf("first run: status %d: %s", code, e)
	}
	r1, err := ReadResult(res)
	if err != nil {
		t.Fatal(err)
	}
	if want := checksumOf(7, 32, 40); r1.Checksum != hex(want) {
		t.Fatalf("checksum %s, want %s", r1.Checksum, hex(want))
	}
	meta, f, err := protocol.ReadCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if meta.Done != 40 {
		t.Fatalf("last periodic checkpoint at %d, want 40", meta.Done)
	}
	// Restore from a checkpoint in the middle: rewrite one at step 15.
	m := newModel(7, 32)
	for k := int64(0); k < 15; k++ {
		m.step(k)
	}
	var buf bytes.Buffer
	m.save(&buf, 15)
	if _, err := protocol.WriteCheckpoint(dir, protocol.Meta{Done: 15}, func(w io.Writer) error {
		_, err := w.Write(buf.Bytes())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Setenv(protocol.EnvRestore, "1")
	t.Setenv(protocol.EnvCheckpointEvery, "0")
	out, e, code := runTrainer(t, "-steps", "40", "-step-time", "0", "-dim", "32", "-seed", "7", "-out", res)
	if code != 0 {
		t.Fatalf("restored run: status %d: %s", code, e)
	}
	if !strings.Contains(out, "starting at mini-batch 15 of 40 (restored=true") {
		t.Fatalf("restored run did not start at 15:\n%s", out)
	}
	if !strings.HasSuffix(out, "checksum="+r1.Checksum+" steps=40\n") {
		t.Fatalf("restored run output:\n%s\nwant checksum %s", out, r1.Checksum)
	}
}

func TestInjectedFailure(t *testing.T) {
	t.Setenv(protocol.EnvFD, "")
	t.Setenv(protocol.EnvAttempt, "2")
	if _, e, code := runTrainer(t, "-steps", "10", "-step-time", "0", "-fail-at", "0"); code != 3 || !strings.Contains(e, "injected failure before mini-batch 0") {
		t.Fatalf("status %d, stderr %q", code, e)
	}
	// With -fail-times 2, the third run succeeds.
	t.Setenv(protocol.EnvCheckpointDir, t.TempDir())
	for i, want := range []int{3, 3, 0, 0} {
		if _, e, code := runTrainer(t, "-steps", "10", "-step-time", "0", "-fail-at", "0", "-fail-times", "2", "-no-client"); code != want {
			t.Fatalf("run %d with -fail-times 2: status %d, want %d: %s", i, code, want, e)
		}
	}
}

func hex(x uint64) string {
	const digits = "0123456789abcdef"
	b := make([]byte, 16)
	for i := 15; i >= 0; i-- {
		b[i] = digits[x&15]
		x >>= 4
	}
	return string(b)
}

// The ledger records starts and completions, and a second copy running at
// the same time is refused and recorded.
func TestLedger(t *testing.T) {
	t.Setenv(protocol.EnvFD, "")
	dir := t.TempDir()
	ledger := filepath.Join(dir, "ledger")
	out, e, code := runTrainer(t, "-steps", "5", "-step-time", "0", "-dim", "8", "-ledger", ledger)
	if code != 0 {
		t.Fatalf("status %d: %s", code, e)
	}
	sum := strings.TrimPrefix(strings.Fields(strings.TrimSpace(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:]))[0], "checksum=")
	release := holdLedger(t, ledger, 0, 1) // another copy is running
	if _, e, code := runTrainer(t, "-steps", "5", "-step-time", "0", "-dim", "8", "-ledger", ledger); code != 4 || !strings.Contains(e, "holds") {
		t.Fatalf("overlapping run: status %d: %s", code, e)
	}
	release()
	b, _ := os.ReadFile(ledger)
	var kinds []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		kinds = append(kinds, strings.Fields(line)[0])
	}
	if got := strings.Join(kinds, " "); got != "spawn start ready done busy overlap" {
		t.Fatalf("ledger lines %q, want spawn start ready done busy overlap:\n%s", got, b)
	}
	// ReadLedger reads the same lines back.
	l, err := ReadLedger(ledger)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Starts) != 1 || l.Starts[0] != " 0" || len(l.Done) != 1 || l.Done[0] != sum || len(l.Overlaps) != 1 || l.Once(sum) ||
		len(l.Spawns) != 1 || len(l.Ready) != 1 || len(l.Busy) != 1 || l.Busy[0][1] < l.Busy[0][0] || l.Ready[0] > l.Busy[0][0] {
		t.Fatalf("ReadLedger: %+v", l)
	}
	// Another copy's start-up and its 100th mini-batch are recorded.
	ledger2 := filepath.Join(dir, "ledger2")
	if _, e, code := runTrainer(t, "-steps", "120", "-step-time", "0", "-dim", "8", "-startup", "30ms", "-first-batch", "20ms", "-ledger", ledger2); code != 0 {
		t.Fatalf("status %d: %s", code, e)
	}
	l2, err := ReadLedger(ledger2)
	if err != nil {
		t.Fatal(err)
	}
	var spawned float64
	if len(l2.SpawnAt) == 1 {
		spawned = l2.SpawnAt[0]
	}
	if len(l2.Ready) != 1 || len(l2.T100) != 1 || l2.Ready[0]-spawned < 0.05 || l2.T100[0] < l2.Ready[0] {
		t.Fatalf("start-up of 30ms + 20ms: spawned at %.3f, %+v", spawned, l2)
	}
	if !(Ledger{Starts: l.Starts, Done: l.Done}).Once(sum) {
		t.Fatalf("a ledger with one completion and no overlap is not Once")
	}
}

// The ranks of one gang (one trainer per node, GANDIVA_RANK of
// GANDIVA_WORLD_SIZE) run together without an overlap, and only rank 0
// writes the start and done lines and -out; a second copy of a rank, or a
// rank of another gang outside this one's world, is an overlap. (TestKill9
// failed on a 2-GPU job spread over two nodes: its rank 1 found the lock of
// its own rank 0 taken and exited with status 4, twice.)
func TestLedgerGang(t *testing.T) {
	t.Setenv(protocol.EnvFD, "")
	for _, c := range []struct {
		held, run [2]int // rank, world
		overlap   bool
	}{
		{held: [2]int{1, 2}, run: [2]int{0, 2}},                // the other rank of the gang
		{held: [2]int{0, 2}, run: [2]int{1, 2}},                //
		{held: [2]int{0, 3}, run: [2]int{2, 3}},                //
		{held: [2]int{0, 1}, run: [2]int{0, 1}, overlap: true}, // a single process twice
		{held: [2]int{1, 2}, run: [2]int{1, 2}, overlap: true}, // a rank twice
		{held: [2]int{0, 2}, run: [2]int{0, 1}, overlap: true}, //
		{held: [2]int{1, 2}, run: [2]int{0, 1}, overlap: true}, // a rank left of a wider gang
		{held: [2]int{2, 3}, run: [2]int{0, 2}, overlap: true}, //
		{held: [2]int{0, 1}, run: [2]int{1, 2}, overlap: true}, // a gang beside a single process
	} {
		name := fmt.Sprintf("held %d of %d, run %d of %d", c.held[0], c.held[1], c.run[0], c.run[1])
		dir := t.TempDir()
		ledger, res := filepath.Join(dir, "ledger"), filepath.Join(dir, "out.json")
		release := holdLedger(t, ledger, c.held[0], c.held[1])
		t.Setenv("GANDIVA_RANK", fmt.Sprint(c.run[0]))
		t.Setenv("GANDIVA_WORLD_SIZE", fmt.Sprint(c.run[1]))
		_, e, code := runTrainer(t, "-steps", "3", "-step-time", "0", "-dim", "8", "-ledger", ledger, "-out", res)
		release()
		l, err := ReadLedger(ledger)
		if err != nil && !errors.Is(err, fs.ErrNotExist) { // (a rank > 0 that ran writes nothing)
			t.Fatal(err)
		}
		_, outErr := os.Stat(res)
		switch {
		case c.overlap && (code != 4 || len(l.Overlaps) != 1 || len(l.Starts) != 0):
			t.Errorf("%s: status %d, ledger %+v, want an overlap (status 4): %s", name, code, l, e)
		case !c.overlap && code != 0:
			t.Errorf("%s: status %d, want 0: %s", name, code, e)
		case !c.overlap && len(l.Overlaps) != 0:
			t.Errorf("%s: ledger %+v, want no overlap", name, l)
		case !c.overlap && c.run[0] == 0 && (len(l.Starts) != 1 || len(l.Done) != 1 || outErr != nil):
			t.Errorf("%s: rank 0 wrote ledger %+v and -out (%v), want its start, its completion and -out", name, l, outErr)
		case !c.overlap && c.run[0] != 0 && (len(l.Starts) != 0 || len(l.Done) != 0 || outErr == nil):
			t.Errorf("%s: rank %d wrote ledger %+v and -out (%v), want neither (rank 0's to write)", name, c.run[0], l, outErr)
		}
	}
	// A rank outside its world is refused before anything runs.
	t.Setenv("GANDIVA_RANK", "2")
	t.Setenv("GANDIVA_WORLD_SIZE", "2")
	if _, e, code := runTrainer(t, "-steps", "1", "-step-time", "0", "-dim", "8"); code != 2 || !strings.Contains(e, "GANDIVA_RANK") {
		t.Errorf("rank 2 of 2: status %d (%s), want 2 naming GANDIVA_RANK", code, e)
	}
}

// holdEnv makes the test binary a holder of a ledger's locks (TestMain), as
// rank holdEnv_RANK of holdEnv_WORLD. The locks are fcntl record locks,
// which a process never conflicts with itself on, so the other copy must
// be another process.
const holdEnv = "TRAINER_TEST_HOLD_LEDGER"

func TestMain(m *testing.M) {
	if v := os.Getenv(holdEnv); v != "" {
		rank, _ := strconv.Atoi(os.Getenv(holdEnv + "_RANK"))
		world, _ := strconv.Atoi(os.Getenv(holdEnv + "_WORLD"))
		l, err := openLedger(v, rank, world)
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		fmt.Println("held")
		io.Copy(io.Discard, os.Stdin) // until the test closes it
		l.Close()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// holdLedger runs a process that holds ledger's locks for rank of world
// until release is called.
func holdLedger(t *testing.T, ledger string, rank, world int) (release func()) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), holdEnv+"="+ledger, fmt.Sprintf("%s_RANK=%d", holdEnv, rank), fmt.Sprintf("%s_WORLD=%d", holdEnv, world))
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	release = func() {
		in.Close()
		cmd.Wait()
	}
	if line != "held\n" {
		release()
		t.Fatalf("the holder of %s (rank %d of %d) did not take its locks: %q", ledger, rank, world, line)
	}
	return release
}
