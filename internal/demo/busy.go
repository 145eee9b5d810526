package demo

import (
	"fmt"
	"io"
	"time"

	"github.com/gandiva-sched/gandiva/internal/api"
)

// busyMeter measures the GPU-busy fraction of a run from the job list the
// narration polls: the share of the node's GPU time in which a GPU ran
// mini-batches, that is held a running job past its start-up (a GPU
// shared by a packed pair counts once). Each poll's view is taken to hold
// until the next one.
type busyMeter struct {
	gpus       int
	last       time.Time
	busy, span float64 // GPU-seconds busy, GPU-seconds in all
	busyGPUs   int     // busy GPUs in the last view
}

func newBusyMeter(gpus int) *busyMeter { return &busyMeter{gpus: gpus} }

// sample records the view list, seen at now.
func (b *busyMeter) sample(now time.Time, list []api.Job) {
	if !b.last.IsZero() {
		dt := now.Sub(b.last).Seconds()
		b.busy += dt * float64(b.busyGPUs)
		b.span += dt * float64(b.gpus)
	}
	b.last, b.busyGPUs = now, busyGPUs(list)
}

// busyGPUs counts the distinct GPUs that hold a running job past its
// start-up.
func busyGPUs(list []api.Job) int {
	seen := map[string]bool{}
	for _, j := range list {
		if j.State != "running" || j.Starting != "" {
			continue
		}
		for _, w := range j.Workers {
			for _, g := range w.GPUs {
				seen[fmt.Sprintf("%s/%d", w.Node, g)] = true
			}
		}
	}
	return len(seen)
}

// fraction is the busy share so far (0 before two samples).
func (b *busyMeter) fraction() float64 {
	if b.span <= 0 {
		return 0
	}
	return b.busy / b.span
}

// report prints the fraction.
func (b *busyMeter) report(w io.Writer) {
	fmt.Fprintf(w, "GPU-busy: %.0f%% of %.0f GPU-seconds (GPUs running a job past its start-up, polled every 200 ms)\n", 100*b.fraction(), b.span)
}
