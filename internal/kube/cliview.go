package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/gandiva-sched/gandiva/internal/kube/shared"
)

// QueueView is one namespace (a user: gandiva-fair's queue) as `kubectl
// gandiva queues` shows it: its tickets in the settings ConfigMap and the
// GPUs its pods hold and wait for, read from the API server alone.
type QueueView struct {
	Namespace string
	// Tickets are the ConfigMap's tickets.NAMESPACE; TicketsSet says the
	// key is there (else the policy's default applies: its parameters,
	// which only the scheduler's --policy shows).
	Tickets    float64
	TicketsSet bool
	// Entitled is Tickets over the tickets of every namespace listed
	// (a namespace without its own key counts DefaultTickets).
	Entitled float64
	// Held and Pending are the GPUs of its pods of Gandiva's: bound, and
	// waiting to be bound; Share is Held over the cluster's GPUs.
	Held, Pending int
	Share         float64
	// Running and Waiting count its workloads: some pod bound, none bound.
	Running, Waiting int
}

// QueuesInfo is `kubectl gandiva queues`: the GandivaQueues, the
// namespaces, and where their tickets came from.
type QueuesInfo struct {
	// Tree is the GandivaQueues, parents before children, siblings by
	// name (none when the CRD is not installed: NoCRD).
	Tree  []GQueueView `json:",omitempty"`
	NoCRD bool         `json:",omitempty"`
	// Queues are the namespaces.
	Queues []QueueView
	// TotalGPUs is the allocatable GPUs of every node.
	TotalGPUs int
	// Settings names the ConfigMap read (NAMESPACE/NAME); SettingsErr
	// says why it could not be (not found, forbidden), "" when read.
	Settings, SettingsErr string
}

// GQueueView is one GandivaQueue: its spec, and the status Gandiva wrote.
type GQueueView struct {
	Name, Parent string
	Depth        int // 0 for a root, or a queue whose parent is missing
	Tickets      float64
	Namespaces   []string
	Quota        map[string]int `json:",omitempty"`
	// status: GPUs held now, the share of the cluster its tickets give it
	// now, and that share in GPUs
	GPUs               int
	Share, Entitlement float64
	// Valid is its Valid condition's status ("True", "False", "" not
	// written yet), Why the condition's message or the spec's error.
	Valid, Why string
}

// gqueueStatus is the part of a GandivaQueue's status shown.
type gqueueStatus struct {
	Status struct {
		GPUs        int     `json:"gpus"`
		Share       float64 `json:"share"`
		Entitlement float64 `json:"entitlement"`
		Conditions  []struct {
			Type, Status, Message string
		} `json:"conditions"`
	} `json:"status"`
}

