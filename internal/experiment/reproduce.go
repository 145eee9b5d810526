package experiment

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// Check is one figure of a paper reproduced: what the paper reports, what
// we require, what we got and whether it passes. The JSON field names are a
// contract (`gandiva reproduce NAME --format json`).
type Check struct {
	Name   string  `json:"name"`
	Metric string  `json:"metric"`
	Paper  any     `json:"paper"` // the paper's figure: a number, or text where it gives none
	Target string  `json:"target"`
	Ours   float64 `json:"ours"`
	Pass   bool    `json:"pass"`
	// Note explains a miss, or how the figure was obtained.
	Note string `json:"note,omitempty"`
}

// AtLeast builds a check that passes when ours ≥ min.
func AtLeast(name, metric string, paper any, min, ours float64, note string) Check {
	return Check{Name: name, Metric: metric, Paper: paper, Target: fmt.Sprintf("≥ %s", fmtNum(min)), Ours: round(ours), Pass: ours >= min, Note: note}
}

// AtMost builds a check that passes when ours ≤ max.
func AtMost(name, metric string, paper any, max, ours float64, note string) Check {
	return Check{Name: name, Metric: metric, Paper: paper, Target: fmt.Sprintf("≤ %s", fmtNum(max)), Ours: round(ours), Pass: ours <= max, Note: note}
}

// Within builds a check that passes when |ours − want| ≤ tol × |want|.
func Within(name, metric string, paper any, want, tol, ours float64, note string) Check {
	return Check{Name: name, Metric: metric, Paper: paper, Target: fmt.Sprintf("%s ± %s%%", fmtNum(want), fmtNum(tol*100)),
		Ours: round(ours), Pass: math.Abs(ours-want) <= tol*math.Abs(want)+1e-12, Note: note}
}

func round(f float64) float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return f
	}
	return math.Round(f*10000) / 10000
}

func fmtNum(f float64) string {
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.4f", f), "0"), ".")
}

// Options control a reproduction.
type Options struct {
	// Quick runs the reduced version CI uses (seconds, not minutes); the
	// checks and their targets are the same.
	Quick bool
	Seed  uint64
	// Progress, when set, receives one line per step.
	Progress func(msg string)
}

// Report is a reproduction's outcome: the checks, and a Markdown write-up
// with its figures (SVG files by name) for docs/results.
type Report struct {
	Name     string
	Checks   []Check
	Markdown string
	Files    map[string][]byte
}

// Passed reports whether every check passed.
func (r *Report) Passed() bool {
	for _, c := range r.Checks {
		if !c.Pass {
			return false
		}
	}
	return true
}

// Reproduction is one paper's set of experiments.
type Reproduction struct {
	Name string
	Doc  string
	Run  func(Options) (*Report, error)
}

// reproductions lists every registered reproduction. Each paper's file adds
// its entry here.
func reproductions() []Reproduction {
	return []Reproduction{gandivaRepro, tiresiasRepro, fairRepro}
}

// Reproductions returns the reproductions sorted by name.
func Reproductions() []Reproduction {
	rs := reproductions()
	sort.Slice(rs, func(i, j int) bool { return rs[i].Name < rs[j].Name })
	return rs
}

// LookupReproduction finds one by name.
func LookupReproduction(name string) (Reproduction, error) {
	var names []string
	for _, r := range Reproductions() {
		if r.Name == name {
			return r, nil
		}
		names = append(names, r.Name)
	}
	return Reproduction{}, fmt.Errorf("unknown reproduction %q (known: %s)", name, strings.Join(names, ", "))
}

// ChecksTable renders checks as a Markdown table.
func ChecksTable(cs []Check) string {
	var b strings.Builder
	b.WriteString("| experiment | metric | paper | target | ours | pass |\n|---|---|---|---|---|---|\n")
	for _, c := range cs {
		pass := "yes"
		if !c.Pass {
			pass = "**no**"
		}
		fmt.Fprintf(&b, "| %s | %s | %v | %s | %s | %s |\n", c.Name, c.Metric, c.Paper, c.Target, fmtNum(c.Ours), pass)
	}
	return b.String()
}
