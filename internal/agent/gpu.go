package agent

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/cluster"
)

// ParseFakeGPUs reads a fake GPU spec such as "4xV100" (count x type; the
// type must be a known one or carry its memory: "2xL4:24").
func ParseFakeGPUs(spec string) ([]api.GPU, error) {
	n, typ, ok := strings.Cut(strings.TrimSpace(spec), "x")
	if !ok {
		return nil, fmt.Errorf("--fake-gpus %q: want COUNTxTYPE, such as 4xV100", spec)
	}
	count, err := strconv.Atoi(n)
	if err != nil || count < 1 || count > cluster.MaxGPUsPerServer {
		return nil, fmt.Errorf("--fake-gpus %q: count must be 1 to %d", spec, cluster.MaxGPUsPerServer)
	}
	typ, memStr, hasMem := strings.Cut(typ, ":")
	mem := 0.0
	if hasMem {
		if mem, err = strconv.ParseFloat(memStr, 64); err != nil || mem <= 0 {
			return nil, fmt.Errorf("--fake-gpus %q: memory %q must be a positive number of GiB", spec, memStr)
		}
	}
	if t, err := cluster.LookupGPUType(typ); err == nil {
		typ = t.Name
		if !hasMem {
			mem = t.MemGiB
		}
	} else if !hasMem {
		return nil, fmt.Errorf("--fake-gpus %q: %v; or give its memory: %dx%s:GiB", spec, err, count, typ)
	}
	out := make([]api.GPU, count)
	for i := range out {
		out[i] = api.GPU{Index: i, Type: typ, MemGiB: mem, UUID: fmt.Sprintf("fake-%s-%d", strings.ToLower(typ), i)}
	}
	return out, nil
}

// DiscoverGPUs lists the node's NVIDIA GPUs with nvidia-smi. It returns
// (nil, nil) when nvidia-smi is not installed.
func DiscoverGPUs(ctx context.Context) ([]api.GPU, error) {
	path, err := exec.LookPath("nvidia-smi")
	if err != nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--query-gpu=index,name,memory.total,uuid", "--format=csv,noheader,nounits").Output()
	if err != nil {
		return nil, fmt.Errorf("nvidia-smi: %w", err)
	}
	return parseNvidiaSMI(string(out))
}

// parseNvidiaSMI reads nvidia-smi's CSV (index, name, memory MiB, uuid).
func parseNvidiaSMI(out string) ([]api.GPU, error) {
	var gpus []api.GPU
	sc := bufio.NewScanner(strings.NewReader(out))
	for line := 1; sc.Scan(); line++ {
		t := strings.TrimSpace(sc.Text())
		if t == "" {
			continue
		}
		f := strings.Split(t, ",")
		if len(f) < 4 {
			return nil, fmt.Errorf("nvidia-smi line %d: want index, name, memory, uuid: %q", line, t)
		}
		idx, err := strconv.Atoi(strings.TrimSpace(f[0]))
		if err != nil {
			return nil, fmt.Errorf("nvidia-smi line %d: index: %w", line, err)
		}
		mib, err := strconv.ParseFloat(strings.TrimSpace(f[2]), 64)
		if err != nil {
			return nil, fmt.Errorf("nvidia-smi line %d: memory: %w", line, err)
		}
		gpus = append(gpus, api.GPU{Index: idx, Type: gpuType(strings.TrimSpace(f[1])), MemGiB: mib / 1024, UUID: strings.TrimSpace(f[3])})
	}
	for i := range gpus {
		if gpus[i].Index != i {
			return nil, fmt.Errorf("nvidia-smi: GPU indices are not 0..%d in order", len(gpus)-1)
		}
	}
	return gpus, nil
}

// gpuType maps a product name ("NVIDIA H100 80GB HBM3", "Tesla V100-SXM2-16GB")
// to a known type name, or a compact form of the name.
func gpuType(name string) string {
	up := strings.ToUpper(name)
	for _, t := range []string{"H200", "H100", "A100", "V100", "P100", "P40", "K80"} {
		if strings.Contains(up, t) {
			return t
		}
	}
	s := strings.NewReplacer("NVIDIA ", "", "TESLA ", "", "GEFORCE ", "", " ", "-").Replace(up)
	if s == "" {
		return "GPU"
	}
	return s
}

// hostMemGiB is half the machine's memory: what suspended jobs' state may
// take in host memory (the rest is the jobs' and the system's).
func hostMemGiB() float64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 16
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) >= 2 && fs[0] == "MemTotal:" {
			kb, err := strconv.ParseFloat(fs[1], 64)
			if err == nil {
				return kb / (1 << 20) / 2
			}
		}
	}
	return 16
}