// gqueues lists the GandivaQueues as a tree; noCRD when the resource is
// not served.
func gqueues(ctx context.Context, dc dynamic.Interface) (tree []GQueueView, noCRD bool, err error) {
	l, err := dc.Resource(QueueGVR).List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("listing GandivaQueues: %w", err)
	}
	byParent := map[string][]GQueueView{}
	names := map[string]bool{}
	for i := range l.Items {
		data, err := l.Items[i].MarshalJSON()
		if err != nil {
			return nil, false, fmt.Errorf("GandivaQueue %s: %w", l.Items[i].GetName(), err)
		}
		q, perr := parseQueue(data)
		v := GQueueView{Name: l.Items[i].GetName(), Parent: q.Parent, Tickets: q.Tickets, Namespaces: q.Namespaces, Quota: q.Quota}
		var st gqueueStatus
		if err := json.Unmarshal(data, &st); err == nil {
			v.GPUs, v.Share, v.Entitlement = st.Status.GPUs, st.Status.Share, st.Status.Entitlement
			for _, c := range st.Status.Conditions {
				if c.Type == "Valid" {
					v.Valid, v.Why = c.Status, c.Message
				}
			}
		}
		if perr != nil {
			v.Valid, v.Why = "False", perr.Error()
		}
		names[v.Name] = true
		byParent[v.Parent] = append(byParent[v.Parent], v)
	}
	var walk func(parent string, depth int)
	seen := map[string]bool{}
	walk = func(parent string, depth int) {
		kids := byParent[parent]
		slices.SortFunc(kids, func(a, b GQueueView) int { return strings.Compare(a.Name, b.Name) })
		for _, k := range kids {
			if seen[k.Name] || depth > maxQueueDepth {
				continue
			}
			seen[k.Name] = true
			k.Depth = depth
			tree = append(tree, k)
			walk(k.Name, depth+1)
		}
	}
	walk("", 0)
	// queues whose parent is missing, or in a cycle: shown as roots
	var orphans []string
	for p := range byParent {
		if p != "" && !names[p] {
			orphans = append(orphans, p)
		}
	}
	slices.Sort(orphans)
	for _, p := range orphans {
		walk(p, 0)
	}
	// the rest are in a cycle: shown flat, by name
	var rest []GQueueView
	for _, kids := range byParent {
		for _, k := range kids {
			if !seen[k.Name] {
				rest = append(rest, k)
			}
		}
	}
	slices.SortFunc(rest, func(a, b GQueueView) int { return strings.Compare(a.Name, b.Name) })
	return append(tree, rest...), false, nil
}

// DefaultTickets is gandiva-fair's tickets of a namespace no setting
// names, unless its parameter default= says otherwise.
const DefaultTickets = 1.0

// Queues returns the GandivaQueues (read with dc; nil: not read) and the
// namespaces that have pods of Gandiva's or tickets in the settings
// ConfigMap cmNS/cmName, ordered by name. Listing pods needs a
// cluster-wide list; the ConfigMap, when this account may not read it, is
// reported in SettingsErr (the tickets then show as defaults).
func Queues(ctx context.Context, cs kubernetes.Interface, dc dynamic.Interface, cmNS, cmName string) (QueuesInfo, error) {
	info := QueuesInfo{Settings: cmNS + "/" + cmName}
	if dc != nil {
		var err error
		if info.Tree, info.NoCRD, err = gqueues(ctx, dc); err != nil {
			return info, err
		}
	}
	qs := map[string]*QueueView{}
	q := func(ns string) *QueueView {
		if qs[ns] == nil {
			qs[ns] = &QueueView{Namespace: ns, Tickets: DefaultTickets}
		}
		return qs[ns]
	}
	cm, err := cs.CoreV1().ConfigMaps(cmNS).Get(ctx, cmName, metav1.GetOptions{})
	switch {
	case err == nil:
		for k, v := range cm.Data {
			ns, ok := strings.CutPrefix(k, "tickets.")
			if !ok || ns == "" {
				continue
			}
			if x, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && x >= 0 {
				qv := q(ns)
				qv.Tickets, qv.TicketsSet = x, true
			}
		}
	case apierrors.IsNotFound(err):
		info.SettingsErr = "not found"
	case apierrors.IsForbidden(err):
		info.SettingsErr = "this account may not read it"
	default:
		return info, fmt.Errorf("reading ConfigMap %s: %w", info.Settings, err)
	}
	pods, err := livePods(ctx, cs, "")
	if err != nil {
		return info, err
	}
	type wl struct {
		ns    string
		bound bool
	}
	wls := map[string]wl{} // by workload key
	for i := range pods {
		p := &pods[i]
		k := workloadKey(p)
		if k == "" || p.DeletionTimestamp != nil {
			continue
		}
		g := gpusOf(&p.Spec)
		if n, ok, _ := sharedGPUs(p.Annotations, &p.Spec, ""); ok {
			g = n
		}
		qv := q(p.Namespace)
		if p.Spec.NodeName == "" {
			qv.Pending += g
		} else {
			qv.Held += g
		}
		wls[k] = wl{p.Namespace, wls[k].bound || p.Spec.NodeName != ""}
	}
	for _, w := range wls {
		if w.bound {
			q(w.ns).Running++
		} else {
			q(w.ns).Waiting++
		}
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return info, fmt.Errorf("listing nodes: %w", err)
	}
	for i := range nodes.Items {
		info.TotalGPUs += shapeOf(&nodes.Items[i]).gpus
	}
	var tickets float64
	for _, qv := range qs {
		tickets += qv.Tickets
	}
	for _, qv := range qs {
		if tickets > 0 {
			qv.Entitled = qv.Tickets / tickets
		}
		if info.TotalGPUs > 0 {
			qv.Share = float64(qv.Held) / float64(info.TotalGPUs)
		}
		info.Queues = append(info.Queues, *qv)
	}
	slices.SortFunc(info.Queues, func(a, b QueueView) int { return strings.Compare(a.Namespace, b.Namespace) })
	return info, nil
}

