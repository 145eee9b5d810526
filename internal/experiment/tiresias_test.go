package experiment_test

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"math"
	"os"
	"strconv"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/dataset"
	"github.com/gandiva-sched/gandiva/internal/experiment"
	"github.com/gandiva-sched/gandiva/internal/metrics"
	"github.com/gandiva-sched/gandiva/internal/sim"
	"github.com/gandiva-sched/gandiva/internal/trace"
)

// tiresiasPolicies maps our policy names to the Tiresias simulator's
// schedule names, for the ones implemented so far.
var tiresiasPolicies = map[string]string{"fifo": "fifo", "fjf": "fjf", "sjf": "sjf", "srsf": "shortest-gpu",
	"srtf": "shortest", "tiresias-l": "dlas-gpu", "tiresias-g": "dlas-gpu-gittins"}

// refJobs reads a reference table: job_id → (start, end).
func refJobs(t *testing.T, path string) map[string][2]float64 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][2]float64{}
	for _, r := range recs[1:] {
		s, _ := strconv.ParseFloat(r[2], 64)
		e, _ := strconv.ParseFloat(r[3], 64)
		out[r[0]] = [2]float64{s, e}
	}
	return out
}

func compatRun(t *testing.T, pol, spec string) *sim.Result {
	t.Helper()
	data, err := dataset.ReadFile("60_job.csv")
	if err != nil {
		t.Fatal(err)
	}
	jobs, _, err := trace.Read(bytes.NewReader(data), "60_job.csv", trace.Tiresias, trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := cluster.Load("tiresias-" + spec)
	if err != nil {
		t.Fatal(err)
	}
	res, err := experiment.Compare(experiment.Setup{Cluster: c, Jobs: jobs, Policies: []string{pol}, Compat: true, Check: true})
	if err != nil {
		t.Fatal(err)
	}
	return res[0]
}

// TestTiresiasCompat runs the Tiresias simulator's 60-job trace with
// --compat tiresias and compares every job's start and end with the
// simulator's own output, and the average JCT with the figure it reports.
func TestTiresiasCompat(t *testing.T) {
	for pol, ref := range tiresiasPolicies {
		for _, spec := range []string{"n2g4", "n4g4"} {
			t.Run(pol+"/"+spec, func(t *testing.T) {
				res := compatRun(t, pol, spec)
				want := refJobs(t, fmt.Sprintf("testdata/tiresias/%s_%s.csv", spec, ref))
				sum := 0.0
				for _, j := range res.Jobs {
					w := want[j.Name]
					if j.FirstStart != w[0] || j.End != w[1] {
						t.Errorf("job %s: start %v end %v, Tiresias %v %v", j.Name, j.FirstStart, j.End, w[0], w[1])
					}
					sum += w[1] - math.Round(j.Submit)
				}
				got := metrics.Summarize(res.Records()).AvgJCT
				if math.Abs(got-sum/float64(len(res.Jobs))) > 1e-9 {
					t.Errorf("average JCT %.4f, Tiresias %.4f", got, sum/float64(len(res.Jobs)))
				}
			})
		}
	}
}

// stressCases are the schedules whose outputs on the stress trace are in
// testdata/tiresias/stress: the simulator's name, our policy and parameters.
var stressCases = []struct {
	ref, policy string
	params      map[string]string
}{
	{"fifo", "fifo", nil},
	{"fjf", "fjf", nil},
	{"sjf", "sjf", nil},
	{"shortest-gpu", "srsf", nil},
	{"shortest", "srtf", nil},
	{"dlas-gpu", "tiresias-l", nil},
	{"dlas-gpu-gittins", "tiresias-g", nil},
	{"dlas-gpu-05", "tiresias-l", map[string]string{"starve": "0.5"}},
	{"dlas-gpu-2", "tiresias-l", map[string]string{"starve": "2"}},
}

// TestTiresiasCompatStress replays the 120-job stress trace (demotion to
// every queue, threshold wake-ups, preemption across and, for Gittins,
// inside queues, starvation promotion, same-time arrivals) in compat mode
// and compares every job's first start and end with the simulator's.
func TestTiresiasCompatStress(t *testing.T) {
	jobs, _, err := trace.ReadFile("testdata/tiresias/stress/stress_trace.csv", trace.Tiresias, trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range stressCases {
		for _, spec := range []string{"n2g4", "n4g4"} {
			t.Run(c.ref+"/"+spec, func(t *testing.T) {
				cl, err := cluster.Load("tiresias-" + spec)
				if err != nil {
					t.Fatal(err)
				}
				res, err := experiment.Compare(experiment.Setup{Cluster: cl, Jobs: jobs, Policies: []string{c.policy},
					Params: []map[string]string{c.params}, Compat: true, Check: true})
				if err != nil {
					t.Fatal(err)
				}
				want := refJobs(t, fmt.Sprintf("testdata/tiresias/stress/%s_%s.csv", spec, c.ref))
				bad := 0
				for _, j := range res[0].Jobs {
					w, ok := want[j.Name]
					if !ok {
						t.Fatalf("job %s is not in the reference", j.Name)
					}
					if j.FirstStart != w[0] || j.End != w[1] {
						if bad++; bad <= 5 {
							t.Errorf("job %s: start %v end %v, Tiresias %v %v", j.Name, j.FirstStart, j.End, w[0], w[1])
						}
					}
				}
				if bad > 0 || len(want) != len(res[0].Jobs) {
					t.Errorf("%d of %d jobs differ (reference has %d)", bad, len(res[0].Jobs), len(want))
				}
			})
		}
	}
}
