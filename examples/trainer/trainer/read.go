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
		}
	}
	if err := sc.Err(); err != nil {
		return l, fmt.Errorf("%s: %w", path, err)
	}
	return l, nil
}
