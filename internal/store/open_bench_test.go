package store

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// BenchmarkOpen measures Open of a large store, which reads every page of
// it (guard.check), against bbolt's open alone (which reads its meta and
// freelist pages only): the cost of refusing damage at the start.
//
//	go test ./internal/store -run '^$' -bench BenchmarkOpen -benchtime 5x
func BenchmarkOpen(b *testing.B) {
	for _, size := range []struct {
		name      string
		jobs, job int // job records and their size
		entries   int // 200-byte log entries
	}{
		{"jobs=400x1MiB", 400, 1 << 20, 0},
		{"entries=1000000x200B", 0, 0, 1000000},
	} {
		path := filepath.Join(b.TempDir(), "g.db")
		db, err := Open(path, Options{NoSync: true})
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; i < size.jobs; i++ {
			if _, err := db.Commit(&Batch{Jobs: map[string][]byte{fmt.Sprintf("job-%06d", i): bytes.Repeat([]byte{byte(i)}, size.job)}}); err != nil {
				b.Fatal(err)
			}
		}
		for i := 0; i < size.entries; i += 10000 {
			batch := &Batch{}
			for k := 0; k < 10000; k++ {
				batch.Entries = append(batch.Entries, bytes.Repeat([]byte{byte(k)}, 200))
			}
			if _, err := db.Commit(batch); err != nil {
				b.Fatal(err)
			}
		}
		db.Close()
		b.Run(size.name+"/check", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				db, err := Open(path, Options{})
				if err != nil {
					b.Fatal(err)
				}
				db.Close()
			}
		})
		b.Run(size.name+"/bbolt", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
				if err != nil {
					b.Fatal(err)
				}
				db.Close()
			}
		})
	}
}
