// Package agent is `gandiva agent --kube`: the node agent of Kubernetes
// shared mode, one per shared GPU node (a DaemonSet). It watches the pods
// bound to its node; for every shared pod (annotation gandiva.io/gpus) it
// makes a Unix socket, <socket dir>/<pod UID>/agent.sock, which the pod
// mounts (and nothing else of the directory), and waits there for the pod's
// in-job client. The client says hello naming its pod; the agent checks it
// (the pod's UID and name; the peer's cgroup where it names a pod), welcomes
// it with the GPUs of the pod's assignment (gandiva.io/assign, written by
// `gandiva kube`) and from then on drives it through jobproc's attached
// mode: every newer generation of the assignment is a suspension (at a
// mini-batch boundary, state in host memory) or a resumption on the same
// GPUs, acknowledged in gandiva.io/agent-status with the job's progress,
// which the agent also republishes every Options.ReportEvery. The contract
// of both annotations is package internal/kube/shared.
//
// What the agent never does: start, stop or signal a process (the kubelet
// does), move a job (a change of GPUs is reported Failed: the scheduler
// moves a job by ending its pod, which checkpoints on SIGTERM, and binding
// a new one), or write anything but gandiva.io/agent-status and Warning
// Events (its RBAC and the ValidatingAdmissionPolicy of
// deploy/base/agent-vap.yaml hold it to that, and to its own node's pods).
//
// Failures it reports (status Failed, and a Warning Event on the pod):
// an assignment that does not parse (the error names the field), GPUs that
// changed, a suspension or resumption the job could not carry out, and a
// pod whose process has not said hello within Options.ClientDeadline of
// the pod running (a process without the in-job client cannot be suspended
// in place: there is no SIGSTOP fallback for a process of another's).
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/gandiva-sched/gandiva/internal/kube/shared"
)

// Options configure Run.
type Options struct {
	// Node is the name of this node (required; the DaemonSet passes
	// spec.nodeName through the downward API).
	Node string
	// SocketDir is the host directory under which the pods' sockets are
	// made (required): <SocketDir>/<pod UID>/agent.sock. It is created if
	// missing (mode 0711: pods reach their own directory, nobody lists it).
	SocketDir string
	// ReportEvery is how often progress is republished (default 5 s).
	ReportEvery time.Duration
	// ClientDeadline is how long a running pod's process has to say hello
	// before the pod is reported Failed (default 10 min).
	ClientDeadline time.Duration
	// HelloTimeout bounds the read of a hello once connected (default 30 s).
	HelloTimeout time.Duration
	// PeerCheck checks the process at the other end of a new connection
	// (its pid, from SO_PEERCRED) against the pod's UID; nil means
	// CgroupCheck.
	PeerCheck func(pid int, podUID types.UID) error
	// Log receives the agent's log (default slog.Default()).
	Log *slog.Logger
}

// Defaults of Options.
const (
	DefaultReportEvery    = 5 * time.Second
	DefaultClientDeadline = 10 * time.Minute
	DefaultHelloTimeout   = 30 * time.Second
)

// Validate checks the options and names the bad one.
func (o *Options) Validate() error {
	switch {
	case o.Node == "":
		return errors.New("node: required (the name of this node)")
	case o.SocketDir == "":
		return errors.New("socket dir: required")
	case !filepath.IsAbs(o.SocketDir):
		return fmt.Errorf("socket dir: %q is not an absolute path", o.SocketDir)
	case o.ReportEvery < 0 || o.ClientDeadline < 0 || o.HelloTimeout < 0:
		return errors.New("report every, client deadline, hello timeout: must not be negative")
	}
	// a pod's socket path must fit a sockaddr_un (108 bytes with its NUL)
	if n := len(filepath.Join(o.SocketDir, "01234567-89ab-cdef-0123-456789abcdef", shared.SocketName)); n > 107 {
		return fmt.Errorf("socket dir: %q is too long for Unix socket paths (%d bytes of 107 with a pod's UID)", o.SocketDir, n)
	}
	return nil
}

func (o *Options) defaults() {
	if o.ReportEvery == 0 {
		o.ReportEvery = DefaultReportEvery
	}
	if o.ClientDeadline == 0 {
		o.ClientDeadline = DefaultClientDeadline
	}
	if o.HelloTimeout == 0 {
		o.HelloTimeout = DefaultHelloTimeout
	}
	if o.PeerCheck == nil {
		o.PeerCheck = CgroupCheck
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
}

// Run runs the agent until ctx ends. It returns an error for bad options
// or a socket directory it cannot make; everything about one pod is
// reported on that pod, not returned.
func Run(ctx context.Context, cs kubernetes.Interface, o Options) error {
	if err := o.Validate(); err != nil {
		return fmt.Errorf("kube agent: %w", err)
	}
	o.defaults()
	if err := os.MkdirAll(o.SocketDir, 0o711); err != nil {
		return fmt.Errorf("kube agent: socket dir: %w", err)
	}
	if err := os.Chmod(o.SocketDir, 0o711); err != nil { // (a hostPath DirectoryOrCreate is 0755)
		return fmt.Errorf("kube agent: socket dir: %w", err)
	}
	a := &agent{cs: cs, o: o, log: o.Log.With("node", o.Node), pods: map[types.UID]*pod{}}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
		lo.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", o.Node).String()
	}))
	inf := f.Core().V1().Pods().Informer()
	inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { a.update(ctx, obj) },
		UpdateFunc: func(_, obj any) { a.update(ctx, obj) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				a.gone(p.UID)
			}
		},
	})
	f.Start(ctx.Done())
	a.log.Info("kube agent running", "socket_dir", o.SocketDir, "report_every", o.ReportEvery)
	<-ctx.Done()
	f.Shutdown()
	a.mu.Lock()
	pods := make([]*pod, 0, len(a.pods))
	for _, p := range a.pods {
		pods = append(pods, p)
	}
	a.mu.Unlock()
	for _, p := range pods {
		p.stop(false) // (the sockets' directories stay: their pods have them mounted)
	}
	return nil
}
