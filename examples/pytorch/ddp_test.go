package pytorch_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gandiva-sched/gandiva/internal/agent/jobproc"
	"github.com/gandiva-sched/gandiva/internal/torchtest"
)

const ddpSteps = 40

func ddpArgs(py, script, out string) []string {
	return []string{py, script, "--steps", strconv.Itoa(ddpSteps), "--step-time", "0.05", "--out", out,
		"--gang-timeout", "60"}
}

// runDDP runs ddp.py's ranks by env, without Gandiva, and returns rank 0's
// result.
func runDDP(ctx context.Context, t *testing.T, py, script, dir string, world int) torchtest.Result {
	t.Helper()
	out := filepath.Join(dir, "result.json")
	return torchtest.Run(ctx, t, torchtest.Ranks{Python: py, Args: []string{script, "--steps", strconv.Itoa(ddpSteps), "--out", out},
		Out: out, Dir: dir, Env: append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1", "GANDIVA_FD=", "GANDIVA_CHECKPOINT_DIR="),
		World: world})
}

// gangSpecs are the jobproc Specs of a 2-rank ddp.py gang, one Proc per
// rank (as agents on two nodes run them), sharing a checkpoint directory.
func gangSpecs(t *testing.T, py, script, base, name string, restore bool) []jobproc.Spec {
	t.Helper()
	port := torchtest.FreePort(t)
	out := filepath.Join(base, name+"-result.json")
	var specs []jobproc.Spec
	for r := 0; r < 2; r++ {
		dir := filepath.Join(base, fmt.Sprintf("%s-rank%d", name, r))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		specs = append(specs, jobproc.Spec{
			Job: "ddp", Attempt: 1, Command: ddpArgs(py, script, out),
			Env:     map[string]string{"PYTHONDONTWRITEBYTECODE": "1"},
			WorkDir: dir, CheckpointDir: filepath.Join(base, "ckpt"), LogPath: filepath.Join(dir, "log"),
			Restore: restore, ReportEvery: 10 * time.Millisecond,
			Rank: r, WorldSize: 2, MasterAddr: "127.0.0.1", MasterPort: port,
		})
	}
	return specs
}

func startGang(ctx context.Context, t *testing.T, specs []jobproc.Spec) []*jobproc.Proc {
	t.Helper()
	var ps []*jobproc.Proc
	for _, s := range specs {
		p, err := jobproc.Start(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Kill)
		ps = append(ps, p)
	}
	return ps
}

func waitGangDone(ctx context.Context, t *testing.T, ps []*jobproc.Proc, n int64) {
	t.Helper()
	for _, p := range ps {
		for p.Info().Done < n {
			select {
			case <-p.Done():
				t.Fatalf("rank ended before mini-batch %d: %+v", n, p.Exit())
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
}

// onEach runs f for every rank at once (an agent per node acting on its
// rank) and fails the test on the first error.
func onEach(t *testing.T, ps []*jobproc.Proc, f func(r int, p *jobproc.Proc) error) {
	t.Helper()
	errs := make([]error, len(ps))
	var wg sync.WaitGroup
	for r, p := range ps {
		wg.Add(1)
		go func(r int, p *jobproc.Proc) {
			defer wg.Done()
			errs[r] = f(r, p)
		}(r, p)
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			var tail string
			if e := ps[r].Exit(); e != nil {
				tail = e.LogTail
			}
			t.Fatalf("rank %d: %v\n%s", r, err, tail)
		}
	}
}

// A 2-rank DDP gang of ddp.py (gloo, CPU) under jobproc, one Proc per rank:
// both ranks suspended at the same mini-batch (the agents' at) and resumed,
// then checkpointed (one checkpoint for the gang) and restored as a new
// gang: the final weights are bit-identical to an uninterrupted 2-rank run.
func TestDDPGangSuspendCheckpointRestore(t *testing.T) {
	py := torchtest.Python(t)
	script := torchtest.Script(t, "../..")
	base := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ref := filepath.Join(base, "ref")
	os.MkdirAll(ref, 0o755)
	want := runDDP(ctx, t, py, script, ref, 2)
	if want.Steps != ddpSteps || want.WorldSize != 2 || want.Restored {
		t.Fatalf("uninterrupted run: %+v", want)
	}

	ps := startGang(ctx, t, gangSpecs(t, py, script, base, "a", false))
	waitGangDone(ctx, t, ps, 4)
	at := max(ps[0].Info().Done, ps[1].Info().Done) + 3
	susp := make([]jobproc.Suspension, 2)
	onEach(t, ps, func(r int, p *jobproc.Proc) (err error) {
		susp[r], err = p.Suspend(ctx, jobproc.SuspendOptions{At: at})
		return err
	})
	for r, s := range susp {
		if s.Mode != jobproc.Memory || s.Done != at || s.Bytes == 0 {
			t.Fatalf("rank %d suspension %+v, want in memory at mini-batch %d", r, s, at)
		}
	}
	onEach(t, ps, func(r int, p *jobproc.Proc) error {
		_, err := p.Resume(ctx, nil)
		return err
	})
	waitGangDone(ctx, t, ps, at+4)
	exits := make([]*jobproc.Exit, 2)
	onEach(t, ps, func(r int, p *jobproc.Proc) (err error) {
		exits[r], err = p.Checkpoint(ctx)
		return err
	})
	for r, e := range exits {
		if e.Outcome != jobproc.Checkpointed || e.Checkpoint == nil || e.Checkpoint.Done != exits[0].Checkpoint.Done {
			t.Fatalf("rank %d checkpoint exit %+v (rank 0: %+v)", r, e, exits[0])
		}
	}
	done := exits[0].Checkpoint.Done

	ps2 := startGang(ctx, t, gangSpecs(t, py, script, base, "b", true))
	for r, p := range ps2 {
		e, err := p.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if e.Outcome != jobproc.Finished || e.Steps != ddpSteps-done {
			t.Fatalf("restored rank %d: %+v", r, e)
		}
	}
	got := torchtest.ReadResult(t, filepath.Join(base, "b-result.json"))
	if !got.Restored || int64(got.Start) != done || got.WorldSize != 2 {
		t.Fatalf("restored result %+v, want a restore from mini-batch %d", got, done)
	}
	if got.Checksum != want.Checksum {
		t.Fatalf("weights checksum %s after suspend, resume, checkpoint and restore; uninterrupted %s",
			got.Checksum, want.Checksum)
	}
}

// A rank killed mid-run: its peer stops with a non-zero status (a failed
// collective) instead of hanging.
func TestDDPGangRankKilled(t *testing.T) {
	py := torchtest.Python(t)
	script := torchtest.Script(t, "../..")
	base := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ps := startGang(ctx, t, gangSpecs(t, py, script, base, "k", false))
	waitGangDone(ctx, t, ps, 3)
	ps[1].Kill()
	// --gang-timeout is 60 s: the peer must stop well within ctx
	e, err := ps[0].Wait(ctx)
	if err != nil {
		t.Fatalf("rank 0 still running after rank 1 was killed: %v", err)
	}
	if e.Outcome != jobproc.Failed || e.Code == 0 {
		t.Fatalf("rank 0 after its peer was killed: %+v", e)
	}
	if e.Done >= ddpSteps {
		t.Fatalf("rank 0 finished alone: %+v", e)
	}
}
