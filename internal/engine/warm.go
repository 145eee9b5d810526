package engine

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/policy"
)

// Warm starts (Options.Warm, with Options.StartUps). A process starting up
// needs CPUs, host memory and a little GPU memory, not GPU compute; a
// real one takes tens of seconds (37 s for PyTorch ResNet-50 on an H100),
// while suspending and resuming a process at a mini-batch boundary takes
// tens of milliseconds (61 ms and 15 ms there). So after every round the
// engine starts the processes of waiting jobs ahead of their turn, on GPUs
// that have the memory for them even where another job computes, and holds
// each at its first mini-batch boundary, suspended with its state in host
// memory: when the job's turn comes, the policy resumes it there, which
// costs what a resume costs, not a start-up. It is a mechanism, like the
// pre-run, so every policy gets it; policies see only its result, an
// ordinary suspended job (Warmed) whose Home and Last are where its
// process waits, which the placement ledger prefers when it resumes it.
//
// Which jobs: queued ones that may start now (not backing off, not held by
// a pre-run, not pre-run probes), whose gang fits one server, in the
// policy's own order (policy.Explainer's Position; the 64 longest waiting
// are ranked, then submission order), else in submission order. Where:
// the GPUs of one server with a free start-up slot (fewer than PerNode
// processes starting up there: placed jobs' and warming ones), fewer than
// PerGPU warm processes each, and room in GPU memory for the job's peak
// (MemGiB, during its first mini-batch) beside the jobs holding the GPU,
// the other warming processes' peaks and the contexts of the warm ones
// held there (ContextGiB each), and room in the server's host memory for
// its state (as a suspension books it); among those, the least loaded by
// warm processes, then by start-ups, then the lowest. The warm start is a
// process start: it counts as an attempt.
//
// While Warming the job is neither holding nor waiting: no policy places
// it. EvReady makes it Suspended there (its state booked in host memory;
// if that no longer fits, the warm start is cooled); a failure goes through
// the failure policy as any attempt's does; a placement that needs the
// GPU memory a warming process reserved cools it (the job is queued again,
// the attempt not counted, its process killed), as does the loss of its
// node. A policy that resumes a warm job on other GPUs pays a migration
// (the process's GPUs are fixed for its life).

// WarmOptions configure warm starts. The zero value disables them.
type WarmOptions struct {
	// PerNode bounds the processes starting up at once on one server,
	// placed or warming: warm starts begin only below it (CPU and host
	// memory are what a start-up uses). 0 disables warm starts.
	PerNode int
	// PerGPU bounds the warm processes on one GPU, warming or held at
	// their first boundary without having run (0: 4): the jobs taking
	// turns on a GPU, beyond which a warm process would only wait.
	PerGPU int
	// ContextGiB is the GPU memory a held warm process keeps (its CUDA
	// context; 834 MiB for PyTorch on an H100), counted where the engine
	// decides to warm (not against the policy's placements).
	ContextGiB float64
}

// StartUpStats counts start-ups and warm starts.
type StartUpStats struct {
	// Ready counts the processes that reported their first boundary;
	// Warms the warm starts; Cooled those cooled before their job ran.
	Ready, Warms, Cooled int
}

// StartUpStats returns the start-up counters so far.
func (e *Engine) StartUpStats() StartUpStats { return e.sus }

// warmRankLimit bounds the candidates ranked by the policy's Explainer.
const warmRankLimit = 64

// warmLoad is one round's view of the warm processes and start-ups.
type warmLoad struct {
	startups []int     // per server: processes starting up
	warm     []int     // per GPU: warm processes (warming or held, never run)
	gpuGiB   []float64 // per GPU: memory taken (holders, warming peaks, held contexts)
	hostGiB  []float64 // per server: host memory booked or to be booked
}

// warm starts the warm starts the round allows and appends them to acts.
func (e *Engine) warm(now float64, acts []Applied) []Applied {
	w := e.opts.Warm
	if w.PerNode <= 0 || !e.opts.StartUps {
		return acts
	}
	ld := e.warmLoad()
	if !slices.ContainsFunc(ld.startups, func(n int) bool { return n < w.PerNode }) {
		return acts
	}
	cands := e.warmCandidates(now)
	if len(cands) == 0 {
		return acts
	}
	for _, j := range e.warmOrder(cands) {
		gpus := e.warmPlace(j, &ld)
		if gpus == nil {
			continue
		}
		acts = append(acts, e.startWarm(j, gpus, now, &ld))
		if !slices.ContainsFunc(ld.startups, func(n int) bool { return n < w.PerNode }) {
			break
		}
	}
	return acts
}

