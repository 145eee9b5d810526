package cluster

import (
	"fmt"
	"sort"

	"github.com/gandiva-sched/gandiva/internal/plural"
)

// GPUID indexes a GPU across the whole cluster: server s owns GPUs
// [Servers[s].FirstGPU, Servers[s].FirstGPU+Servers[s].NumGPUs).
type GPUID int32

// ServerID indexes Cluster.Servers.
type ServerID int32

// MaxClusterGPUs bounds a cluster's size, so a typo in a spec cannot
// exhaust memory.
const MaxClusterGPUs = 1 << 20

// MaxGPUsPerServer bounds a server's GPU count so that free GPUs fit a uint64 mask.
const MaxGPUsPerServer = 64

// Server is one machine with GPUs of one type.
type Server struct {
	ID       ServerID
	Name     string
	Rack     int // index into Cluster.Racks
	Domain   int // InfiniBand domain (switch) index; racks never span domains
	Type     int // index into Cluster.Types
	NumGPUs  int
	FirstGPU GPUID
	// HostMemGiB bounds the suspended jobs' state kept in this server's host
	// memory; what does not fit is checkpointed.
	HostMemGiB float64
	CPUs       int
}

// Cluster is the static topology. It only grows (live agents register new
// servers); servers never move between racks or domains.
type Cluster struct {
	Name    string
	Types   []GPUType
	Servers []Server
	Racks   []string // rack names, index = Server.Rack
	// Domains lists the servers of each InfiniBand domain in ID order.
	Domains [][]ServerID
	// gpuServer maps a GPUID to its server.
	gpuServer []ServerID
}

// ServerOf returns the server that owns g.
func (c *Cluster) ServerOf(g GPUID) ServerID { return c.gpuServer[g] }

// NumGPUs is the total GPU count.
func (c *Cluster) NumGPUs() int { return len(c.gpuServer) }

// TypeOf returns the GPU type of server s.
func (c *Cluster) TypeOf(s ServerID) *GPUType { return &c.Types[c.Servers[s].Type] }

// GPUType returns the type of GPU g.
func (c *Cluster) GPUType(g GPUID) *GPUType { return c.TypeOf(c.gpuServer[g]) }

// TypeIndex returns the index of the named type, or -1.
func (c *Cluster) TypeIndex(name string) int {
	for i := range c.Types {
		if c.Types[i].Name == name {
			return i
		}
	}
	return -1
}

// ServerGroup describes identical servers for Builder.Add.
type ServerGroup struct {
	Type       string
	Count      int
	GPUs       int
	Rack       string // empty: one rack per domain, named after it
	Domain     int
	HostMemGiB float64
	CPUs       int
	NamePrefix string
}

// Builder assembles a Cluster. Its zero value is not usable; call NewBuilder.
type Builder struct {
	c      *Cluster
	racks  map[string]int
	nextID map[string]int
	err    error
}

// NewBuilder starts a cluster with the given GPU types (KnownGPUTypes when nil).
func NewBuilder(name string, types []GPUType) *Builder {
	if types == nil {
		types = KnownGPUTypes()
	}
	return &Builder{
		c:      &Cluster{Name: name, Types: append([]GPUType(nil), types...)},
		racks:  map[string]int{},
		nextID: map[string]int{},
	}
}

// Add appends g.Count servers. The first error sticks and is returned by Build.
func (b *Builder) Add(g ServerGroup) *Builder {
	if b.err != nil {
		return b
	}
	t := b.c.TypeIndex(g.Type)
	if t < 0 {
		if kt, err := LookupGPUType(g.Type); err == nil {
			b.c.Types = append(b.c.Types, kt)
			t = len(b.c.Types) - 1
		} else {
			b.err = err
			return b
		}
	}
	switch {
	case g.Count <= 0:
		b.err = fmt.Errorf("server group of type %s: count must be positive, got %d", g.Type, g.Count)
		return b
	case g.GPUs <= 0 || g.GPUs > MaxGPUsPerServer:
		b.err = fmt.Errorf("server group of type %s: gpus per server must be in 1..%d, got %d", g.Type, MaxGPUsPerServer, g.GPUs)
		return b
	case g.Domain < 0:
		b.err = fmt.Errorf("server group of type %s: domain must not be negative, got %d", g.Type, g.Domain)
		return b
	}
	if len(b.c.gpuServer)+g.Count*g.GPUs > MaxClusterGPUs || g.Count > MaxClusterGPUs {
		b.err = fmt.Errorf("server group of type %s: %d × %d GPUs makes the cluster larger than %d GPUs", g.Type, g.Count, g.GPUs, MaxClusterGPUs)
		return b
	}
	rack := g.Rack
	if rack == "" {
		rack = fmt.Sprintf("rack-%d", g.Domain)
	}
	ri, ok := b.racks[rack]
	if !ok {
		ri = len(b.c.Racks)
		b.racks[rack] = ri
		b.c.Racks = append(b.c.Racks, rack)
	}
	prefix := g.NamePrefix
	if prefix == "" {
		prefix = rack + "-n"
	}
	for i := 0; i < g.Count; i++ {
		id := ServerID(len(b.c.Servers))
		n := b.nextID[prefix]
		b.nextID[prefix] = n + 1
		b.c.Servers = append(b.c.Servers, Server{
			ID: id, Name: fmt.Sprintf("%s%d", prefix, n), Rack: ri, Domain: g.Domain, Type: t,
			NumGPUs: g.GPUs, FirstGPU: GPUID(len(b.c.gpuServer)), HostMemGiB: g.HostMemGiB, CPUs: g.CPUs,
		})
		for j := 0; j < g.GPUs; j++ {
			b.c.gpuServer = append(b.c.gpuServer, id)
		}
	}
	return b
}

