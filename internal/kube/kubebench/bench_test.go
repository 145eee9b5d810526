package kubebench

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
)

// The benchmark end to end, small: both schedulers bind the whole backlog
// (what fits: 4 nodes × 2 GPUs for 6 singles and 2 gangs of 2), on a
// control plane per run and on one shared by the runs, and measure the
// latency phase; gandiva's figures include its rounds.
func TestRunSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	if err := cplane.Check(cplane.BinDir()); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v\n(CI=true: the Kubernetes tests must run; .ci/run builds the binaries first)", err)
		}
		t.Skip(err)
	}
	for _, fresh := range []bool{true, false} {
		var log bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		res, err := Run(ctx, Config{Nodes: 4, GPUs: 2, Pods: 6, Gangs: 2, GangSize: 2, Latency: 4, Rate: 10,
			Schedulers: []string{"gandiva", "kube-scheduler"}, Fresh: fresh, Log: &log})
		cancel()
		if err != nil {
			t.Fatalf("fresh=%v: %v\n%s", fresh, err, log.String())
		}
		if len(res) != 2 {
			t.Fatalf("fresh=%v: %d results, want 2", fresh, len(res))
		}
		planes := strings.Count(log.String(), "control plane at ")
		if want := map[bool]int{true: 2, false: 1}[fresh]; planes != want {
			t.Errorf("fresh=%v: %d control planes brought up, want %d\n%s", fresh, planes, want, log.String())
		}
		for _, r := range res {
			// gandiva binds gangs whole: 6 singles and 1 gang fill 8 GPUs;
			// kube-scheduler pod by pod: 8 of the 10 pods
			if r.Bound != 8 || r.Pending != 10 || r.Rate <= 0 || r.Measured != 4 || r.P99 <= 0 {
				t.Errorf("fresh=%v: %+v: want 8 of 10 bound, a rate, 4 latencies", fresh, r)
			}
			if r.Scheduler == "gandiva" && r.Rounds == 0 {
				t.Errorf("fresh=%v: gandiva ran no rounds: %+v", fresh, r)
			}
		}
	}
}
