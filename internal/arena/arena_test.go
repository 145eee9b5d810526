package arena

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"strings"
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

// kubeChild is `gandiva kube --kubeconfig K --policy P --namespace N
// --clock-speed S`.
func kubeChild(args []string) int {
	fs := flag.NewFlagSet("kube", flag.ContinueOnError)
	kc := fs.String("kubeconfig", "", "")
	pol := fs.String("policy", "", "")
	ns := fs.String("namespace", "", "")
	speed := fs.Float64("clock-speed", 1, "")
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
	if err := kube.Run(ctx, cfg, kube.Options{Policy: *pol, Namespace: *ns, ClockSpeed: *speed}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// The CI arena: 30 synthetic jobs of 1 to 4 GPUs from 3 users on 2
// servers of 4 GPUs, under gandiva (tiresias-l, its clock at the replay's
// speed: the simulator's thresholds in trace seconds) and kube-scheduler,
// at 150× speed; the JSON has both rows, every job completed, no job ended
// sooner than its work allows, and the figures are sane; the HTML report
// of the run is well-formed with a line per scheduler in each chart.
func TestSmallArena(t *testing.T) {
	if err := cplane.Check(cplane.BinDir()); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v\n(CI=true: the arena must run)", err)
		}
		t.Skip(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(childEnv, "1") // for the child only: this process is past TestMain
	a := playArena(t, trace.SynthConfig{Jobs: 30, Seed: 1, Users: 3, Load: 8, GPUs: []int{1, 1, 2, 4}, MaxDuration: 1200},
		"gandiva:tiresias-l,kube-scheduler", Config{Speed: 150, Checkpoints: Checkpoints{Every: 300, OnTerm: true},
			DeclareWork: true, Timeout: 4 * time.Minute, Gandiva: []string{exe}}, 12*time.Minute)
	sums, err := Simulate(a.plan, a.cfg.Schedulers, sim.DefaultPerf(), 1)
	if err != nil {
		t.Fatal(err)
	}
	AddSim(a.res, a.plan, sums)
	doc := a.report(t)
	var page bytes.Buffer
	if err := WriteHTML(&page, Report{Settings: a.settings(), Results: a.res}); err != nil {
		t.Fatal(err)
	}
	if charts := parsePage(t, page.Bytes()); len(charts) != 2 || len(charts[0]) != 2 || len(charts[1]) != 2 {
		t.Errorf("the HTML report's charts have %v lines, want 2 each", charts)
	}
	if doc.Settings.Checkpoints != a.cfg.Checkpoints || doc.Settings.Speed != 150 {
		t.Errorf("settings %+v", doc.Settings)
	}
	a.checkRows(t, doc.Results, "gandiva:tiresias-l", "kube-scheduler")
	for _, r := range doc.Results {
		if len(r.Util) != 10 {
			t.Errorf("%s: %d utilisation samples, want 10", r.Scheduler, len(r.Util))
		}
	}
	if s := doc.Results[0].Sim; s == nil || s.AvgJCT <= 0 || s.ArenaRun <= 0 || s.SimRun <= 0 {
		t.Errorf("gandiva's row has no simulator figures: %+v", doc.Results[0].Sim)
	}
	if doc.Results[1].Sim != nil {
		t.Errorf("kube-scheduler's row has simulator figures")
	}
}

// arenaRun is a small arena a test ran: synthetic jobs on tiresias-n2g4.
type arenaRun struct {
	c    *cluster.Cluster
	plan *Plan
	cfg  Config
	res  []Result
}

// smallPlan is the plan of the jobs of synth on tiresias-n2g4 and the
// schedulers parsed.
func smallPlan(t *testing.T, synth trace.SynthConfig, schedulers string) (*cluster.Cluster, *Plan, []Scheduler) {
	t.Helper()
	c, err := cluster.Load("tiresias-n2g4")
	if err != nil {
		t.Fatal(err)
	}
	plan, err := NewPlan(c, trace.Synthetic(synth))
	if err != nil {
		t.Fatal(err)
	}
	scheds, err := ParseSchedulers(schedulers)
	if err != nil {
		t.Fatal(err)
	}
	return c, plan, scheds
}

// needPeer skips the test unless the plane's binaries and the peer's
// build are there (missing says what the build lacks); it fails instead
// where the peer's name is in $GANDIVA_ARENA_REQUIRE (a comma-separated
// list: CI sets it for the peers .ci/run builds, so that a broken build
// fails rather than skips).
func needPeer(t *testing.T, name string, missing func(*Config) string) {
	t.Helper()
	skip := func(why any) { t.Skip(why) }
	if slices.Contains(strings.Split(os.Getenv("GANDIVA_ARENA_REQUIRE"), ","), name) {
		skip = func(why any) { t.Fatalf("%v\n(GANDIVA_ARENA_REQUIRE names %s: it must run)", why, name) }
	}
	if err := cplane.Check(cplane.BinDir()); err != nil {
		skip(err)
	}
	if why := missing(nil); why != "" {
		skip(why)
	}
}

// scriptTag is the release tag scripts/arena-peers sets in NAME_TAG.
func scriptTag(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("../../scripts/arena-peers")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^` + name + `_TAG=(\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("scripts/arena-peers sets no %s_TAG", name)
	}
	return string(m[1])
}

// playArena runs cfg with the jobs of synth on tiresias-n2g4 as its plan
// and schedulers as its schedulers, within the given time, logging the
// arena's log; it fails the test if the arena cannot run.
func playArena(t *testing.T, synth trace.SynthConfig, schedulers string, cfg Config, within time.Duration) *arenaRun {
	t.Helper()
	c, plan, scheds := smallPlan(t, synth, schedulers)
	var log bytes.Buffer
	cfg.Plan, cfg.Schedulers, cfg.Log = plan, scheds, &log
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	t0 := time.Now()
	res, err := Run(ctx, cfg)
	t.Logf("arena ran in %.0f s:\n%s", time.Since(t0).Seconds(), log.String())
	if err != nil {
		t.Fatal(err)
	}
	return &arenaRun{c: c, plan: plan, cfg: cfg, res: res}
}

// settings are the run's settings as `gandiva arena` writes them.
func (a *arenaRun) settings() Settings {
	return Settings{Trace: "synthetic", Cluster: a.c.Name, Jobs: len(a.plan.Jobs), Speed: a.cfg.Speed, Checkpoints: a.cfg.Checkpoints,
		DeclareWork: a.cfg.DeclareWork, Perf: "gandiva-perf/v1"}
}

// report writes the results as JSON with each job's record, logs them as
// a table, and returns the JSON read back.
func (a *arenaRun) report(t *testing.T) Report {
	t.Helper()
	var out bytes.Buffer
	if err := Write(&out, "json", a.settings(), a.res, true); err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	Write(&table, "table", a.settings(), a.res, false)
	t.Logf("\n%s", table.String())
	var doc Report
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// checkRows checks that rows are the schedulers' in order, each with every
// job completed, sane figures and usage, and each job's record in order
// and no sooner than its work allows.
func (a *arenaRun) checkRows(t *testing.T, rows []Result, schedulers ...string) {
	t.Helper()
	names := make([]string, len(rows))
	for i, r := range rows {
		names[i] = r.Scheduler
	}
	if !slices.Equal(names, schedulers) {
		t.Fatalf("rows: %+v", rows)
	}
	n := len(a.plan.Jobs)
	minJCT := bestCase(a.c, a.plan)
	for _, r := range rows {
		if r.Status != "ok" || r.Jobs != n || r.Finished != n {
			t.Fatalf("%s: %s, %d of %d jobs finished", r.Scheduler, r.Status, r.Finished, r.Jobs)
		}
		if !(r.AvgJCT > 0 && r.P50JCT <= r.P95JCT && r.Makespan >= r.P95JCT && r.GPUUtil > 0 && r.GPUUtil <= 1 &&
			r.RunUtil > 0 && r.RunUtil <= r.GPUUtil+1e-9 && r.Jain > 0 && r.Jain <= 1+1e-9 && len(r.Shares) == 3 && r.AvgFirstBind >= 0) {
			t.Errorf("%s: figures not sane: %+v", r.Scheduler, r.Summary)
		}
		if !(r.CPUSeconds > 0 && r.PeakRSSMiB > 1) {
			t.Errorf("%s: scheduler usage %+v", r.Scheduler, r.Usage)
		}
		if r.Record == nil || len(r.Record.Jobs) != n {
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
}

// checkNotBuilt checks that an arena of the jobs of synth under the peer
// scheduler, whose build is missing, gives one "not run" row that says how
// to build it, without starting a plane.
func checkNotBuilt(t *testing.T, scheduler string, synth trace.SynthConfig) {
	t.Helper()
	t.Setenv("GANDIVA_ARENA_PEERS", t.TempDir())
	_, plan, s := smallPlan(t, synth, scheduler)
	res, err := Run(context.Background(), Config{Plan: plan, Schedulers: s, Speed: 10, BinDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Scheduler != scheduler || !strings.HasPrefix(res[0].Status, "not run: ") ||
		!strings.Contains(res[0].Status, "scripts/arena-peers "+scheduler) {
		t.Fatalf("rows %+v", res)
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