// Build validates and returns the cluster.
func (b *Builder) Build() (*Cluster, error) {
	if b.err != nil {
		return nil, b.err
	}
	c := b.c
	if len(c.Servers) == 0 {
		return nil, fmt.Errorf("cluster %q has no servers", c.Name)
	}
	c.reindex()
	for _, t := range c.Types {
		if t.Speed <= 0 {
			return nil, fmt.Errorf("GPU type %q: speed must be positive, got %v", t.Name, t.Speed)
		}
	}
	return c, nil
}

func (c *Cluster) reindex() {
	maxD := 0
	for _, s := range c.Servers {
		if s.Domain > maxD {
			maxD = s.Domain
		}
	}
	c.Domains = make([][]ServerID, maxD+1)
	for _, s := range c.Servers {
		c.Domains[s.Domain] = append(c.Domains[s.Domain], s.ID)
	}
	// A rack lives in one domain: the first server decides.
	rackDomain := map[int]int{}
	for _, s := range c.Servers {
		if d, ok := rackDomain[s.Rack]; ok && d != s.Domain {
			// keep the topology a tree: rename the rack per domain
			name := fmt.Sprintf("%s@d%d", c.Racks[s.Rack], s.Domain)
			c.Racks = append(c.Racks, name)
			nr := len(c.Racks) - 1
			for i := range c.Servers {
				if c.Servers[i].Rack == s.Rack && c.Servers[i].Domain == s.Domain {
					c.Servers[i].Rack = nr
				}
			}
			continue
		}
		rackDomain[s.Rack] = s.Domain
	}
}

// AddServer appends one server at run time (a live agent registering) and
// returns its ID. The type is looked up by name among c.Types, then the
// built-in types.
func (c *Cluster) AddServer(name, gpuType string, gpus int, rack string, domain int, hostMemGiB float64) (ServerID, error) {
	if gpus <= 0 || gpus > MaxGPUsPerServer {
		return 0, fmt.Errorf("server %q: gpus must be in 1..%d, got %d", name, MaxGPUsPerServer, gpus)
	}
	if domain < 0 {
		return 0, fmt.Errorf("server %q: domain must not be negative", name)
	}
	t := c.TypeIndex(gpuType)
	if t < 0 {
		kt, err := LookupGPUType(gpuType)
		if err != nil {
			return 0, fmt.Errorf("server %q: %w", name, err)
		}
		c.Types = append(c.Types, kt)
		t = len(c.Types) - 1
	}
	ri := -1
	for i, r := range c.Racks {
		if r == rack {
			ri = i
		}
	}
	if ri < 0 {
		c.Racks = append(c.Racks, rack)
		ri = len(c.Racks) - 1
	}
	id := ServerID(len(c.Servers))
	c.Servers = append(c.Servers, Server{ID: id, Name: name, Rack: ri, Domain: domain, Type: t, NumGPUs: gpus,
		FirstGPU: GPUID(len(c.gpuServer)), HostMemGiB: hostMemGiB})
	for j := 0; j < gpus; j++ {
		c.gpuServer = append(c.gpuServer, id)
	}
	c.reindex()
	return id, nil
}

// Summary is a one-line description such as "8 servers, 32 GPUs (32 V100), 1 domain".
func (c *Cluster) Summary() string {
	counts := map[string]int{}
	for _, s := range c.Servers {
		counts[c.Types[s.Type].Name] += s.NumGPUs
	}
	names := make([]string, 0, len(counts))
	for n := range counts {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := ""
	for i, n := range names {
		if i > 0 {
			parts += ", "
		}
		parts += fmt.Sprintf("%d %s", counts[n], n)
	}
	return fmt.Sprintf("%s, %s (%s), %s", plural.Of(len(c.Servers), "server"), plural.Of(c.NumGPUs(), "GPU"), parts, plural.Of(len(c.Domains), "domain"))
}
