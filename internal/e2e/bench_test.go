package e2e_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/server"
)

// switcher is a test policy for BenchmarkTimeSlice: two jobs share GPU 0;
// each "switch" setting suspends the one running and resumes (or starts)
// the other.
type switcher struct{}

func (switcher) Name() string { return "e2e-switcher" }

func (switcher) Schedule(s *cluster.Snapshot) cluster.Decision {
	var d cluster.Decision
	var a, b *cluster.Job
	for _, j := range s.Active() {
		switch j.Spec.Name {
		case "j1":
			a = j
		case "j2":
			b = j
		}
	}
	flip := false
	for _, ev := range s.Events {
		flip = flip || ev.Kind == cluster.EvSetting && ev.Key == "switch"
	}
	run := func(j *cluster.Job) {
		kind := cluster.Start
		if j.State == cluster.Suspended {
			kind = cluster.Resume
		}
		d.Actions = append(d.Actions, cluster.Action{Kind: kind, Job: j.ID, GPUs: []cluster.GPUID{0}, Reason: "turn"})
	}
	if a == nil || b == nil {
		return d
	}
	switch {
	case a.State == cluster.Queued && b.State == cluster.Queued:
		run(a)
	case flip && a.State == cluster.Running && b.State.Waiting():
		d.Actions = append(d.Actions, cluster.Action{Kind: cluster.Suspend, Job: a.ID, Reason: "switch"})
		run(b)
	case flip && b.State == cluster.Running && a.State.Waiting():
		d.Actions = append(d.Actions, cluster.Action{Kind: cluster.Suspend, Job: b.ID, Reason: "switch"})
		run(a)
	}
	return d
}

// CheckSetting implements policy.SettingsValidator: the switcher reads
// "switch".
func (switcher) CheckSetting(key, _ string) (bool, error) { return key == "switch", nil }

var (
	_ policy.Policy            = switcher{}
	_ policy.SettingsValidator = switcher{}
)

// BenchmarkTimeSlice measures one time-slice switch of the live scheduler
// end to end: from the API call that makes the policy switch two
// deterministic trainers sharing a GPU, through the round, the long poll,
// the agent suspending the running trainer at its next mini-batch boundary
// (state to host memory) and reporting it, the server publishing the other
// trainer's resume once the GPU is released, the agent resuming it and
// reporting, to the API showing it running. Mini-batches of 20 ms, so a
// switch includes the wait for the boundary (10 ms on average).
//
//	go test ./internal/e2e -run '^$' -bench TimeSlice -benchtime 50x
func BenchmarkTimeSlice(b *testing.B) {
	b.Run("minibatch=20ms", benchTimeSlice)
}

func benchTimeSlice(b *testing.B) {
	dir := jobDir(b)
	s, err := server.Open(server.Config{DataDir: b.TempDir(), CheckpointRoot: openDir(b), Policy: "e2e-switcher", NewPolicy: func() (policy.Policy, error) { return switcher{}, nil },
		NoRateLimit: true}) // (it polls every 500 µs)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	defer func() { cancel(); <-done; s.Close() }()
	hs := newTestHTTP(s)
	defer hs.Close()
	admin := api.NewClient(hs.URL, s.AdminToken)
	stop := startAgent(b, hs.URL, s.AgentToken, "node", "1xV100", openDir(b), nil)
	defer stop()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if ns, _ := admin.Nodes(ctx); len(ns) == 1 && ns[0].Up {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("the agent did not register")
		}
	}
	for i := 0; i < 2; i++ {
		j := &trainerJob{name: fmt.Sprintf("s%d", i), steps: 1 << 30, stepTime: 20 * time.Millisecond, seed: uint64(i), dir: dir, noPreRun: true}
		if _, err := admin.Submit(ctx, j.request()); err != nil {
			b.Fatal(err)
		}
	}
	running := func(id string) bool {
		j, err := admin.Get(ctx, id)
		return err == nil && j.State == "running" && len(j.Workers) == 1 && j.Workers[0].Phase == "running"
	}
	waitFor := func(id string) {
		deadline := time.Now().Add(20 * time.Second)
		for !running(id) {
			if time.Now().After(deadline) {
				b.Fatalf("%s did not run", id)
			}
			time.Sleep(500 * time.Microsecond)
		}
	}
	waitFor("j1")
	flip := func(k int) string {
		if err := admin.Do(ctx, "POST", "/v1/settings", api.Setting{Key: "switch", Value: fmt.Sprint(k)}, nil); err != nil {
			b.Fatal(err)
		}
		if k%2 == 0 {
			return "j2"
		}
		return "j1"
	}
	for k := 0; k < 4; k++ { // warm up: j2's first start, then both suspended once
		waitFor(flip(k))
		time.Sleep(50 * time.Millisecond)
	}
	var total time.Duration
	b.ResetTimer()
	for k := 0; k < b.N; k++ {
		time.Sleep(30 * time.Millisecond) // let the resumed job run a mini-batch or so
		start := time.Now()
		waitFor(flip(k))
		total += time.Since(start)
	}
	b.StopTimer()
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/switch")
}
