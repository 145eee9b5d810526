package trainer

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// ReadResult reads the result a trainer wrote with -out.
func ReadResult(path string) (Result, error) {
	var r Result
	data, err := os.ReadFile(path)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return r, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// Ledger is what a trainer's -ledger file records, line by line.
type Ledger struct {
	// Starts are the processes that started the job ("ATTEMPT MINI-BATCH"),
	// Done the checksums of its completions, and Overlaps the processes
	// (PIDs) refused because another copy of the job was running: all in
	// the order written.
	Starts, Done, Overlaps []string
	// Spawns are the processes started ("ATTEMPT UNIX-SECONDS"), counted
	// before their start-up: a job that pays its start-up twice has two.
	Spawns []string
	// SpawnAt are the spawns' times (Unix seconds), where the line has one.
	SpawnAt []float64
	// Ready are the times (Unix seconds) at which a process finished its
	// first mini-batch (the end of its start-up); T100 those at which a
	// process did the job's 100th mini-batch.
	Ready, T100 []float64
	// Busy are the stretches [from, to] (Unix seconds) in which a process
	// ran mini-batches after its first without being stopped at a boundary.
	Busy [][2]float64
}

// Once reports whether the job completed exactly once, with checksum sum,
// and never ran twice at the same time.
func (l Ledger) Once(sum string) bool {
	return len(l.Overlaps) == 0 && len(l.Done) == 1 && l.Done[0] == sum
}

// ReadLedger reads a trainer's -ledger file.
func ReadLedger(path string) (Ledger, error) {
	var l Ledger
	f, err := os.Open(path)
	if err != nil {
		return l, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		kind, rest, _ := strings.Cut(sc.Text(), " ")
		switch kind {
		case "start":
			l.Starts = append(l.Starts, rest)
		case "done":
			l.Done = append(l.Done, rest)
		case "overlap":
			l.Overlaps = append(l.Overlaps, rest)
		case "spawn":
			l.Spawns = append(l.Spawns, rest)
			if f := strings.Fields(rest); len(f) > 0 {
				var t float64
				if _, err := fmt.Sscan(f[len(f)-1], &t); err == nil && t > 1e6 {
					l.SpawnAt = append(l.SpawnAt, t)
				}
			}
		case "t100", "ready":
			var t float64
			if _, err := fmt.Sscan(rest, &t); err != nil {
				return l, fmt.Errorf("%s: bad line %q: %w", path, sc.Text(), err)
			}
			if kind == "ready" {
				l.Ready = append(l.Ready, t)
			} else {
				l.T100 = append(l.T100, t)
			}
		case "busy":
			var b [2]float64
			if _, err := fmt.Sscan(rest, &b[0], &b[1]); err != nil {
				return l, fmt.Errorf("%s: bad line %q: %w", path, sc.Text(), err)
			}
			l.Busy = append(l.Busy, b)
		}
	}
	if err := sc.Err(); err != nil {
		return l, fmt.Errorf("%s: %w", path, err)
	}
	return l, nil
}
