package registry_test

import (
	"bytes"
	"crypto/sha256"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/dataset"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/experiment"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/registry"
	"github.com/gandiva-sched/gandiva/internal/sim"
	"github.com/gandiva-sched/gandiva/internal/trace"
)

var (
	fingerprintAll   = flag.Bool("fingerprint", false, "TestFingerprint: run every workload, not only the quick ones")
	fingerprintWrite = flag.Bool("fingerprint-write", false, "TestFingerprint: write testdata/fingerprint.txt instead of comparing")
)

// workload is one trace on one cluster, with the run's options.
type workload struct {
	name     string
	cluster  string // a preset
	jobs     func() ([]*cluster.JobSpec, error)
	failures bool
	preRun   bool
	slow     bool // only with -fingerprint
}

func embedded(file string) func() ([]*cluster.JobSpec, error) {
	return func() ([]*cluster.JobSpec, error) {
		data, err := dataset.ReadFile(file)
		if err != nil {
			return nil, err
		}
		jobs, _, err := trace.Read(bytes.NewReader(data), file, trace.Auto, trace.Options{Seed: 1})
		return jobs, err
	}
}

func heavyTail() ([]*cluster.JobSpec, error) {
	cfg := experiment.DefaultHeavyTail()
	cfg.Seed = 1
	data, err := experiment.HeavyTail(cfg)
	if err != nil {
		return nil, err
	}
	jobs, _, err := trace.Read(bytes.NewReader(data), "heavytail.csv", trace.Tiresias, trace.Options{Seed: 1})
	return jobs, err
}

var workloads = []workload{
	{name: "60job-n2g4", cluster: "tiresias-n2g4", jobs: embedded("60_job.csv")},
	{name: "60job-n4g4", cluster: "tiresias-n4g4", jobs: embedded("60_job.csv")},
	{name: "philly-sample", cluster: "philly-sample", jobs: embedded("philly-sample.csv"), slow: true},
	{name: "philly-sample-failures-prerun", cluster: "philly-sample", jobs: embedded("philly-sample.csv"), failures: true, preRun: true, slow: true},
	{name: "heavytail-seed1", cluster: "tiresias-n8g8", jobs: heavyTail, slow: true},
}

// fingerprint runs one policy on one workload and hashes every job's
// result and the full event and action log.
func fingerprint(w workload, c *cluster.Cluster, jobs []*cluster.JobSpec, name string, compat bool, observe func(now float64, e *engine.Engine)) (string, error) {
	cfg := policy.Config{Seed: 1}
	perf := sim.DefaultPerf()
	if compat {
		cfg = policy.TiresiasCompat(cfg)
		perf = sim.CompatPerf()
	}
	p, err := registry.New(name, cfg)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	var failures *sim.Failures
	if w.failures {
		f := sim.PhillyFailures()
		failures = &f
	}
	r, err := sim.Run(sim.Config{Cluster: c, Jobs: jobs, Policy: p, Perf: perf, Failures: failures, Seed: 1,
		Engine: engine.Options{PreRun: w.preRun}, Log: func(line string) { h.Write([]byte(line)); h.Write([]byte{'\n'}) },
		Observe: observe})
	if err != nil {
		return "", err
	}
	log := h.Sum(nil)
	h.Reset()
	for _, j := range r.Jobs {
		fmt.Fprintf(h, "%+v\n", j)
	}
	fmt.Fprintf(h, "%+v %d %d %+v\n", r.Stats, r.Events, r.Stale, r.Rejected)
	return fmt.Sprintf("%x %x", log[:8], h.Sum(nil)[:8]), nil
}

// run is one policy on one workload, with or without compat.
type run struct {
	key    string
	w      workload
	c      *cluster.Cluster
	jobs   []*cluster.JobSpec
	name   string
	compat bool
}

// runs lists every registered policy × {default, compat} on the workloads
// (the slow ones only when slow is set).
func runs(t *testing.T, slow bool) []run {
	var out []run
	for _, w := range workloads {
		if w.slow && !slow {
			continue
		}
		c, err := cluster.Load(w.cluster)
		if err != nil {
			t.Fatal(err)
		}
		jobs, err := w.jobs()
		if err != nil {
			t.Fatal(err)
		}
		for _, compat := range []bool{false, true} {
			for _, name := range registry.Names() {
				out = append(out, run{fmt.Sprintf("%s %s compat=%v", w.name, name, compat), w, c, jobs, name, compat})
			}
		}
	}
	return out
}

