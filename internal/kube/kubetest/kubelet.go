package kubetest

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Labels and annotations of pods a Kubelet plays.
const (
	// LabelPlayed marks pods whose containers the test runs as processes
	// (kwok then leaves their end to the Kubelet).
	LabelPlayed = "kubetest.gandiva.io/played"
	// AnnExit is the exit code of a pod's containers (cplane.AnnExit).
	AnnExit = cplane.AnnExit
)

// Kubelet stands in for the kubelets of kwok nodes for the pods labelled
// LabelPlayed: when such a pod runs (bound, and Running by kwok) it starts
// the pod's first container as a process of this machine, with the
// container's environment (values, and the pod fields the Job controller
// refers to), paths under its hostPath mounts rewritten to the host's; when the pod is deleted it sends SIGTERM, then SIGKILL after
// the grace period; when the process ends it annotates the pod with its
// exit code (AnnExit). A node that disappears takes its processes with it
// (SIGKILL), as a machine that died.
type Kubelet struct {
	cs kubernetes.Interface
	// programs maps a container's command[0] to an executable here.
	programs map[string]string
	dir      string
	log      func(string, ...any)

	mu    sync.Mutex
	procs map[types.UID]*Process
	all   []*Process
}

// Process is one container run by the Kubelet.
type Process struct {
	Pod, Namespace, Node, Job string
	UID                       types.UID
	Start, End                time.Time
	Exit                      int
	// Log is the file with the process's output.
	Log  string
	cmd  *exec.Cmd
	done chan struct{}
	term bool
}

// StartKubelet starts a Kubelet for the test; programs maps the command
// names of containers to executables. It stops (killing every process)
// when the test ends.
func StartKubelet(t testing.TB, cs kubernetes.Interface, programs map[string]string) *Kubelet {
	k := &Kubelet{cs: cs, programs: programs, dir: t.TempDir(), log: t.Logf, procs: map[types.UID]*Process{}}
	ctx, cancel := context.WithCancel(context.Background())
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = LabelPlayed + "=true"
	}))
	pods := f.Core().V1().Pods().Informer()
	nodes := f.Core().V1().Nodes().Informer()
	pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { k.pod(ctx, o) },
		UpdateFunc: func(_, o any) { k.pod(ctx, o) },
	})
	nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(o any) {
			if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = t.Obj
			}
			if n, ok := o.(*corev1.Node); ok {
				k.nodeGone(n.Name)
			}
		},
	})
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	t.Cleanup(func() {
		cancel()
		f.Shutdown()
		k.mu.Lock()
		procs := append([]*Process(nil), k.all...)
		k.mu.Unlock()
		for _, p := range procs {
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	return k
}

// Processes returns every process started so far, in start order.
func (k *Kubelet) Processes() []*Process {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]*Process, len(k.all))
	for i, p := range k.all {
		cp := *p
		out[i] = &cp
	}
	return out
}

func (k *Kubelet) pod(ctx context.Context, o any) {
	p, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	k.mu.Lock()
	pr := k.procs[p.UID]
	k.mu.Unlock()
	switch {
	case p.DeletionTimestamp != nil:
		if pr == nil {
			if _, ended := p.Annotations[AnnExit]; !ended && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				k.annotateExit(ctx, p.Namespace, p.Name, 137) // never started
			}
			return
		}
		k.stop(pr, p)
	case pr == nil && p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning && p.Annotations[AnnExit] == "":
		k.start(ctx, p)
	}
}

func (k *Kubelet) start(ctx context.Context, p *corev1.Pod) {
	if len(p.Spec.Containers) == 0 || len(p.Spec.Containers[0].Command) == 0 {
		k.log("kubelet: pod %s/%s: no command", p.Namespace, p.Name)
		k.annotateExit(ctx, p.Namespace, p.Name, 127)
		return
	}
	c := p.Spec.Containers[0]
	prog, ok := k.programs[c.Command[0]]
	if !ok {
		k.log("kubelet: pod %s/%s: unknown program %q", p.Namespace, p.Name, c.Command[0])
		k.annotateExit(ctx, p.Namespace, p.Name, 127)
		return
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + k.dir}
	vars := map[string]string{}
	for _, e := range c.Env {
		v := e.Value
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			v = fieldOf(p, e.ValueFrom.FieldRef.FieldPath)
		} else {
			v = expand(v, vars)
		}
		vars[e.Name] = v
		env = append(env, e.Name+"="+v)
	}
	args := append(append([]string(nil), c.Command[1:]...), c.Args...)
	for i := range args {
		args[i] = expand(args[i], vars)
	}
	// hostPath mounts: the process runs on this machine, so paths under a
	// mount's mountPath in its environment and arguments become the host
	// directory (with its subPath or subPathExpr, made if missing, as the
	// kubelet makes it)
	for _, vm := range c.VolumeMounts {
		host := hostPathOf(p, vm.Name)
		if host == "" {
			continue
		}
		sub := vm.SubPath
		if vm.SubPathExpr != "" {
			sub = expand(vm.SubPathExpr, vars)
		}
		host = filepath.Join(host, sub)
		if err := os.MkdirAll(host, 0o755); err != nil {
			k.log("kubelet: pod %s/%s: mount %s: %v", p.Namespace, p.Name, vm.Name, err)
		}
		for i, kv := range env {
			name, v, _ := strings.Cut(kv, "=")
			env[i] = name + "=" + underMount(v, vm.MountPath, host)
		}
		for i := range args {
			args[i] = underMount(args[i], vm.MountPath, host)
		}
	}
	logPath := filepath.Join(k.dir, fmt.Sprintf("%s_%s_%s.log", p.Namespace, p.Name, p.UID))
	f, err := os.Create(logPath)
	if err != nil {
		k.log("kubelet: %v", err)
		return
	}
	cmd := exec.Command(prog, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Dir = k.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	pr := &Process{Pod: p.Name, Namespace: p.Namespace, Node: p.Spec.NodeName, UID: p.UID,
		Job: p.Labels["job-name"], Start: time.Now(), Log: logPath, cmd: cmd, done: make(chan struct{})}
	k.mu.Lock()
	if k.procs[p.UID] != nil {
		k.mu.Unlock()
		f.Close()
		return
	}
	if err := cmd.Start(); err != nil {
		k.mu.Unlock()
		f.Close()
		k.log("kubelet: starting %s: %v", prog, err)
		k.annotateExit(ctx, p.Namespace, p.Name, 128)
		return
	}
	k.procs[p.UID] = pr
	k.all = append(k.all, pr)
	k.mu.Unlock()
	go func() {
		err := cmd.Wait()
		f.Close()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				code = 128 + int(ws.Signal())
			}
		} else if err != nil {
			code = 128
		}
		k.mu.Lock()
		pr.End, pr.Exit = time.Now(), code
		k.mu.Unlock()
		close(pr.done)
		k.annotateExit(ctx, pr.Namespace, pr.Pod, code)
	}()
}

