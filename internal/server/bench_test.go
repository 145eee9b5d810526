package server

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gandiva-sched/gandiva/internal/api"
)

// BenchmarkAPISubmit measures job submissions per second through the whole
// API: HTTP, authentication, validation, the loop, a synced store commit
// per batch (bbolt, fsync), the scheduling round, and the answer. Clients
// submit concurrently; the loop commits what has queued in one transaction
// (group commit), which is why throughput grows with clients.
//
// The sync=false variants skip fsync, to show what the disk costs; a real
// server always syncs.
//
//	go test ./internal/server -run '^$' -bench APISubmit -benchtime 2000x
func BenchmarkAPISubmit(b *testing.B) {
	for _, c := range []struct {
		clients int
		sync    bool
	}{{1, true}, {16, true}, {64, true}, {1, false}, {64, false}} {
		clients := c.clients
		b.Run(fmt.Sprintf("clients=%d/sync=%v", clients, c.sync), func(b *testing.B) {
			s, stop := runServer(b, Config{DataDir: b.TempDir(), Policy: "fifo", NoSync: !c.sync, NoRateLimit: true})
			defer stop()
			addNode(b, s, "n1")
			srv := newHTTPTest(s)
			defer srv.Close()
			cl := api.NewClient(srv.URL, s.AdminToken)
			rq := &api.JobRequest{Name: "bench", Command: []string{"python", "train.py", "--lr", "0.1"}, GPUs: 2, MemGiB: 4}
			var next atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, clients)
			b.ResetTimer()
			start := time.Now()
			for c := 0; c < clients; c++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for next.Add(1) <= int64(b.N) {
						if _, err := cl.Submit(context.Background(), rq); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			el := time.Since(start)
			b.StopTimer()
			select {
			case err := <-errs:
				b.Fatal(err)
			default:
			}
			b.ReportMetric(float64(b.N)/el.Seconds(), "submits/s")
		})
	}
}

// BenchmarkReplay measures recovery: opening a store whose log holds the
// submissions of n jobs (and the rounds they caused) replays every entry
// into a fresh engine and policy.
//
//	go test ./internal/server -run '^$' -bench Replay -benchtime 5x
func BenchmarkReplay(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("jobs=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			s, stop := runServer(b, Config{DataDir: dir, Policy: "fifo", NoSync: true})
			addNode(b, s, "n1")
			ctx := context.Background()
			if err := s.Set(ctx, api.Principal{User: "admin", Admin: true}, api.Setting{Key: QuotaUnended, Value: "1000000"}); err != nil {
				b.Fatal(err)
			}
			var wg sync.WaitGroup
			per := n / 16
			for c := 0; c < 16; c++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < per; i++ {
						if _, _, err := s.Submit(ctx, api.Principal{User: "u"}, &api.JobRequest{Name: "r", Command: []string{"x"}, GPUs: 1}); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			stop()
			entries := 0
			b.ResetTimer()
			for b.Loop() {
				s, err := Open(Config{DataDir: dir, Policy: "fifo"})
				if err != nil {
					b.Fatal(err)
				}
				entries = s.Replay.Entries
				if s.Replay.Diverged != 0 {
					b.Fatalf("replay diverged %d times", s.Replay.Diverged)
				}
				s.Close()
			}
			b.ReportMetric(float64(entries), "entries")
			b.ReportMetric(float64(entries)*float64(b.N)/b.Elapsed().Seconds(), "entries/s")
		})
	}
}
