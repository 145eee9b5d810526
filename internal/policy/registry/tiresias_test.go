package registry

import (
	"math"
	"strings"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/policy"
)

func TestPrior(t *testing.T) {
	for name, n := range map[string]int{"yarn-gput1000": 1001, "yarn-gput5000": 5000, "yarn-gput10000": 9999} {
		s, err := Prior(name)
		if err != nil {
			t.Fatal(err)
		}
		if len(s) < n-1 || len(s) > n+1 {
			t.Errorf("%s: %d samples, want about %d", name, len(s), n)
		}
	}
	if _, err := Prior("testdata/no-such-file.csv"); err == nil {
		t.Error("a missing prior file is not an error")
	}
}

func TestParsePriorErrors(t *testing.T) {
	for in, want := range map[string]string{
		"":                   "no samples",
		"duration\n":         "no samples",
		"gpu_time\n5\n":      "no \"duration\" column",
		"duration\nabc\n":    "line 2, field duration",
		"duration\n-3\n":     "line 2, field duration",
		"duration\n+Inf\n":   "line 2, field duration",
		"a,duration\n1\n":    "line 2: 1 fields, the header has 2",
		"x,duration\n1,7\n8": "line 3: 1 fields",
	} {
		_, err := ParsePrior(strings.NewReader(in), "p.csv")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParsePrior(%q) = %v, want an error with %q", in, err, want)
		}
	}
	s, err := ParsePrior(strings.NewReader("\ufeffjob,Duration\r\nx, 12\r\n\r\ny,3.5\r\n"), "p.csv")
	if err != nil || len(s) != 2 || s[0] != 12 || s[1] != 3.5 {
		t.Errorf("ParsePrior = %v, %v", s, err)
	}
}

func FuzzParsePrior(f *testing.F) {
	f.Add("duration\n121\n122\n")
	f.Add("a,duration\n1,2\n")
	f.Add("duration\n1e309\n")
	f.Fuzz(func(t *testing.T, in string) {
		s, err := ParsePrior(strings.NewReader(in), "fuzz.csv")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.csv") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		for _, v := range s {
			if !(v > 0) || math.IsInf(v, 0) {
				t.Fatalf("accepted sample %v", v)
			}
		}
	})
}

// TestTiresiasGPrior: the prior parameter selects the distribution, "none"
// needs learn=true, and unknown parameters are still rejected.
func TestTiresiasGPrior(t *testing.T) {
	ok := []map[string]string{nil, {"prior": "yarn-gput5000"}, {"prior": "none", "learn": "true"}, {"delta": "1000"}}
	for _, p := range ok {
		if _, err := New("tiresias-g", policy.Config{Params: p}); err != nil {
			t.Errorf("%v: %v", p, err)
		}
	}
	bad := []map[string]string{{"prior": "none"}, {"prior": "nope.csv"}, {"bogus": "1"}, {"delta": "0"}}
	for _, p := range bad {
		if _, err := New("tiresias-g", policy.Config{Params: p}); err == nil {
			t.Errorf("%v: no error", p)
		}
	}
}
