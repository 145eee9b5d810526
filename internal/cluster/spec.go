package cluster

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Spec is the YAML form of a cluster:
//
//	name: lab
//	gpu_types:                  # optional: override or add GPU generations
//	  - {name: A100, speed: 2.2, mem_gib: 80}
//	servers:
//	  - {type: V100, count: 4, gpus: 8, domain: 0, rack: r0, host_mem_gib: 512}
//	  - {type: K80, count: 8, gpus: 4, domain: 1}
type Spec struct {
	Name     string       `yaml:"name"`
	GPUTypes []GPUType    `yaml:"gpu_types"`
	Servers  []ServerSpec `yaml:"servers"`
}

// ServerSpec is one group of identical servers in a Spec.
type ServerSpec struct {
	Type       string  `yaml:"type"`
	Count      int     `yaml:"count"`
	GPUs       int     `yaml:"gpus"`
	Domain     int     `yaml:"domain"`
	Rack       string  `yaml:"rack"`
	HostMemGiB float64 `yaml:"host_mem_gib"`
	CPUs       int     `yaml:"cpus"`
	NamePrefix string  `yaml:"name_prefix"`
}

// DefaultHostMemGiB is a server's host memory when a spec does not say.
const DefaultHostMemGiB = 256

// Build turns a Spec into a Cluster; errors name the offending server group.
func (s *Spec) Build() (*Cluster, error) {
	types := KnownGPUTypes()
	for i, t := range s.GPUTypes {
		if t.Name == "" {
			return nil, fmt.Errorf("gpu_types[%d]: name is required", i)
		}
		if t.Speed <= 0 {
			return nil, fmt.Errorf("gpu_types[%d] (%s): speed must be positive", i, t.Name)
		}
		if t.MemGiB <= 0 {
			return nil, fmt.Errorf("gpu_types[%d] (%s): mem_gib must be positive", i, t.Name)
		}
		replaced := false
		for j := range types {
			if strings.EqualFold(types[j].Name, t.Name) {
				types[j] = t
				replaced = true
			}
		}
		if !replaced {
			types = append(types, t)
		}
	}
	if len(s.Servers) == 0 {
		return nil, errors.New("servers: at least one server group is required")
	}
	name := s.Name
	if name == "" {
		name = "cluster"
	}
	b := NewBuilder(name, types)
	for i, g := range s.Servers {
		if g.Type == "" {
			return nil, fmt.Errorf("servers[%d]: type is required", i)
		}
		if idx := indexType(types, g.Type); idx >= 0 {
			g.Type = types[idx].Name
		} else {
			return nil, fmt.Errorf("servers[%d]: unknown GPU type %q (define it under gpu_types)", i, g.Type)
		}
		mem := g.HostMemGiB
		if mem == 0 {
			mem = DefaultHostMemGiB
		}
		if mem < 0 {
			return nil, fmt.Errorf("servers[%d]: host_mem_gib must not be negative", i)
		}
		b.Add(ServerGroup{Type: g.Type, Count: g.Count, GPUs: g.GPUs, Domain: g.Domain, Rack: g.Rack,
			HostMemGiB: mem, CPUs: g.CPUs, NamePrefix: g.NamePrefix})
		if b.err != nil {
			return nil, fmt.Errorf("servers[%d]: %w", i, b.err)
		}
	}
	return b.Build()
}

func indexType(types []GPUType, name string) int {
	for i := range types {
		if strings.EqualFold(types[i].Name, name) {
			return i
		}
	}
	return -1
}

// ParseYAML reads a YAML cluster spec. Unknown keys are errors, so typos are caught.
func ParseYAML(r io.Reader) (*Cluster, error) {
	dec := yaml.NewDecoder(r)
	dec.KnownFields(true)
	var s Spec
	if err := dec.Decode(&s); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty cluster spec")
		}
		return nil, err
	}
	return s.Build()
}

// tiresiasColumns are the columns of the Tiresias simulator's cluster spec CSV.
var tiresiasColumns = []string{"num_switch", "num_node_p_switch", "num_gpu_p_node", "num_cpu_p_node", "mem_p_node"}

// ParseTiresiasCSV reads the Tiresias simulator's cluster spec CSV
// (num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,mem_p_node):
// one switch per InfiniBand domain, GPUs of the reference type.
func ParseTiresiasCSV(name string, r io.Reader) (*Cluster, error) {
	cr := csv.NewReader(r)
	cr.TrimLeadingSpace = true
	recs, err := cr.ReadAll()
	if err != nil {
		return nil, err
	}
	if len(recs) < 2 {
		return nil, errors.New("line 2: expected a header and one row of values")
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[strings.TrimSpace(h)] = i
	}
	for _, c := range tiresiasColumns {
		if _, ok := col[c]; !ok {
			return nil, fmt.Errorf("line 1: missing column %q", c)
		}
	}
	row := recs[1]
	v := map[string]int{}
	for _, c := range tiresiasColumns {
		n, err := strconv.Atoi(strings.TrimSpace(row[col[c]]))
		if err != nil {
			return nil, fmt.Errorf("line 2, field %s: %w", c, err)
		}
		if n <= 0 {
			return nil, fmt.Errorf("line 2, field %s: must be positive, got %d", c, n)
		}
		v[c] = n
	}
	if v["num_switch"]*v["num_node_p_switch"] > 1<<20 {
		return nil, fmt.Errorf("line 2: %d servers is more than this simulator handles", v["num_switch"]*v["num_node_p_switch"])
	}
	b := NewBuilder(name, nil)
	for sw := 0; sw < v["num_switch"]; sw++ {
		b.Add(ServerGroup{Type: ReferenceGPU, Count: v["num_node_p_switch"], GPUs: v["num_gpu_p_node"], Domain: sw,
			HostMemGiB: float64(v["mem_p_node"]), CPUs: v["num_cpu_p_node"], Rack: fmt.Sprintf("sw%d", sw),
			NamePrefix: fmt.Sprintf("sw%d-n", sw)})
	}
	return b.Build()
}

