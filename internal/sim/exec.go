package sim

import (
	"math"
	"math/rand/v2"
	"slices"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/model"
	"github.com/gandiva-sched/gandiva/internal/place"
)

// Failures is the simulated failure model (the Philly paper, ATC'19: user
// errors in code or configuration show early; infrastructure failures hit
// at any time and are more common for larger jobs).
type Failures struct {
	// UserErrorFrac is the fraction of jobs whose own code fails on every
	// attempt when it reaches mini-batch UserErrorIter (1: the first one,
	// which a pre-run on one GPU catches cheaply).
	UserErrorFrac float64
	UserErrorIter float64
	// InfraPerGPUHour is the rate of infrastructure failures per GPU-hour
	// held (a job on more GPUs fails more often).
	InfraPerGPUHour float64
}

// PhillyFailures are estimates after the Philly analysis (Jeon et al., ATC'19):
// about a third of unsuccessful jobs fail on user errors within minutes; the
// infrastructure rate is set so a 4-GPU day-long job fails about once in ten
// runs. The papers give no exact rates; these are stated assumptions.
func PhillyFailures() Failures {
	return Failures{UserErrorFrac: 0.08, UserErrorIter: 1, InfraPerGPUHour: 0.001}
}

// truth is the simulator's hidden state of one job.
type truth struct {
	spec    *cluster.JobSpec
	m       *model.Model
	gpus    []cluster.GPUID
	holding bool
	done    float64 // mini-batches done as of at
	at      float64
	start   float64 // progress (re)starts here, after costs
	rate    float64 // mini-batches per second once started
	ver     uint32
	t100    float64 // when min(100, iters) mini-batches were done, -1 before
	busy    float64 // GPU-seconds held
	heldAt  float64
	userErr bool
	// probe marks an engine pre-run (one mini-batch on one GPU).
	probe bool
	// spread is set once the job ran across servers.
	spread bool
	// sampled is the rate of the last placement sample pushed, and where:
	// a resume onto the same GPUs at the same rate reports nothing new.
	sampledRate float64
	sampledGPUs []cluster.GPUID
	// sampleDue is when that sample fires: a job that leaves its placement
	// before then never reported it, so its next placement samples again.
	sampleDue float64
	// resample is set when a job's neighbours on its GPUs changed: its
	// runtime reports a sample even if its rate did not change (the sample
	// names its neighbours, which the policy's packing verdict reads).
	resample bool
	// placements counts placements; an infrastructure failure planned for
	// one placement is void once the job leaves it.
	placements uint32
	// warming is set while the job's process starts up off its GPUs (a
	// warm start, or a suspension during a start-up) on warmGPUs; procAt
	// is when its current process was launched (PerfModel.StartUps).
	warming   bool
	warmGPUs  []cluster.GPUID
	warmGPUs0 cluster.GPUID // warmGPUs[0], kept once the process is no longer warming
	procAt    float64
}

// executor is the simulated Executor: ground-truth progress of every job
// under the performance model, and the events it produces.
type executor struct {
	c        *cluster.Cluster
	perf     *PerfModel
	cat      *model.Catalog
	fail     *Failures
	rng      *rand.Rand
	heap     *eventHeap
	truth    []*truth // by JobID
	gpuJobs  [][]cluster.JobID
	busyTill []float64 // per GPU: busy with a suspend/checkpoint until
	warmOn   []int     // per GPU: processes warming there (PerfModel.WarmInterference)
	affected []cluster.JobID
	every    func(*cluster.JobSpec) float64
}

var _ engine.Executor = (*executor)(nil)

func newExecutor(c *cluster.Cluster, perf *PerfModel, cat *model.Catalog, fail *Failures, rng *rand.Rand, h *eventHeap) *executor {
	return &executor{c: c, perf: perf, cat: cat, fail: fail, rng: rng, heap: h,
		gpuJobs: make([][]cluster.JobID, c.NumGPUs()), busyTill: make([]float64, c.NumGPUs()), warmOn: make([]int, c.NumGPUs())}
}

// add registers a submitted job.
func (x *executor) add(id cluster.JobID, spec *cluster.JobSpec) {
	for int(id) >= len(x.truth) {
		x.truth = append(x.truth, nil)
	}
	t := &truth{spec: spec, m: x.cat.Get(spec.Model), t100: -1}
	if x.fail != nil && x.fail.UserErrorFrac > 0 {
		t.userErr = x.rng.Float64() < x.fail.UserErrorFrac
	}
	x.truth[id] = t
}

