package sim

import (
	"fmt"
	"math"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/model"
)

// PerfModel is the simulator's hidden ground truth: how fast a job trains
// where it runs and what each mechanism costs. Policies never see it; they
// see only the profile samples it produces. Every parameter names its source.
type PerfModel struct {
	// Name identifies the model in results ("gandiva-perf/v1" or "tiresias-compat").
	Name string

	// CommBase and CommSkew set the slowdown of a gang spread over several
	// servers: iteration time × (1 + CommBase + CommSkew × skew), where skew
	// is the model's largest-tensor share (Tiresias model_tensors.csv).
	// Source: Tiresias NSDI'19 §2 and its talk ("communication taking 58%
	// on average" across 4-GPU servers on 56 Gbps InfiniBand; skewed models
	// such as VGG suffer most): VGG19 (skew 0.72) ≈ 2.1×, ResNet-50 (0.11) ≈ 1.2×.
	CommBase, CommSkew float64
	// CommDomain is the extra slowdown factor per unit of (skew + 0.1) when
	// a gang crosses InfiniBand domains (Ethernet between racks). Source:
	// Tiresias' talk ("high-speed network is rack-localized"); the factor is our
	// assumption, twice the cross-server coefficient.
	CommDomain float64
	// ShareDefault is the fraction of its solo speed a job keeps on a shared
	// GPU when the catalog has no co-location measurement for the pair: plain
	// alternation (0.5) less a little contention. Gavel's data (k80/p100/v100
	// pairs) is used whenever it covers the pair.
	ShareDefault float64
	// ShareOOM is the fraction kept by a pair that Gavel could not run
	// together (throughput 0): the jobs thrash.
	ShareOOM float64
	// ScaleExp: an elastic job on w GPUs instead of its requested g runs at
	// (w/g)^ScaleExp of its speed. Source: Gandiva OSDI'18 (grow-shrink);
	// the exponent is an assumption (90% scaling efficiency).
	ScaleExp float64

	// Startup is the seconds a process needs before its first mini-batch
	// (container, framework, data loader). Charged on start, restart after a
	// checkpoint, migration and resize. Measured live figures are in
	// docs/PERFORMANCE.md; 10 s is typical of PyTorch jobs.
	Startup float64
	// SuspendCost and ResumeCost are seconds of a suspend or resume aligned
	// to a mini-batch boundary (state copied between GPU and host memory).
	// Source: Gandiva OSDI'18: 50–250 ms; we take 150 ms.
	SuspendCost, ResumeCost float64
	// UnalignedFactor multiplies SuspendCost for a suspend not aligned to a
	// boundary (the whole peak memory is copied). Source: Gandiva OSDI'18, ~50×.
	UnalignedFactor float64
	// CheckpointGBps is the bandwidth to shared storage for checkpoints, in
	// GB/s. Checkpoint size is 3 × the model's parameters (weights plus
	// optimizer state) or the boundary memory, whichever is larger.
	CheckpointGBps float64

	// ProfileAfter is how long after a job starts progressing on a new
	// placement its runtime reports a profile sample (the in-job client
	// reports every mini-batch; the simulator samples once, then on changes).
	ProfileAfter float64

	// StartUps makes the simulated executor report each new process's
	// first mini-batch boundary (EvReady) when its Startup ends, as the live
	// agents do, so that the engine and the policies know the phase
	// (engine Options.StartUps). Off in the default model, whose runs keep
	// the results they had before start-ups were known.
	StartUps bool
	// WarmPerNode, WarmPerGPU and ContextGiB turn on the engine's warm
	// starts (engine.WarmOptions; WarmPerNode 0: none; they need StartUps).
	WarmPerNode, WarmPerGPU int
	ContextGiB              float64
	// WarmInterference is the fraction of its speed a job keeps on a GPU
	// where another process is warming (starting up beside it): the
	// warming process's first mini-batch runs on the GPU (cuDNN's
	// autotuning tries kernels there) and its start-up takes CPU. Not
	// measured; an assumption (0.9), charged for the whole start-up.
	WarmInterference float64

	// Compat: Tiresias simulator semantics (no locality, no costs, integer seconds).
	Compat bool
}

// DefaultPerf is Gandiva's performance model v1.
func DefaultPerf() PerfModel {
	return PerfModel{
		Name:     "gandiva-perf/v1",
		CommBase: 0.05, CommSkew: 1.4, CommDomain: 2.0,
		ShareDefault: 0.48, ShareOOM: 0.1, ScaleExp: 0.9,
		Startup: 10, SuspendCost: 0.15, ResumeCost: 0.15, UnalignedFactor: 50, CheckpointGBps: 1.0,
		ProfileAfter: 20,
	}
}

