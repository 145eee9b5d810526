package eta_test

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/dataset"
	"github.com/gandiva-sched/gandiva/internal/eta"
	"github.com/gandiva-sched/gandiva/internal/trace"
)

// BenchmarkAccuracy is the ETA's accuracy in the simulator (the table in
// docs/PERFORMANCE.md): a Philly trace under a policy, with every job's
// ETA asked at its submission and compared with when it started in that
// same simulation. The metrics are the median and 90th percentile of the
// absolute error over all jobs (err-p50-s, err-p90-s) and over the jobs
// that had to wait (wait-err-p50-s, wait-err-p90-s; waited of them, their
// median wait waited-p50-s for scale), leaving out the jobs forecast to
// start beyond the horizon (beyond), with the jobs' lengths declared
// (lengths=declared) or unknown to the fork (lengths=unknown: the prior).
//
//	go test ./internal/eta -run '^$' -bench Accuracy -benchtime 1x
//
// trace=sample is the embedded Philly sample (850 jobs of virtual cluster
// 6c71a0 on its 64-GPU preset), every job asked; trace=b436b2 the 7,423
// jobs of virtual cluster b436b2 of ../shared/data/philly/philly.csv on
// 64 GPUs (tiresias-n8g8), the jobs of one submission time in 10 asked
// (skipped when the file is absent). (The whole trace on its 2,816 GPUs
// never queues in the simulator: every ETA would be "now".)
func BenchmarkAccuracy(b *testing.B) {
	data, err := dataset.ReadFile("philly-sample.csv")
	if err != nil {
		b.Fatal(err)
	}
	sample, _, err := trace.Read(bytes.NewReader(data), "philly-sample.csv", trace.Auto, trace.Options{Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	type experiment struct {
		name, cluster string
		jobs          []*cluster.JobSpec
		every         int
	}
	traces := []experiment{{"sample", "philly-sample", sample, 1}}
	const full = "../../../shared/data/philly/philly.csv"
	if _, err := os.Stat(full); err == nil {
		jobs, _, err := trace.ReadFile(full, trace.Auto, trace.Options{Seed: 1, VC: []string{"b436b2"}})
		if err != nil {
			b.Fatal(err)
		}
		traces = append(traces, experiment{"b436b2", "tiresias-n8g8", jobs, 10})
	}
	for _, tr := range traces {
		c, err := cluster.Load(tr.cluster)
		if err != nil {
			b.Fatal(err)
		}
		for _, pol := range []string{"fifo", "tiresias-l", "gandiva"} {
			for _, lengths := range []bool{true, false} {
				kind := map[bool]string{true: "declared", false: "unknown"}[lengths]
				b.Run(fmt.Sprintf("trace=%s/policy=%s/lengths=%s", tr.name, pol, kind), func(b *testing.B) {
					var a *eta.Accuracy
					for b.Loop() {
						if a, err = eta.Measure(eta.MeasureConfig{Cluster: c, Jobs: tr.jobs, Policy: pol, Lengths: lengths, Seed: 1, Every: tr.every}); err != nil {
							b.Fatal(err)
						}
					}
					all, missed := a.Errors(nil)
					waited := func(s eta.Sample) bool { return s.Actual > s.Submit }
					w, _ := a.Errors(waited)
					var waits []float64
					for _, s := range a.Samples {
						if waited(s) {
							waits = append(waits, s.Actual-s.Submit)
						}
					}
					slices.Sort(waits)
					b.ReportMetric(float64(len(a.Samples)), "jobs")
					b.ReportMetric(float64(missed), "beyond")
					b.ReportMetric(eta.Quantile(all, 0.5), "err-p50-s")
					b.ReportMetric(eta.Quantile(all, 0.9), "err-p90-s")
					b.ReportMetric(float64(len(waits)), "waited")
					b.ReportMetric(eta.Quantile(w, 0.5), "wait-err-p50-s")
					b.ReportMetric(eta.Quantile(w, 0.9), "wait-err-p90-s")
					b.ReportMetric(eta.Quantile(waits, 0.5), "waited-p50-s")
				})
			}
		}
	}
}