// NodeView is one node with GPUs as `kubectl gandiva nodes` shows it.
type NodeView struct {
	Name string
	// Status: up, drained (cordoned) or down (not Ready, being deleted).
	Status string
	// GPUs is allocatable; Gandiva the GPUs its pods (and a shared node's
	// reservation) hold; Others those of other schedulers' pods; Free the
	// rest on a node that is up.
	GPUs, Gandiva, Others, Free int
	GPUType                     string
	// Shared: labelled gandiva.io/shared=true. Reservation is its
	// reservation pod's state: "holding" (bound, running, all GPUs),
	// "pending", "releasing" (being deleted), "" none.
	Shared      bool
	Reservation string
	// SharedPods counts the shared-mode pods bound here.
	SharedPods int
}

// Nodes returns the nodes with GPUs, ordered by name.
func Nodes(ctx context.Context, cs kubernetes.Interface) ([]NodeView, error) {
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	pods, err := livePods(ctx, cs, "")
	if err != nil {
		return nil, err
	}
	type use struct {
		ours, others, shared int
		resv                 string
	}
	per := map[string]*use{}
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName == "" {
			continue
		}
		u := per[p.Spec.NodeName]
		if u == nil {
			u = &use{}
			per[p.Spec.NodeName] = u
		}
		g := gpusOf(&p.Spec)
		if p.Spec.SchedulerName != SchedulerName {
			u.others += g
			continue
		}
		u.ours += g
		if _, ok := p.Labels[shared.LabelReservation]; ok {
			switch {
			case p.DeletionTimestamp != nil:
				u.resv = "releasing"
			case p.Status.Phase == corev1.PodRunning:
				u.resv = "holding"
			default:
				u.resv = "pending"
			}
		} else if _, ok := p.Annotations[shared.AnnGPUs]; ok {
			u.shared++
		}
	}
	var out []NodeView
	for i := range nodes.Items {
		n := &nodes.Items[i]
		sh := shapeOf(n)
		if sh.gpus == 0 {
			continue
		}
		u := per[n.Name]
		if u == nil {
			u = &use{}
		}
		v := NodeView{Name: n.Name, GPUs: sh.gpus, Gandiva: u.ours, Others: u.others, GPUType: sh.gpuType,
			Shared: isSharedNode(n), Reservation: u.resv, SharedPods: u.shared, Status: "up"}
		if ok, _ := nodeUsable(n); !ok {
			v.Status = "down"
		} else if n.Spec.Unschedulable {
			v.Status = "drained"
		} else {
			v.Free = max(v.GPUs-v.Gandiva-v.Others, 0)
		}
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b NodeView) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// livePods lists the pods of namespace ns ("" all) that have not ended.
func livePods(ctx context.Context, cs kubernetes.Interface, ns string) ([]corev1.Pod, error) {
	l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{
		FieldSelector: "status.phase!=" + string(corev1.PodSucceeded) + ",status.phase!=" + string(corev1.PodFailed)})
	if err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	return l.Items, nil
}
