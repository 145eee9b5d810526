package jobproc

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkSuspendResume measures one suspend-to-resume cycle of the
// deterministic trainer under jobproc, on the same GPUs: with the in-job
// client (state saved to host memory at the next mini-batch boundary and
// the weights dropped, then loaded back) and without it (SIGSTOP/SIGCONT).
// Between cycles (outside the timing) the job runs for one to two
// mini-batches, so that each request lands inside a mini-batch, at a phase
// that sweeps it. Besides ns/op (suspend plus resume) it reports suspend-ms (request to
// suspended, including the wait for the boundary, at most one mini-batch),
// save-ms (the job's Save and Release hooks), resume-ms (request to
// running) and load-ms (the Load hook).
func BenchmarkSuspendResume(b *testing.B) {
	for _, c := range []struct {
		name     string
		dim      int
		stepTime time.Duration
		noClient bool
	}{
		{"client/state=8KiB/step=1ms", 1 << 10, time.Millisecond, false},
		{"client/state=8MiB/step=1ms", 1 << 20, time.Millisecond, false},
		{"client/state=8KiB/step=20ms", 1 << 10, 20 * time.Millisecond, false},
		{"signal/state=8KiB/step=1ms", 1 << 10, time.Millisecond, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			root := b.TempDir()
			var extra []string
			if c.noClient {
				extra = []string{"-no-client"}
			}
			s := node(root, filepath.Join(root, "ckpt"), trainerArgs{1, c.dim, 1 << 40}, c.stepTime, extra...)
			s.ReportEvery = time.Second
			p, err := Start(context.Background(), s)
			if err != nil {
				b.Fatal(err)
			}
			defer func() { p.Kill(); p.Wait(context.Background()) }()
			if !c.noClient {
				for p.Info().Done < 1 {
					time.Sleep(time.Millisecond)
				}
			}
			ctx := context.Background()
			var sus, save, res, load time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				// Let the job run into a mini-batch, at a phase that
				// sweeps the mini-batch: the request waits for its end.
				b.StopTimer()
				time.Sleep(c.stepTime + c.stepTime*time.Duration(i%10)/10)
				b.StartTimer()
				s, err := p.Suspend(ctx, SuspendOptions{})
				if err != nil {
					b.Fatal(err)
				}
				r, err := p.Resume(ctx, []int{0})
				if err != nil {
					b.Fatal(err)
				}
				sus += s.Took
				save += s.Save
				res += r.Took
				load += r.Load
			}
			b.StopTimer()
			ms := func(d time.Duration) float64 { return d.Seconds() * 1000 / float64(b.N) }
			b.ReportMetric(ms(sus), "suspend-ms")
			b.ReportMetric(ms(res), "resume-ms")
			if !c.noClient {
				b.ReportMetric(ms(save), "save-ms")
				b.ReportMetric(ms(load), "load-ms")
			}
		})
	}
}

// BenchmarkMigrate measures a migration of the deterministic trainer between
// two node directories: checkpoint at the next boundary and exit, then a new
// process restored from the checkpoint, up to its client's hello.
func BenchmarkMigrate(b *testing.B) {
	for _, dim := range []int{1 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("state=%dKiB/step=1ms", dim*8/1024), func(b *testing.B) {
			base := b.TempDir()
			ckpt := filepath.Join(base, "ckpt")
			a := trainerArgs{1, dim, 1 << 40}
			ctx := context.Background()
			p, err := Start(ctx, node(filepath.Join(base, "n0"), ckpt, a, time.Millisecond))
			if err != nil {
				b.Fatal(err)
			}
			for p.Info().Done < 1 {
				time.Sleep(time.Millisecond)
			}
			var save time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				e, err := p.Checkpoint(ctx)
				if err != nil || e.Checkpoint == nil {
					b.Fatalf("%v %+v", err, e)
				}
				save += e.Checkpoint.Save
				s := node(filepath.Join(base, fmt.Sprint("n", i%2+1)), ckpt, a, time.Millisecond)
				s.Restore = true
				if p, err = Start(ctx, s); err != nil {
					b.Fatal(err)
				}
				for ev := range p.Events() {
					if ev.Kind == EvConnected {
						break
					}
				}
			}
			b.StopTimer()
			b.ReportMetric(save.Seconds()*1000/float64(b.N), "save-ms")
			p.Kill()
			p.Wait(ctx)
		})
	}
}
