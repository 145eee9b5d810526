package cplane

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FakeGPUNode returns a Node that kwok plays (annotation
// kwok.x-k8s.io/node=fake) with gpus nvidia.com/gpu, 64 CPUs and 512 GiB of
// memory, labelled type=kwok and kubernetes.io/hostname plus labels.
func FakeGPUNode(name string, gpus int, labels map[string]string, taints []corev1.Taint) *corev1.Node {
	l := map[string]string{"type": "kwok", "kubernetes.io/hostname": name}
	for k, v := range labels {
		l[k] = v
	}
	res := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("512Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
		"nvidia.com/gpu":      *resource.NewQuantity(int64(gpus), resource.DecimalSI),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
		Spec:       corev1.NodeSpec{Taints: taints},
		Status:     corev1.NodeStatus{Capacity: res, Allocatable: res.DeepCopy()},
	}
}
