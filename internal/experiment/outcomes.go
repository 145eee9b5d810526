package experiment

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
)

// recordedJSON is the outcome of every check as recorded in the
// repository (outcomes.json): reproduction → check name → outcome of the
// full run and of the --quick run. A documented miss is recorded as
// "miss"; CI fails only when an outcome regresses from its record.
//
//go:embed outcomes.json
var recordedJSON []byte

// Recorded is one check's recorded outcomes.
type Recorded struct {
	Full  string `json:"full"`
	Quick string `json:"quick"`
}

// Record maps reproduction → check name → recorded outcomes.
type Record map[string]map[string]Recorded

// LoadRecord returns the record embedded in the binary.
func LoadRecord() (Record, error) {
	var r Record
	if err := json.Unmarshal(recordedJSON, &r); err != nil {
		return nil, fmt.Errorf("outcomes.json: %w", err)
	}
	for repro, checks := range r {
		for name, o := range checks {
			for _, v := range []string{o.Full, o.Quick} {
				if v != Pass && v != Miss {
					return nil, fmt.Errorf("outcomes.json: %s / %s: outcome %q, want pass or miss", repro, name, v)
				}
			}
		}
	}
	return r, nil
}

// Compare sets each check's Recorded field from rec and returns the
// regressions (a check that misses where its record says pass, a check
// that misses and has no record, a recorded check the report lacks) and
// the improvements (a recorded miss that passes: update the record).
func (r *Report) Compare(rec Record) (regressions, improvements []string) {
	mine := rec[r.Name]
	seen := map[string]bool{}
	for i := range r.Checks {
		c := &r.Checks[i]
		seen[c.Name] = true
		o, ok := mine[c.Name]
		want := o.Full
		if r.Quick {
			want = o.Quick
		}
		c.Recorded = want
		switch {
		case !ok && !c.Passed():
			regressions = append(regressions, fmt.Sprintf("%s: %s, and no outcome is recorded for it (a new check must pass or be recorded as a miss)", c.Name, c.Outcome))
		case ok && want == Pass && !c.Passed():
			regressions = append(regressions, fmt.Sprintf("%s: miss, recorded pass (median %s, band %s, pass rate %.0f%%)", c.Name, fmtNum(c.Median), c.Band, 100*c.PassRate))
		case ok && want == Miss && c.Passed():
			improvements = append(improvements, fmt.Sprintf("%s: pass, recorded miss (update outcomes.json)", c.Name))
		}
	}
	var gone []string
	for name := range mine {
		if !seen[name] {
			gone = append(gone, name)
		}
	}
	sort.Strings(gone)
	for _, name := range gone {
		regressions = append(regressions, fmt.Sprintf("%s: recorded, but the reproduction no longer reports it", name))
	}
	return regressions, improvements
}

// RecordOf returns the record entries of reports run in full and quick
// mode (the same reproductions): what outcomes.json should hold for them.
func RecordOf(full, quick []*Report) Record {
	rec := Record{}
	for _, r := range full {
		m := rec[r.Name]
		if m == nil {
			m = map[string]Recorded{}
			rec[r.Name] = m
		}
		for _, c := range r.Checks {
			o := m[c.Name]
			o.Full = c.Outcome
			m[c.Name] = o
		}
	}
	for _, r := range quick {
		m := rec[r.Name]
		if m == nil {
			m = map[string]Recorded{}
			rec[r.Name] = m
		}
		for _, c := range r.Checks {
			o := m[c.Name]
			o.Quick = c.Outcome
			m[c.Name] = o
		}
	}
	return rec
}

// checkNames lists a report's check names, and reports duplicates.
func checkNames(r *Report) (names []string, dup string) {
	for _, c := range r.Checks {
		if slices.Contains(names, c.Name) {
			dup = c.Name
		}
		names = append(names, c.Name)
	}
	return names, dup
}