// addProbe registers the engine's pre-run probe of job parent: it runs the
// parent's code (same model, same hidden user error) on one GPU.
func (x *executor) addProbe(id cluster.JobID, spec *cluster.JobSpec, parent cluster.JobID) {
	for int(id) >= len(x.truth) {
		x.truth = append(x.truth, nil)
	}
	pt := x.truth[parent]
	x.truth[id] = &truth{spec: spec, m: pt.m, t100: -1, userErr: pt.userErr, probe: true}
}

func (x *executor) round(t float64) float64 {
	if x.perf.Compat {
		return math.Round(t)
	}
	return t
}

// settle brings a job's progress up to now.
func (x *executor) settle(t *truth, now float64) {
	if t.holding && t.rate > 0 {
		from := math.Max(t.start, t.at)
		if now > from {
			before := t.done
			t.done = math.Min(t.done+t.rate*(now-from), t.spec.Iters)
			target := math.Min(100, t.spec.Iters)
			if t.t100 < 0 && before < target && t.done >= target-1e-9 {
				t.t100 = from + (target-before)/t.rate
			}
		}
	}
	if now > t.at {
		t.at = now
	}
}

// iterTime is the ground-truth seconds per mini-batch of job t on its GPUs now.
func (x *executor) iterTime(id cluster.JobID, t *truth) float64 {
	spec := t.spec
	if x.perf.Compat {
		return spec.IterTime
	}
	slow := 0.0
	for _, g := range t.gpus {
		f := typeFactor(t.m, x.c.GPUType(g))
		if n := x.warmOn[g]; n > 0 && x.perf.WarmInterference > 0 {
			f /= math.Pow(x.perf.WarmInterference, float64(n))
		}
		// Sharing: the job keeps a fraction of its speed next to each neighbour.
		for _, o := range x.gpuJobs[g] {
			if o == id {
				continue
			}
			f /= x.shareFraction(t, x.truth[o], x.c.GPUType(g).Name)
		}
		slow = math.Max(slow, f) // a gang runs at its slowest worker
	}
	servers, domains := place.Spread(x.c, t.gpus)
	return spec.IterTime * slow * x.perf.locality(t.m, servers, domains) / x.perf.width(len(t.gpus), spec.GPUs)
}

func (x *executor) shareFraction(a, b *truth, gpuType string) float64 {
	fa, fb, ok := x.cat.Colocated(a.m, b.m, gpuType)
	switch {
	case !ok:
		return x.perf.ShareDefault
	case fa == 0 && fb == 0:
		return x.perf.ShareOOM
	}
	return math.Max(fa, 0.01)
}

// Execute implements engine.Executor.
func (x *executor) Execute(now float64, acts []engine.Applied) {
	x.affected = x.affected[:0]
	p := x.perf
	for _, a := range acts {
		t := x.truth[a.Job]
		switch a.Kind {
		case cluster.Start:
			cost := p.Startup
			if a.Checkpointed {
				cost += p.checkpointSeconds(t.m, t.spec)
			}
			x.place(a.Job, t, a.GPUs, now, cost)
			x.launched(a, t, now)
		case cluster.Warm:
			cost := p.Startup
			if a.Checkpointed {
				cost += p.checkpointSeconds(t.m, t.spec)
			}
			x.warm(a.Job, t, a.GPUs, now, cost)
		case cluster.Resume:
			cost := p.ResumeCost
			if a.Remote || a.Checkpointed {
				cost = 2*p.checkpointSeconds(t.m, t.spec) + p.Startup
			}
			if p.Compat {
				cost = 0
			}
			x.place(a.Job, t, a.GPUs, now, cost)
			if a.Remote {
				// keyed to the placement: reschedule bumps ver below
				x.push(item{t: t.start, kind: evActionDone, job: a.Job, ver: t.placements})
			}
			x.launched(a, t, now)
		case cluster.Suspend:
			if a.StillStarting {
				// its process goes on to its first boundary, off its GPUs:
				// the ready event keyed to this placement stays due
				start := t.start
				x.unplace(a.Job, t, now, 0)
				x.startWarming(a.Job, t, a.Prev)
				t.start = start
				break
			}
			hold := p.SuspendCost
			if a.Unaligned {
				hold *= p.UnalignedFactor
			}
			if a.Checkpointed {
				hold += p.checkpointSeconds(t.m, t.spec)
			}
			if p.Compat {
				hold = 0
			}
			x.unplace(a.Job, t, now, hold)
			if !p.Compat { // the compat model reports no progress (as ProfileAfter)
				x.push(item{t: now, kind: evProfile, job: a.Job, ver: t.ver})
			}
		case cluster.Migrate, cluster.Resize:
			ck := p.checkpointSeconds(t.m, t.spec)
			x.unplace(a.Job, t, now, ck)
			x.place(a.Job, t, a.GPUs, now+ck, ck+p.Startup)
			if a.Kind == cluster.Migrate {
				x.push(item{t: t.start, kind: evActionDone, job: a.Job, ver: t.placements})
			}
			x.launched(a, t, now)
		case cluster.Kill:
			if t.holding {
				x.unplace(a.Job, t, now, 0)
			}
			x.stopWarming(a.Job, t)
			x.bump(a.Job, t)
		}
	}
	x.reschedule(now)
}