// warmLoad counts the start-ups per server and the warm processes and
// memory per GPU.
func (e *Engine) warmLoad() warmLoad {
	ld := warmLoad{startups: make([]int, len(e.servers)), warm: make([]int, len(e.gpus)),
		gpuGiB: make([]float64, len(e.gpus)), hostGiB: make([]float64, len(e.servers))}
	for g := range e.gpus {
		ld.gpuGiB[g] = e.gpus[g].MemGiB
	}
	for s := range e.servers {
		ld.hostGiB[s] = e.servers[s].SuspendedGiB
	}
	for _, id := range e.starting {
		j := e.jobs[id]
		gpus := j.GPUs
		if j.State == cluster.Warming {
			gpus = j.Last
		}
		for _, s := range cluster.ServersOf(e.c, gpus) {
			ld.startups[s]++
		}
	}
	for _, j := range e.active {
		switch {
		case j.State == cluster.Warming:
			for _, g := range j.Last {
				ld.warm[g]++
				ld.gpuGiB[g] += j.Spec.MemGiB
				ld.hostGiB[e.c.ServerOf(g)] += stateGiB(j)
			}
		case j.State == cluster.Suspended && j.Warmed && j.Home != cluster.NoServer:
			for _, g := range j.Last {
				ld.warm[g]++
				ld.gpuGiB[g] += e.opts.Warm.ContextGiB
			}
		}
	}
	return ld
}

// warmCandidates lists the queued jobs a warm start may take, in ID order.
func (e *Engine) warmCandidates(now float64) []*cluster.Job {
	var out []*cluster.Job
	for _, j := range e.active {
		if j.State != cluster.Queued || j.Probe || j.NotBefore > now || !e.fitsOneServer(j.Spec.GPUs) || e.noClient[family(j.Spec)] {
			continue
		}
		out = append(out, j)
	}
	return out
}

func (e *Engine) fitsOneServer(n int) bool {
	for i := range e.c.Servers {
		if e.c.Servers[i].NumGPUs >= n {
			return true
		}
	}
	return false
}

