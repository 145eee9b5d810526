package arena

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/gandiva-sched/gandiva/internal/cluster"
)

// PlannedJob is one trace job as the player creates it: a batch/v1 Indexed
// Job of Pods pods of PodGPUs GPUs each in Namespace (its user), created
// at Submit seconds of trace time.
type PlannedJob struct {
	Spec      *cluster.JobSpec
	Namespace string
	Name      string
	Pods      int
	PodGPUs   int
	// Submit is the trace's submission time less the first job's: the
	// replay starts at 0.
	Submit float64
}

// Key is "namespace/name".
func (j *PlannedJob) Key() string { return j.Namespace + "/" + j.Name }

// PlannedNode is one server of the cluster as a kwok node.
type PlannedNode struct {
	Name   string
	Server cluster.ServerID
	GPUs   int
	Labels map[string]string
}

// Plan is a trace and a cluster as the player lays them out.
type Plan struct {
	Cluster *cluster.Cluster
	Nodes   []PlannedNode
	// Jobs in creation order: by submission time, then trace order.
	Jobs []*PlannedJob
	// Namespaces, sorted.
	Namespaces []string
	// ServerOf maps a node's name to its server.
	ServerOf map[string]cluster.ServerID
}

// Workloads: how the player makes a job's pods (Config.Workload).
const (
	// WorkloadJob: an Indexed batch/v1 Job, whose controller makes the
	// pods and makes them again when a scheduler deletes them.
	WorkloadJob = "job"
	// WorkloadPods: a plain-pod gang, the pods created by the player with
	// no owner, labelled and annotated as one gang (Gandiva's gang
	// annotations); the player makes a deleted gang's pods again, as a
	// job controller would (player_pods.go).
	WorkloadPods = "pods"
)

// Workloads are the values of Config.Workload.
var Workloads = []string{WorkloadJob, WorkloadPods}

// Node labels Gandiva reads (docs/KUBERNETES.md).
const (
	labelGPUType = "gandiva.io/gpu-type"
	labelDomain  = "gandiva.io/domain"
	labelRack    = "gandiva.io/rack"
)

// NewPlan lays out jobs on c. A job's gang becomes pods of the largest
// number of GPUs that divides its gang and fits one server (so an 8-GPU
// job on 4-GPU servers is 2 pods of 4); a job larger than the cluster, or
// one that no server can hold a pod of, is an error naming it. Users
// become namespaces ("u-" and the user name lower-cased, characters other
// than a-z, 0-9 and '-' as '-', cut to 40 characters; users that collide
// get a numeric suffix); job names become Job names the same way.
func NewPlan(c *cluster.Cluster, jobs []*cluster.JobSpec) (*Plan, error) {
	if len(jobs) == 0 {
		return nil, fmt.Errorf("arena: the trace has no jobs")
	}
	p := &Plan{Cluster: c, ServerOf: map[string]cluster.ServerID{}}
	maxGPUs := 0
	for i, s := range c.Servers {
		name := fmt.Sprintf("gpu-%d", i)
		t := c.TypeOf(s.ID)
		p.Nodes = append(p.Nodes, PlannedNode{Name: name, Server: s.ID, GPUs: s.NumGPUs, Labels: map[string]string{
			labelGPUType: t.Name, labelDomain: strconv.Itoa(s.Domain), labelRack: "rack-" + strconv.Itoa(s.Rack)}})
		p.ServerOf[name] = s.ID
		maxGPUs = max(maxGPUs, s.NumGPUs)
	}
	users := map[string]string{}
	usedNS := map[string]bool{}
	usedName := map[string]bool{}
	first := jobs[0].Submit
	for _, j := range jobs {
		first = min(first, j.Submit)
	}
	for i, s := range jobs {
		if s.GPUs <= 0 {
			return nil, fmt.Errorf("arena: job %d (%s) asks for %d GPUs", i, s.Name, s.GPUs)
		}
		if !(s.Iters > 0) || !(s.IterTime > 0) {
			return nil, fmt.Errorf("arena: job %d (%s) has no work to replay (%v mini-batches of %v s)", i, s.Name, s.Iters, s.IterTime)
		}
		if s.GPUs > c.NumGPUs() {
			return nil, fmt.Errorf("arena: job %s needs %d GPUs; cluster %s has %d", s.Name, s.GPUs, c.Name, c.NumGPUs())
		}
		per := podGPUs(s.GPUs, maxGPUs)
		if per == 0 {
			return nil, fmt.Errorf("arena: job %s: no server of cluster %s holds a pod of its %d GPUs", s.Name, c.Name, s.GPUs)
		}
		ns, ok := users[s.User]
		if !ok {
			ns = unique("u-"+dnsLabel(s.User, 40), usedNS)
			users[s.User] = ns
		}
		p.Jobs = append(p.Jobs, &PlannedJob{Spec: s, Namespace: ns, Name: unique("j-"+dnsLabel(s.Name, 40), usedName),
			Pods: s.GPUs / per, PodGPUs: per, Submit: s.Submit - first})
	}
	slices.SortStableFunc(p.Jobs, func(a, b *PlannedJob) int {
		switch {
		case a.Submit < b.Submit:
			return -1
		case a.Submit > b.Submit:
			return 1
		}
		return 0
	})
	for _, ns := range users {
		p.Namespaces = append(p.Namespaces, ns)
	}
	slices.Sort(p.Namespaces)
	return p, nil
}

// Capacity is the cluster's GPUs.
func (p *Plan) Capacity() int { return p.Cluster.NumGPUs() }

// podGPUs is the largest divisor of gpus that is at most perNode (0 if none).
func podGPUs(gpus, perNode int) int {
	for d := min(gpus, perNode); d >= 1; d-- {
		if gpus%d == 0 {
			return d
		}
	}
	return 0
}

var notLabel = regexp.MustCompile(`[^a-z0-9-]+`)

// dnsLabel makes s a piece of a DNS label: lower case, a-z 0-9 '-', at
// most n characters, no '-' at either end ("x" if nothing is left).
func dnsLabel(s string, n int) string {
	s = notLabel.ReplaceAllString(strings.ToLower(s), "-")
	if len(s) > n {
		s = s[:n]
	}
	s = strings.Trim(s, "-")
	if s == "" {
		return "x"
	}
	return s
}

// unique returns s, or s-2, s-3, ... the first not in used, and marks it.
func unique(s string, used map[string]bool) string {
	out := s
	for i := 2; used[out]; i++ {
		out = s + "-" + strconv.Itoa(i)
	}
	used[out] = true
	return out
}