// place puts a job on GPUs; progress starts after the GPUs are no longer
// busy and cost seconds have passed.
func (x *executor) place(id cluster.JobID, t *truth, gpus []cluster.GPUID, now, cost float64) {
	x.settle(t, now)
	ready := now
	for _, g := range gpus {
		ready = math.Max(ready, x.busyTill[g])
		for _, o := range x.gpuJobs[g] {
			x.affected = append(x.affected, o)
			x.truth[o].resample = true
		}
		x.gpuJobs[g] = insertID(x.gpuJobs[g], id)
	}
	t.gpus = gpus // the engine never modifies an applied action's GPUs (engine.Applied)
	if servers, _ := place.Spread(x.c, gpus); servers > 1 {
		t.spread = true
	}
	t.holding = true
	t.heldAt = now
	t.start = x.round(ready + cost)
	t.rate = 0
	x.bump(id, t)
	t.placements++
	x.affected = append(x.affected, id)
	if x.fail != nil && x.fail.InfraPerGPUHour > 0 {
		// Exponential time to an infrastructure failure while holding GPUs.
		rate := x.fail.InfraPerGPUHour * float64(len(gpus)) / 3600
		x.push(item{t: x.round(t.start + x.rng.ExpFloat64()/rate), kind: evFail, job: id, ver: t.placements})
	}
}

// launched schedules the first boundary of a placement's new process
// (engine Applied.NewProcess): when its progress starts, after its start-up.
func (x *executor) launched(a engine.Applied, t *truth, now float64) {
	if !a.NewProcess {
		return
	}
	t.procAt = now
	x.push(item{t: t.start, kind: evReady, job: a.Job, ver: t.placements})
}

// warm starts a job's process on gpus it does not hold (engine Warm): it
// is ready after cost seconds; meanwhile it slows the jobs on those GPUs.
func (x *executor) warm(id cluster.JobID, t *truth, gpus []cluster.GPUID, now, cost float64) {
	x.settle(t, now)
	x.bump(id, t)
	t.placements++
	t.procAt = now
	t.start = x.round(now + cost)
	x.startWarming(id, t, gpus)
	x.push(item{t: t.start, kind: evReady, job: id, ver: t.placements})
}

// startWarming puts a job's starting process on gpus, off them.
func (x *executor) startWarming(id cluster.JobID, t *truth, gpus []cluster.GPUID) {
	t.warming, t.warmGPUs, t.warmGPUs0 = true, gpus, gpus[0]
	for _, g := range gpus {
		x.warmOn[g]++
		x.affected = append(x.affected, x.gpuJobs[g]...)
	}
}

// stopWarming ends a job's warming process (ready, or killed).
func (x *executor) stopWarming(id cluster.JobID, t *truth) {
	if !t.warming {
		return
	}
	for _, g := range t.warmGPUs {
		x.warmOn[g]--
		x.affected = append(x.affected, x.gpuJobs[g]...)
	}
	t.warming, t.warmGPUs = false, nil
}