// H100Perf is the model calibrated on one NVIDIA H100 80GB HBM3 with
// PyTorch ResNet-50 at batch 64 (docs/measurements/h100-2026-11-24.md,
// section 1; docs/SIMULATOR.md lists each figure against the model's):
// start-ups of 37.1 s to the first mini-batch boundary, reported to the
// engine (StartUps) and overlapped by warm starts (at most 4 starting up
// per server, 4 warm processes per GPU, each keeping its 834 MiB CUDA
// context); suspend 61 ms and resume 15.4 ms at a boundary; an unaligned
// suspend (SIGSTOP) 0.2 ms; checkpoints at 0.45 GB/s (195 MiB in 0.43 s).
// Packing ResNet-50 b64 with itself on an H100 keeps 0.48 and 0.46 of its
// speed (the model catalog's H100 measurements), so introspection reverts it.
func H100Perf() PerfModel {
	p := DefaultPerf()
	p.Name = "gandiva-perf/h100"
	p.Startup = 37.1
	p.SuspendCost, p.ResumeCost = 0.061, 0.0154
	p.UnalignedFactor = 0.0002 / 0.061
	p.CheckpointGBps = 0.45
	p.StartUps = true
	p.WarmPerNode, p.WarmPerGPU, p.ContextGiB = 4, 4, 834.0/1024
	p.WarmInterference = 0.9
	return p
}

// H100ColdPerf is H100Perf without the start-up phase: the measured
// costs, with every start-up paid inside its placement and none
// overlapped, as the engine ran before it knew start-ups (for comparison).
func H100ColdPerf() PerfModel {
	p := H100Perf()
	p.Name = "gandiva-perf/h100-cold"
	p.StartUps = false
	p.WarmPerNode, p.WarmPerGPU, p.ContextGiB, p.WarmInterference = 0, 0, 0, 0
	return p
}

// PerfModels lists the named performance models `gandiva sim --perf` takes.
func PerfModels() []string { return []string{"default", "h100", "h100-cold"} }

// LookupPerf returns a named performance model (PerfModels).
func LookupPerf(name string) (PerfModel, error) {
	switch name {
	case "", "default":
		return DefaultPerf(), nil
	case "h100":
		return H100Perf(), nil
	case "h100-cold":
		return H100ColdPerf(), nil
	}
	return PerfModel{}, fmt.Errorf("performance model %q: use default, h100 or h100-cold", name)
}

// CompatPerf is the Tiresias simulator's model: a job runs exactly its
// duration on any GPUs; nothing costs anything; times are whole seconds.
func CompatPerf() PerfModel {
	return PerfModel{Name: "tiresias-compat", ShareDefault: 0.5, ShareOOM: 0.5, ScaleExp: 1, ProfileAfter: 20, Compat: true}
}

// typeFactor is the iteration-time multiplier of model m on GPU type t.
func typeFactor(m *model.Model, t *cluster.GPUType) float64 {
	if m != nil {
		if s, ok := m.SpeedOn(t.Name, cluster.ReferenceGPU); ok {
			return 1 / s
		}
	}
	return 1 / t.Speed
}

// locality is the iteration-time multiplier of a gang spanning servers and domains.
func (p *PerfModel) locality(m *model.Model, servers, domains int) float64 {
	if p.Compat || servers <= 1 {
		return 1
	}
	skew := 0.0
	if m != nil {
		skew = m.Skew
	}
	f := 1 + p.CommBase + p.CommSkew*skew
	if domains > 1 {
		f *= 1 + p.CommDomain*(skew+0.1)
	}
	return f
}

// width is the speed multiplier of an elastic job on w GPUs instead of g.
func (p *PerfModel) width(w, g int) float64 {
	if w == g || g <= 0 {
		return 1
	}
	return math.Pow(float64(w)/float64(g), p.ScaleExp)
}

// checkpointSeconds is the time to write (or read) a job's checkpoint.
func (p *PerfModel) checkpointSeconds(m *model.Model, spec *cluster.JobSpec) float64 {
	if p.Compat || p.CheckpointGBps <= 0 {
		return 0
	}
	gb := spec.MemGiB * 0.05
	if m != nil {
		gb = math.Max(gb, 3*m.SizeMB/1024)
	}
	return gb / p.CheckpointGBps
}