// warmOrder ranks candidates in the policy's order, if it explains one.
func (e *Engine) warmOrder(cands []*cluster.Job) []*cluster.Job {
	x, ok := e.pol.(policy.Explainer)
	if !ok {
		return cands
	}
	if len(cands) > warmRankLimit {
		cands = cands[:warmRankLimit]
	}
	snap := e.Snapshot()
	pos := make(map[cluster.JobID]int, len(cands))
	for _, j := range cands {
		if p := x.Explain(snap, j.ID).Position; p > 0 {
			pos[j.ID] = p
		}
	}
	out := slices.Clone(cands)
	slices.SortStableFunc(out, func(a, b *cluster.Job) int {
		pa, oka := pos[a.ID]
		pb, okb := pos[b.ID]
		switch {
		case oka && okb:
			return cmp.Or(cmp.Compare(pa, pb), cmp.Compare(a.ID, b.ID))
		case oka:
			return -1
		case okb:
			return 1
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return out
}

// warmPlace chooses GPUs for j's warm start, or nil.
func (e *Engine) warmPlace(j *cluster.Job, ld *warmLoad) []cluster.GPUID {
	w := e.opts.Warm
	perGPU := w.PerGPU
	if perGPU <= 0 {
		perGPU = 4
	}
	n := j.Spec.GPUs
	var best []cluster.GPUID
	bestLoad, bestStarts := 0, 0
	for i := range e.c.Servers {
		sv := &e.c.Servers[i]
		st := &e.servers[i]
		if !st.Schedulable() || sv.NumGPUs < n || ld.startups[i] >= w.PerNode {
			continue
		}
		if need := stateGiB(j) * float64(n); need > 0 && ld.hostGiB[i]+need > sv.HostMemGiB {
			continue
		}
		var gs []cluster.GPUID
		for k := 0; k < sv.NumGPUs; k++ {
			g := sv.FirstGPU + cluster.GPUID(k)
			if ld.warm[g] < perGPU && ld.gpuGiB[g]+j.Spec.MemGiB <= e.c.GPUType(g).MemGiB {
				gs = append(gs, g)
			}
		}
		if len(gs) < n {
			continue
		}
		slices.SortStableFunc(gs, func(a, b cluster.GPUID) int { return cmp.Compare(ld.warm[a], ld.warm[b]) })
		gs = gs[:n]
		slices.Sort(gs)
		load := 0
		for _, g := range gs {
			load += ld.warm[g]
		}
		if best == nil || load < bestLoad || (load == bestLoad && ld.startups[i] < bestStarts) {
			best, bestLoad, bestStarts = gs, load, ld.startups[i]
		}
	}
	return best
}

// startWarm applies a warm start of j on gpus and returns the action.
func (e *Engine) startWarm(j *cluster.Job, gpus []cluster.GPUID, now float64, ld *warmLoad) Applied {
	j.Settle(now)
	j.Last = gpus
	j.Home = cluster.NoServer
	e.setState(j, cluster.Warming, now, fmt.Sprintf("warm start: its process starts up on GPUs %v while it waits, to be held at its first mini-batch boundary", gpus))
	e.newProcess(j, now)
	e.warmAt(j)
	j.Warmed = true
	j.Starts++
	j.Attempts++
	e.sus.Warms++
	for _, g := range gpus {
		ld.warm[g]++
		ld.gpuGiB[g] += j.Spec.MemGiB
	}
	s := e.c.ServerOf(gpus[0])
	ld.startups[s]++
	ld.hostGiB[s] += stateGiB(j) * float64(len(gpus))
	return Applied{Action: cluster.Action{Kind: cluster.Warm, Job: j.ID, GPUs: gpus, Reason: "warm start"},
		Checkpointed: j.Starts > 1, Internal: true, NewProcess: true}
}

// warmAt books j's warming process on its Last GPUs.
func (e *Engine) warmAt(j *cluster.Job) {
	for _, g := range j.Last {
		e.warmOn[g] = insertID(e.warmOn[g], j.ID)
	}
}

// unwarm drops j's warming bookings.
func (e *Engine) unwarm(j *cluster.Job) {
	for _, g := range j.Last {
		e.warmOn[g] = removeID(e.warmOn[g], j.ID)
	}
}

// warmReady makes a Warming job whose process is ready Suspended, held at
// its boundary with its state in host memory, or cools it when that
// memory is gone.
func (e *Engine) warmReady(j *cluster.Job, now, startUp float64, how string) {
	e.unwarm(j)
	if !e.keepHome(j) {
		e.cool(j, now, "its warm process is ready, but its server's host memory cannot hold its state")
		return
	}
	why := fmt.Sprintf("warm: start-up finished in %.1f s; held at its first mini-batch boundary", startUp)
	if how != "" {
		why += " (" + how + ")"
	}
	e.setState(j, cluster.Suspended, now, why)
}

// cool ends j's warm start (Warming, or held without having run): its
// process is killed, and it is queued again without using up an attempt.
func (e *Engine) cool(j *cluster.Job, now float64, why string) {
	prev := e.release(j, now)
	j.Home = cluster.NoServer
	if j.Attempts > 0 {
		j.Attempts--
	}
	e.setState(j, cluster.Queued, now, "warm start cooled: "+why)
	j.NotBefore = now
	e.sus.Cooled++
	e.cooled = append(e.cooled, Applied{Action: cluster.Action{Kind: cluster.Kill, Job: j.ID, Reason: "warm start cooled: " + why},
		Prev: prev, Internal: true})
}

// makeRoom cools the warming processes on gpus whose memory a placement of
// j needs (own: GPUs j holds already).
func (e *Engine) makeRoom(j *cluster.Job, gpus, own []cluster.GPUID, now float64) {
	for _, g := range gpus {
		if len(e.warmOn[g]) == 0 {
			continue
		}
		used := e.gpus[g].MemGiB
		if _, mine := slices.BinarySearch(own, g); !mine {
			used += j.Spec.MemGiB
		}
		for _, w := range e.warmOn[g] {
			used += e.jobs[w].Spec.MemGiB
		}
		for used > e.c.GPUType(g).MemGiB && len(e.warmOn[g]) > 0 {
			w := e.jobs[e.warmOn[g][len(e.warmOn[g])-1]]
			used -= w.Spec.MemGiB
			e.cool(w, now, fmt.Sprintf("job %s needs the GPU memory of its process", j.Spec.Name))
		}
	}
}

// checkWarm verifies the warm bookings (CheckInvariants).
func (e *Engine) checkWarm() error {
	want := make([][]cluster.JobID, len(e.gpus))
	for _, j := range e.jobs {
		if j.State != cluster.Warming {
			continue
		}
		if !j.StartingUp || !j.Warmed || len(j.GPUs) != 0 || len(j.Last) == 0 {
			return fmt.Errorf("warming job %s: starting up %v, warmed %v, GPUs %v, last %v", j.Spec.Name, j.StartingUp, j.Warmed, j.GPUs, j.Last)
		}
		for _, g := range j.Last {
			want[g] = append(want[g], j.ID)
		}
	}
	for g := range e.gpus {
		if !slices.Equal(want[g], e.warmOn[g]) {
			return fmt.Errorf("GPU %d books warming jobs %v, but %v warm on it", g, e.warmOn[g], want[g])
		}
		if len(want[g]) == 0 {
			continue
		}
		mem := e.gpus[g].MemGiB
		for _, id := range want[g] {
			mem += e.jobs[id].Spec.MemGiB
		}
		if cap := e.c.GPUType(cluster.GPUID(g)).MemGiB; mem > cap+1e-9 {
			return fmt.Errorf("GPU %d over-committed with warming processes: %.1f GiB of %.1f", g, mem, cap)
		}
	}
	return nil
}