// golden reads testdata/fingerprint.txt ("key: fingerprint" lines).
func golden() (map[string]string, error) {
	want := map[string]string{}
	data, err := os.ReadFile("testdata/fingerprint.txt")
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if k, v, ok := strings.Cut(line, ": "); ok {
			want[k] = v
		}
	}
	return want, err
}

// TestFingerprint runs every registered policy, with default settings and
// with --compat tiresias, over a few workloads, and compares a hash of
// every job result and of the event log with testdata/fingerprint.txt: a
// refactoring that must not change behaviour keeps every line. The quick
// workloads run by default; -fingerprint runs them all (about a minute);
// -fingerprint-write rewrites the file (review the diff: a changed line is
// a changed result).
func TestFingerprint(t *testing.T) {
	want, err := golden()
	if err != nil && !*fingerprintWrite {
		t.Fatal(err)
	}
	rs := runs(t, *fingerprintAll || *fingerprintWrite)
	got := make([]string, len(rs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for i, r := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			fp, err := fingerprint(r.w, r.c, r.jobs, r.name, r.compat, nil)
			if err != nil {
				fp = "error: " + err.Error()
			}
			got[i] = fp
		}()
	}
	wg.Wait()
	var out strings.Builder
	for i, r := range rs {
		fmt.Fprintf(&out, "%s: %s\n", r.key, got[i])
		if !*fingerprintWrite && want[r.key] != got[i] {
			t.Errorf("%s: fingerprint %s, want %s", r.key, got[i], want[r.key])
		}
	}
	if *fingerprintWrite {
		if err := os.WriteFile("testdata/fingerprint.txt", []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestExplainChangesNothing runs the quick workloads again with every
// waiting job explained after every round (policy.Explainer, which every
// registered policy implements): the fingerprints must not change, and
// each explanation must be consistent: the job's place, the jobs ahead of
// it and the number waiting agree, and a policy with one order (all but
// gandiva-fair, whose order is per stride scheduler) gives the waiting
// jobs distinct places.
func TestExplainChangesNothing(t *testing.T) {
	want, err := golden()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runs(t, false) {
		explained := 0
		observe := func(now float64, e *engine.Engine) {
			explained += explainAll(t, r, now, e)
		}
		got, err := fingerprint(r.w, r.c, r.jobs, r.name, r.compat, observe)
		if err != nil {
			t.Fatal(err)
		}
		if got != want[r.key] {
			t.Errorf("%s: explaining changed the run: fingerprint %s, want %s", r.key, got, want[r.key])
		}
		if explained == 0 {
			t.Errorf("%s: no waiting job was explained", r.key)
		}
	}
}

// explainAll explains every waiting job after a round, checks each
// explanation and returns how many it checked.
func explainAll(t *testing.T, r run, now float64, e *engine.Engine) int {
	ex, ok := e.Policy().(policy.Explainer)
	if !ok {
		t.Fatalf("%s: policy %s does not implement policy.Explainer", r.key, r.name)
	}
	snap := e.Snapshot()
	places := map[int]cluster.JobID{}
	n := 0
	for _, j := range snap.Active() {
		if !j.State.Waiting() {
			continue
		}
		x := ex.Explain(snap, j.ID)
		n++
		if err := consistent(snap, j.ID, x); err != nil {
			t.Fatalf("%s t=%v: job %s: %v", r.key, now, j.Spec.Name, err)
		}
		if other, dup := places[x.Position]; dup && x.Position > 0 && r.name != "gandiva-fair" {
			t.Fatalf("%s t=%v: jobs %s and %s both at place %d", r.key, now, snap.Jobs[other].Spec.Name, j.Spec.Name, x.Position)
		}
		places[x.Position] = j.ID
	}
	return n
}

// consistent checks one explanation of waiting job id.
func consistent(s *cluster.Snapshot, id cluster.JobID, e policy.Explanation) error {
	switch {
	case e.Queue == "":
		return fmt.Errorf("no queue named")
	case e.Position < 0 || e.Position > e.Waiting:
		return fmt.Errorf("place %d of %d", e.Position, e.Waiting)
	case e.Position > 0 && len(e.Ahead) != e.Position-1:
		return fmt.Errorf("place %d with %d jobs ahead", e.Position, len(e.Ahead))
	case len(e.Servers) != len(s.Servers):
		return fmt.Errorf("%d server reasons for %d servers", len(e.Servers), len(s.Servers))
	}
	for _, a := range e.Ahead {
		if a == id || !s.Jobs[a].State.Waiting() {
			return fmt.Errorf("job %s ahead of it is itself or not waiting", s.Jobs[a].Spec.Name)
		}
	}
	return nil
}
