package cluster

import (
	"fmt"
	"sort"
	"strings"
)

// GPUType describes one GPU generation.
//
// Speed is the generic training speed relative to the reference GPU (V100 =
// 1.0), used for models that have no measured per-type throughput in the model
// catalog. MemGiB is the device memory.
type GPUType struct {
	Name   string  `yaml:"name" json:"name"`
	Speed  float64 `yaml:"speed" json:"speed"`
	MemGiB float64 `yaml:"mem_gib" json:"mem_gib"`
}

// ReferenceGPU is the GPU type against which work is normalised: one unit of
// work is one second of a job's training on one reference GPU, alone, with
// perfect locality. Cluster throughput is reported in these units per second.
const ReferenceGPU = "V100"

// KnownGPUTypes returns the built-in GPU generations, sorted by name.
//
// Sources of the relative speeds (V100 = 1):
//   - K80, P40, P100: the Gandiva_fair seed (003) table of mini-batch-time
//     speedups; we take ResNet-50's column, the median model of that table:
//     K80→P40 3.17×, K80→P100 3.34×, K80→V100 5.14×, so K80 = 1/5.14 = 0.195,
//     P40 = 3.17/5.14 = 0.617, P100 = 3.34/5.14 = 0.650.
//   - A100 = 2.2 and H100 = 4.4: vendor-published training speed-ups over
//     V100 for ResNet-50-class models (A100 ≈ 2.2× V100 in mixed precision;
//     H100 ≈ 2× A100). These are configuration, not measurements of ours;
//     override them in a cluster spec's gpu_types section.
//
// Memory is each product's most common variant.
func KnownGPUTypes() []GPUType {
	return []GPUType{
		{Name: "A100", Speed: 2.2, MemGiB: 40},
		{Name: "H100", Speed: 4.4, MemGiB: 80},
		{Name: "K80", Speed: 1 / 5.14, MemGiB: 12},
		{Name: "P100", Speed: 3.34 / 5.14, MemGiB: 16},
		{Name: "P40", Speed: 3.17 / 5.14, MemGiB: 24},
		{Name: "V100", Speed: 1.0, MemGiB: 16},
	}
}

// LookupGPUType finds a built-in GPU type by name, case-insensitively.
func LookupGPUType(name string) (GPUType, error) {
	for _, t := range KnownGPUTypes() {
		if strings.EqualFold(t.Name, name) {
			return t, nil
		}
	}
	names := make([]string, 0, 6)
	for _, t := range KnownGPUTypes() {
		names = append(names, t.Name)
	}
	sort.Strings(names)
	return GPUType{}, fmt.Errorf("unknown GPU type %q (known: %s; define others under gpu_types)", name, strings.Join(names, ", "))
}