// stop sends SIGTERM once, and SIGKILL after the grace period.
func (k *Kubelet) stop(pr *Process, p *corev1.Pod) {
	k.mu.Lock()
	if pr.term {
		k.mu.Unlock()
		return
	}
	pr.term = true
	k.mu.Unlock()
	pr.cmd.Process.Signal(syscall.SIGTERM)
	grace := 30 * time.Second
	if p.Spec.TerminationGracePeriodSeconds != nil {
		grace = time.Duration(*p.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	go func() {
		select {
		case <-pr.done:
		case <-time.After(grace):
			pr.cmd.Process.Kill()
		}
	}()
}

// nodeGone kills the processes of a node that disappeared.
func (k *Kubelet) nodeGone(node string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, pr := range k.procs {
		if pr.Node == node {
			pr.cmd.Process.Kill()
		}
	}
}

func (k *Kubelet) annotateExit(ctx context.Context, ns, pod string, code int) {
	body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{AnnExit: strconv.Itoa(code)}}})
	for try := 0; try < 50; try++ {
		_, err := k.cs.CoreV1().Pods(ns).Patch(ctx, pod, types.MergePatchType, body, metav1.PatchOptions{})
		if err == nil || apierrors.IsNotFound(err) || ctx.Err() != nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// hostPathOf returns the host path of the pod's hostPath volume of that
// name ("" if it is not one).
func hostPathOf(p *corev1.Pod, volume string) string {
	for _, v := range p.Spec.Volumes {
		if v.Name == volume && v.HostPath != nil {
			return v.HostPath.Path
		}
	}
	return ""
}

// underMount rewrites a path under mount to the same path under host.
func underMount(v, mount, host string) string {
	mount = strings.TrimSuffix(mount, "/")
	if v == mount {
		return host
	}
	if rest, ok := strings.CutPrefix(v, mount+"/"); ok {
		return filepath.Join(host, rest)
	}
	return v
}

var fieldRef = regexp.MustCompile(`^metadata\.(annotations|labels)\['(.*)'\]$`)

// fieldOf reads the pod fields the downward API offers.
func fieldOf(p *corev1.Pod, path string) string {
	switch path {
	case "metadata.name":
		return p.Name
	case "metadata.namespace":
		return p.Namespace
	case "metadata.uid":
		return string(p.UID)
	case "spec.nodeName":
		return p.Spec.NodeName
	}
	if m := fieldRef.FindStringSubmatch(path); m != nil {
		if m[1] == "annotations" {
			return p.Annotations[m[2]]
		}
		return p.Labels[m[2]]
	}
	return ""
}

// expand replaces $(VAR) by the values of earlier variables, as the kubelet does.
func expand(s string, vars map[string]string) string {
	if !strings.Contains(s, "$(") {
		return s
	}
	return regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`).ReplaceAllStringFunc(s, func(m string) string {
		if v, ok := vars[m[2:len(m)-1]]; ok {
			return v
		}
		return m
	})
}

// LogTails returns the last 2,000 bytes of each process's log, headed by
// its pod, node and exit code: what a failed test shows of them.
func LogTails(prs []*Process) string {
	var b strings.Builder
	for _, pr := range prs {
		out, _ := os.ReadFile(pr.Log)
		if len(out) > 2000 {
			out = out[len(out)-2000:]
		}
		fmt.Fprintf(&b, "--- %s on %s (exit %d):\n%s\n", pr.Pod, pr.Node, pr.Exit, out)
	}
	return b.String()
}
