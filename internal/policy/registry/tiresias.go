package registry

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"maps"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/gandiva-sched/gandiva/internal/dataset"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/tiresias"
)

// DefaultPrior is the job GPU-time distribution tiresias-g uses unless told
// otherwise: the Tiresias simulator's own (yarn-gput1000.csv, embedded).
const DefaultPrior = "yarn-gput1000"

// tiresiasG builds tiresias-g. It takes one parameter of its own, the prior
// distribution of job GPU-time, and passes the rest to the policy:
//
//	prior=yarn-gput1000   an embedded sample set: yarn-gput1000, yarn-gput5000 or yarn-gput10000
//	prior=FILE.csv        a CSV file with a "duration" column of GPU-seconds (one sample per row)
//	prior=none            no prior (use with learn=true)
func tiresiasG(cfg policy.Config) (*tiresias.Policy, error) {
	name := DefaultPrior
	if v, ok := cfg.Params["prior"]; ok {
		name = v
		cfg.Params = maps.Clone(cfg.Params)
		delete(cfg.Params, "prior")
	}
	var samples []float64
	if name != "none" {
		var err error
		if samples, err = Prior(name); err != nil {
			return nil, fmt.Errorf("policy tiresias-g: prior: %w", err)
		}
	}
	return tiresias.NewG(cfg, samples)
}

var priors sync.Map // embedded name → []float64

// Prior returns the samples of a prior distribution of job GPU-time: an
// embedded set by name (yarn-gput1000, yarn-gput5000, yarn-gput10000) or a
// CSV file with a "duration" column. The caller must not modify the slice.
func Prior(name string) ([]float64, error) {
	switch name {
	case "yarn-gput1000", "yarn-gput5000", "yarn-gput10000":
		if v, ok := priors.Load(name); ok {
			return v.([]float64), nil
		}
		data, err := dataset.ReadFile(name + ".csv")
		if err != nil {
			return nil, err
		}
		s, err := ParsePrior(bytes.NewReader(data), name+".csv")
		if err != nil {
			return nil, err
		}
		priors.Store(name, s)
		return s, nil
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("%w (embedded priors: yarn-gput1000, yarn-gput5000, yarn-gput10000)", err)
	}
	defer f.Close()
	return ParsePrior(f, name)
}

// ParsePrior reads a job GPU-time sample file: a header line naming a
// "duration" column (the Tiresias simulator's yarn-gput*.csv), then one
// row per sample, in GPU-seconds, positive and finite.
func ParsePrior(r io.Reader, file string) ([]float64, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	col, ncol := -1, 0
	var out []float64
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		fields := strings.Split(text, ",")
		if col < 0 {
			for i, f := range fields {
				if strings.EqualFold(strings.TrimSpace(strings.TrimPrefix(f, "\ufeff")), "duration") {
					col = i
				}
			}
			if col < 0 {
				return nil, fmt.Errorf("%s line %d: no \"duration\" column in the header %q", file, line, text)
			}
			ncol = len(fields)
			continue
		}
		if len(fields) != ncol {
			return nil, fmt.Errorf("%s line %d: %d fields, the header has %d", file, line, len(fields), ncol)
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(fields[col]), 64)
		if err != nil {
			return nil, fmt.Errorf("%s line %d, field duration: %w", file, line, err)
		}
		if !(v > 0) || v > 1e300 {
			return nil, fmt.Errorf("%s line %d, field duration: %v is not a positive finite GPU-time", file, line, v)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no samples", file)
	}
	return out, nil
}