// Preset describes a named, built-in cluster.
type Preset struct {
	Name string
	Doc  string
	Spec Spec
}

// Presets returns the built-in clusters, sorted by name.
func Presets() []Preset {
	ps := []Preset{
		{Name: "philly", Doc: "Philly-sized: 352 servers × 8 V100 in 11 InfiniBand domains of 32 servers (2,816 GPUs)",
			Spec: Spec{Servers: domains(11, 32, "V100", 8)}},
		{Name: "gandiva-180", Doc: "the Gandiva paper's 180-GPU cluster: 45 four-GPU servers, 24 P100 and 21 P40, 3 domains",
			Spec: Spec{Servers: []ServerSpec{
				{Type: "P100", Count: 15, GPUs: 4, Domain: 0}, {Type: "P100", Count: 9, GPUs: 4, Domain: 1},
				{Type: "P40", Count: 6, GPUs: 4, Domain: 1}, {Type: "P40", Count: 15, GPUs: 4, Domain: 2}}}},
		{Name: "fair-hetero", Doc: "Gandiva_fair's heterogeneous cluster: 12 V100, 24 P100 and 128 K80 in four-GPU servers",
			Spec: Spec{Servers: []ServerSpec{
				{Type: "V100", Count: 3, GPUs: 4, Domain: 0}, {Type: "P100", Count: 6, GPUs: 4, Domain: 0},
				{Type: "K80", Count: 32, GPUs: 4, Domain: 1}}}},
		{Name: "philly-sample", Doc: "the embedded Philly sample's cluster: 8 servers × 8 V100 in 2 InfiniBand domains (64 GPUs)",
			Spec: Spec{Servers: domains(2, 4, "V100", 8)}},
		{Name: "tiresias-n2g4", Doc: "Tiresias spec n2g4: 2 servers × 4 GPUs", Spec: Spec{Servers: domains(1, 2, "V100", 4)}},
		{Name: "tiresias-n4g4", Doc: "Tiresias spec n4g4: 4 servers × 4 GPUs", Spec: Spec{Servers: domains(1, 4, "V100", 4)}},
		{Name: "tiresias-n8g8", Doc: "Tiresias spec n8g8: 8 servers × 8 GPUs (64 GPUs)", Spec: Spec{Servers: domains(1, 8, "V100", 8)}},
		{Name: "p100x4", Doc: "one server with 4 P100 (Gandiva's time-slicing microbenchmark)", Spec: Spec{Servers: domains(1, 1, "P100", 4)}},
		{Name: "p100x1", Doc: "one server with 1 P100 (Gandiva's packing microbenchmark)", Spec: Spec{Servers: domains(1, 1, "P100", 1)}},
		{Name: "h100x1", Doc: "one server with 1 H100 80GB (the machine of the H100 measurements; use with gandiva sim --perf h100)",
			Spec: Spec{Servers: domains(1, 1, "H100", 1)}},
		{Name: "p40x16", Doc: "4 servers × 4 P40 (Gandiva's AutoML experiment)", Spec: Spec{Servers: domains(1, 4, "P40", 4)}},
		{Name: "big-8000", Doc: "1,000 servers × 8 V100 in 25 domains (8,000 GPUs), for benchmarks", Spec: Spec{Servers: domains(25, 40, "V100", 8)}},
	}
	for i := range ps {
		ps[i].Spec.Name = ps[i].Name
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].Name < ps[j].Name })
	return ps
}

func domains(n, perDomain int, typ string, gpus int) []ServerSpec {
	out := make([]ServerSpec, n)
	for d := range out {
		out[d] = ServerSpec{Type: typ, Count: perDomain, GPUs: gpus, Domain: d, Rack: fmt.Sprintf("d%d", d), NamePrefix: fmt.Sprintf("d%d-n", d)}
	}
	return out
}

// Load resolves a cluster argument: a preset name, a YAML file (.yaml, .yml)
// or a Tiresias spec CSV (.csv). Errors name the file.
func Load(arg string) (*Cluster, error) {
	for _, p := range Presets() {
		if p.Name == arg {
			return p.Spec.Build()
		}
	}
	data, err := os.ReadFile(arg)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			names := []string{}
			for _, p := range Presets() {
				names = append(names, p.Name)
			}
			return nil, fmt.Errorf("cluster %q: no such file and no such preset (presets: %s)", arg, strings.Join(names, ", "))
		}
		return nil, fmt.Errorf("cluster spec %q: %w", arg, err)
	}
	var c *Cluster
	base := arg
	if i := strings.LastIndexAny(base, `/\`); i >= 0 {
		base = base[i+1:]
	}
	if strings.HasSuffix(strings.ToLower(arg), ".csv") {
		c, err = ParseTiresiasCSV(strings.TrimSuffix(base, ".csv"), bytes.NewReader(data))
	} else {
		c, err = ParseYAML(bytes.NewReader(data))
	}
	if err != nil {
		return nil, fmt.Errorf("cluster spec %q: %w", arg, err)
	}
	return c, nil
}