// unplace takes a job off its GPUs, which stay busy for hold seconds.
func (x *executor) unplace(id cluster.JobID, t *truth, now, hold float64) {
	x.settle(t, now)
	for _, g := range t.gpus {
		x.gpuJobs[g] = removeID(x.gpuJobs[g], id)
		x.busyTill[g] = math.Max(x.busyTill[g], now+hold)
		x.affected = append(x.affected, x.gpuJobs[g]...)
		for _, o := range x.gpuJobs[g] {
			x.truth[o].resample = true
		}
	}
	t.busy += float64(len(t.gpus)) * (now - t.heldAt)
	t.gpus = nil
	t.holding = false
	t.rate = 0
	if t.sampleDue > now {
		// the placement's sample was still to come: it never will
		t.sampledRate, t.sampledGPUs = -1, t.sampledGPUs[:0]
	}
	x.bump(id, t)
}

// bump moves a job's version, which voids the events keyed to the old one
// (its finish, profile samples, user-error failure); its finish leaves the
// queue at once (eventHeap.retire).
func (x *executor) bump(id cluster.JobID, t *truth) {
	t.ver++
	x.heap.retire(id)
}

// reschedule recomputes the rate of every affected job and schedules its
// finish and a profile sample.
func (x *executor) reschedule(now float64) {
	if len(x.affected) == 0 {
		return
	}
	slices.Sort(x.affected)
	x.affected = slices.Compact(x.affected)
	for _, id := range x.affected {
		t := x.truth[id]
		if !t.holding {
			continue
		}
		x.settle(t, now)
		it := x.iterTime(id, t)
		rate := 0.0
		if it > 0 {
			rate = 1 / it
		}
		if rate == t.rate && t.start <= now && t.ver > 0 {
			// unchanged: keep the scheduled finish; a new neighbour is
			// still reported (live, every mini-batch reports it)
			if t.resample && x.perf.ProfileAfter > 0 && !x.perf.Compat {
				t.sampleDue = now + x.perf.ProfileAfter
				x.push(item{t: t.sampleDue, kind: evProfile, job: id, ver: t.ver})
			}
			t.resample = false
			continue
		}
		t.resample = false
		t.rate = rate
		x.bump(id, t)
		from := math.Max(t.start, now)
		if rate > 0 {
			// (a user error fails every attempt: a job that failed exactly at
			// its error point and restarted there fails again)
			failing := t.userErr && t.done <= x.fail.UserErrorIter
			if !(failing && t.probe) { // a pre-run with the job's error fails at its one mini-batch
				x.push(item{t: x.round(from + (t.spec.Iters-t.done)/rate), kind: evFinish, job: id, ver: t.ver})
			}
			if failing {
				x.push(item{t: x.round(from + (x.fail.UserErrorIter-t.done)/rate), kind: evFail, job: id, ver: t.ver, user: true})
			}
		}
		if x.perf.ProfileAfter > 0 && !x.perf.Compat && (rate != t.sampledRate || !slices.Equal(t.gpus, t.sampledGPUs)) {
			t.sampledRate, t.sampledGPUs = rate, append(t.sampledGPUs[:0], t.gpus...)
			t.sampleDue = from + x.perf.ProfileAfter
			x.push(item{t: t.sampleDue, kind: evProfile, job: id, ver: t.ver})
		}
		x.nextReport(id, t, from)
	}
	x.affected = x.affected[:0]
}

// nextReport schedules a running job's next periodic progress report, at
// its next multiple of ReportEvery mini-batches, if that comes before the end.
func (x *executor) nextReport(id cluster.JobID, t *truth, from float64) {
	if x.every == nil || t.rate <= 0 {
		return
	}
	e := x.every(t.spec)
	if e <= 0 {
		return
	}
	next := (math.Floor(t.done/e+1e-6) + 1) * e
	if next >= t.spec.Iters {
		return
	}
	x.push(item{t: from + (next-t.done)/t.rate, kind: evProfile, job: id, ver: t.ver, periodic: true})
}

func (x *executor) push(it item) { x.heap.push(it) }

func insertID(s []cluster.JobID, id cluster.JobID) []cluster.JobID {
	i, found := slices.BinarySearch(s, id)
	if found {
		return s
	}
	return slices.Insert(s, i, id)
}

func removeID(s []cluster.JobID, id cluster.JobID) []cluster.JobID {
	if i, found := slices.BinarySearch(s, id); found {
		return slices.Delete(s, i, i+1)
	}
	return s
}
