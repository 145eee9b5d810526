package arena

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/kube"
	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
	"github.com/gandiva-sched/gandiva/internal/model"
	"github.com/gandiva-sched/gandiva/internal/sim"
	"github.com/gandiva-sched/gandiva/internal/trace"
)

// childEnv makes the test binary run `gandiva kube` (the arena's gandiva
// scheduler process) instead of the tests.
const childEnv = "GANDIVA_ARENA_TEST_KUBE"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(kubeChild(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// kubeChild is `gandiva kube --kubeconfig K --policy P --namespace N`.
func kubeChild(args []string) int {
	fs := flag.NewFlagSet("kube", flag.ContinueOnError)
	kc := fs.String("kubeconfig", "", "")
	pol := fs.String("policy", "", "")
	ns := fs.String("namespace", "", "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kc)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := kube.Run(ctx, cfg, kube.Options{Policy: *pol, Namespace: *ns}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// The CI arena: 30 synthetic jobs of 1 to 4 GPUs from 3 users on 2
// servers of 4 GPUs, under gandiva (tiresias-l) and kube-scheduler, at
// 150× speed; the JSON has both rows, every job completed, no job ended
// sooner than its work allows, and the figures are sane.
func TestSmallArena(t *testing.T) {
	if err := cplane.Check(cplane.BinDir()); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v\n(CI=true: the arena must run)", err)
		}
		t.Skip(err)
	}
	c, err := cluster.Load("tiresias-n2g4")
	if err != nil {
		t.Fatal(err)
	}
	jobs := trace.Synthetic(trace.SynthConfig{Jobs: 30, Seed: 1, Users: 3, Load: 8, GPUs: []int{1, 1, 2, 4}, MaxDuration: 1200})
	plan, err := NewPlan(c, jobs)
	if err != nil {
		t.Fatal(err)
	}
	scheds, err := ParseSchedulers("gandiva:tiresias-l,kube-scheduler")
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(childEnv, "1") // for the child only: this process is past TestMain
	var log bytes.Buffer
	cfg := Config{Plan: plan, Schedulers: scheds, Speed: 150, Checkpoints: Checkpoints{Every: 300, OnTerm: true},
		DeclareWork: true, Timeout: 4 * time.Minute, Gandiva: []string{exe}, Log: &log}
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	t0 := time.Now()
	res, err := Run(ctx, cfg)
	t.Logf("arena ran in %.0f s:\n%s", time.Since(t0).Seconds(), log.String())
	if err != nil {
		t.Fatal(err)
	}
	sums, err := Simulate(plan, scheds, sim.DefaultPerf(), 1)
	if err != nil {
		t.Fatal(err)
	}
	AddSim(res, plan, sums)
	var out bytes.Buffer
	st := Settings{Trace: "synthetic", Cluster: c.Name, Jobs: len(jobs), Speed: cfg.Speed, Checkpoints: cfg.Checkpoints, DeclareWork: true, Perf: "gandiva-perf/v1"}
	if err := Write(&out, "json", st, res, true); err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	Write(&table, "table", st, res, false)
	t.Logf("\n%s", table.String())

	var doc struct {
		Settings Settings `json:"settings"`
		Results  []Result `json:"results"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Results) != 2 || doc.Results[0].Scheduler != "gandiva:tiresias-l" || doc.Results[1].Scheduler != "kube-scheduler" {
		t.Fatalf("rows: %+v", doc.Results)
	}
	if doc.Settings.Checkpoints != cfg.Checkpoints || doc.Settings.Speed != 150 {
		t.Errorf("settings %+v", doc.Settings)
	}
	minJCT := bestCase(c, plan)
	for _, r := range doc.Results {
		if r.Status != "ok" || r.Jobs != 30 || r.Finished != 30 {
			t.Errorf("%s: %s, %d of %d jobs finished", r.Scheduler, r.Status, r.Finished, r.Jobs)
		}
		if !(r.AvgJCT > 0 && r.P50JCT <= r.P95JCT && r.Makespan >= r.P95JCT && r.GPUUtil > 0 && r.GPUUtil <= 1 &&
			r.Jain > 0 && r.Jain <= 1+1e-9 && len(r.Shares) == 3 && len(r.Util) == 10 && r.AvgFirstBind >= 0) {
			t.Errorf("%s: figures not sane: %+v", r.Scheduler, r.Summary)
		}
		if !(r.CPUSeconds > 0 && r.PeakRSSMiB > 1) {
			t.Errorf("%s: scheduler usage %+v", r.Scheduler, r.Usage)
		}
		if r.Record == nil || len(r.Record.Jobs) != 30 {
			t.Fatalf("%s: no record of each job", r.Scheduler)
		}
		for _, j := range r.Record.Jobs {
			if j.Completed < 0 || j.FirstBind < j.Submit || j.FirstRun < j.FirstBind || j.Completed < j.FirstRun {
				t.Errorf("%s: %s: submitted %v, bound %v, ran %v, completed %v", r.Scheduler, j.Key, j.Submit, j.FirstBind, j.FirstRun, j.Completed)
			}
			if jct := j.Completed - j.Submit; jct < minJCT[j.Key]-1e-6 {
				t.Errorf("%s: %s took %v s, less than its work at best (%v s)", r.Scheduler, j.Key, jct, minJCT[j.Key])
			}
		}
	}
	if s := doc.Results[0].Sim; s == nil || s.AvgJCT <= 0 || s.ArenaRun <= 0 || s.SimRun <= 0 {
		t.Errorf("gandiva's row has no simulator figures: %+v", doc.Results[0].Sim)
	}
	if doc.Results[1].Sim != nil {
		t.Errorf("kube-scheduler's row has simulator figures")
	}
}

// bestCase is each job's shortest possible JCT: its start-up and its work
// on its fastest placement (here every server is a V100 server, and the
// gangs fit one).
func bestCase(c *cluster.Cluster, p *Plan) map[string]float64 {
	perf := sim.DefaultPerf()
	out := map[string]float64{}
	for _, j := range p.Jobs {
		var gpus []cluster.GPUID
		for g := 0; g < j.Spec.GPUs; g++ {
			gpus = append(gpus, cluster.GPUID(g))
		}
		out[j.Key()] = perf.Startup + j.Spec.Iters*perf.SoloIterTime(model.Default(), c, j.Spec, gpus)
	}
	return out
}
