package kube

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/gandiva-sched/gandiva/internal/cluster"
)

// Node labels Gandiva reads (all optional).
const (
	// LabelGPUType names the GPU generation (A100, H100, V100, ...) when
	// NVIDIA's GPU feature discovery label nvidia.com/gpu.product does not.
	LabelGPUType = "gandiva.io/gpu-type"
	// LabelDomain is the InfiniBand domain (a non-negative integer).
	LabelDomain = "gandiva.io/domain"
	// LabelRack is the rack; else the zone, else one rack per domain.
	LabelRack = "gandiva.io/rack"

	labelGPUProduct = "nvidia.com/gpu.product"
	labelZone       = "topology.kubernetes.io/zone"
)

// nodeShape is what the engine knows of a node: a server's static shape.
type nodeShape struct {
	gpus    int
	gpuType string
	rack    string
	domain  int
	// hostMem bounds the state of jobs suspended in its host memory, in
	// GiB: a shared node's allocatable memory (0 elsewhere: exclusive
	// suspensions checkpoint)
	hostMem float64
}

// shapeOf reads a node's shape; gpus is 0 for a node without GPUs.
func shapeOf(n *corev1.Node) nodeShape {
	s := nodeShape{gpuType: cluster.ReferenceGPU}
	if q, ok := n.Status.Allocatable[GPU]; ok {
		s.gpus = int(min(max(q.Value(), 0), cluster.MaxGPUsPerServer))
	}
	if t := gpuTypeOf(n.Labels); t != "" {
		s.gpuType = t
	}
	if d, err := strconv.Atoi(n.Labels[LabelDomain]); err == nil && d >= 0 && d < 1<<16 {
		s.domain = d
	}
	s.rack = n.Labels[LabelRack]
	if s.rack == "" {
		s.rack = n.Labels[labelZone]
	}
	if s.rack == "" {
		s.rack = "rack-" + strconv.Itoa(s.domain)
	}
	if isSharedNode(n) {
		if q, ok := n.Status.Allocatable[corev1.ResourceMemory]; ok {
			s.hostMem = float64(q.Value() >> 30)
		}
	}
	return s
}

// gpuTypeOf finds a known GPU generation in the node's labels: LabelGPUType,
// else a known name inside nvidia.com/gpu.product ("NVIDIA-A100-SXM4-40GB").
func gpuTypeOf(labels map[string]string) string {
	if t, err := cluster.LookupGPUType(labels[LabelGPUType]); err == nil {
		return t.Name
	}
	p := strings.ToUpper(labels[labelGPUProduct])
	if p == "" {
		return ""
	}
	for _, t := range cluster.KnownGPUTypes() {
		if strings.Contains(p, t.Name) {
			return t.Name
		}
	}
	return ""
}

// nodeUsable reports whether new pods may go to the node, and why not.
func nodeUsable(n *corev1.Node) (bool, string) {
	ready := false
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = c.Status == corev1.ConditionTrue
		}
	}
	switch {
	case n.DeletionTimestamp != nil:
		return false, "node is being deleted"
	case !ready:
		return false, "node is not Ready"
	}
	return true, ""
}

// sameServer reports whether two shapes of a node are one server of the
// engine: all but the host memory the same (a shared node's memory, read
// only while it is shared, changes in place).
func (a nodeShape) sameServer(b nodeShape) bool {
	a.hostMem = b.hostMem
	return a == b
}
