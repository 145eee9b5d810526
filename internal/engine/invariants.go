package engine

import (
	"fmt"
	"math"
	"slices"

	"github.com/gandiva-sched/gandiva/internal/cluster"
)

// CheckInvariants verifies the engine's state from scratch: every GPU's job
// list matches the jobs that hold it, free masks agree, no GPU holds more
// jobs than allowed or more memory than it has when shared, gangs are whole,
// only holding jobs hold GPUs, host memory bookings add up, and the active
// list holds exactly the non-terminal jobs. Tests call it after every event.
func (e *Engine) CheckInvariants() error {
	holders := make([][]cluster.JobID, len(e.gpus))
	mem := make([]float64, len(e.gpus))
	host := make([]float64, len(e.servers))
	nActive := 0
	for _, j := range e.jobs {
		if !j.State.Terminal() {
			nActive++
		}
		if j.State.Holding() {
			lo, hi := j.Spec.WidthRange()
			if len(j.GPUs) < lo || len(j.GPUs) > hi {
				return fmt.Errorf("job %s (%s) holds %d GPUs, allowed %d..%d", j.Spec.Name, j.State, len(j.GPUs), lo, hi)
			}
			if !slices.IsSorted(j.GPUs) {
				return fmt.Errorf("job %s: GPUs not sorted: %v", j.Spec.Name, j.GPUs)
			}
			for _, g := range j.GPUs {
				holders[g] = append(holders[g], j.ID)
				mem[g] += j.Spec.MemGiB
			}
		} else if len(j.GPUs) != 0 {
			return fmt.Errorf("job %s in state %s holds GPUs %v", j.Spec.Name, j.State, j.GPUs)
		}
		if j.State == cluster.Suspended && j.Home != cluster.NoServer {
			for _, g := range j.Last {
				host[e.c.ServerOf(g)] += stateGiB(j)
			}
		}
		if j.State.Terminal() && j.Ended < 0 {
			return fmt.Errorf("job %s is %s with no end time", j.Spec.Name, j.State)
		}
	}
	for g := range e.gpus {
		gs := &e.gpus[g]
		if !slices.Equal(gs.Jobs, holders[g]) {
			return fmt.Errorf("GPU %d lists jobs %v, but %v hold it", g, gs.Jobs, holders[g])
		}
		if math.Abs(gs.MemGiB-mem[g]) > 1e-6 {
			return fmt.Errorf("GPU %d books %.3f GiB, jobs need %.3f", g, gs.MemGiB, mem[g])
		}
		if len(gs.Jobs) > 1 {
			if len(gs.Jobs) > e.opts.MaxJobsPerGPU {
				return fmt.Errorf("GPU %d holds %d jobs (limit %d)", g, len(gs.Jobs), e.opts.MaxJobsPerGPU)
			}
			if cap := e.c.GPUType(cluster.GPUID(g)).MemGiB; mem[g] > cap+1e-9 {
				return fmt.Errorf("GPU %d over-committed: %.1f GiB of %.1f", g, mem[g], cap)
			}
		}
		s := e.c.ServerOf(cluster.GPUID(g))
		bit := uint64(1) << uint(cluster.GPUID(g)-e.c.Servers[s].FirstGPU)
		if free := e.servers[s].Free&bit != 0; free != (len(gs.Jobs) == 0) {
			return fmt.Errorf("GPU %d: free bit %v but %d jobs", g, free, len(gs.Jobs))
		}
	}
	for s := range e.servers {
		want := 0
		if e.servers[s].Schedulable() {
			want = e.servers[s].NumFree()
		}
		if got := e.free.Count(cluster.ServerID(s)); got != want {
			return fmt.Errorf("server %d: free index says %d free, state says %d", s, got, want)
		}
		if math.Abs(host[s]-e.servers[s].SuspendedGiB) > 1e-6 {
			return fmt.Errorf("server %d books %.3f GiB of suspended state, jobs need %.3f", s, e.servers[s].SuspendedGiB, host[s])
		}
	}
	live := 0
	for i, j := range e.active {
		if i > 0 && e.active[i-1].ID >= j.ID {
			return fmt.Errorf("active list out of order at %d", i)
		}
		if !j.State.Terminal() {
			live++
		}
	}
	if live != nActive {
		return fmt.Errorf("active list holds %d live jobs, %d exist", live, nActive)
	}
	if err := e.checkStartUps(); err != nil {
		return err
	}
	return e.checkWarm()
}
